/* gguf.c — GGUF v2/v3 reader (mmapped, bounds-checked) and writer (see include/assay/gguf.h).
 *
 * File layout: "GGUF", u32 version, u64 tensor count, u64 kv count, the kvs (string key, u32 value type,
 * value), the tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset), padding to
 * the alignment, then the tensor data; each tensor's offset is relative to the data section and aligned.
 *
 * The reader never trusts a number from the file: every count is compared with the bytes that remain before
 * anything is allocated for it (an element needs at least one byte, a string eight), every size product is
 * checked for overflow, and every tensor must lie inside the data section. Nested arrays are limited in depth
 * so a crafted file cannot exhaust the stack.
 */
#include "assay/gguf.h"

#include <math.h>
#include <string.h>

#include "assay/file.h"
#include "assay/strbuf.h"

#define GGUF_MAX_ARRAY_DEPTH 64

struct assay_gguf {
    assay_mapped_file file; /* empty for assay_gguf_open_memory */
    const uint8_t *base;
    size_t size;
    char *name;
    uint32_t version;
    uint64_t alignment;
    size_t data_start; /* absolute offset of the tensor data section */
    int64_t n_kv;
    assay_gguf_kv *kvs;
    int64_t n_tensors;
    assay_gguf_tensor *tensors;
    /* open-addressing hash tables of index+1 (0 = empty), sized to a power of two >= 2n */
    int64_t *kv_hash, *tensor_hash;
    uint64_t kv_hash_mask, tensor_hash_mask;
};

/* ---- value types -------------------------------------------------------------------------------------- */

/* Bytes of one scalar of `t`; 0 for string/array/unknown. */
static size_t scalar_size(uint32_t t) {
    switch (t) {
    case ASSAY_GGUF_UINT8: case ASSAY_GGUF_INT8: case ASSAY_GGUF_BOOL: return 1;
    case ASSAY_GGUF_UINT16: case ASSAY_GGUF_INT16: return 2;
    case ASSAY_GGUF_UINT32: case ASSAY_GGUF_INT32: case ASSAY_GGUF_FLOAT32: return 4;
    case ASSAY_GGUF_UINT64: case ASSAY_GGUF_INT64: case ASSAY_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *assay_gguf_type_name(assay_gguf_value_type t) {
    switch (t) {
    case ASSAY_GGUF_UINT8: return "u8";
    case ASSAY_GGUF_INT8: return "i8";
    case ASSAY_GGUF_UINT16: return "u16";
    case ASSAY_GGUF_INT16: return "i16";
    case ASSAY_GGUF_UINT32: return "u32";
    case ASSAY_GGUF_INT32: return "i32";
    case ASSAY_GGUF_FLOAT32: return "f32";
    case ASSAY_GGUF_BOOL: return "bool";
    case ASSAY_GGUF_STRING: return "string";
    case ASSAY_GGUF_ARRAY: return "array";
    case ASSAY_GGUF_UINT64: return "u64";
    case ASSAY_GGUF_INT64: return "i64";
    case ASSAY_GGUF_FLOAT64: return "f64";
    }
    return "unknown";
}

static int is_integer_type(assay_gguf_value_type t) {
    return t == ASSAY_GGUF_UINT8 || t == ASSAY_GGUF_INT8 || t == ASSAY_GGUF_UINT16 || t == ASSAY_GGUF_INT16 ||
           t == ASSAY_GGUF_UINT32 || t == ASSAY_GGUF_INT32 || t == ASSAY_GGUF_UINT64 || t == ASSAY_GGUF_INT64;
}

/* Decodes one little-endian scalar into the widened forms of the kv union. Unaligned: memcpy. */
typedef union scalar_value {
    int64_t i64;
    uint64_t u64;
    double f64;
} scalar_value;

static scalar_value decode_scalar(assay_gguf_value_type t, const uint8_t *p) {
    scalar_value v = {0};
    switch (t) {
    case ASSAY_GGUF_UINT8: v.u64 = p[0]; break;
    case ASSAY_GGUF_INT8: v.i64 = (int8_t)p[0]; break;
    case ASSAY_GGUF_BOOL: v.i64 = p[0] != 0; break;
    case ASSAY_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); v.u64 = x; break; }
    case ASSAY_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); v.i64 = x; break; }
    case ASSAY_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); v.u64 = x; break; }
    case ASSAY_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); v.i64 = x; break; }
    case ASSAY_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v.f64 = x; break; }
    case ASSAY_GGUF_UINT64: memcpy(&v.u64, p, 8); break;
    case ASSAY_GGUF_INT64: memcpy(&v.i64, p, 8); break;
    case ASSAY_GGUF_FLOAT64: memcpy(&v.f64, p, 8); break;
    default: ASSAY_ASSERT(0);
    }
    return v;
}

/* ---- bounded cursor ----------------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *base;
    size_t size, pos;
    const char *name; /* file name for messages */
} cursor;

static assay_status need(cursor *c, uint64_t n, const char *what) {
    if (n > c->size - c->pos)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated or corrupt: %s at offset %zu needs %llu bytes, %zu remain",
                          c->name, what, c->pos, (unsigned long long)n, c->size - c->pos);
    return ASSAY_OK;
}

static assay_status read_u32(cursor *c, uint32_t *v, const char *what) {
    assay_status st = need(c, 4, what);
    if (st) return st;
    memcpy(v, c->base + c->pos, 4);
    c->pos += 4;
    return ASSAY_OK;
}

