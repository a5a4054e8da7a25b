/* fuzz_tokenizer.c — libFuzzer harness for the tokenizers (src/tokenizer/): arbitrary bytes through encode and
 * decode, for every kind of tokenizer we load.
 *   bash scripts/fuzz.sh 300      (seeds: fuzz/corpus/fuzz_tokenizer; dictionary: fuzz/fuzz_tokenizer.dict)
 * The tokenizers are loaded once: llama.cpp's vocabulary fixtures gpt-2, falcon and deepseek-coder (byte-level
 * BPE with their pre-tokenizer regexes and added tokens), llama-spm and phi-3 (SentencePiece with byte fallback)
 * from $ASSAY_SHARED/data/llamacpp_vocab, the house model's tokenizer.json (byte-level BPE), and two small
 * tokenizer.json files written here (BPE over characters with byte fallback: Prepend/Replace normalizers with
 * Digits and Punctuation splits, and NFC with a Metaspace pre-tokenizer, added tokens with lstrip/rstrip).
 *
 * Input: byte 0 picks the tokenizer (bits 0-2) and the encode flags (bit 3 ADD_SPECIAL, bit 4 PARSE_SPECIAL);
 * the rest is the text. Checks:
 *   - encode succeeds, every id is inside the vocabulary, BOS/EOS sit where add_bos/add_eos say;
 *   - encoding again (now from the word cache) gives the same ids;
 *   - decode(encode(x)) == x where the tokenizer is lossless: byte-level BPE always (special and added tokens
 *     decode to their own text) where each byte of x has a token that decodes to it; SentencePiece and character BPE when no added or
 *     special token was matched, the text has no U+2581 (which decodes as a space), the dummy prefix stripped
 *     (and, for the NFC one, ASCII text not starting with a space);
 *   - the rest of the bytes read as 16-bit ids decode, or fail with ASSAY_ERR_RANGE exactly when one is outside
 *     the vocabulary, to the concatenation of the tokens' bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/file.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "tokenizer/tok_internal.h" /* the word cache, emptied before each input */

#define FAIL() __builtin_trap()

enum { LOSSY, LOSSLESS_BYTES, LOSSLESS_PREFIXED, LOSSLESS_ASCII };

typedef struct entry {
    const char *what;
    int lossless;
    assay_tokenizer *tok;
    uint8_t own_byte[256]; /* the byte's token decodes to that byte */
} entry;

static entry toks[8];

/* A small tokenizer.json of the character-BPE kind (Metaspace style): <unk>, <s>, </s>, the 256 byte tokens,
 * letters, digits, a few accented and CJK characters, ▁, some merges, and added tokens. */
#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

static void write_chars_tokenizer(const char *path, int metaspace) {
    assay_strbuf b = {0};
    static const char *chars[] = {"\xe2\x96\x81", "\xc3\xa9", "\xc3\xbc", "\xe6\x97\xa5", "\xe6\x9c\xac", "\xf0\x9f\xa6\x99", ".", ",", "!", "'"};
    static const char *merges[][2] = {{"\xe2\x96\x81", "t"}, {"h", "e"}, {SP "t", "he"}, {"i", "n"}, {"e", "r"},
                                      {"a", "n"}, {"\xe2\x96\x81", "a"}, {SP "a", "n"}, {"o", "n"}, {"e", "s"},
                                      {"\xe2\x96\x81", "\xe6\x97\xa5"}, {"\xe6\x97\xa5", "\xe6\x9c\xac"}, {"\xe2\x96\x81", "\xe2\x96\x81"}};
    int id = 0;
    assay_strbuf_puts(&b, "{\"version\": \"1.0\", \"added_tokens\": [");
    assay_strbuf_puts(&b, "{\"id\": 0, \"content\": \"<unk>\", \"special\": true},");
    assay_strbuf_puts(&b, "{\"id\": 1, \"content\": \"<s>\", \"special\": true},");
    assay_strbuf_puts(&b, "{\"id\": 2, \"content\": \"</s>\", \"special\": true},");
    assay_strbuf_printf(&b, "{\"id\": %d, \"content\": \"<|user|>\", \"special\": false, \"lstrip\": true, \"rstrip\": true},", 400);
    assay_strbuf_printf(&b, "{\"id\": %d, \"content\": \"<|end|>\", \"special\": true, \"rstrip\": true}], ", 401);
    if (metaspace) {
        assay_strbuf_puts(&b, "\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": "
                              "\"\xe2\x96\x81\", \"prepend_scheme\": \"first\", \"split\": true}, ");
    } else {
        assay_strbuf_puts(&b, "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "
                              "\"\xe2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]}, "
                              "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": "
                              "true}, {\"type\": \"Punctuation\", \"behavior\": \"Isolated\"}]}, ");
    }
    assay_strbuf_puts(&b, "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
                          "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}, ");
    assay_strbuf_printf(&b, "\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\", \"ignore_merges\": %s, \"vocab\": {",
                        metaspace ? "true" : "false");
    assay_strbuf_puts(&b, "\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    id = 3;
    for (int x = 0; x < 256; x++) assay_strbuf_printf(&b, ", \"<0x%02X>\": %d", x, id++);
    for (int c = 'a'; c <= 'z'; c++) assay_strbuf_printf(&b, ", \"%c\": %d", c, id++);
    for (int c = '0'; c <= '9'; c++) assay_strbuf_printf(&b, ", \"%c\": %d", c, id++);
    for (size_t i = 0; i < sizeof chars / sizeof *chars; i++) {
        assay_strbuf_puts(&b, ", ");
        assay_strbuf_json_string(&b, chars[i], strlen(chars[i]));
        assay_strbuf_printf(&b, ": %d", id++);
    }
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++) {
        char joined[32];
        snprintf(joined, sizeof joined, "%s%s", merges[i][0], merges[i][1]);
        assay_strbuf_puts(&b, ", ");
        assay_strbuf_json_string(&b, joined, strlen(joined));
        assay_strbuf_printf(&b, ": %d", id++);
    }
    assay_strbuf_puts(&b, "}, \"merges\": [");
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++) {
        assay_strbuf_puts(&b, i ? ", [" : "[");
        assay_strbuf_json_string(&b, merges[i][0], strlen(merges[i][0]));
        assay_strbuf_puts(&b, ", ");
        assay_strbuf_json_string(&b, merges[i][1], strlen(merges[i][1]));
        assay_strbuf_puts(&b, "]");
    }
    assay_strbuf_puts(&b, "]}}\n");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
        fprintf(stderr, "fuzz_tokenizer: cannot write %s\n", path);
        exit(1);
    }
    assay_strbuf_free(&b);
}

