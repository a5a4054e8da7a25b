/* fuzz_json.c — libFuzzer harness for the JSON reader (src/core/json.c) and the JSON writers of strbuf.h.
 *   bash scripts/fuzz.sh 300      (seeds: fuzz/corpus/fuzz_json; dictionary: fuzz/fuzz_json.dict)
 * Whatever the bytes, parsing must fail with a message or give a well-formed tree: counts that match the
 * children, NUL-terminated strings and keys, number literals that read back as their value, lookups that find
 * the first member of a name. A parsed document is written back out (assay_strbuf_json_string for strings and
 * keys, assay_strbuf_json_number for numbers, integers as written) and the output must parse to the same tree,
 * strings byte for byte where they were valid UTF-8 (the writer escapes other bytes as \u00XX of the byte); from
 * the second writing on, the text must not change. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/json.h"
#include "assay/strbuf.h"

#define FAIL() __builtin_trap()

/* Length of the valid UTF-8 sequence at s (1..4), 0 when invalid: the rule the writer applies. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0], cp, min;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xC0 && c < 0xE0) len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c < 0xF0) len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c < 0xF8) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* What a string reads back as after the writer: invalid bytes become U+0080..U+00FF (or the C0 escapes). */
static int same_after_write(const char *orig, size_t on, const char *back, size_t bn) {
    const unsigned char *u = (const unsigned char *)orig;
    size_t j = 0;
    for (size_t i = 0; i < on;) {
        size_t l = utf8_len(u + i, on - i);
        if (l) {
            if (j + l > bn || memcmp(orig + i, back + j, l) != 0) return 0;
            i += l, j += l;
        } else { /* \u00XX of a byte >= 0x80: two bytes of UTF-8 */
            unsigned char want[2] = {(unsigned char)(0xC0 | (u[i] >> 6)), (unsigned char)(0x80 | (u[i] & 0x3F))};
            if (j + 2 > bn || memcmp(want, back + j, 2) != 0) return 0;
            i++, j += 2;
        }
    }
    return j == bn;
}

static void check_tree(const assay_json *v, int depth) {
    if (depth > ASSAY_JSON_MAX_DEPTH + 1) FAIL();
    if (v->key && v->key[v->key_len] != 0) FAIL();
    switch (v->type) {
    case ASSAY_JSON_NULL:
    case ASSAY_JSON_FALSE:
    case ASSAY_JSON_TRUE: break;
    case ASSAY_JSON_STRING:
        if (!v->str || v->str[v->str_len] != 0 || assay_json_string(v, NULL) != v->str) FAIL();
        break;
    case ASSAY_JSON_NUMBER: {
        if (!v->str || v->str_len == 0 || v->str[v->str_len] != 0 || strlen(v->str) != v->str_len) FAIL();
        double d = strtod(v->str, NULL);
        if (!(d == v->num || (isnan(d) && isnan(v->num)))) FAIL();
        if (v->is_integer && (strchr(v->str, '.') || strchr(v->str, 'e') || strchr(v->str, 'E') ||
                              strtoll(v->str, NULL, 10) != v->integer || assay_json_int(v, 0) != v->integer))
            FAIL();
        if (!v->is_integer && assay_json_int(v, -7) != -7) FAIL();
        break;
    }
    case ASSAY_JSON_ARRAY:
    case ASSAY_JSON_OBJECT: {
        int64_t n = 0;
        for (const assay_json *c = v->first; c; c = c->next, n++) {
            if ((v->type == ASSAY_JSON_OBJECT) != (c->key != NULL)) FAIL();
            if (v->type == ASSAY_JSON_ARRAY && n < 64 && assay_json_at(v, n) != c) FAIL();
            if (v->type == ASSAY_JSON_OBJECT && n < 64 && !memchr(c->key, 0, c->key_len)) {
                /* assay_json_get finds the first member of that name */
                const assay_json *first = v->first;
                while (!(first->key_len == c->key_len && memcmp(first->key, c->key, c->key_len) == 0)) first = first->next;
                if (assay_json_get(v, c->key) != first) FAIL();
            }
            check_tree(c, depth + 1);
        }
        if (n != v->count || assay_json_at(v, -1) != NULL) FAIL();
        if (v->type == ASSAY_JSON_ARRAY && n <= 64 && assay_json_at(v, n) != NULL) FAIL();
        break;
    }
    default: FAIL();
    }
}