static assay_status read_u64(cursor *c, uint64_t *v, const char *what) {
    assay_status st = need(c, 8, what);
    if (st) return st;
    memcpy(v, c->base + c->pos, 8);
    c->pos += 8;
    return ASSAY_OK;
}

static assay_status read_str(cursor *c, assay_gguf_str *s, const char *what) {
    uint64_t len;
    assay_status st = read_u64(c, &len, what);
    if (st) return st;
    if (len > c->size - c->pos)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated or corrupt: %s at offset %zu has length %llu but only %zu bytes remain",
                          c->name, what, c->pos - 8, (unsigned long long)len, c->size - c->pos);
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += len;
    return ASSAY_OK;
}

/* ---- parsing ------------------------------------------------------------------------------------------ */

/* Tables sized by counts from the file: bounded by the file size (checked before), but a huge crafted file
 * could still ask for more memory than there is, so failure is an error, not an abort. */
static void *big_calloc(const cursor *c, size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) assay_fail(ASSAY_ERR_NOMEM, "%s: out of memory allocating %zu entries of %zu bytes", c->name, n, size);
    return p;
}

static void kv_free_contents(assay_gguf_kv *kv) {
    if (kv->arrays) {
        for (uint64_t i = 0; i < kv->array_len; i++) kv_free_contents(&kv->arrays[i]);
        free(kv->arrays);
    }
    free(kv->strings);
    kv->arrays = NULL;
    kv->strings = NULL;
}

/* Parses the body of an array (element type, count, elements) into kv. `where` names the kv for messages. */
static assay_status parse_array(cursor *c, assay_gguf_kv *kv, int depth, const char *where) {
    kv->type = ASSAY_GGUF_ARRAY;
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s: arrays nested deeper than %d levels", c->name, where,
                          GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    assay_status st = read_u32(c, &et, "array element type");
    if (!st) st = read_u64(c, &n, "array length");
    if (st) return assay_fail_context(st, "%s", where);
    if (et > ASSAY_GGUF_FLOAT64)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s: unknown array element type %u at offset %zu", c->name, where,
                          et, c->pos - 12);
    kv->array_type = (assay_gguf_value_type)et;
    kv->array_len = n;
    kv->array_data = c->base + c->pos;
    size_t remain = c->size - c->pos;
    size_t es = scalar_size(et);
    if (es) {
        if (n > remain / es)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated or corrupt: %s: array of %llu %s needs %llu bytes, %zu remain",
                              c->name, where, (unsigned long long)n, assay_gguf_type_name(kv->array_type),
                              (unsigned long long)n * es, remain);
        c->pos += n * es;
        return ASSAY_OK;
    }
    if (et == ASSAY_GGUF_STRING) {
        if (n > remain / 8) /* every string has an 8-byte length */
            return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated or corrupt: %s: array of %llu strings cannot fit in the %zu bytes that remain",
                              c->name, where, (unsigned long long)n, remain);
        kv->strings = big_calloc(c, (size_t)n, sizeof *kv->strings);
        if (!kv->strings) return ASSAY_ERR_NOMEM;
        for (uint64_t i = 0; i < n; i++) {
            st = read_str(c, &kv->strings[i], "array string");
            if (st) return assay_fail_context(st, "%s, element %llu", where, (unsigned long long)i);
        }
        return ASSAY_OK;
    }
    /* arrays of arrays: every element has at least a 4-byte type and an 8-byte count */
    if (n > remain / 12)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated or corrupt: %s: array of %llu arrays cannot fit in the %zu bytes that remain",
                          c->name, where, (unsigned long long)n, remain);
    kv->arrays = big_calloc(c, (size_t)n, sizeof *kv->arrays);
    if (!kv->arrays) return ASSAY_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        st = parse_array(c, &kv->arrays[i], depth + 1, where);
        if (st) return st;
    }
    return ASSAY_OK;
}

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static int str_eq(assay_gguf_str a, const char *p, uint64_t n) { return a.len == n && memcmp(a.ptr, p, n) == 0; }

static int64_t *hash_new(cursor *c, int64_t n, uint64_t *mask) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2;
    *mask = cap - 1;
    return big_calloc(c, (size_t)cap, sizeof(int64_t));
}

/* Inserts index i for `name` unless the name is present; returns the existing index, or -1 when inserted. */
static int64_t hash_insert(int64_t *tab, uint64_t mask, const void *items, size_t stride, size_t name_off,
                           int64_t i) {
    const assay_gguf_str *nm = (const assay_gguf_str *)((const char *)items + (size_t)i * stride + name_off);
    for (uint64_t h = hash_bytes(nm->ptr, nm->len) & mask;; h = (h + 1) & mask) {
        if (!tab[h]) {
            tab[h] = i + 1;
            return -1;
        }
        const assay_gguf_str *o = (const assay_gguf_str *)((const char *)items + (size_t)(tab[h] - 1) * stride + name_off);
        if (str_eq(*o, nm->ptr, nm->len)) return tab[h] - 1;
    }
}