static void load(int i, const char *what, const char *path, int lossless) {
    if (assay_tokenizer_load(&toks[i].tok, path) != ASSAY_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n(set ASSAY_SHARED to the folder with data/llamacpp_vocab and models/house)\n",
                assay_last_error());
        exit(1);
    }
    toks[i].what = what;
    toks[i].lossless = lossless;
    for (int b = 0; b < 256; b++) {
        int32_t id = toks[i].tok->byte_to_id[b];
        size_t l;
        const char *s = id >= 0 ? assay_tokenizer_token_bytes(toks[i].tok, id, &l) : NULL;
        toks[i].own_byte[b] = s && l == 1 && (uint8_t)s[0] == b;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *shared = assay_shared_dir();
    if (!shared) {
        fprintf(stderr, "fuzz_tokenizer: no shared data folder: set ASSAY_SHARED\n");
        exit(1);
    }
    char path[4096];
    static const char *vocabs[][2] = {{"gpt-2", "b"}, {"llama-spm", "p"}, {"falcon", "b"}, {"deepseek-coder", "b"}, {"phi-3", "p"}};
    static const int slot[] = {0, 1, 3, 4, 5};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/data/llamacpp_vocab/ggml-vocab-%s.gguf", shared, vocabs[i][0]);
        load(slot[i], vocabs[i][0], path, vocabs[i][1][0] == 'b' ? LOSSLESS_BYTES : LOSSLESS_PREFIXED);
    }
    snprintf(path, sizeof path, "%s/models/house/tokenizer.json", shared);
    load(2, "house", path, LOSSLESS_BYTES);
    char dir[] = "/tmp/fuzz_tokenizer_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("fuzz_tokenizer: mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_chars_tokenizer(path, 0);
    load(6, "chars (Prepend, Replace, Digits, Punctuation)", path, LOSSLESS_PREFIXED);
    write_chars_tokenizer(path, 1);
    load(7, "chars (NFC, Metaspace)", path, LOSSLESS_ASCII);
    unlink(path);
    rmdir(dir);
    return 0;
}

static void cache_reset(assay_tokenizer *t) {
    if (t->cache.mask + 1 > 4096) {
        tok_map_free(&t->cache);
        tok_map_init(&t->cache, 1024);
    } else {
        tok_map_clear(&t->cache);
    }
    t->cache_keys_len = 0;
    t->cache_ids_len = 0;
}

static int is_matchable(const assay_tokenizer *t, int32_t id) {
    assay_token_type ty = assay_tokenizer_token_type(t, id);
    return ty == ASSAY_TOKEN_CONTROL || ty == ASSAY_TOKEN_USER_DEFINED || ty == ASSAY_TOKEN_UNKNOWN;
}

