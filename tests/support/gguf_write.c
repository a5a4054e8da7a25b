/* gguf_write — test support: writes a GGUF file with assay's writer, for tests/py to read back with gguf-py.
 *
 *   gguf_write DESC.json OUT.gguf        from a JSON description (below)
 *   gguf_write --copy IN.gguf OUT.gguf   every kv (assay_gguf_writer_set_kv) and tensor of IN, read by assay
 *
 * DESC.json:
 *   {"alignment": 64,                                   (optional: assay_gguf_writer_set_alignment)
 *    "kv": [{"key": "k", "type": "u8", "value": "255"},  integers as decimal strings (u64 needs all 64 bits),
 *           {"key": "f", "type": "f32", "value": "0x7fc00000"},      floats as hex of their bit pattern,
 *           {"key": "b", "type": "bool", "value": true}, {"key": "s", "type": "string", "value": "text"},
 *           {"key": "a", "type": "array", "value": {"elem": "i32", "value": ["1", "-2"]}},
 *           {"key": "n", "type": "array", "value": {"elem": "array", "value": [{"elem": "string", "value": ["x"]}]}}],
 *    "remove": ["key"],                                 (optional: assay_gguf_writer_remove after setting)
 *    "tensors": [{"name": "t", "type": "q4_K", "ne": [256, 2], "data": "file", "data_offset": 0}]}
 * Top-level arrays of numbers go through set_array, of strings through set_string_array, nested ones through
 * set_kv with a hand-built kv tree. Exit 0 on success, 1 with the error on stderr otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "assay/file.h"
#include "assay/gguf.h"
#include "assay/json.h"

static int fail(const char *what) {
    fprintf(stderr, "gguf_write: %s: %s\n", what, assay_last_error());
    return 1;
}

static void die(const char *msg, const char *detail) {
    fprintf(stderr, "gguf_write: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static assay_gguf_value_type type_of(const char *name) {
    for (int t = 0; t <= ASSAY_GGUF_FLOAT64; t++)
        if (strcmp(assay_gguf_type_name((assay_gguf_value_type)t), name) == 0) return (assay_gguf_value_type)t;
    die("unknown value type", name);
    return ASSAY_GGUF_UINT8;
}

static size_t scalar_bytes(assay_gguf_value_type t) {
    switch (t) {
    case ASSAY_GGUF_UINT8: case ASSAY_GGUF_INT8: case ASSAY_GGUF_BOOL: return 1;
    case ASSAY_GGUF_UINT16: case ASSAY_GGUF_INT16: return 2;
    case ASSAY_GGUF_UINT32: case ASSAY_GGUF_INT32: case ASSAY_GGUF_FLOAT32: return 4;
    case ASSAY_GGUF_UINT64: case ASSAY_GGUF_INT64: case ASSAY_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Encodes a scalar JSON value of type t into 8 little-endian bytes (the low scalar_bytes(t) are used). */
static void encode_scalar(const assay_json *v, assay_gguf_value_type t, uint8_t out[8]) {
    uint64_t u = 0;
    if (t == ASSAY_GGUF_BOOL) {
        if (!assay_json_is(v, ASSAY_JSON_TRUE) && !assay_json_is(v, ASSAY_JSON_FALSE)) die("bool value expected", NULL);
        u = assay_json_is(v, ASSAY_JSON_TRUE);
    } else {
        const char *s = assay_json_string(v, NULL);
        if (!s) die("scalar values are strings", NULL);
        char *end;
        if (t == ASSAY_GGUF_FLOAT32 || t == ASSAY_GGUF_FLOAT64) u = strtoull(s, &end, 16);
        else if (t == ASSAY_GGUF_UINT8 || t == ASSAY_GGUF_UINT16 || t == ASSAY_GGUF_UINT32 || t == ASSAY_GGUF_UINT64)
            u = strtoull(s, &end, 10);
        else u = (uint64_t)strtoll(s, &end, 10);
        if (*end) die("bad number", s);
    }
    memcpy(out, &u, 8);
}