static int64_t hash_find(const int64_t *tab, uint64_t mask, const void *items, size_t stride, size_t name_off,
                         const char *name) {
    if (!tab) return -1;
    size_t n = strlen(name);
    for (uint64_t h = hash_bytes(name, n) & mask;; h = (h + 1) & mask) {
        if (!tab[h]) return -1;
        const assay_gguf_str *o = (const assay_gguf_str *)((const char *)items + (size_t)(tab[h] - 1) * stride + name_off);
        if (str_eq(*o, name, n)) return tab[h] - 1;
    }
}

/* Short printable form of a key/name for messages (keys come from the file: keep them bounded). */
static const char *show(assay_gguf_str s, char *buf, size_t cap) {
    size_t n = 0;
    for (uint64_t i = 0; i < s.len && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (s.len > n) {
        if (n + 4 >= cap) n = cap - 4;
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = 0;
    return buf;
}

static assay_status parse(assay_gguf *g) {
    cursor c = {g->base, g->size, 0, g->name};
    assay_status st;
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0) {
        if (g->size < 4) return assay_fail(ASSAY_ERR_FORMAT, "%s: not a GGUF file (only %zu bytes)", g->name, g->size);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: not a GGUF file (starts with %02x %02x %02x %02x, expected \"GGUF\")",
                          g->name, g->base[0], g->base[1], g->base[2], g->base[3]);
    }
    c.pos = 4;
    uint64_t n_tensors, n_kv;
    if ((st = read_u32(&c, &g->version, "header version"))) return st;
    if (g->version == 1)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: GGUF version 1 is not supported (convert the model again)", g->name);
    if (g->version != 2 && g->version != 3) {
        if (g->version != 0 && (g->version & 0xffff) == 0)
            return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: a big-endian GGUF file (version field 0x%08x); only little-endian files are supported",
                              g->name, g->version);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: unknown GGUF version %u (expected 2 or 3)", g->name, g->version);
    }
    if ((st = read_u64(&c, &n_tensors, "header tensor count"))) return st;
    if ((st = read_u64(&c, &n_kv, "header metadata count"))) return st;
    /* smallest kv: 8-byte key length + 4-byte type + 1-byte value; smallest tensor info: 8 + 4 + 4 + 8 */
    size_t remain = g->size - c.pos;
    if (n_kv > remain / 13)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: corrupt header: %llu metadata entries cannot fit in a %zu-byte file",
                          g->name, (unsigned long long)n_kv, g->size);
    if (n_tensors > remain / 24)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: corrupt header: %llu tensors cannot fit in a %zu-byte file",
                          g->name, (unsigned long long)n_tensors, g->size);

    /* metadata */
    g->kvs = big_calloc(&c, (size_t)n_kv, sizeof *g->kvs);
    g->kv_hash = g->kvs ? hash_new(&c, (int64_t)n_kv, &g->kv_hash_mask) : NULL;
    if (!g->kv_hash) return ASSAY_ERR_NOMEM;
    char where[160], shown[96];
    for (uint64_t i = 0; i < n_kv; i++) {
        assay_gguf_kv *kv = &g->kvs[i];
        g->n_kv = (int64_t)i + 1; /* so close frees what was parsed */
        snprintf(where, sizeof where, "metadata entry %llu", (unsigned long long)i);
        if ((st = read_str(&c, &kv->key, "metadata key"))) return assay_fail_context(st, "%s", where);
        snprintf(where, sizeof where, "metadata entry %llu (\"%s\")", (unsigned long long)i, show(kv->key, shown, sizeof shown));
        uint32_t t;
        if ((st = read_u32(&c, &t, "value type"))) return assay_fail_context(st, "%s", where);
        if (t > ASSAY_GGUF_FLOAT64)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s has unknown value type %u", g->name, where, t);
        kv->type = (assay_gguf_value_type)t;
        if (t == ASSAY_GGUF_STRING) {
            if ((st = read_str(&c, &kv->value.str, "string value"))) return assay_fail_context(st, "%s", where);
        } else if (t == ASSAY_GGUF_ARRAY) {
            if ((st = parse_array(&c, kv, 0, where))) return st;
        } else {
            size_t es = scalar_size(t);
            if ((st = need(&c, es, "scalar value"))) return assay_fail_context(st, "%s", where);
            scalar_value v = decode_scalar(kv->type, c.base + c.pos);
            memcpy(&kv->value, &v, sizeof v);
            c.pos += es;
        }
        if (hash_insert(g->kv_hash, g->kv_hash_mask, g->kvs, sizeof *g->kvs, offsetof(assay_gguf_kv, key), (int64_t)i) >= 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: duplicate metadata key \"%s\"", g->name, show(kv->key, shown, sizeof shown));
    }

    /* alignment */
    g->alignment = ASSAY_GGUF_DEFAULT_ALIGNMENT;
    const assay_gguf_kv *al = assay_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != ASSAY_GGUF_UINT32)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: general.alignment has type %s, expected u32", g->name,
                              assay_gguf_type_name(al->type));
        if (al->value.u64 == 0 || (al->value.u64 & (al->value.u64 - 1)) != 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: general.alignment is %llu, expected a power of two", g->name,
                              (unsigned long long)al->value.u64);
        g->alignment = al->value.u64;
    }

    /* tensor infos */
    g->tensors = big_calloc(&c, (size_t)n_tensors, sizeof *g->tensors);
    g->tensor_hash = g->tensors ? hash_new(&c, (int64_t)n_tensors, &g->tensor_hash_mask) : NULL;
    if (!g->tensor_hash) return ASSAY_ERR_NOMEM;
    for (uint64_t i = 0; i < n_tensors; i++) {
        assay_gguf_tensor *t = &g->tensors[i];
        g->n_tensors = (int64_t)i + 1;
        snprintf(where, sizeof where, "tensor %llu", (unsigned long long)i);
        if ((st = read_str(&c, &t->name, "tensor name"))) return assay_fail_context(st, "%s", where);
        snprintf(where, sizeof where, "tensor %llu (\"%s\")", (unsigned long long)i, show(t->name, shown, sizeof shown));
        if ((st = read_u32(&c, &t->n_dims, "tensor dimension count"))) return assay_fail_context(st, "%s", where);
        if (t->n_dims > ASSAY_GGUF_MAX_DIMS)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s has %u dimensions (at most %d)", g->name, where, t->n_dims,
                              ASSAY_GGUF_MAX_DIMS);
        for (int d = 0; d < ASSAY_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            if ((st = read_u64(&c, &ne, "tensor dimension"))) return assay_fail_context(st, "%s", where);
            if (ne > (uint64_t)INT64_MAX)
                return assay_fail(ASSAY_ERR_FORMAT, "%s: %s has dimension %u = %llu (negative as int64)", g->name,
                                  where, d, (unsigned long long)ne);
            t->ne[d] = (int64_t)ne;
        }
        uint32_t type;
        if ((st = read_u32(&c, &type, "tensor type"))) return assay_fail_context(st, "%s", where);
        if (type >= ASSAY_TYPE_GGML_COUNT || !assay_type_get((assay_type)type))
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s has unknown ggml type %u", g->name, where, type);
        t->type = (assay_type)type;
        if ((st = read_u64(&c, &t->offset, "tensor data offset"))) return assay_fail_context(st, "%s", where);
        if (hash_insert(g->tensor_hash, g->tensor_hash_mask, g->tensors, sizeof *g->tensors,
                        offsetof(assay_gguf_tensor, name), (int64_t)i) >= 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: duplicate tensor name \"%s\"", g->name, show(t->name, shown, sizeof shown));

        /* size: rows of ne[0] elements in whole blocks, every product checked for overflow */
        const assay_type_info *ti = assay_type_get(t->type);
        if (t->ne[0] % ti->block_elems != 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s: row length %lld is not a multiple of the %s block size %lld",
                              g->name, where, (long long)t->ne[0], ti->name, (long long)ti->block_elems);
        uint64_t bytes = 0, rows = 1;
        int overflow = __builtin_mul_overflow((uint64_t)(t->ne[0] / ti->block_elems), (uint64_t)ti->block_bytes, &bytes);
        for (int d = 1; d < ASSAY_GGUF_MAX_DIMS; d++) overflow |= __builtin_mul_overflow(rows, (uint64_t)t->ne[d], &rows);
        overflow |= __builtin_mul_overflow(bytes, rows, &bytes);
        int64_t elems = 1;
        for (int d = 0; d < ASSAY_GGUF_MAX_DIMS; d++) overflow |= __builtin_mul_overflow(elems, t->ne[d], &elems);
        if (overflow || bytes > SIZE_MAX)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s: shape [%lld, %lld, %lld, %lld] is too large", g->name, where,
                              (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
        t->bytes = (size_t)bytes;
        if (t->offset % g->alignment != 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s: data offset %llu is not a multiple of the alignment %llu",
                              g->name, where, (unsigned long long)t->offset, (unsigned long long)g->alignment);
    }

    /* the data section starts at the next multiple of the alignment */
    size_t pad = (size_t)((g->alignment - c.pos % g->alignment) % g->alignment);
    if (n_tensors > 0 && pad > g->size - c.pos)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated: the tensor data section would start at offset %zu, past the end of the %zu-byte file",
                          g->name, c.pos + pad, g->size);
    /* with no tensors the file may end before the padding; the offset is still where data would start */
    g->data_start = c.pos + pad;
    size_t data_size = n_tensors > 0 ? g->size - g->data_start : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        assay_gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->bytes > data_size - t->offset)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: truncated or corrupt: tensor \"%s\" (%zu bytes at data offset %llu) extends past the end of the file (data section holds %zu bytes)",
                              g->name, show(t->name, shown, sizeof shown), t->bytes, (unsigned long long)t->offset, data_size);
        t->data = g->base + g->data_start + t->offset;
    }
    return ASSAY_OK;
}

