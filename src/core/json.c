/* json.c — strict JSON parser into an arena-allocated tree (see include/assay/json.h). */
#include "assay/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "assay/file.h"

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct assay_json_doc {
    arena_chunk *chunks;
    assay_json *root;
    size_t next_cap; /* size of the next chunk: from a guess by the text's length, doubling up to 1 MiB */
};

#define ARENA_MAX_CHUNK ((size_t)1 << 20)

static void *arena_alloc(assay_json_doc *doc, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    arena_chunk *c = doc->chunks;
    if (!c || c->used + bytes > c->cap) {
        size_t cap = bytes > doc->next_cap ? bytes : doc->next_cap;
        if (doc->next_cap < ARENA_MAX_CHUNK) doc->next_cap = doc->next_cap * 2 < ARENA_MAX_CHUNK ? doc->next_cap * 2 : ARENA_MAX_CHUNK;
        c = assay_xmalloc(sizeof *c + cap);
        c->used = 0;
        c->cap = cap;
        c->next = doc->chunks;
        doc->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += bytes;
    return p;
}

typedef struct parser {
    const char *s, *end, *start;
    assay_json_doc *doc;
    int depth;
} parser;

static assay_status parse_error(const parser *p, const char *what) {
    int64_t line = 1, col = 1;
    for (const char *q = p->start; q < p->s && q < p->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    return assay_fail(ASSAY_ERR_FORMAT, "invalid JSON at line %lld, column %lld: %s", (long long)line,
                      (long long)col, what);
}

static void skip_ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string literal at p->s (which points at the opening quote). Raw bytes are copied as they are:
 * tokenizer files carry arbitrary UTF-8, and we do not reject what Python's json module accepts. */
static assay_status parse_string(parser *p, const char **out, size_t *out_len) {
    p->s++; /* opening quote */
    const char *q = p->s;
    size_t raw = 0;
    while (q < p->end && *q != '"') {
        if (*q == '\\') q++;
        q++, raw++;
    }
    if (q >= p->end) return parse_error(p, "unterminated string");
    char *o = arena_alloc(p->doc, (size_t)(q - p->s) + 1), *w = o;
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) return parse_error(p, "control character in string");
        if (c != '\\') { *w++ = (char)c; p->s++; continue; }
        p->s++;
        char e = *p->s++;
        switch (e) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->end - p->s < 4 || !hex4(p->s, &cp)) return parse_error(p, "bad \\u escape");
            p->s += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
                unsigned lo;
                if (hex4(p->s + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p->s += 6;
                }
            }
            /* A lone surrogate cannot be UTF-8; write U+FFFD as Python's decoder would on output. */
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            w += put_utf8(w, cp);
            break;
        }
        default: p->s--; return parse_error(p, "bad escape in string");
        }
    }
    p->s++; /* closing quote */
    *w = 0;
    *out = o;
    *out_len = (size_t)(w - o);
    (void)raw;
    return ASSAY_OK;
}

static assay_status parse_number(parser *p, assay_json *v) {
    const char *b = p->s, *s = p->s;
    int integral = 1;
    if (s < p->end && *s == '-') s++;
    if (s >= p->end) return parse_error(p, "bad number");
    if (*s == '0') s++;
    else if (*s >= '1' && *s <= '9') while (s < p->end && *s >= '0' && *s <= '9') s++;
    else return parse_error(p, "bad number");
    if (s < p->end && *s == '.') {
        integral = 0;
        s++;
        if (s >= p->end || *s < '0' || *s > '9') return parse_error(p, "bad number: digit expected after '.'");
        while (s < p->end && *s >= '0' && *s <= '9') s++;
    }
    if (s < p->end && (*s == 'e' || *s == 'E')) {
        integral = 0;
        s++;
        if (s < p->end && (*s == '+' || *s == '-')) s++;
        if (s >= p->end || *s < '0' || *s > '9') return parse_error(p, "bad number: digit expected in exponent");
        while (s < p->end && *s >= '0' && *s <= '9') s++;
    }
    size_t n = (size_t)(s - b);
    char buf[64], *tmp = n < sizeof buf ? buf : assay_xmalloc(n + 1);
    memcpy(tmp, b, n);
    tmp[n] = 0;
    v->type = ASSAY_JSON_NUMBER;
    v->num = strtod(tmp, NULL);
    if (integral) {
        errno = 0;
        long long ll = strtoll(tmp, NULL, 10);
        if (errno == 0) v->is_integer = 1, v->integer = ll;
    }
    if (tmp != buf) free(tmp);
    /* The literal is copied into the arena: the input text may be freed once parsing is done. */
    char *lit = arena_alloc(p->doc, n + 1);
    memcpy(lit, b, n);
    lit[n] = 0;
    v->str = lit;
    v->str_len = n;
    p->s = s;
    return ASSAY_OK;
}

static int match_word(parser *p, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n) != 0) return 0;
    p->s += n;
    return 1;
}

