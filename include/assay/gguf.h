/* gguf.h — GGUF v2/v3 files: a bounds-checked mmapped reader and a writer.
 *
 *   assay_gguf *g;
 *   if (assay_gguf_open(&g, "model.gguf") != ASSAY_OK) fprintf(stderr, "%s\n", assay_last_error());
 *   const char *arch = ...; assay_gguf_get_string(g, "general.architecture", &s) -> s.ptr/s.len
 *   int64_t n_layer = assay_gguf_get_int(g, "llama.block_count", -1);
 *   const assay_gguf_kv *toks = assay_gguf_find(g, "tokenizer.ggml.tokens");   // array of strings
 *   for (uint64_t i = 0; i < toks->array_len; i++) { assay_gguf_str t = assay_gguf_array_str(toks, i); ... }
 *   const assay_gguf_tensor *t = assay_gguf_find_tensor(g, "blk.0.attn_q.weight"); // t->data, t->bytes, t->ne
 *   assay_gguf_close(g);
 *
 * Every length, count, offset and type read from the file is checked against the file size before use: a
 * truncated or corrupt file gives ASSAY_ERR_FORMAT with a message naming the file and what is wrong (GGUF v1 and
 * big-endian files: ASSAY_ERR_UNSUPPORTED). Keys and tensor names must be unique; tensor offsets must be
 * multiples of the alignment (general.alignment, u32 power of two, default 32) and lie inside the file.
 * Strings point into the mapping (not NUL-terminated); they stay valid until assay_gguf_close.
 * Tensor shapes are in ggml order: ne[0] is the innermost dimension.
 */
#ifndef ASSAY_GGUF_H
#define ASSAY_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/weight_type.h"

#define ASSAY_GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define ASSAY_GGUF_DEFAULT_ALIGNMENT 32
#define ASSAY_GGUF_MAX_DIMS 4

typedef enum assay_gguf_value_type {
    ASSAY_GGUF_UINT8 = 0,
    ASSAY_GGUF_INT8 = 1,
    ASSAY_GGUF_UINT16 = 2,
    ASSAY_GGUF_INT16 = 3,
    ASSAY_GGUF_UINT32 = 4,
    ASSAY_GGUF_INT32 = 5,
    ASSAY_GGUF_FLOAT32 = 6,
    ASSAY_GGUF_BOOL = 7,
    ASSAY_GGUF_STRING = 8,
    ASSAY_GGUF_ARRAY = 9,
    ASSAY_GGUF_UINT64 = 10,
    ASSAY_GGUF_INT64 = 11,
    ASSAY_GGUF_FLOAT64 = 12,
} assay_gguf_value_type;

typedef struct assay_gguf_str {
    const char *ptr;
    uint64_t len;
} assay_gguf_str;

typedef struct assay_gguf_kv assay_gguf_kv;
struct assay_gguf_kv {
    assay_gguf_str key;
    assay_gguf_value_type type;
    /* Scalars: the value widened (signed integers to i64, unsigned to u64, floats to f64, bool to 0/1 in
     * i64); strings point into the mapping. */
    union {
        int64_t i64;
        uint64_t u64;
        double f64;
        assay_gguf_str str;
    } value;
    /* Arrays (type == ASSAY_GGUF_ARRAY): element type, count, and the raw element bytes in the file.
     * For arrays of strings, `strings` indexes every element; for arrays of arrays, `arrays` holds one kv
     * (empty key, type ASSAY_GGUF_ARRAY) per element, nested to any depth (both allocated at open). */
    assay_gguf_value_type array_type;
    uint64_t array_len;
    const uint8_t *array_data;
    assay_gguf_str *strings;
    assay_gguf_kv *arrays;
};

typedef struct assay_gguf_tensor {
    assay_gguf_str name;
    uint32_t n_dims;
    int64_t ne[ASSAY_GGUF_MAX_DIMS]; /* unused dims are 1 */
    assay_type type;
    uint64_t offset;   /* relative to the start of the tensor data section */
    const void *data;  /* into the mapping */
    size_t bytes;
} assay_gguf_tensor;

typedef struct assay_gguf assay_gguf;

assay_status assay_gguf_open(assay_gguf **out, const char *path);
/* Parses a GGUF image already in memory (not copied: `data` must outlive the handle); `name` is used in
 * messages and returned by assay_gguf_path. For fuzzing and for files produced in memory. */
assay_status assay_gguf_open_memory(assay_gguf **out, const void *data, size_t size, const char *name);
void assay_gguf_close(assay_gguf *g);

uint32_t assay_gguf_version(const assay_gguf *g);
uint64_t assay_gguf_alignment(const assay_gguf *g);
const char *assay_gguf_path(const assay_gguf *g);
size_t assay_gguf_file_size(const assay_gguf *g);
/* Absolute file offset of the tensor data section (tensor offsets are relative to it). */
size_t assay_gguf_data_offset(const assay_gguf *g);