static assay_status open_common(assay_gguf **out, assay_gguf *g) {
    assay_status st = parse(g);
    if (st != ASSAY_OK) {
        assay_gguf_close(g);
        return st;
    }
    *out = g;
    return ASSAY_OK;
}

assay_status assay_gguf_open(assay_gguf **out, const char *path) {
    *out = NULL;
    assay_gguf *g = assay_xcalloc(1, sizeof *g);
    assay_status st = assay_mapped_file_open(&g->file, path);
    if (st != ASSAY_OK) {
        free(g);
        return st;
    }
    g->base = g->file.data;
    g->size = g->file.size;
    g->name = assay_xstrdup(path);
    return open_common(out, g);
}

assay_status assay_gguf_open_memory(assay_gguf **out, const void *data, size_t size, const char *name) {
    *out = NULL;
    assay_gguf *g = assay_xcalloc(1, sizeof *g);
    g->base = data;
    g->size = data ? size : 0;
    g->name = assay_xstrdup(name ? name : "(memory)");
    return open_common(out, g);
}

void assay_gguf_close(assay_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) kv_free_contents(&g->kvs[i]);
    free(g->kvs);
    free(g->tensors);
    free(g->kv_hash);
    free(g->tensor_hash);
    free(g->name);
    if (g->file.path) assay_mapped_file_close(&g->file);
    free(g);
}

