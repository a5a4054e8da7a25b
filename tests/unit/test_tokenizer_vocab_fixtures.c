/* test_tokenizer_vocab_fixtures.c — llama.cpp's tokenizer fixtures: for every ggml-vocab-*.gguf in
 * $ASSAY_SHARED/data/llamacpp_vocab that has its .inp/.out pair, every test string must give exactly the ids
 * of the .out line. The pairs were generated with the Hugging Face tokenizers; like llama.cpp's
 * test-tokenizer-0 we encode with add_special = false and parse_special = false (user-defined tokens are
 * still matched). Test strings are separated by "\n__ggml_vocab_test__\n"; .out has one line per string.
 * Pairs whose .gguf is absent are listed and skipped (drop the vocab file in to have it checked). */
#include <dirent.h>

#include "assay/file.h"
#include "assay/tokenizer.h"
#include "check.h"

static void check_vocab(const char *dir, const char *name) {
    char gguf[4096], inp[4200], outp[4200];
    snprintf(gguf, sizeof gguf, "%s/%s", dir, name);
    snprintf(inp, sizeof inp, "%s.inp", gguf);
    snprintf(outp, sizeof outp, "%s.out", gguf);
    char *in_text, *out_text;
    size_t in_len, out_len;
    if (assay_read_file(inp, &in_text, &in_len) != ASSAY_OK || assay_read_file(outp, &out_text, &out_len) != ASSAY_OK) {
        printf("%s: no .inp/.out pair, skipped\n", name);
        return;
    }
    assay_tokenizer *tok = NULL;
    CHECK_OK(assay_tokenizer_load(&tok, gguf));
    if (!tok) return;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const char *p = in_text, *end = in_text + in_len;
    char *line = out_text;
    int n_tests = 0, n_bad = 0;
    while (p <= end && line) {
        const char *q = memmem(p, (size_t)(end - p), sep, sizeof sep - 1);
        size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        assay_tokens want = {0}, got = {0};
        for (char *s = line, *e; *s; s = e) {
            long v = strtol(s, &e, 10);
            if (e == s) break;
            assay_tokens_push(&want, (int32_t)v);
        }
        CHECK_OK(assay_tokenizer_encode(tok, p, len, 0, &got));
        int same = got.n == want.n && (got.n == 0 || memcmp(got.ids, want.ids, (size_t)got.n * sizeof *got.ids) == 0);
        CHECK(same);
        if (!same) {
            n_bad++;
            fprintf(stderr, "%s: test %d '%.*s'\n  want:", name, n_tests, (int)(len > 60 ? 60 : len), p);
            for (int64_t i = 0; i < want.n; i++) fprintf(stderr, " %d", want.ids[i]);
            fprintf(stderr, "\n  got: ");
            for (int64_t i = 0; i < got.n; i++) fprintf(stderr, " %d", got.ids[i]);
            fprintf(stderr, "\n");
        }
        assay_tokens_free(&want);
        assay_tokens_free(&got);
        n_tests++;
        line = nl ? nl + 1 : NULL;
        if (!q) break;
        p = q + sizeof sep - 1;
    }
    CHECK(n_tests > 10);
    printf("%s: %d strings, %d mismatches (%s)\n", name, n_tests, n_bad, assay_tokenizer_describe(tok));
    assay_tokenizer_free(tok);
    free(in_text);
    free(out_text);
}

int main(void) {
    const char *dir = check_shared_path("data/llamacpp_vocab");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    DIR *d = opendir(dirbuf);
    CHECK(d != NULL);
    int n_vocab = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "ggml-vocab-", 11) == 0 && n > 5 && strcmp(e->d_name + n - 5, ".gguf") == 0) {
            check_vocab(dirbuf, e->d_name);
            n_vocab++;
        } else if (n > 9 && strcmp(e->d_name + n - 9, ".gguf.inp") == 0) {
            char g[4096 + 256];
            snprintf(g, sizeof g, "%s/%.*s", dirbuf, (int)(n - 4), e->d_name);
            if (!assay_path_exists(g)) printf("%.*s: fixture without its vocab file, skipped\n", (int)(n - 4), e->d_name);
        }
    }
    if (d) closedir(d);
    CHECK(n_vocab >= 6);
    return check_finish("tokenizer_vocab_fixtures");
}