int64_t assay_gguf_kv_count(const assay_gguf *g);
const assay_gguf_kv *assay_gguf_kv_at(const assay_gguf *g, int64_t i);
const assay_gguf_kv *assay_gguf_find(const assay_gguf *g, const char *key); /* NULL if absent */

/* Typed getters: `fallback` when absent or of an incompatible type (any integer type reads as int). */
int64_t assay_gguf_get_int(const assay_gguf *g, const char *key, int64_t fallback);
double assay_gguf_get_float(const assay_gguf *g, const char *key, double fallback);
int assay_gguf_get_bool(const assay_gguf *g, const char *key, int fallback);
/* Returns 1 and fills *out when the key holds a string. */
int assay_gguf_get_string(const assay_gguf *g, const char *key, assay_gguf_str *out);

/* Array element access (index < kv->array_len; asserted). */
int64_t assay_gguf_array_int(const assay_gguf_kv *kv, uint64_t i);
double assay_gguf_array_float(const assay_gguf_kv *kv, uint64_t i);
assay_gguf_str assay_gguf_array_str(const assay_gguf_kv *kv, uint64_t i);
/* Element i of an array of arrays (kv->array_type == ASSAY_GGUF_ARRAY). */
const assay_gguf_kv *assay_gguf_array_sub(const assay_gguf_kv *kv, uint64_t i);
/* "u8", "i8", ... "f64", "bool", "string", "array"; "unknown" otherwise. */
const char *assay_gguf_type_name(assay_gguf_value_type t);

int64_t assay_gguf_tensor_count(const assay_gguf *g);
const assay_gguf_tensor *assay_gguf_tensor_at(const assay_gguf *g, int64_t i);
const assay_gguf_tensor *assay_gguf_find_tensor(const assay_gguf *g, const char *name);

/* ---- writing ----------------------------------------------------------------------------------------------
 *   assay_gguf_writer *w = assay_gguf_writer_new();
 *   assay_gguf_writer_set_string(w, "general.architecture", "llama");
 *   assay_gguf_writer_set_u32(w, "llama.block_count", 7);
 *   assay_gguf_writer_add_tensor(w, "token_embd.weight", ASSAY_TYPE_BF16, 2, ne, data, bytes);
 *   assay_status st = assay_gguf_writer_write(w, "out.gguf", overwrite);  // temp file + rename
 *   assay_gguf_writer_free(w);
 * Tensor data is referenced, not copied, until write. Keys keep insertion order; setting a key twice replaces it.
 * Every value type is supported (assay_gguf_writer_set_kv copies a kv from a reader, arrays included). */
typedef struct assay_gguf_writer assay_gguf_writer;

assay_gguf_writer *assay_gguf_writer_new(void);
void assay_gguf_writer_free(assay_gguf_writer *w);
void assay_gguf_writer_set_alignment(assay_gguf_writer *w, uint32_t alignment);
void assay_gguf_writer_set_u8(assay_gguf_writer *w, const char *key, uint8_t v);
void assay_gguf_writer_set_i8(assay_gguf_writer *w, const char *key, int8_t v);
void assay_gguf_writer_set_u16(assay_gguf_writer *w, const char *key, uint16_t v);
void assay_gguf_writer_set_i16(assay_gguf_writer *w, const char *key, int16_t v);
void assay_gguf_writer_set_u32(assay_gguf_writer *w, const char *key, uint32_t v);
void assay_gguf_writer_set_i32(assay_gguf_writer *w, const char *key, int32_t v);
void assay_gguf_writer_set_u64(assay_gguf_writer *w, const char *key, uint64_t v);
void assay_gguf_writer_set_i64(assay_gguf_writer *w, const char *key, int64_t v);
void assay_gguf_writer_set_f32(assay_gguf_writer *w, const char *key, float v);
void assay_gguf_writer_set_f64(assay_gguf_writer *w, const char *key, double v);
void assay_gguf_writer_set_bool(assay_gguf_writer *w, const char *key, int v);
void assay_gguf_writer_set_string(assay_gguf_writer *w, const char *key, const char *v);
void assay_gguf_writer_set_string_n(assay_gguf_writer *w, const char *key, const char *v, size_t n);
/* Arrays of numbers/bools: `data` holds `n` elements of `elem_type` in the file's encoding (little-endian). */
void assay_gguf_writer_set_array(assay_gguf_writer *w, const char *key, assay_gguf_value_type elem_type,
                                 const void *data, uint64_t n);
void assay_gguf_writer_set_string_array(assay_gguf_writer *w, const char *key, const assay_gguf_str *items, uint64_t n);
void assay_gguf_writer_set_kv(assay_gguf_writer *w, const assay_gguf_kv *kv);
void assay_gguf_writer_remove(assay_gguf_writer *w, const char *key);
assay_status assay_gguf_writer_add_tensor(assay_gguf_writer *w, const char *name, assay_type type, int n_dims,
                                          const int64_t *ne, const void *data, size_t bytes);
assay_status assay_gguf_writer_write(assay_gguf_writer *w, const char *path, int overwrite);

#endif