/* ---- accessors ---------------------------------------------------------------------------------------- */

uint32_t assay_gguf_version(const assay_gguf *g) { return g->version; }
uint64_t assay_gguf_alignment(const assay_gguf *g) { return g->alignment; }
const char *assay_gguf_path(const assay_gguf *g) { return g->name; }
size_t assay_gguf_file_size(const assay_gguf *g) { return g->size; }
size_t assay_gguf_data_offset(const assay_gguf *g) { return g->data_start; }
int64_t assay_gguf_kv_count(const assay_gguf *g) { return g->n_kv; }
int64_t assay_gguf_tensor_count(const assay_gguf *g) { return g->n_tensors; }

const assay_gguf_kv *assay_gguf_kv_at(const assay_gguf *g, int64_t i) {
    ASSAY_ASSERT(i >= 0 && i < g->n_kv);
    return &g->kvs[i];
}

const assay_gguf_tensor *assay_gguf_tensor_at(const assay_gguf *g, int64_t i) {
    ASSAY_ASSERT(i >= 0 && i < g->n_tensors);
    return &g->tensors[i];
}

const assay_gguf_kv *assay_gguf_find(const assay_gguf *g, const char *key) {
    int64_t i = hash_find(g->kv_hash, g->kv_hash_mask, g->kvs, sizeof *g->kvs, offsetof(assay_gguf_kv, key), key);
    return i < 0 ? NULL : &g->kvs[i];
}

const assay_gguf_tensor *assay_gguf_find_tensor(const assay_gguf *g, const char *name) {
    int64_t i = hash_find(g->tensor_hash, g->tensor_hash_mask, g->tensors, sizeof *g->tensors,
                          offsetof(assay_gguf_tensor, name), name);
    return i < 0 ? NULL : &g->tensors[i];
}

/* Any integer scalar as int64; 0 with *ok = 0 when a u64 does not fit. */
static int64_t int_of(assay_gguf_value_type t, scalar_value v, int *ok) {
    *ok = 1;
    if (t == ASSAY_GGUF_UINT64 && v.u64 > (uint64_t)INT64_MAX) {
        *ok = 0;
        return 0;
    }
    return v.i64;
}

int64_t assay_gguf_get_int(const assay_gguf *g, const char *key, int64_t fallback) {
    const assay_gguf_kv *kv = assay_gguf_find(g, key);
    if (!kv || !is_integer_type(kv->type)) return fallback;
    scalar_value v;
    memcpy(&v, &kv->value, sizeof v);
    int ok;
    int64_t r = int_of(kv->type, v, &ok);
    return ok ? r : fallback;
}

double assay_gguf_get_float(const assay_gguf *g, const char *key, double fallback) {
    const assay_gguf_kv *kv = assay_gguf_find(g, key);
    if (!kv) return fallback;
    if (kv->type == ASSAY_GGUF_FLOAT32 || kv->type == ASSAY_GGUF_FLOAT64) return kv->value.f64;
    if (kv->type == ASSAY_GGUF_UINT64) return (double)kv->value.u64;
    if (is_integer_type(kv->type)) return (double)kv->value.i64;
    return fallback;
}

int assay_gguf_get_bool(const assay_gguf *g, const char *key, int fallback) {
    const assay_gguf_kv *kv = assay_gguf_find(g, key);
    if (!kv || kv->type != ASSAY_GGUF_BOOL) return fallback;
    return kv->value.i64 != 0;
}

int assay_gguf_get_string(const assay_gguf *g, const char *key, assay_gguf_str *out) {
    const assay_gguf_kv *kv = assay_gguf_find(g, key);
    if (!kv || kv->type != ASSAY_GGUF_STRING) return 0;
    *out = kv->value.str;
    return 1;
}

int64_t assay_gguf_array_int(const assay_gguf_kv *kv, uint64_t i) {
    ASSAY_ASSERT(kv->type == ASSAY_GGUF_ARRAY && i < kv->array_len);
    size_t es = scalar_size(kv->array_type);
    ASSAY_ASSERT(es != 0);
    scalar_value v = decode_scalar(kv->array_type, kv->array_data + i * es);
    if (kv->array_type == ASSAY_GGUF_FLOAT32 || kv->array_type == ASSAY_GGUF_FLOAT64) {
        /* truncation of an out-of-range double is undefined in C: clamp first */
        if (!(v.f64 == v.f64)) return 0;
        if (v.f64 >= 9.2233720368547758e18) return INT64_MAX;
        if (v.f64 <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)v.f64;
    }
    return v.i64; /* u64 above INT64_MAX wraps: callers reading ids never see such values in valid files */
}

double assay_gguf_array_float(const assay_gguf_kv *kv, uint64_t i) {
    ASSAY_ASSERT(kv->type == ASSAY_GGUF_ARRAY && i < kv->array_len);
    size_t es = scalar_size(kv->array_type);
    ASSAY_ASSERT(es != 0);
    scalar_value v = decode_scalar(kv->array_type, kv->array_data + i * es);
    if (kv->array_type == ASSAY_GGUF_FLOAT32 || kv->array_type == ASSAY_GGUF_FLOAT64) return v.f64;
    if (kv->array_type == ASSAY_GGUF_UINT64) return (double)v.u64;
    return (double)v.i64;
}