static assay_status parse_value(parser *p, assay_json *v) {
    skip_ws(p);
    if (p->s >= p->end) return parse_error(p, "unexpected end of input");
    char c = *p->s;
    if (c == '{' || c == '[') {
        if (++p->depth > ASSAY_JSON_MAX_DEPTH) return parse_error(p, "nesting too deep");
        int is_obj = c == '{';
        char close = is_obj ? '}' : ']';
        v->type = is_obj ? ASSAY_JSON_OBJECT : ASSAY_JSON_ARRAY;
        p->s++;
        skip_ws(p);
        assay_json **tail = &v->first;
        if (p->s < p->end && *p->s == close) {
            p->s++;
            p->depth--;
            return ASSAY_OK;
        }
        for (;;) {
            assay_json *child = arena_alloc(p->doc, sizeof *child);
            memset(child, 0, sizeof *child);
            if (is_obj) {
                skip_ws(p);
                if (p->s >= p->end || *p->s != '"') return parse_error(p, "object key expected");
                assay_status st = parse_string(p, &child->key, &child->key_len);
                if (st != ASSAY_OK) return st;
                skip_ws(p);
                if (p->s >= p->end || *p->s != ':') return parse_error(p, "':' expected after object key");
                p->s++;
            }
            assay_status st = parse_value(p, child);
            if (st != ASSAY_OK) return st;
            *tail = child;
            tail = &child->next;
            v->count++;
            skip_ws(p);
            if (p->s >= p->end) return parse_error(p, "unexpected end of input");
            if (*p->s == ',') { p->s++; continue; }
            if (*p->s == close) { p->s++; break; }
            return parse_error(p, is_obj ? "',' or '}' expected" : "',' or ']' expected");
        }
        p->depth--;
        return ASSAY_OK;
    }
    if (c == '"') {
        v->type = ASSAY_JSON_STRING;
        return parse_string(p, &v->str, &v->str_len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    if (match_word(p, "true")) { v->type = ASSAY_JSON_TRUE; return ASSAY_OK; }
    if (match_word(p, "false")) { v->type = ASSAY_JSON_FALSE; return ASSAY_OK; }
    if (match_word(p, "null")) { v->type = ASSAY_JSON_NULL; return ASSAY_OK; }
    return parse_error(p, "value expected");
}

assay_status assay_json_parse(const char *text, size_t len, assay_json_doc **out) {
    *out = NULL;
    assay_json_doc *doc = assay_xcalloc(1, sizeof *doc);
    /* A small text gets a small arena (a request body, a config.json), not a whole MiB: decoded strings and
     * literals take at most the text's length, nodes a few times more. */
    doc->next_cap = len < ARENA_MAX_CHUNK / 8 ? 4096 + 8 * len : ARENA_MAX_CHUNK;
    parser p = {.s = text, .end = text + len, .start = text, .doc = doc};
    doc->root = arena_alloc(doc, sizeof *doc->root);
    memset(doc->root, 0, sizeof *doc->root);
    assay_status st = parse_value(&p, doc->root);
    if (st == ASSAY_OK) {
        skip_ws(&p);
        if (p.s != p.end) st = parse_error(&p, "trailing characters after the JSON value");
    }
    if (st != ASSAY_OK) {
        assay_json_doc_free(doc);
        return st;
    }
    *out = doc;
    return ASSAY_OK;
}

assay_status assay_json_parse_file(const char *path, assay_json_doc **out) {
    char *text;
    size_t len;
    *out = NULL;
    assay_status st = assay_read_file(path, &text, &len);
    if (st != ASSAY_OK) return st;
    st = assay_json_parse(text, len, out);
    free(text);
    if (st != ASSAY_OK) return assay_fail_context(st, "%s", path);
    return ASSAY_OK;
}

void assay_json_doc_free(assay_json_doc *doc) {
    if (!doc) return;
    for (arena_chunk *c = doc->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(doc);
}

const assay_json *assay_json_root(const assay_json_doc *doc) { return doc ? doc->root : NULL; }

const assay_json *assay_json_get(const assay_json *obj, const char *key) {
    if (!obj || obj->type != ASSAY_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (const assay_json *c = obj->first; c; c = c->next)
        if (c->key_len == n && memcmp(c->key, key, n) == 0) return c;
    return NULL;
}

const assay_json *assay_json_at(const assay_json *arr, int64_t index) {
    if (!arr || arr->type != ASSAY_JSON_ARRAY || index < 0) return NULL;
    const assay_json *c = arr->first;
    while (c && index--) c = c->next;
    return c;
}

double assay_json_number(const assay_json *v, double fallback) {
    return v && v->type == ASSAY_JSON_NUMBER ? v->num : fallback;
}

int64_t assay_json_int(const assay_json *v, int64_t fallback) {
    return v && v->type == ASSAY_JSON_NUMBER && v->is_integer ? v->integer : fallback;
}

const char *assay_json_string(const assay_json *v, const char *fallback) {
    return v && v->type == ASSAY_JSON_STRING ? v->str : fallback;
}

int assay_json_bool(const assay_json *v, int fallback) {
    if (!v) return fallback;
    if (v->type == ASSAY_JSON_TRUE) return 1;
    if (v->type == ASSAY_JSON_FALSE) return 0;
    return fallback;
}

int assay_json_is(const assay_json *v, assay_json_type type) { return v && v->type == type; }
