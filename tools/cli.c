/* cli.c — option parsing shared by every subcommand (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "assay/cleanup.h"
#include "assay/file.h"
#include "assay/status.h"

const char *cli_option_name(const cli_option *o, char *buf, int size) {
    snprintf(buf, (size_t)size, "%s%s%s", o->short_name ? o->short_name : "", o->short_name ? "/" : "", o->long_name);
    return buf;
}

/* "%g" of a bound, whole numbers without an exponent */
static void format_bound(char *buf, size_t size, double v) {
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, "%g", v);
}

/* ">= 1", "in (0, 1]", "<= 8": the valid range of an option, for its help line and its error message */
static const char *range_text(const cli_option *o, char *buf, size_t size) {
    char lo[32], hi[32];
    format_bound(lo, sizeof lo, o->min);
    format_bound(hi, sizeof hi, o->max);
    unsigned r = o->range;
    if ((r & CLI_HAS_MIN) && (r & CLI_HAS_MAX) && o->max < 1e18)
        snprintf(buf, size, "in %c%s, %s%c", r & CLI_MIN_OPEN ? '(' : '[', lo, hi, r & CLI_MAX_OPEN ? ')' : ']');
    else if (r & CLI_HAS_MIN) snprintf(buf, size, "%s %s", r & CLI_MIN_OPEN ? ">" : ">=", lo);
    else if (r & CLI_HAS_MAX) snprintf(buf, size, "%s %s", r & CLI_MAX_OPEN ? "<" : "<=", hi);
    else buf[0] = 0;
    return buf;
}

void cli_print_help(const cli_spec *spec) {
    printf("usage: assay %s %s\n\n%s\n", spec->command, spec->usage, spec->summary);
    if (spec->options && spec->options[0].long_name) printf("\noptions:\n");
    for (const cli_option *o = spec->options; o && o->long_name; o++) {
        char left[96], range[64];
        snprintf(left, sizeof left, "%s%s%s%s%s", o->short_name ? o->short_name : "", o->short_name ? ", " : "",
                 o->long_name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        range_text(o, range, sizeof range);
        printf("  %-30s %s", left, o->help ? o->help : "");
        if (range[0]) printf(" (valid: %s %s)", o->metavar ? o->metavar : "value", range);
        printf("\n");
        if (o->alias) printf("  %-30s the same as %s\n", o->alias, o->long_name);
    }
    printf("  %-30s %s\n", "-h, --help", "show this help");
}

int cli_usage_error(const cli_spec *spec, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "assay %s: ", spec->command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: assay %s %s\n(see 'assay %s --help')\n", spec->command, spec->usage, spec->command);
    return CLI_EXIT_USAGE;
}

int cli_report_error(const char *command) {
    fprintf(stderr, "assay %s: %s\n", command, assay_last_error());
    return CLI_EXIT_ERROR;
}

static const cli_option *find_option(const cli_spec *spec, const char *name, size_t len) {
    for (const cli_option *o = spec->options; o && o->long_name; o++) {
        if (strlen(o->long_name) == len && strncmp(o->long_name, name, len) == 0) return o;
        if (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0) return o;
        if (o->short_name && strlen(o->short_name) == len && strncmp(o->short_name, name, len) == 0) return o;
    }
    return NULL;
}

static int in_range(const cli_option *o, double v) {
    if (o->range & CLI_HAS_MIN && (o->range & CLI_MIN_OPEN ? !(v > o->min) : !(v >= o->min))) return 0;
    if (o->range & CLI_HAS_MAX && (o->range & CLI_MAX_OPEN ? !(v < o->max) : !(v <= o->max))) return 0;
    return 1;
}

static int cpu_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int store_value(const cli_spec *spec, const cli_option *o, const char *value) {
    char *end, name[96], range[64];
    cli_option_name(o, name, sizeof name);
    range_text(o, range, sizeof range);
    switch (o->kind) {
    case CLI_STRING: *(const char **)o->dest = value; return 0;
    case CLI_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (end == value || *end) return cli_usage_error(spec, "%s expects a whole number, got '%s'", name, value);
        if (errno) return cli_usage_error(spec, "%s: %s is too large%s%s%s", name, value, range[0] ? " (valid: " : "", range,
                                          range[0] ? ")" : "");
        if (!in_range(o, (double)v)) {
            if (range[0]) return cli_usage_error(spec, "%s must be %s, got %s", name, range, value);
            return cli_usage_error(spec, "%s: %s is out of range", name, value);
        }
        if ((o->range & CLI_WARN_CORES) && v > cpu_cores())
            fprintf(stderr, "assay %s: warning: %s %lld is more threads than this machine's %d cores: expect it to be "
                    "slower, not faster\n", spec->command, name, v, cpu_cores());
        *(int64_t *)o->dest = v;
        return 0;
    }
    case CLI_FLOAT: {
        errno = 0;
        double v = strtod(value, &end);
        if (end == value || *end) return cli_usage_error(spec, "%s expects a number, got '%s'", name, value);
        if (errno || !isfinite(v) || !in_range(o, v)) {
            if (range[0]) return cli_usage_error(spec, "%s must be %s, got %s", name, range, value);
            return cli_usage_error(spec, "%s: %s is out of range", name, value);
        }
        *(double *)o->dest = v;
        return 0;
    }
    case CLI_FLAG: break;
    }
    ASSAY_ASSERT(0);
    return CLI_EXIT_USAGE;
}