assay_gguf_str assay_gguf_array_str(const assay_gguf_kv *kv, uint64_t i) {
    ASSAY_ASSERT(kv->type == ASSAY_GGUF_ARRAY && kv->array_type == ASSAY_GGUF_STRING && i < kv->array_len);
    return kv->strings[i];
}

const assay_gguf_kv *assay_gguf_array_sub(const assay_gguf_kv *kv, uint64_t i) {
    ASSAY_ASSERT(kv->type == ASSAY_GGUF_ARRAY && kv->array_type == ASSAY_GGUF_ARRAY && i < kv->array_len);
    return &kv->arrays[i];
}

/* ---- writer ------------------------------------------------------------------------------------------- */

/* Each kv is kept serialized (u32 type + payload) from the moment it is set, so writing is a copy. */
typedef struct wkv {
    char *key;
    size_t key_len;
    assay_strbuf val;
} wkv;

typedef struct wtensor {
    char *name;
    assay_type type;
    int n_dims;
    int64_t ne[ASSAY_GGUF_MAX_DIMS];
    const void *data;
    size_t bytes;
} wtensor;

struct assay_gguf_writer {
    wkv *kvs;
    int64_t n_kv, cap_kv;
    wtensor *tensors;
    int64_t n_tensors, cap_tensors;
};

assay_gguf_writer *assay_gguf_writer_new(void) { return assay_xcalloc(1, sizeof(assay_gguf_writer)); }

void assay_gguf_writer_free(assay_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        assay_strbuf_free(&w->kvs[i].val);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

static int64_t writer_find(const assay_gguf_writer *w, const char *key, size_t n) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (w->kvs[i].key_len == n && memcmp(w->kvs[i].key, key, n) == 0) return i;
    return -1;
}

/* Takes ownership of `val`: replaces the value of an existing key in place (order kept) or appends. */
static void writer_put(assay_gguf_writer *w, const char *key, size_t key_len, assay_strbuf val) {
    ASSAY_ASSERT(key != NULL);
    int64_t i = writer_find(w, key, key_len);
    if (i >= 0) {
        assay_strbuf_free(&w->kvs[i].val);
        w->kvs[i].val = val;
        return;
    }
    if (w->n_kv == w->cap_kv) {
        w->cap_kv = w->cap_kv ? w->cap_kv * 2 : 32;
        w->kvs = assay_xrealloc(w->kvs, (size_t)w->cap_kv * sizeof *w->kvs);
    }
    wkv *kv = &w->kvs[w->n_kv++];
    kv->key = assay_xmalloc(key_len + 1);
    memcpy(kv->key, key, key_len);
    kv->key[key_len] = 0;
    kv->key_len = key_len;
    kv->val = val;
}

static void put_u32(assay_strbuf *b, uint32_t v) { assay_strbuf_append(b, (const char *)&v, 4); }
static void put_u64(assay_strbuf *b, uint64_t v) { assay_strbuf_append(b, (const char *)&v, 8); }

static void set_scalar(assay_gguf_writer *w, const char *key, assay_gguf_value_type t, const void *v) {
    assay_strbuf b = {0};
    put_u32(&b, t);
    assay_strbuf_append(&b, v, scalar_size(t));
    writer_put(w, key, strlen(key), b);
}

void assay_gguf_writer_set_u8(assay_gguf_writer *w, const char *key, uint8_t v) { set_scalar(w, key, ASSAY_GGUF_UINT8, &v); }
void assay_gguf_writer_set_i8(assay_gguf_writer *w, const char *key, int8_t v) { set_scalar(w, key, ASSAY_GGUF_INT8, &v); }
void assay_gguf_writer_set_u16(assay_gguf_writer *w, const char *key, uint16_t v) { set_scalar(w, key, ASSAY_GGUF_UINT16, &v); }
void assay_gguf_writer_set_i16(assay_gguf_writer *w, const char *key, int16_t v) { set_scalar(w, key, ASSAY_GGUF_INT16, &v); }
void assay_gguf_writer_set_u32(assay_gguf_writer *w, const char *key, uint32_t v) { set_scalar(w, key, ASSAY_GGUF_UINT32, &v); }
void assay_gguf_writer_set_i32(assay_gguf_writer *w, const char *key, int32_t v) { set_scalar(w, key, ASSAY_GGUF_INT32, &v); }
void assay_gguf_writer_set_u64(assay_gguf_writer *w, const char *key, uint64_t v) { set_scalar(w, key, ASSAY_GGUF_UINT64, &v); }
void assay_gguf_writer_set_i64(assay_gguf_writer *w, const char *key, int64_t v) { set_scalar(w, key, ASSAY_GGUF_INT64, &v); }
void assay_gguf_writer_set_f32(assay_gguf_writer *w, const char *key, float v) { set_scalar(w, key, ASSAY_GGUF_FLOAT32, &v); }
void assay_gguf_writer_set_f64(assay_gguf_writer *w, const char *key, double v) { set_scalar(w, key, ASSAY_GGUF_FLOAT64, &v); }

void assay_gguf_writer_set_bool(assay_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    set_scalar(w, key, ASSAY_GGUF_BOOL, &b);
}

