/* json.h — a strict RFC 8259 JSON reader (config.json, tokenizer.json, safetensors headers, results files).
 *
 *   assay_json_doc *doc;
 *   if (assay_json_parse(text, len, &doc) != ASSAY_OK) { ... assay_last_error() says "line 3, column 7: ..." }
 *   const assay_json *cfg = assay_json_root(doc);
 *   int64_t layers = assay_json_int(assay_json_get(cfg, "num_hidden_layers"), -1);
 *   for (const assay_json *m = assay_json_get(cfg, "merges")->first; m; m = m->next) ...
 *   assay_json_doc_free(doc);
 *
 * Nodes live in one arena owned by the document; strings are decoded (escapes resolved) and NUL-terminated,
 * with an explicit length because "\u0000" is legal. Object members keep file order; duplicate keys are kept
 * and assay_json_get returns the first. Nesting deeper than ASSAY_JSON_MAX_DEPTH is rejected.
 * Writing JSON is assay_strbuf's job (strbuf.h).
 */
#ifndef ASSAY_JSON_H
#define ASSAY_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"

#define ASSAY_JSON_MAX_DEPTH 256

typedef enum assay_json_type {
    ASSAY_JSON_NULL,
    ASSAY_JSON_FALSE,
    ASSAY_JSON_TRUE,
    ASSAY_JSON_NUMBER,
    ASSAY_JSON_STRING,
    ASSAY_JSON_ARRAY,
    ASSAY_JSON_OBJECT,
} assay_json_type;

typedef struct assay_json assay_json;
struct assay_json {
    assay_json_type type;
    const char *key;     /* member name when inside an object, else NULL */
    size_t key_len;
    const char *str;     /* STRING: decoded text; NUMBER: the literal as written */
    size_t str_len;
    double num;          /* NUMBER */
    int is_integer;      /* NUMBER written without fraction or exponent and fitting int64 */
    int64_t integer;     /* valid when is_integer */
    assay_json *first;   /* ARRAY/OBJECT: first child */
    assay_json *next;    /* next sibling */
    int64_t count;       /* ARRAY/OBJECT: number of children */
};

typedef struct assay_json_doc assay_json_doc;

assay_status assay_json_parse(const char *text, size_t len, assay_json_doc **out);
/* Reads and parses a file; errors name the file. */
assay_status assay_json_parse_file(const char *path, assay_json_doc **out);
void assay_json_doc_free(assay_json_doc *doc);
const assay_json *assay_json_root(const assay_json_doc *doc);

/* Lookups return NULL when `obj` is NULL, not an object, or lacks the key, so they chain safely. */
const assay_json *assay_json_get(const assay_json *obj, const char *key);
const assay_json *assay_json_at(const assay_json *arr, int64_t index);
/* Value accessors return `fallback` when the node is NULL or of another type. */
double assay_json_number(const assay_json *v, double fallback);
int64_t assay_json_int(const assay_json *v, int64_t fallback); /* integers only (1.0 is not one) */
const char *assay_json_string(const assay_json *v, const char *fallback);
int assay_json_bool(const assay_json *v, int fallback);
int assay_json_is(const assay_json *v, assay_json_type type);

#endif
