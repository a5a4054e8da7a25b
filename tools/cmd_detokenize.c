/* cmd_detokenize.c — `assay detokenize MODEL IDS... [-f FILE] [--skip-special]`: token ids -> the exact bytes
 * they decode to. Into a pipe or a file nothing is added (no newline), so that
 * `assay detokenize M $(assay tokenize M --ids TEXT) > out` reproduces TEXT byte for byte; on a terminal a newline
 * ends the text when it has none, so that the shell's prompt starts on a line of its own. Ids may be separate arguments, one argument with spaces/commas, or read from FILE
 * (-: standard input; also the default when no ids are given). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/file.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "cli.h"
#include "commands.h"

/* Parses ids separated by whitespace, commas or brackets; returns 0 and names the bad word on error. */
static int parse_ids(const char *s, assay_tokens *out, const cli_spec *spec) {
    while (*s) {
        while (*s && (isspace((unsigned char)*s) || *s == ',' || *s == '[' || *s == ']')) s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX || (*end && !isspace((unsigned char)*end) && *end != ',' && *end != ']')) {
            const char *w = s;
            size_t n = 0;
            while (w[n] && !isspace((unsigned char)w[n]) && w[n] != ',') n++;
            cli_usage_error(spec, "'%.*s' is not a token id", (int)n, w);
            return 0;
        }
        assay_tokens_push(out, (int32_t)v);
        s = end;
    }
    return 1;
}

int assay_cmd_detokenize(int argc, char **argv) {
    const char *file = NULL;
    int skip_special = 0;
    const cli_option opts[] = {
        {"-f", "--file", CLI_STRING, &file, "FILE", "read the ids from FILE (-: standard input, the default without IDS)"},
        {NULL, "--skip-special", CLI_FLAG, &skip_special, NULL, "leave out control tokens (BOS, EOS, end of turn)"},
        {0}};
    const cli_spec spec = {"detokenize", "MODEL [IDS... | -f FILE]", "token ids -> text", opts, 1, -1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    assay_tokens ids = {0};
    for (int i = 1; i < args.count; i++) {
        if (!parse_ids(args.positional[i], &ids, &spec)) {
            assay_tokens_free(&ids);
            cli_args_free(&args);
            return CLI_EXIT_USAGE;
        }
    }
    if (!file && args.count == 1) file = "-";
    if (file) {
        char *data;
        size_t n;
        if (cli_read_text("detokenize", file, &data, &n) != 0) {
            assay_tokens_free(&ids);
            cli_args_free(&args);
            return CLI_EXIT_ERROR;
        }
        int ok = parse_ids(data, &ids, &spec);
        free(data);
        if (!ok) {
            assay_tokens_free(&ids);
            cli_args_free(&args);
            return CLI_EXIT_USAGE;
        }
    }
    assay_tokenizer *tok;
    if (assay_tokenizer_load(&tok, args.positional[0]) != ASSAY_OK) {
        assay_tokens_free(&ids);
        cli_args_free(&args);
        return cli_report_error("detokenize");
    }
    assay_strbuf out = {0};
    int flags = ASSAY_DETOK_STRIP_PREFIX | (skip_special ? ASSAY_DETOK_SKIP_SPECIAL : 0);
    assay_status st = assay_tokenizer_decode(tok, ids.ids, ids.n, flags, &out);
    if (st == ASSAY_OK) {
        fwrite(out.data, 1, out.len, stdout);
        if (isatty(STDOUT_FILENO) && (out.len == 0 || out.data[out.len - 1] != '\n')) fputc('\n', stdout);
    }
    assay_strbuf_free(&out);
    assay_tokenizer_free(tok);
    assay_tokens_free(&ids);
    cli_args_free(&args);
    if (st != ASSAY_OK) return cli_report_error("detokenize");
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}