void assay_gguf_writer_set_string_n(assay_gguf_writer *w, const char *key, const char *v, size_t n) {
    assay_strbuf b = {0};
    put_u32(&b, ASSAY_GGUF_STRING);
    put_u64(&b, n);
    assay_strbuf_append(&b, v, n);
    writer_put(w, key, strlen(key), b);
}

void assay_gguf_writer_set_string(assay_gguf_writer *w, const char *key, const char *v) {
    assay_gguf_writer_set_string_n(w, key, v, strlen(v));
}

void assay_gguf_writer_set_alignment(assay_gguf_writer *w, uint32_t alignment) {
    ASSAY_ASSERT(alignment != 0 && (alignment & (alignment - 1)) == 0);
    assay_gguf_writer_set_u32(w, "general.alignment", alignment);
}

void assay_gguf_writer_set_array(assay_gguf_writer *w, const char *key, assay_gguf_value_type elem_type,
                                 const void *data, uint64_t n) {
    size_t es = scalar_size(elem_type);
    ASSAY_ASSERT(es != 0); /* strings: set_string_array; nested arrays: set_kv */
    ASSAY_ASSERT(n == 0 || data != NULL);
    assay_strbuf b = {0};
    put_u32(&b, ASSAY_GGUF_ARRAY);
    put_u32(&b, elem_type);
    put_u64(&b, n);
    if (n) assay_strbuf_append(&b, data, (size_t)n * es);
    writer_put(w, key, strlen(key), b);
}

void assay_gguf_writer_set_string_array(assay_gguf_writer *w, const char *key, const assay_gguf_str *items, uint64_t n) {
    assay_strbuf b = {0};
    put_u32(&b, ASSAY_GGUF_ARRAY);
    put_u32(&b, ASSAY_GGUF_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) {
        put_u64(&b, items[i].len);
        assay_strbuf_append(&b, items[i].ptr, (size_t)items[i].len);
    }
    writer_put(w, key, strlen(key), b);
}

/* Serializes an array body (element type, count, elements) from a reader-shaped kv. */
static void put_array_body(assay_strbuf *b, const assay_gguf_kv *kv) {
    ASSAY_ASSERT(kv->type == ASSAY_GGUF_ARRAY);
    put_u32(b, kv->array_type);
    put_u64(b, kv->array_len);
    size_t es = scalar_size(kv->array_type);
    if (es) {
        if (kv->array_len) assay_strbuf_append(b, (const char *)kv->array_data, (size_t)kv->array_len * es);
    } else if (kv->array_type == ASSAY_GGUF_STRING) {
        for (uint64_t i = 0; i < kv->array_len; i++) {
            put_u64(b, kv->strings[i].len);
            assay_strbuf_append(b, kv->strings[i].ptr, (size_t)kv->strings[i].len);
        }
    } else {
        ASSAY_ASSERT(kv->array_type == ASSAY_GGUF_ARRAY);
        for (uint64_t i = 0; i < kv->array_len; i++) put_array_body(b, &kv->arrays[i]);
    }
}

void assay_gguf_writer_set_kv(assay_gguf_writer *w, const assay_gguf_kv *kv) {
    assay_strbuf b = {0};
    put_u32(&b, kv->type);
    uint8_t raw[8];
    switch (kv->type) {
    case ASSAY_GGUF_STRING:
        put_u64(&b, kv->value.str.len);
        assay_strbuf_append(&b, kv->value.str.ptr, (size_t)kv->value.str.len);
        break;
    case ASSAY_GGUF_ARRAY: put_array_body(&b, kv); break;
    case ASSAY_GGUF_FLOAT32: { float f = (float)kv->value.f64; memcpy(raw, &f, 4); assay_strbuf_append(&b, (char *)raw, 4); break; }
    case ASSAY_GGUF_FLOAT64: assay_strbuf_append(&b, (const char *)&kv->value.f64, 8); break;
    case ASSAY_GGUF_BOOL: raw[0] = kv->value.i64 != 0; assay_strbuf_append(&b, (char *)raw, 1); break;
    default: {
        /* integers: the low bytes of the 64-bit value (little-endian host) */
        size_t es = scalar_size(kv->type);
        ASSAY_ASSERT(es != 0);
        uint64_t u = kv->value.u64;
        memcpy(raw, &u, 8);
        assay_strbuf_append(&b, (char *)raw, es);
    }
    }
    writer_put(w, kv->key.ptr, (size_t)kv->key.len, b);
}

