/* status.h — how assay reports errors.
 *
 * Two kinds of error (DESIGN.md principle 5):
 *   - our own bugs abort through ASSAY_ASSERT with file:line;
 *   - everything a user or a file can cause returns an assay_status and records one
 *     message for the caller to print.
 *
 *   assay_status st = assay_gguf_open(&g, path);
 *   if (st != ASSAY_OK) { fprintf(stderr, "assay: %s\n", assay_last_error()); return 1; }
 *
 * Inside a function that fails:
 *   if (n > limit) return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor count %llu exceeds file size", path, n);
 *
 * The message lives in thread-local storage, so threads do not overwrite each other's errors.
 */
#ifndef ASSAY_STATUS_H
#define ASSAY_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum assay_status {
    ASSAY_OK = 0,
    ASSAY_ERR_IO,          /* file missing, unreadable, disk full */
    ASSAY_ERR_FORMAT,      /* a file is corrupt, truncated or not what it claims */
    ASSAY_ERR_UNSUPPORTED, /* valid input we cannot handle yet */
    ASSAY_ERR_ARG,         /* a bad argument from the user */
    ASSAY_ERR_NOMEM,       /* allocation failed */
    ASSAY_ERR_RANGE,       /* a value out of range (prompt longer than the context, ...) */
} assay_status;

/* Records a printf-style message and returns `code`, so `return assay_fail(...)` reads naturally. */
assay_status assay_fail(assay_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefixes the recorded message with more context: "loading x.gguf: <old message>". Returns `code`. */
assay_status assay_fail_context(assay_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

const char *assay_last_error(void);

/* Notes to the user: one line on stderr, prefixed with the command that runs ("assay quantize: ..."), so that every
 * line a command prints says where it comes from. The command line names the command once, at its start. */
void assay_log_set_command(const char *command);
const char *assay_log_command(void); /* NULL until set */
void assay_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
const char *assay_status_name(assay_status code);

/* For our own bugs only: never for conditions a user or a file can cause. */
#define ASSAY_ASSERT(cond)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Allocation that aborts on failure: for small bookkeeping where an error path would be noise.
 * Large buffers (weights, KV caches) use plain malloc and return ASSAY_ERR_NOMEM. */
void *assay_xmalloc(size_t bytes);
void *assay_xcalloc(size_t count, size_t bytes);
void *assay_xrealloc(void *ptr, size_t bytes);
char *assay_xstrdup(const char *s);

#endif
