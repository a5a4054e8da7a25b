/* test_tokenizer_pre_table.c — every entry of the pre-tokenizer table (tokenizer.ggml.pre -> split regexes) must
 * compile and run: for each name, a byte-level tokenizer with only the 256 byte tokens and that name's splits
 * encodes a text mixing scripts, digits, punctuation, CJK, contractions and whitespace runs, and decodes it back to
 * the same bytes (with no merges every piece is its bytes, so the round trip holds whatever the splits are; a regex
 * that does not compile, or fails while matching, is an error). A name whose regex did not compile once (deepseek-llm:
 * Unicode normalization of its source had put ranges out of order) is checked by name as well. */
#include <stdio.h>
#include <string.h>

#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "check.h"
#include "tokenizer/tok_internal.h"

static int utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* GPT-2's byte alphabet (written here independently of the tokenizer's own table) */
static uint32_t byte_cp(int b) {
    int n = 0;
    for (int x = 0; x < 256; x++) {
        int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
        if (x == b) return printable ? (uint32_t)x : (uint32_t)(256 + n);
        if (!printable) n++;
    }
    return 0;
}

static const char *TEXT =
    "Hello, World! It's 2026-12-07; we'll test 1234567 numbers.\n\n  Ünïcödé ΐΆΩ Kelvin K ώ, "
    "中文字符 测试 日本語のテキスト 한국어 텍스트\r\n\ttabs\t\tand   spaces   \n"
    "emoji 🙂🚀, math ∑∫√ and full-width ＡＢＣ！？ 'S 'T 'RE I'M YOU'D\n   ";

static int check_name(const char *name, size_t len) {
    assay_tokenizer *t = tok_new(ASSAY_TOKENIZER_BPE_BYTES, 256);
    for (int b = 0; b < 256; b++) {
        char s[4];
        int l = utf8_put(byte_cp(b), s);
        tok_set_token(t, b, s, (size_t)l, 0, ASSAY_TOKEN_NORMAL);
    }
    tok_index_vocab(t);
    t->byte_level = 1;
    assay_status st = tok_set_pre_by_name(t, name, len);
    if (st == ASSAY_OK) st = tok_finish(t);
    int ok = st == ASSAY_OK;
    if (!ok) printf("%.*s: %s\n", (int)len, name, assay_last_error());
    assay_tokens ids = {0};
    assay_strbuf out = {0};
    if (ok && assay_tokenizer_encode(t, TEXT, strlen(TEXT), 0, &ids) != ASSAY_OK) {
        printf("%.*s: encode: %s\n", (int)len, name, assay_last_error());
        ok = 0;
    }
    if (ok && assay_tokenizer_decode(t, ids.ids, ids.n, 0, &out) != ASSAY_OK) ok = 0;
    if (ok && (out.len != strlen(TEXT) || memcmp(out.data, TEXT, out.len) != 0)) {
        printf("%.*s: the round trip changed the text\n", (int)len, name);
        ok = 0;
    }
    if (ok) printf("%-18.*s %lld byte tokens\n", (int)len, name, (long long)ids.n);
    assay_tokens_free(&ids);
    assay_strbuf_free(&out);
    assay_tokenizer_free(t);
    return ok;
}

int main(void) {
    int n_names = 0;
    for (size_t f = 0; tok_pre_family_names(f); f++) {
        const char *s = tok_pre_family_names(f);
        while (*s) {
            while (*s == ' ') s++;
            const char *e = s;
            while (*e && *e != ' ') e++;
            if (e > s) {
                CHECK(check_name(s, (size_t)(e - s)));
                n_names++;
            }
            s = e;
        }
    }
    CHECK(n_names > 40);
    CHECK(check_name("deepseek-llm", 12));
    assay_tokenizer *t = tok_new(ASSAY_TOKENIZER_BPE_BYTES, 1);
    CHECK(tok_set_pre_by_name(t, "no-such-family", 14) != ASSAY_OK); /* unknown names are an error, not a default */
    assay_tokenizer_free(t);
    printf("%d pre-tokenizer names\n", n_names);
    return check_finish("tokenizer_pre_table");
}