/* Builds a reader-shaped array kv (for set_kv) from {"elem": T, "value": [...]}; free_array releases it. */
static void build_array(const assay_json *a, assay_gguf_kv *kv) {
    memset(kv, 0, sizeof *kv);
    kv->type = ASSAY_GGUF_ARRAY;
    kv->array_type = type_of(assay_json_string(assay_json_get(a, "elem"), "?"));
    const assay_json *vals = assay_json_get(a, "value");
    if (!assay_json_is(vals, ASSAY_JSON_ARRAY)) die("array value must be a JSON array", NULL);
    kv->array_len = (uint64_t)vals->count;
    size_t es = scalar_bytes(kv->array_type);
    uint64_t i = 0;
    if (es) {
        uint8_t *buf = assay_xmalloc((size_t)kv->array_len * es + 1);
        for (const assay_json *e = vals->first; e; e = e->next, i++) {
            uint8_t raw[8];
            encode_scalar(e, kv->array_type, raw);
            memcpy(buf + i * es, raw, es);
        }
        kv->array_data = buf;
    } else if (kv->array_type == ASSAY_GGUF_STRING) {
        kv->strings = assay_xcalloc((size_t)kv->array_len + 1, sizeof *kv->strings);
        for (const assay_json *e = vals->first; e; e = e->next, i++) {
            if (!assay_json_is(e, ASSAY_JSON_STRING)) die("string array elements must be strings", NULL);
            kv->strings[i].ptr = e->str;
            kv->strings[i].len = e->str_len;
        }
    } else {
        kv->arrays = assay_xcalloc((size_t)kv->array_len + 1, sizeof *kv->arrays);
        for (const assay_json *e = vals->first; e; e = e->next, i++) build_array(e, &kv->arrays[i]);
    }
}

static void free_array(assay_gguf_kv *kv) {
    if (kv->arrays)
        for (uint64_t i = 0; i < kv->array_len; i++) free_array(&kv->arrays[i]);
    free(kv->arrays);
    free(kv->strings);
    free((void *)kv->array_data);
}

