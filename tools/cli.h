/* cli.h — one declarative option parser for every subcommand.
 *
 * A subcommand declares its options as a table and calls cli_parse:
 *
 *   const char *out = NULL; int64_t n = 32; int force = 0;
 *   const cli_option opts[] = {
 *       {"-o", "--output", CLI_STRING, &out, "FILE", "where to write the result"},
 *       {"-n", "--n-predict", CLI_INT, &n, "N", "tokens to generate (default 32)"},
 *       {NULL, "--force", CLI_FLAG, &force, NULL, "overwrite an existing output"},
 *       {0}};
 *   const cli_spec spec = {"convert", "MODEL -o OUT [options]", "convert between formats", opts, 1, 1};
 *   cli_args args;
 *   int rc = cli_parse(&spec, argc, argv, &args);
 *   if (rc != CLI_CONTINUE) return rc;      // --help printed (0) or usage error printed (2)
 *   ... args.positional[0] ...
 *
 * Usage errors (unknown flag, missing value, bad number, wrong positional count) print one line naming the
 * problem plus a pointer to --help, and make the command exit with code 2.
 */
#ifndef ASSAY_TOOLS_CLI_H
#define ASSAY_TOOLS_CLI_H

#include <stdint.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2, CLI_CONTINUE = -1 };

typedef enum cli_kind {
    CLI_FLAG,   /* int*: set to 1 */
    CLI_STRING, /* const char**: the value as given */
    CLI_INT,    /* int64_t*: a whole number */
    CLI_FLOAT,  /* double*: a number */
} cli_kind;

typedef struct cli_option {
    const char *short_name; /* "-o" or NULL */
    const char *long_name;  /* "--output" */
    cli_kind kind;
    void *dest;
    const char *metavar; /* shown in --help for options that take a value */
    const char *help;
} cli_option;

typedef struct cli_spec {
    const char *command;      /* "convert" */
    const char *usage;        /* "MODEL -o OUT [options]" */
    const char *summary;      /* one line */
    const cli_option *options;/* terminated by an all-zero row */
    int min_positional;
    int max_positional;       /* -1: unlimited */
} cli_spec;

typedef struct cli_args {
    char **positional;
    int count;
} cli_args;

int cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *args);
void cli_args_free(cli_args *args);
void cli_print_help(const cli_spec *spec);
/* Prints "assay CMD: MESSAGE" and a pointer to --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_spec *spec, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "assay CMD: <assay_last_error()>" and returns CLI_EXIT_ERROR: the way commands report failures. */
int cli_report_error(const char *command);

/* From here on SIGINT, SIGTERM and SIGHUP end the command cleanly: a thread that waits for them removes the
 * temporary outputs still registered (cleanup.h), prints one line ("assay CMD: interrupted by SIGINT") and exits
 * with 128 + the signal's number (130, 143, 129). Call it before any thread is started: they inherit the mask. */
void cli_handle_signals(const char *command);

#endif
