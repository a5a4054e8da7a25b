/* status.c — thread-local error messages and checked allocation (see include/assay/status.h). */
#include "assay/status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char last_error[2048];

assay_status assay_fail(assay_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

assay_status assay_fail_context(assay_status code, const char *fmt, ...) {
    char prefix[1024], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
    return code;
}

const char *assay_last_error(void) { return last_error[0] ? last_error : "no error recorded"; }

static const char *log_command;

void assay_log_set_command(const char *command) { log_command = command; }
const char *assay_log_command(void) { return log_command; }

void assay_note(const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one write per line, so lines of several threads do not interleave */
    if (log_command) fprintf(stderr, "assay %s: %s\n", log_command, line);
    else fprintf(stderr, "assay: %s\n", line);
}

const char *assay_status_name(assay_status code) {
    static const char *const names[] = {
        [ASSAY_OK] = "ok",
        [ASSAY_ERR_IO] = "i/o error",
        [ASSAY_ERR_FORMAT] = "format error",
        [ASSAY_ERR_UNSUPPORTED] = "unsupported",
        [ASSAY_ERR_ARG] = "bad argument",
        [ASSAY_ERR_NOMEM] = "out of memory",
        [ASSAY_ERR_RANGE] = "out of range",
    };
    if ((unsigned)code < sizeof names / sizeof names[0] && names[code]) return names[code];
    return "unknown error";
}

static void *checked(void *p, size_t bytes) {
    if (!p && bytes) {
        fprintf(stderr, "assay: out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    return p;
}

void *assay_xmalloc(size_t bytes) { return checked(malloc(bytes ? bytes : 1), bytes); }
void *assay_xcalloc(size_t count, size_t bytes) { return checked(calloc(count ? count : 1, bytes ? bytes : 1), count * bytes); }
void *assay_xrealloc(void *ptr, size_t bytes) { return checked(realloc(ptr, bytes ? bytes : 1), bytes); }
char *assay_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(assay_xmalloc(n), s, n);
}