static int copy_file(const char *in, const char *out) {
    assay_gguf *g;
    if (assay_gguf_open(&g, in) != ASSAY_OK) return fail(in);
    assay_gguf_writer *w = assay_gguf_writer_new();
    for (int64_t i = 0; i < assay_gguf_kv_count(g); i++) assay_gguf_writer_set_kv(w, assay_gguf_kv_at(g, i));
    for (int64_t i = 0; i < assay_gguf_tensor_count(g); i++) {
        const assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (assay_gguf_writer_add_tensor(w, name, t->type, (int)t->n_dims, t->ne, t->data, t->bytes) != ASSAY_OK)
            return fail(name);
    }
    if (assay_gguf_writer_write(w, out, 1) != ASSAY_OK) return fail(out);
    assay_gguf_writer_free(w);
    assay_gguf_close(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--copy") == 0) return copy_file(argv[2], argv[3]);
    if (argc != 3) {
        fprintf(stderr, "usage: gguf_write DESC.json OUT.gguf | gguf_write --copy IN.gguf OUT.gguf\n");
        return 2;
    }
    assay_json_doc *doc;
    if (assay_json_parse_file(argv[1], &doc) != ASSAY_OK) return fail(argv[1]);
    const assay_json *root = assay_json_root(doc);
    assay_gguf_writer *w = assay_gguf_writer_new();
    int64_t alignment = assay_json_int(assay_json_get(root, "alignment"), 0);
    if (alignment) assay_gguf_writer_set_alignment(w, (uint32_t)alignment);

    const assay_json *kvs = assay_json_get(root, "kv");
    for (const assay_json *e = kvs ? kvs->first : NULL; e; e = e->next) {
        const char *key = assay_json_string(assay_json_get(e, "key"), NULL);
        if (!key) die("kv without key", NULL);
        assay_gguf_value_type t = type_of(assay_json_string(assay_json_get(e, "type"), "?"));
        const assay_json *v = assay_json_get(e, "value");
        uint8_t raw[8];
        int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint16_t u16; uint32_t u32; uint64_t u64; float f; double d;
        switch (t) {
        case ASSAY_GGUF_STRING:
            if (!assay_json_is(v, ASSAY_JSON_STRING)) die("string value expected", key);
            assay_gguf_writer_set_string_n(w, key, v->str, v->str_len);
            break;
        case ASSAY_GGUF_ARRAY: {
            assay_gguf_kv kv;
            build_array(v, &kv);
            if (scalar_bytes(kv.array_type)) assay_gguf_writer_set_array(w, key, kv.array_type, kv.array_data, kv.array_len);
            else if (kv.array_type == ASSAY_GGUF_STRING) assay_gguf_writer_set_string_array(w, key, kv.strings, kv.array_len);
            else {
                kv.key.ptr = key;
                kv.key.len = strlen(key);
                assay_gguf_writer_set_kv(w, &kv);
            }
            free_array(&kv);
            break;
        }
        default:
            encode_scalar(v, t, raw);
            switch (t) {
            case ASSAY_GGUF_UINT8: assay_gguf_writer_set_u8(w, key, raw[0]); break;
            case ASSAY_GGUF_INT8: memcpy(&i8, raw, 1); assay_gguf_writer_set_i8(w, key, i8); break;
            case ASSAY_GGUF_UINT16: memcpy(&u16, raw, 2); assay_gguf_writer_set_u16(w, key, u16); break;
            case ASSAY_GGUF_INT16: memcpy(&i16, raw, 2); assay_gguf_writer_set_i16(w, key, i16); break;
            case ASSAY_GGUF_UINT32: memcpy(&u32, raw, 4); assay_gguf_writer_set_u32(w, key, u32); break;
            case ASSAY_GGUF_INT32: memcpy(&i32, raw, 4); assay_gguf_writer_set_i32(w, key, i32); break;
            case ASSAY_GGUF_UINT64: memcpy(&u64, raw, 8); assay_gguf_writer_set_u64(w, key, u64); break;
            case ASSAY_GGUF_INT64: memcpy(&i64, raw, 8); assay_gguf_writer_set_i64(w, key, i64); break;
            case ASSAY_GGUF_FLOAT32: memcpy(&f, raw, 4); assay_gguf_writer_set_f32(w, key, f); break;
            case ASSAY_GGUF_FLOAT64: memcpy(&d, raw, 8); assay_gguf_writer_set_f64(w, key, d); break;
            case ASSAY_GGUF_BOOL: assay_gguf_writer_set_bool(w, key, raw[0]); break;
            default: die("unhandled type", key);
            }
        }
    }
    const assay_json *rm = assay_json_get(root, "remove");
    for (const assay_json *e = rm ? rm->first : NULL; e; e = e->next) assay_gguf_writer_remove(w, assay_json_string(e, ""));

    const assay_json *ts = assay_json_get(root, "tensors");
    char **blobs = assay_xcalloc(ts ? (size_t)ts->count + 1 : 1, sizeof *blobs);
    int nb = 0;
    for (const assay_json *e = ts ? ts->first : NULL; e; e = e->next) {
        const char *name = assay_json_string(assay_json_get(e, "name"), "");
        assay_type type;
        if (assay_type_from_name(assay_json_string(assay_json_get(e, "type"), "?"), &type) != ASSAY_OK) return fail(name);
        int64_t ne[4] = {1, 1, 1, 1};
        int nd = 0;
        const assay_json *jne = assay_json_get(e, "ne");
        for (const assay_json *d = jne ? jne->first : NULL; d && nd < 4; d = d->next) ne[nd++] = assay_json_int(d, -1);
        char *blob;
        size_t size;
        if (assay_read_file(assay_json_string(assay_json_get(e, "data"), ""), &blob, &size) != ASSAY_OK) return fail(name);
        blobs[nb++] = blob;
        size_t off = (size_t)assay_json_int(assay_json_get(e, "data_offset"), 0);
        size_t bytes = (size_t)assay_json_int(assay_json_get(e, "bytes"), -1);
        if (off > size || bytes > size - off) die("tensor data range outside its file", name);
        if (assay_gguf_writer_add_tensor(w, name, type, nd, ne, blob + off, bytes) != ASSAY_OK) return fail(name);
    }
    if (assay_gguf_writer_write(w, argv[2], 1) != ASSAY_OK) return fail(argv[2]);
    assay_gguf_writer_free(w);
    for (int i = 0; i < nb; i++) free(blobs[i]);
    free(blobs);
    assay_json_doc_free(doc);
    return 0;
}
