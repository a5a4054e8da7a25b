/* main.c — the assay command line: `assay <command> [options]`. Dispatches through the table in commands.c. */
#include <stdio.h>
#include <string.h>

#include "assay/status.h"
#include "cli.h"
#include "commands.h"

#ifndef ASSAY_VERSION
#define ASSAY_VERSION "0.1.0"
#endif

static void print_overview(FILE *out) {
    fprintf(out, "assay %s — quantize, run, serve and measure large language models\n\n", ASSAY_VERSION);
    fprintf(out, "usage: assay <command> [options]     (assay <command> --help for its options)\n\ncommands:\n");
    for (const assay_command *c = assay_commands; c->name; c++)
        if (c->run) fprintf(out, "  %-12s %s\n", c->name, c->summary); /* only what this build can run */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_overview(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        print_overview(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("assay %s\n", ASSAY_VERSION);
        return CLI_EXIT_OK;
    }
    for (const assay_command *c = assay_commands; c->name; c++) {
        if (strcmp(c->name, name) != 0) continue;
        if (!c->run) {
            fprintf(stderr, "assay %s: not built yet in this version (see README.md, 'Status')\n", name);
            return CLI_EXIT_ERROR;
        }
        /* serve waits for its signals itself (to stop the server cleanly), judge too (to write the results of what
         * finished); every other command is ended by them, with its temporary outputs removed */
        assay_log_set_command(c->name);
        if (strcmp(c->name, "serve") != 0 && strcmp(c->name, "judge") != 0) cli_handle_signals(c->name);
        return c->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "assay: unknown command '%s'\n\n", name);
    print_overview(stderr);
    return CLI_EXIT_USAGE;
}
