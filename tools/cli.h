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

#include <stddef.h>
#include <stdint.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2, CLI_CONTINUE = -1 };

typedef enum cli_kind {
    CLI_FLAG,   /* int*: set to 1 */
    CLI_STRING, /* const char**: the value as given */
    CLI_INT,    /* int64_t*: a whole number */
    CLI_FLOAT,  /* double*: a number */
} cli_kind;

/* The valid range of a CLI_INT or CLI_FLOAT option, checked at parse time and shown in --help, so that the two
 * cannot drift: a row ends with one of the range macros below, after its help text. */
enum {
    CLI_HAS_MIN = 1, CLI_HAS_MAX = 2,
    CLI_MIN_OPEN = 4, CLI_MAX_OPEN = 8, /* the bound itself is excluded */
    CLI_WARN_CORES = 16,                /* a thread count: above the machine's cores it warns */
};
#define CLI_AT_LEAST(lo) .min = (lo), .range = CLI_HAS_MIN
#define CLI_ABOVE(lo) .min = (lo), .range = CLI_HAS_MIN | CLI_MIN_OPEN
#define CLI_IN(lo, hi) .min = (lo), .max = (hi), .range = CLI_HAS_MIN | CLI_HAS_MAX
#define CLI_IN_OPEN_CLOSED(lo, hi) .min = (lo), .max = (hi), .range = CLI_HAS_MIN | CLI_HAS_MAX | CLI_MIN_OPEN
#define CLI_IN_OPEN(lo, hi) .min = (lo), .max = (hi), .range = CLI_HAS_MIN | CLI_HAS_MAX | CLI_MIN_OPEN | CLI_MAX_OPEN
#define CLI_THREADS .min = 0, .range = CLI_HAS_MIN | CLI_WARN_CORES /* 0: every core */
/* a seed: -1 means a random one (cli_seed() draws and prints it) */
#define CLI_SEED .min = -1, .max = 9.2e18, .range = CLI_HAS_MIN | CLI_HAS_MAX

typedef struct cli_option {
    const char *short_name; /* "-o" or NULL */
    const char *long_name;  /* "--output" */
    cli_kind kind;
    void *dest;
    const char *metavar; /* shown in --help for options that take a value */
    const char *help;
    double min, max;     /* see the range macros; rows without one take any value */
    unsigned range;
    const char *alias;   /* an older long name still accepted ("--ctx" for "--ctx-size") */
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
/* "1 token", "2 tokens": a count with the right noun, for messages (cli_count(n, "token", "tokens").s). */
typedef struct cli_count_text {
    char s[64];
} cli_count_text;
cli_count_text cli_count(int64_t n, const char *one, const char *many);
/* "-n/--n-predict" (or "--temp"): how messages name an option. */
const char *cli_option_name(const cli_option *o, char *buf, int size);
/* The seed of a --seed S option: S, or when S is -1 a random one, printed as "assay CMD: seed N" so that the run can
 * be repeated. */
uint64_t cli_seed(const char *command, int64_t seed);
/* Reads FILE, or standard input when FILE is "-", whole, NUL-terminated. */
int cli_read_text(const char *command, const char *file, char **data, size_t *size);
/* Prints "assay CMD: <assay_last_error()>" and returns CLI_EXIT_ERROR: the way commands report failures. */
int cli_report_error(const char *command);

/* From here on SIGINT, SIGTERM and SIGHUP end the command cleanly: a thread that waits for them removes the
 * temporary outputs still registered (cleanup.h), prints one line ("assay CMD: interrupted by SIGINT") and exits
 * with 128 + the signal's number (130, 143, 129). Call it before any thread is started: they inherit the mask. */
void cli_handle_signals(const char *command);

#endif