static void check_roundtrip(const entry *e, const char *text, size_t n, int flags, const assay_tokens *ids) {
    const assay_tokenizer *t = e->tok;
    const int32_t *p = ids->ids;
    int64_t m = ids->n;
    if ((flags & ASSAY_TOK_ADD_SPECIAL) && assay_tokenizer_add_bos(t) && assay_tokenizer_bos(t) >= 0) {
        if (m < 1 || p[0] != assay_tokenizer_bos(t)) FAIL();
        p++, m--;
    }
    if ((flags & ASSAY_TOK_ADD_SPECIAL) && assay_tokenizer_add_eos(t) && assay_tokenizer_eos(t) >= 0) {
        if (m < 1 || p[m - 1] != assay_tokenizer_eos(t)) FAIL();
        m--;
    }
    if (n == 0 && m != 0) FAIL();
    int dflags = 0;
    /* A byte without a token of its own: deepseek-coder has none for C0 C1 F5-FF (never in UTF-8), and the
     * added tokens spelled like those bytes ("Á", ...) decode to their text, as in llama.cpp. */
    for (size_t i = 0; i < n; i++)
        if (!e->own_byte[(uint8_t)text[i]]) return;
    if (e->lossless != LOSSLESS_BYTES) {
        if (flags & ASSAY_TOK_PARSE_SPECIAL) return;
        for (int64_t i = 0; i < m; i++)
            if (is_matchable(t, p[i])) return; /* an added token: the next fragment gets a prefix of its own */
        if (memmem(text, n, "\xe2\x96\x81", 3)) return;
        if (e->lossless == LOSSLESS_ASCII) {
            if (n && text[0] == ' ') return;
            for (size_t i = 0; i < n; i++)
                if ((uint8_t)text[i] >= 0x80) return;
        }
        dflags = ASSAY_DETOK_STRIP_PREFIX;
    }
    assay_strbuf out = {0};
    if (assay_tokenizer_decode(t, p, m, dflags, &out) != ASSAY_OK) FAIL();
    if (out.len != n || memcmp(out.data, text, n) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s: decode(encode(x)) != x (%zu bytes in, %zu out)\n", e->what, n, out.len);
        FAIL();
    }
    assay_strbuf_free(&out);
}

static void check_decode_ids(const assay_tokenizer *t, const uint8_t *data, size_t size, int flags) {
    int32_t ids[512];
    int64_t n = 0, bytes = 0;
    int outside = 0;
    for (size_t i = 0; i + 1 < size && n < 512; i += 2) {
        int32_t id = (int16_t)(data[i] | data[i + 1] << 8);
        if (id < 0 && (data[i] & 1)) id = -id; /* both signs, and ids up to 32768 */
        ids[n++] = id;
        if (id < 0 || id >= assay_tokenizer_n_vocab(t)) outside = 1;
        else if (!outside) {
            size_t l;
            assay_tokenizer_token_bytes(t, id, &l);
            bytes += (int64_t)l;
        }
    }
    assay_strbuf out = {0};
    assay_status st = assay_tokenizer_decode(t, ids, n, flags, &out);
    if (outside) {
        if (st != ASSAY_ERR_RANGE) FAIL();
    } else {
        if (st != ASSAY_OK || !out.data || strlen(out.data) > out.len) FAIL();
        if (flags == 0 && (int64_t)out.len != bytes) FAIL();
        if (flags != 0 && (int64_t)out.len > bytes) FAIL();
    }
    assay_strbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const entry *e = &toks[data[0] & 7];
    assay_tokenizer *t = e->tok;
    int flags = (data[0] & 8 ? ASSAY_TOK_ADD_SPECIAL : 0) | (data[0] & 16 ? ASSAY_TOK_PARSE_SPECIAL : 0);
    const char *text = (const char *)data + 1;
    size_t n = size - 1;

    cache_reset(t);
    assay_tokens a = {0}, b = {0};
    if (assay_tokenizer_encode(t, text, n, flags, &a) != ASSAY_OK) FAIL();
    int64_t nv = assay_tokenizer_n_vocab(t);
    for (int64_t i = 0; i < a.n; i++) {
        int32_t id = a.ids[i];
        if (id < 0 || id >= nv) FAIL();
        if (i < 64) { /* the piece finds a token with that text (the first of equal texts) */
            size_t l;
            const char *piece = assay_tokenizer_piece(t, id, &l);
            int32_t f = assay_tokenizer_find(t, piece, l);
            size_t fl;
            if (l && (f < 0 || (assay_tokenizer_piece(t, f, &fl), fl != l))) FAIL();
        }
    }
    if (assay_tokenizer_encode(t, text, n, flags, &b) != ASSAY_OK) FAIL(); /* the words from the cache now */
    if (a.n != b.n || (a.n && memcmp(a.ids, b.ids, (size_t)a.n * sizeof *a.ids) != 0)) FAIL();
    check_roundtrip(e, text, n, flags, &a);
    assay_tokens_free(&a);
    assay_tokens_free(&b);

    check_decode_ids(t, data + 1, n, data[0] >> 5 & 3);
    return 0;
}