static void write_value(assay_strbuf *b, const assay_json *v) {
    switch (v->type) {
    case ASSAY_JSON_NULL: assay_strbuf_puts(b, "null"); break;
    case ASSAY_JSON_FALSE: assay_strbuf_puts(b, "false"); break;
    case ASSAY_JSON_TRUE: assay_strbuf_puts(b, "true"); break;
    case ASSAY_JSON_STRING: assay_strbuf_json_string(b, v->str, v->str_len); break;
    case ASSAY_JSON_NUMBER:
        if (v->is_integer) assay_strbuf_printf(b, "%lld", (long long)v->integer);
        else if (isfinite(v->num)) assay_strbuf_json_number(b, v->num);
        else assay_strbuf_append(b, v->str, v->str_len); /* 1e999: the writer would say null */
        break;
    case ASSAY_JSON_ARRAY:
    case ASSAY_JSON_OBJECT:
        assay_strbuf_putc(b, v->type == ASSAY_JSON_ARRAY ? '[' : '{');
        for (const assay_json *c = v->first; c; c = c->next) {
            if (c != v->first) assay_strbuf_putc(b, ',');
            if (c->key) {
                assay_strbuf_json_string(b, c->key, c->key_len);
                assay_strbuf_putc(b, ':');
            }
            write_value(b, c);
        }
        assay_strbuf_putc(b, v->type == ASSAY_JSON_ARRAY ? ']' : '}');
        break;
    }
}

static void check_same(const assay_json *a, const assay_json *b) {
    if (a->type != b->type || (a->key == NULL) != (b->key == NULL)) FAIL();
    if (a->key && !same_after_write(a->key, a->key_len, b->key, b->key_len)) FAIL();
    switch (a->type) {
    case ASSAY_JSON_STRING:
        if (!same_after_write(a->str, a->str_len, b->str, b->str_len)) FAIL();
        break;
    case ASSAY_JSON_NUMBER:
        /* An integer stays one; a double with an integral value may come back as an integer (1.0 is written 1). */
        if (a->is_integer && (!b->is_integer || a->integer != b->integer)) FAIL();
        if (a->num != b->num) FAIL(); /* -0 and 0 compare equal: "-0" is written as the integer 0 */
        break;
    case ASSAY_JSON_ARRAY:
    case ASSAY_JSON_OBJECT: {
        if (a->count != b->count) FAIL();
        const assay_json *x = a->first, *y = b->first;
        for (; x && y; x = x->next, y = y->next) check_same(x, y);
        if (x || y) FAIL();
        break;
    }
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    assay_json_doc *doc;
    if (assay_json_parse((const char *)data, size, &doc) != ASSAY_OK) {
        if (doc != NULL || strncmp(assay_last_error(), "invalid JSON at line ", 21) != 0) FAIL();
        return 0;
    }
    const assay_json *root = assay_json_root(doc);
    if (!root || root->key) FAIL();
    check_tree(root, 0);

    assay_strbuf once = {0}, twice = {0}, thrice = {0};
    write_value(&once, root);
    assay_json_doc *back;
    if (assay_json_parse(once.data, once.len, &back) != ASSAY_OK) FAIL(); /* the writers always write JSON */
    check_same(root, assay_json_root(back));
    /* Written again, the text is a fixed point from the second writing on (the first one turns bytes that were
     * not UTF-8 into \u00XX escapes, which read back as characters the second one writes as they are). */
    write_value(&twice, assay_json_root(back));
    assay_json_doc *back2;
    if (assay_json_parse(twice.data, twice.len, &back2) != ASSAY_OK) FAIL();
    check_same(assay_json_root(back), assay_json_root(back2));
    write_value(&thrice, assay_json_root(back2));
    if (thrice.len != twice.len || memcmp(thrice.data, twice.data, twice.len) != 0) FAIL();
    assay_strbuf_free(&once);
    assay_strbuf_free(&twice);
    assay_strbuf_free(&thrice);
    assay_json_doc_free(back);
    assay_json_doc_free(back2);
    assay_json_doc_free(doc);
    return 0;
}
