/* test_json.c — the JSON reader against hand-checked RFC 8259 cases and the real config/tokenizer files. */
#include "assay/json.h"
#include "assay/strbuf.h"
#include "check.h"

static assay_json_doc *parse(const char *s) {
    assay_json_doc *doc = NULL;
    assay_status st = assay_json_parse(s, strlen(s), &doc);
    return st == ASSAY_OK ? doc : NULL;
}

int main(void) {
    /* Values of every type, escapes and surrogate pairs. */
    assay_json_doc *d = parse("{\"a\": [1, -2.5e3, true, false, null], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\", \"big\": 9007199254740993}");
    CHECK(d != NULL);
    const assay_json *r = assay_json_root(d);
    CHECK(assay_json_get(r, "a")->count == 5);
    CHECK(assay_json_int(assay_json_at(assay_json_get(r, "a"), 0), 0) == 1);
    CHECK(assay_json_number(assay_json_at(assay_json_get(r, "a"), 1), 0) == -2500.0);
    CHECK(assay_json_int(assay_json_at(assay_json_get(r, "a"), 1), 7) == 7); /* not an integer literal */
    CHECK(assay_json_bool(assay_json_at(assay_json_get(r, "a"), 2), 0) == 1);
    CHECK(assay_json_is(assay_json_at(assay_json_get(r, "a"), 4), ASSAY_JSON_NULL));
    CHECK(strcmp(assay_json_string(assay_json_get(r, "s"), ""), "x\n\xc3\xa9\xf0\x9f\x98\x80") == 0);
    CHECK(assay_json_int(assay_json_get(r, "big"), 0) == 9007199254740993LL); /* beyond double precision */
    CHECK(assay_json_get(r, "missing") == NULL);
    CHECK(assay_json_get(assay_json_get(r, "missing"), "deeper") == NULL);
    assay_json_doc_free(d);

    /* Embedded NUL keeps its length. */
    d = parse("\"a\\u0000b\"");
    CHECK(d && assay_json_root(d)->str_len == 3);
    assay_json_doc_free(d);

    /* Invalid documents are rejected with a position. */
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "-", "\"abc", "\"\\x\"", "tru", "[1] 2",
                         "{\"a\":1,}", "\"\t\"", "1e", "[\"\\u12\"]", NULL};
    for (int i = 0; bad[i]; i++) {
        assay_json_doc *x = NULL;
        assay_status st = assay_json_parse(bad[i], strlen(bad[i]), &x);
        CHECK(st == ASSAY_ERR_FORMAT && x == NULL);
        CHECK(strstr(assay_last_error(), "line 1") != NULL);
    }

    /* Deep nesting is refused, not a stack overflow. */
    char deep[2048];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    CHECK(parse(deep) == NULL);

    /* Writer round trip: escape, then parse back. */
    assay_strbuf b = {0};
    const char raw[] = "q\"\\\x01\xff\xc3\xa9";
    assay_strbuf_json_string(&b, raw, sizeof raw - 1);
    d = parse(b.data);
    CHECK(d != NULL);
    if (d) CHECK(strcmp(assay_json_root(d)->str, "q\"\\\x01\xc3\xbf\xc3\xa9") == 0); /* 0xff -> U+00FF */
    assay_json_doc_free(d);
    assay_strbuf_clear(&b);
    assay_strbuf_json_number(&b, 0.1);
    CHECK(strcmp(b.data, "0.1") == 0);
    assay_strbuf_free(&b);

    /* A short text with many nodes: the arena starts small (by the text's length) and grows in chunks. */
    {
        assay_strbuf big = {0};
        assay_strbuf_putc(&big, '[');
        for (int i = 0; i < 60000; i++) assay_strbuf_printf(&big, "%s%d", i ? "," : "", i % 10);
        assay_strbuf_puts(&big, ",\"tail\"]");
        CHECK_OK(assay_json_parse(big.data, big.len, &d));
        const assay_json *a = assay_json_root(d);
        CHECK(a && a->count == 60001);
        int64_t sum = 0, n = 0;
        const assay_json *last = NULL;
        for (const assay_json *e = a ? a->first : NULL; e; e = e->next, n++) sum += assay_json_int(e, 0), last = e;
        CHECK(n == 60001 && sum == 6000 * 45 && last && strcmp(assay_json_string(last, ""), "tail") == 0);
        assay_json_doc_free(d);
        assay_strbuf_free(&big);
    }

    /* Real files: the house model's config and tokenizer. */
    CHECK_OK(assay_json_parse_file(check_shared_path("models/house/config.json"), &d));
    CHECK(assay_json_int(assay_json_get(assay_json_root(d), "num_hidden_layers"), 0) == 7);
    CHECK(assay_json_number(assay_json_get(assay_json_get(assay_json_root(d), "rope_parameters"), "rope_theta"), 0) == 10000.0);
    assay_json_doc_free(d);
    CHECK_OK(assay_json_parse_file(check_shared_path("models/house/tokenizer.json"), &d));
    CHECK(assay_json_get(assay_json_get(assay_json_root(d), "model"), "vocab")->count == 8192);
    assay_json_doc_free(d);
    return check_finish("json");
}
