/* cmd_tokenize.c — `assay tokenize MODEL [TEXT | -f FILE] [--ids | --pieces] [--add-special]`.
 * MODEL is a GGUF file, an HF directory (its tokenizer.json) or a tokenizer.json. Without TEXT or -f (or with -f -)
 * the text is read from standard input. Special-token text in the input becomes the special token unless
 * --no-parse-special; BOS/EOS are added only with --add-special (and only as the model says).
 * Output: default one token per line (id, stored piece, decoded bytes, both as JSON strings);
 * --ids: the ids on one line separated by single spaces, nothing else; --pieces: a JSON array of pieces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/file.h"
#include "assay/progress.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "cli.h"
#include "commands.h"

static int read_stream(FILE *f, char **data, size_t *size) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return 0;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) return free(buf), 0;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    *data = buf;
    *size = n;
    return 1;
}

static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int assay_cmd_tokenize(int argc, char **argv) {
    const char *file = NULL;
    int ids_only = 0, pieces = 0, add_special = 0, no_parse_special = 0, timing = 0;
    const cli_option opts[] = {
        {"-f", "--file", CLI_STRING, &file, "FILE", "read the text from FILE (exact bytes; -: standard input, the default)"},
        {NULL, "--ids", CLI_FLAG, &ids_only, NULL, "print only the ids, on one line, separated by spaces"},
        {NULL, "--pieces", CLI_FLAG, &pieces, NULL, "print the tokens as stored in the vocabulary (a JSON array)"},
        {NULL, "--add-special", CLI_FLAG, &add_special, NULL, "add BOS/EOS where the model's metadata says so"},
        {NULL, "--no-parse-special", CLI_FLAG, &no_parse_special, NULL, "treat special-token text as plain text"},
        {NULL, "--time", CLI_FLAG, &timing, NULL, "print the encode time (wall and thread CPU) and MB/s to stderr"},
        {0}};
    const cli_spec spec = {"tokenize", "MODEL [TEXT | -f FILE] [--ids | --pieces] [--add-special]",
                           "text -> token ids or pieces with the model's tokenizer", opts, 1, 2};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (ids_only && pieces) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--ids and --pieces exclude each other");
    }
    if (file && args.count == 2) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "give TEXT or -f FILE, not both");
    }
    char *text = NULL;
    size_t len = 0;
    if (args.count == 2) {
        text = assay_xstrdup(args.positional[1]);
        len = strlen(text);
    } else if (file && strcmp(file, "-") != 0) {
        if (assay_read_file(file, &text, &len) != ASSAY_OK) {
            cli_args_free(&args);
            return cli_report_error("tokenize");
        }
    } else if (!read_stream(stdin, &text, &len)) {
        cli_args_free(&args);
        fprintf(stderr, "assay tokenize: cannot read standard input\n");
        return CLI_EXIT_ERROR;
    }

    assay_tokenizer *tok;
    if (assay_tokenizer_load(&tok, args.positional[0]) != ASSAY_OK) {
        free(text);
        cli_args_free(&args);
        return cli_report_error("tokenize");
    }
    assay_tokens ids = {0};
    int flags = (add_special ? ASSAY_TOK_ADD_SPECIAL : 0) | (no_parse_special ? 0 : ASSAY_TOK_PARSE_SPECIAL);
    double t0 = assay_now_seconds(), c0 = thread_cpu_seconds();
    assay_status st = assay_tokenizer_encode(tok, text, len, flags, &ids);
    double t1 = assay_now_seconds(), c1 = thread_cpu_seconds();
    if (st != ASSAY_OK) {
        assay_tokenizer_free(tok);
        free(text);
        cli_args_free(&args);
        return cli_report_error("tokenize");
    }
    if (timing)
        fprintf(stderr, "assay tokenize: %zu bytes -> %lld tokens in %.3f ms wall (%.2f MB/s), %.3f ms cpu (%.2f MB/s)\n", len,
                (long long)ids.n, (t1 - t0) * 1e3, len / 1e6 / (t1 - t0 > 0 ? t1 - t0 : 1e-9), (c1 - c0) * 1e3,
                len / 1e6 / (c1 - c0 > 0 ? c1 - c0 : 1e-9));

    assay_strbuf b = {0};
    if (ids_only) {
        for (int64_t i = 0; i < ids.n; i++) assay_strbuf_printf(&b, i ? " %d" : "%d", ids.ids[i]);
        assay_strbuf_putc(&b, '\n');
    } else if (pieces) {
        assay_strbuf_putc(&b, '[');
        for (int64_t i = 0; i < ids.n; i++) {
            size_t n;
            const char *p = assay_tokenizer_piece(tok, ids.ids[i], &n);
            if (i) assay_strbuf_puts(&b, ", ");
            assay_strbuf_json_string(&b, p, n);
        }
        assay_strbuf_puts(&b, "]\n");
    } else {
        for (int64_t i = 0; i < ids.n; i++) {
            size_t n, m;
            const char *p = assay_tokenizer_piece(tok, ids.ids[i], &n);
            const char *bytes = assay_tokenizer_token_bytes(tok, ids.ids[i], &m);
            assay_strbuf_printf(&b, "%8d  ", ids.ids[i]);
            assay_strbuf_json_string(&b, p, n);
            assay_strbuf_puts(&b, "  ");
            assay_strbuf_json_string(&b, bytes, m);
            assay_strbuf_putc(&b, '\n');
        }
        assay_strbuf_printf(&b, "%s\n", cli_count(ids.n, "token", "tokens").s);
    }
    fwrite(b.data, 1, b.len, stdout);
    assay_strbuf_free(&b);
    assay_tokens_free(&ids);
    assay_tokenizer_free(tok);
    free(text);
    cli_args_free(&args);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}