void assay_gguf_writer_remove(assay_gguf_writer *w, const char *key) {
    int64_t i = writer_find(w, key, strlen(key));
    if (i < 0) return;
    free(w->kvs[i].key);
    assay_strbuf_free(&w->kvs[i].val);
    memmove(&w->kvs[i], &w->kvs[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kvs);
    w->n_kv--;
}

assay_status assay_gguf_writer_add_tensor(assay_gguf_writer *w, const char *name, assay_type type, int n_dims,
                                          const int64_t *ne, const void *data, size_t bytes) {
    size_t name_len = strlen(name);
    /* ggml keeps names in a 64-byte buffer with its NUL: llama.cpp rejects longer ones */
    if (name_len == 0 || name_len > 63)
        return assay_fail(ASSAY_ERR_ARG, "tensor name \"%s\" must be 1 to 63 bytes long", name);
    if ((int)type >= ASSAY_TYPE_GGML_COUNT || !assay_type_get(type))
        return assay_fail(ASSAY_ERR_ARG, "tensor %s: type %s (%d) has no GGUF number", name, assay_type_name(type), (int)type);
    if (n_dims < 1 || n_dims > ASSAY_GGUF_MAX_DIMS)
        return assay_fail(ASSAY_ERR_ARG, "tensor %s: %d dimensions (expected 1 to %d)", name, n_dims, ASSAY_GGUF_MAX_DIMS);
    wtensor t = {0};
    int64_t elems = 1;
    int overflow = 0;
    for (int d = 0; d < ASSAY_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0) return assay_fail(ASSAY_ERR_ARG, "tensor %s: negative dimension %lld", name, (long long)t.ne[d]);
        overflow |= __builtin_mul_overflow(elems, t.ne[d], &elems);
    }
    if (overflow) return assay_fail(ASSAY_ERR_ARG, "tensor %s: shape too large", name);
    if (!assay_type_row_ok(type, t.ne[0]))
        return assay_fail(ASSAY_ERR_ARG, "tensor %s: row length %lld is not a multiple of the %s block size %lld", name,
                          (long long)t.ne[0], assay_type_name(type), (long long)assay_type_get(type)->block_elems);
    size_t want = 0;
    if (elems > 0 && __builtin_mul_overflow(assay_type_row_bytes(type, t.ne[0]), (size_t)(elems / t.ne[0]), &want))
        return assay_fail(ASSAY_ERR_ARG, "tensor %s: shape too large", name);
    if (bytes != want)
        return assay_fail(ASSAY_ERR_ARG, "tensor %s: %zu bytes given, its shape and type %s need %zu", name, bytes,
                          assay_type_name(type), want);
    if (bytes && !data) return assay_fail(ASSAY_ERR_ARG, "tensor %s: no data", name);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return assay_fail(ASSAY_ERR_ARG, "duplicate tensor name %s", name);
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? w->cap_tensors * 2 : 64;
        w->tensors = assay_xrealloc(w->tensors, (size_t)w->cap_tensors * sizeof *w->tensors);
    }
    t.name = assay_xstrdup(name);
    t.type = type;
    t.n_dims = n_dims;
    t.data = data;
    t.bytes = bytes;
    w->tensors[w->n_tensors++] = t;
    return ASSAY_OK;
}

static void write_bytes(FILE *fp, const void *p, size_t n) {
    if (n) fwrite(p, 1, n, fp);
}

static void write_pad(FILE *fp, uint64_t pos, uint64_t alignment) {
    static const uint8_t zeros[256];
    uint64_t pad = (alignment - pos % alignment) % alignment;
    while (pad) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        fwrite(zeros, 1, k, fp);
        pad -= k;
    }
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

assay_status assay_gguf_writer_write(assay_gguf_writer *w, const char *path, int overwrite) {
    uint64_t alignment = ASSAY_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = writer_find(w, "general.alignment", strlen("general.alignment"));
    if (ai >= 0) {
        const assay_strbuf *v = &w->kvs[ai].val;
        uint32_t t, a = 0;
        memcpy(&t, v->data, 4);
        if (t == ASSAY_GGUF_UINT32) memcpy(&a, v->data + 4, 4);
        if (t != ASSAY_GGUF_UINT32 || a == 0 || (a & (a - 1)) != 0)
            return assay_fail(ASSAY_ERR_ARG, "%s: general.alignment must be a u32 power of two", path);
        alignment = a;
    }
    assay_output_file out;
    assay_status st = assay_output_file_open(&out, path, overwrite);
    if (st != ASSAY_OK) return st;
    FILE *fp = out.fp;
    uint64_t pos = 0;
    uint32_t version = 3;
    uint64_t nt = (uint64_t)w->n_tensors, nk = (uint64_t)w->n_kv;
    write_bytes(fp, "GGUF", 4);
    write_bytes(fp, &version, 4);
    write_bytes(fp, &nt, 8);
    write_bytes(fp, &nk, 8);
    pos = 24;
    for (int64_t i = 0; i < w->n_kv; i++) {
        uint64_t kl = w->kvs[i].key_len;
        write_bytes(fp, &kl, 8);
        write_bytes(fp, w->kvs[i].key, w->kvs[i].key_len);
        write_bytes(fp, w->kvs[i].val.data, w->kvs[i].val.len);
        pos += 8 + kl + w->kvs[i].val.len;
    }
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        uint64_t nl = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims, type = (uint32_t)t->type;
        write_bytes(fp, &nl, 8);
        write_bytes(fp, t->name, nl);
        write_bytes(fp, &nd, 4);
        for (int d = 0; d < t->n_dims; d++) {
            uint64_t ne = (uint64_t)t->ne[d];
            write_bytes(fp, &ne, 8);
        }
        write_bytes(fp, &type, 4);
        write_bytes(fp, &offset, 8);
        pos += 8 + nl + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
        offset = align_up(offset + t->bytes, alignment);
    }
    write_pad(fp, pos, alignment);
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        write_bytes(fp, t->data, t->bytes);
        write_pad(fp, t->bytes, alignment);
    }
    if (ferror(fp)) {
        assay_output_file_abort(&out);
        return assay_fail(ASSAY_ERR_IO, "error writing %s (disk full?)", path);
    }
    return assay_output_file_commit(&out);
}