void cli_args_free(cli_args *args) {
    free(args->positional);
    args->positional = NULL;
    args->count = 0;
}

/* Frees the positional list before returning an early exit code, so callers only free on CLI_CONTINUE. */
static int finish(cli_args *args, int rc) {
    if (rc != CLI_CONTINUE) cli_args_free(args);
    return rc;
}

static int parse_all(const cli_spec *spec, int argc, char **argv, cli_args *args);

int cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *args) {
    return finish(args, parse_all(spec, argc, argv, args));
}

static int parse_all(const cli_spec *spec, int argc, char **argv, cli_args *args) {
    /* argv[0] is the subcommand name. Positionals are collected in order, options anywhere. */
    args->positional = assay_xcalloc((size_t)argc + 1, sizeof(char *));
    args->count = 0;
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_positional || a[0] != '-' || a[1] == 0 || ((a[1] >= '0' && a[1] <= '9') || a[1] == '.')) {
            args->positional[args->count++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) { only_positional = 1; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_print_help(spec);
            return CLI_EXIT_OK;
        }
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_option *o = find_option(spec, a, name_len);
        if (!o) return cli_usage_error(spec, "unknown option '%.*s'", (int)name_len, a);
        if (o->kind == CLI_FLAG) {
            if (eq) return cli_usage_error(spec, "%s takes no value", o->long_name);
            *(int *)o->dest = 1;
            continue;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            char name[96];
            if (i + 1 >= argc)
                return cli_usage_error(spec, "%s needs a value (%s)", cli_option_name(o, name, sizeof name),
                                       o->metavar ? o->metavar : "VALUE");
            value = argv[++i];
        }
        int rc = store_value(spec, o, value);
        if (rc) return rc;
    }
    if (args->count < spec->min_positional)
        return cli_usage_error(spec, "missing argument%s", spec->min_positional - args->count > 1 ? "s" : "");
    if (spec->max_positional >= 0 && args->count > spec->max_positional)
        return cli_usage_error(spec, "unexpected argument '%s'", args->positional[spec->max_positional]);
    return CLI_CONTINUE;
}

static sigset_t watched;
static const char *watched_command;

static void *signal_watcher(void *arg) {
    (void)arg;
    int sig = 0;
    if (sigwait(&watched, &sig) != 0) return NULL;
    int removed = assay_cleanup_run();
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    fflush(stdout);
    /* on a terminal, the line may hold a progress bar or the echoed ^C: start a new one */
    fprintf(stderr, "%sassay %s: interrupted by %s%s\n", isatty(STDERR_FILENO) ? "\n" : "", watched_command, name,
            removed ? "; the unfinished output was removed" : "");
    fflush(stderr);
    _exit(128 + sig);
    return NULL;
}

void cli_handle_signals(const char *command) {
    watched_command = command;
    sigemptyset(&watched);
    /* a signal ignored on entry stays ignored (nohup, a background job of a script) */
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        struct sigaction sa;
        if (sigaction(sigs[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) continue;
        sigaddset(&watched, sigs[i]);
        n++;
    }
    if (n == 0) return;
    if (pthread_sigmask(SIG_BLOCK, &watched, NULL) != 0) return;
    pthread_t th;
    if (pthread_create(&th, NULL, signal_watcher, NULL) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &watched, NULL); /* no watcher: the default actions stay */
        return;
    }
    pthread_detach(th);
}

uint64_t cli_seed(const char *command, int64_t seed) {
    if (seed >= 0) return (uint64_t)seed;
    uint64_t r = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&r, sizeof r, 1, f) != 1) r = (uint64_t)time(NULL) * 6364136223846793005ULL ^ (uint64_t)getpid();
    if (f) fclose(f);
    r &= 0xffffffffULL; /* short enough to type back in */
    fprintf(stderr, "assay %s: seed %llu\n", command, (unsigned long long)r);
    return r;
}

int cli_read_text(const char *command, const char *file, char **data, size_t *size) {
    if (strcmp(file, "-") != 0) {
        if (assay_read_file(file, data, size) == ASSAY_OK) return 0;
        cli_report_error(command);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = assay_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = assay_xrealloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        fprintf(stderr, "assay %s: cannot read standard input\n", command);
        return -1;
    }
    buf[n] = 0;
    *data = buf;
    if (size) *size = n;
    return 0;
}

cli_count_text cli_count(int64_t n, const char *one, const char *many) {
    cli_count_text t;
    snprintf(t.s, sizeof t.s, "%lld %s", (long long)n, n == 1 ? one : many);
    return t;
}
