/* test_tokenizer.c — the tokenizer API on the house model: ids and text from its reference.json (produced by
 * transformers), special-token parsing on/off, byte-exact decoding across token boundaries, errors, and
 * concurrent use of one tokenizer. Whole-file agreement with HF is tests/py/test_tokenizer_house.py. */
#include <pthread.h>
#include <unistd.h>

#include "assay/file.h"
#include "assay/json.h"
#include "assay/tokenizer.h"
#include "check.h"

static assay_tokenizer *house;
static const char *long_text = "It was the best of times, it was the worst of times; 1234567 spaces    and\n\nnewlines \xf0\x9f\xa6\x99!";

static void *worker(void *arg) {
    int *ok = arg;
    assay_tokens a = {0};
    *ok = 1;
    for (int r = 0; r < 200; r++) {
        a.n = 0;
        if (assay_tokenizer_encode(house, long_text, strlen(long_text), 0, &a) != ASSAY_OK) *ok = 0;
        assay_strbuf s = {0};
        assay_tokenizer_decode(house, a.ids, a.n, 0, &s);
        if (s.len != strlen(long_text) || memcmp(s.data, long_text, s.len) != 0) *ok = 0;
        assay_strbuf_free(&s);
    }
    assay_tokens_free(&a);
    return NULL;
}

/* A tokenizer.json from its text, in a directory of its own (the loader reads tokenizer_config.json beside it). */
static assay_tokenizer *load_json_text(const char *json) {
    char dir[] = "/tmp/assay_tok_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    char path[64];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "wb");
    assay_tokenizer *t = NULL;
    if (f) {
        fputs(json, f);
        fclose(f);
        CHECK_OK(assay_tokenizer_load(&t, path));
        unlink(path);
    }
    rmdir(dir);
    return t;
}

/* Bytes that are not valid UTF-8 through a character-BPE tokenizer with regex splits (Digits, Punctuation): the
 * regexes see U+FFFD for them (PCRE2 runs without its UTF check and read out of bounds on such bytes; found by
 * fuzz/fuzz_tokenizer.c), the bytes become byte-fallback tokens, and decoding gives them back. */
static void check_chars_invalid_utf8(void) {
    assay_strbuf j = {0};
    assay_strbuf_puts(&j, "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "
                          "\"\u2581\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\u2581\"}]}, "
                          "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                          "\"individual_digits\": true}, {\"type\": \"Punctuation\"}]}, "
                          "\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"\u2581\": 0, \"a\": 1, \"1\": 2, \"2\": 3");
    for (int b = 0; b < 256; b++) assay_strbuf_printf(&j, ", \"<0x%02X>\": %d", b, 4 + b);
    assay_strbuf_puts(&j, "}, \"merges\": []}}");
    assay_tokenizer *t = load_json_text(j.data);
    assay_strbuf_free(&j);
    if (!t) return;
    CHECK(assay_tokenizer_get_kind(t) == ASSAY_TOKENIZER_BPE_CHARS);
    static const char *texts[] = {"\n\xfe", "12\xfe", "a\xe2\x96", "\xc0\x80!1", "\xf0\x9f\xa6", "1\xff" "2\xed\xa0\x80" "a"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        assay_tokens ids = {0};
        CHECK_OK(assay_tokenizer_encode(t, texts[i], strlen(texts[i]), 0, &ids));
        assay_strbuf out = {0};
        CHECK_OK(assay_tokenizer_decode(t, ids.ids, ids.n, ASSAY_DETOK_STRIP_PREFIX, &out));
        CHECK(out.len == strlen(texts[i]) && memcmp(out.data, texts[i], out.len) == 0);
        assay_strbuf_free(&out);
        assay_tokens_free(&ids);
    }
    /* the valid pieces are split as before: "12" is two digits, each its own token */
    assay_tokens ids = {0};
    CHECK_OK(assay_tokenizer_encode(t, "12\xfe", 3, 0, &ids));
    CHECK(ids.n == 4 && ids.ids[0] == 0 && ids.ids[1] == 2 && ids.ids[2] == 3 && ids.ids[3] == 4 + 0xfe);
    assay_tokens_free(&ids);
    assay_tokenizer_free(t);
}

/* A byte-level tokenizer without some bytes and without unk: a word of those bytes gives no ids, from the cache
 * too (the empty result was once cached by arithmetic on a null pointer: undefined behaviour, found by fuzzing). */
static void check_bytes_missing(void) {
    assay_tokenizer *t = load_json_text("{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
                                        "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"\u0120\": 2}, \"merges\": []}}");
    if (!t) return;
    for (int r = 0; r < 2; r++) {
        assay_tokens ids = {0};
        CHECK_OK(assay_tokenizer_encode(t, "\x01", 1, 0, &ids));
        CHECK(ids.n == 0);
        CHECK_OK(assay_tokenizer_encode(t, "\x01 a\x02" "b", 5, 0, &ids));
        CHECK(ids.n == 3 && ids.ids[0] == 2 && ids.ids[1] == 0 && ids.ids[2] == 1);
        assay_tokens_free(&ids);
    }
    assay_tokenizer_free(t);
}

