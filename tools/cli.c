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
#include <unistd.h>

#include "assay/cleanup.h"
#include "assay/status.h"

void cli_print_help(const cli_spec *spec) {
    printf("usage: assay %s %s\n\n%s\n", spec->command, spec->usage, spec->summary);
    if (spec->options && spec->options[0].long_name) printf("\noptions:\n");
    for (const cli_option *o = spec->options; o && o->long_name; o++) {
        char left[96];
        snprintf(left, sizeof left, "%s%s%s%s%s", o->short_name ? o->short_name : "", o->short_name ? ", " : "",
                 o->long_name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-30s %s\n", left, o->help ? o->help : "");
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
        if (o->short_name && strlen(o->short_name) == len && strncmp(o->short_name, name, len) == 0) return o;
    }
    return NULL;
}

static int store_value(const cli_spec *spec, const cli_option *o, const char *value) {
    char *end;
    switch (o->kind) {
    case CLI_STRING: *(const char **)o->dest = value; return 0;
    case CLI_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end) return cli_usage_error(spec, "%s expects a whole number, got '%s'", o->long_name, value);
        *(int64_t *)o->dest = v;
        return 0;
    }
    case CLI_FLOAT: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(v))
            return cli_usage_error(spec, "%s expects a number, got '%s'", o->long_name, value);
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
            if (i + 1 >= argc) return cli_usage_error(spec, "%s needs a value (%s)", o->long_name, o->metavar ? o->metavar : "VALUE");
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