int main(void) {
    CHECK_OK(assay_tokenizer_load(&house, check_shared_path("models/house")));
    if (!house) return check_finish("tokenizer");
    CHECK(assay_tokenizer_get_kind(house) == ASSAY_TOKENIZER_BPE_BYTES);
    CHECK(assay_tokenizer_n_vocab(house) == 8192);
    CHECK(assay_tokenizer_bos(house) == 0 && assay_tokenizer_eos(house) == 0);
    CHECK(assay_tokenizer_add_bos(house) == 0); /* its post-processor adds nothing */
    CHECK(assay_tokenizer_is_eog(house, 0));

    /* reference.json: the prompt's ids and the greedy continuation's text, both from transformers */
    assay_json_doc *doc;
    CHECK_OK(assay_json_parse_file(check_shared_path("models/house/reference.json"), &doc));
    const assay_json *ref = assay_json_root(doc);
    const char *prompt = assay_json_string(assay_json_get(ref, "prompt"), "");
    assay_tokens ids = {0};
    CHECK_OK(assay_tokenizer_encode(house, prompt, strlen(prompt), ASSAY_TOK_ADD_SPECIAL | ASSAY_TOK_PARSE_SPECIAL, &ids));
    const assay_json *want = assay_json_get(ref, "prompt_ids");
    CHECK(want && ids.n == want->count);
    int64_t i = 0;
    for (const assay_json *e = want ? want->first : NULL; e && i < ids.n; e = e->next, i++) CHECK(ids.ids[i] == assay_json_int(e, -1));
    assay_tokens greedy = {0};
    for (const assay_json *e = assay_json_get(ref, "greedy_ids")->first; e; e = e->next) assay_tokens_push(&greedy, (int32_t)assay_json_int(e, -1));
    assay_strbuf text = {0};
    CHECK_OK(assay_tokenizer_decode(house, greedy.ids, greedy.n, 0, &text));
    CHECK(text.data && strcmp(text.data, assay_json_string(assay_json_get(ref, "greedy_text"), "?")) == 0);
    assay_strbuf_free(&text);
    assay_tokens_free(&greedy);
    assay_json_doc_free(doc);

    /* special-token text: one token when parsed, plain text otherwise */
    const char *sp = "a<|endoftext|>b";
    ids.n = 0;
    CHECK_OK(assay_tokenizer_encode(house, sp, strlen(sp), ASSAY_TOK_PARSE_SPECIAL, &ids));
    CHECK(ids.n == 3 && ids.ids[1] == 0);
    ids.n = 0;
    CHECK_OK(assay_tokenizer_encode(house, sp, strlen(sp), 0, &ids));
    CHECK(ids.n > 3);
    for (i = 0; i < ids.n; i++) CHECK(ids.ids[i] != 0);
    assay_strbuf s = {0};
    CHECK_OK(assay_tokenizer_decode(house, ids.ids, ids.n, 0, &s));
    CHECK(s.data && strcmp(s.data, sp) == 0);
    assay_strbuf_clear(&s);
    int32_t eot_ids[] = {0, 40};
    CHECK_OK(assay_tokenizer_decode(house, eot_ids, 2, ASSAY_DETOK_SKIP_SPECIAL, &s));
    CHECK(s.len == 1 && s.data[0] == 'H');

    /* A rare character becomes several byte tokens; token by token the bytes are partial UTF-8, joined they
     * are the character again. */
    const char *emoji = "\xf0\x9f\xa6\x99";
    ids.n = 0;
    CHECK_OK(assay_tokenizer_encode(house, emoji, 4, 0, &ids));
    CHECK(ids.n >= 2);
    size_t total = 0;
    for (i = 0; i < ids.n; i++) {
        size_t n;
        assay_tokenizer_token_bytes(house, ids.ids[i], &n);
        total += n;
    }
    CHECK(total == 4);
    assay_strbuf_clear(&s);
    CHECK_OK(assay_tokenizer_decode(house, ids.ids, ids.n, 0, &s));
    CHECK(s.len == 4 && memcmp(s.data, emoji, 4) == 0);
    size_t pn;
    const char *piece = assay_tokenizer_piece(house, 221, &pn);
    CHECK(pn == 2 && memcmp(piece, "\xc4\xa0", 2) == 0); /* "Ġ", the space */
    CHECK(assay_tokenizer_find(house, "\xc4\xa0the", 5) >= 0);

    /* errors */
    int32_t bad = 8192;
    CHECK(assay_tokenizer_decode(house, &bad, 1, 0, &s) == ASSAY_ERR_RANGE);
    assay_tokenizer *t2 = NULL;
    CHECK(assay_tokenizer_load(&t2, "/nonexistent/dir/tokenizer.json") != ASSAY_OK && t2 == NULL);
    char tmp[] = "/tmp/assay_tok_XXXXXX.json";
    int fd = mkstemps(tmp, 5);
    CHECK(fd >= 0);
    const char *unigram = "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}";
    CHECK(write(fd, unigram, strlen(unigram)) == (ssize_t)strlen(unigram));
    close(fd);
    CHECK(assay_tokenizer_load(&t2, tmp) == ASSAY_ERR_UNSUPPORTED);
    CHECK(strstr(assay_last_error(), "Unigram") != NULL);
    unlink(tmp);

    check_chars_invalid_utf8();
    check_bytes_missing();

    /* one tokenizer, four threads */
    pthread_t th[4];
    int ok[4];
    for (int k = 0; k < 4; k++) pthread_create(&th[k], NULL, worker, &ok[k]);
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        CHECK(ok[k]);
    }

    assay_strbuf_free(&s);
    assay_tokens_free(&ids);
    assay_tokenizer_free(house);
    return check_finish("tokenizer");
}
