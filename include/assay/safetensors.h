/* safetensors.h — safetensors files: a bounds-checked mmapped reader, sharded directories, and a writer.
 *
 *   assay_safetensors *st;
 *   if (assay_safetensors_open(&st, "model.safetensors") != ASSAY_OK) fprintf(stderr, "%s\n", assay_last_error());
 *   const assay_safetensors_tensor *t = assay_safetensors_find(st, "model.norm.weight");
 *   // t->dtype "BF16", t->type ASSAY_TYPE_BF16, t->shape[0..n_dims) outermost first, t->data, t->bytes
 *   assay_safetensors_close(st);
 *
 *   assay_safetensors_set *set;                          // a model directory: model.safetensors, or the shards
 *   assay_safetensors_set_open(&set, "models/house");    // named by model.safetensors.index.json
 *
 *   assay_safetensors_writer *w = assay_safetensors_writer_new();
 *   assay_safetensors_writer_set_metadata(w, "format", "pt");
 *   assay_safetensors_writer_add(w, "model.norm.weight", "BF16", 1, shape, data, bytes);  // referenced, not copied
 *   assay_safetensors_writer_write(w, "out/model.safetensors", overwrite);                // temp file + rename
 *   assay_safetensors_writer_free(w);
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON ({"__metadata__": {str: str},
 * "name": {"dtype", "shape", "data_offsets": [begin, end]}}), then the data section. The reader checks what
 * the reference implementation checks: N within the file and below 100 MB, the header a JSON object, every
 * dtype known, shape x element size == end - begin, no duplicate names, and the tensors tiling the data
 * section exactly (sorted by offset, each begins where the previous ended, the last ends at the end of the
 * file): so no overlap, no gap, nothing out of range. Shapes here are safetensors' (outermost first), not
 * ggml's: model_file.h does the reversal. Data pointers are as aligned as the file makes them: writers that
 * pad the header (the reference, ours) give 8-byte aligned data sections, but nothing forces it, so typed
 * access to an arbitrary file's tensor should check alignment or copy.
 */
#ifndef ASSAY_SAFETENSORS_H
#define ASSAY_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "assay/json.h"
#include "assay/status.h"
#include "assay/weight_type.h"

#define ASSAY_SAFETENSORS_MAX_DIMS 8
#define ASSAY_SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u) /* the reference library's limit */

typedef struct assay_safetensors_tensor {
    const char *name;     /* NUL-terminated, owned by the file handle */
    const char *dtype;    /* the header's spelling: "F32", "BF16", "F8_E4M3", "BOOL", ... */
    assay_type type;      /* element type; BOOL reads as U8, U16/U32/U64 as I16/I32/I64 (raw bytes) */
    size_t elem_bytes;
    int n_dims;           /* 0 for a scalar */
    int64_t shape[ASSAY_SAFETENSORS_MAX_DIMS]; /* outermost first, as written */
    uint64_t begin, end;  /* data_offsets, relative to the data section */
    const void *data;     /* into the mapping (or the caller's buffer) */
    size_t bytes;
} assay_safetensors_tensor;

typedef struct assay_safetensors assay_safetensors;

assay_status assay_safetensors_open(assay_safetensors **out, const char *path);
/* Parses a file image already in memory (kept, not copied; `label` names it in errors). For fuzzing/tests. */
assay_status assay_safetensors_parse(assay_safetensors **out, const void *data, size_t size, const char *label);
void assay_safetensors_close(assay_safetensors *st);

const char *assay_safetensors_path(const assay_safetensors *st);
int64_t assay_safetensors_tensor_count(const assay_safetensors *st);
/* Tensors in file order (order of their data). */
const assay_safetensors_tensor *assay_safetensors_tensor_at(const assay_safetensors *st, int64_t i);
const assay_safetensors_tensor *assay_safetensors_find(const assay_safetensors *st, const char *name);
/* The "__metadata__" object (string values only) or NULL. */
const assay_json *assay_safetensors_metadata(const assay_safetensors *st);

/* The dtype table: "BF16" -> type and element size. Returns 0 for an unknown dtype. */
int assay_safetensors_dtype_lookup(const char *dtype, assay_type *type, size_t *elem_bytes);
/* The dtype string for an element type (NULL if safetensors has none, e.g. quantized blocks). */
const char *assay_safetensors_dtype_name(assay_type type);

/* ---- a model directory's tensors: model.safetensors, or model.safetensors.index.json + shards ------------- */
typedef struct assay_safetensors_set assay_safetensors_set;

/* `dir` holds model.safetensors.index.json (every shard it names is opened and must hold exactly the tensors
 * the weight_map assigns to it), or model.safetensors, or else exactly the *.safetensors files present. */
assay_status assay_safetensors_set_open(assay_safetensors_set **out, const char *dir);
void assay_safetensors_set_close(assay_safetensors_set *set);
int64_t assay_safetensors_set_file_count(const assay_safetensors_set *set);
const assay_safetensors *assay_safetensors_set_file(const assay_safetensors_set *set, int64_t i);
/* Across all shards; NULL if absent. */
const assay_safetensors_tensor *assay_safetensors_set_find(const assay_safetensors_set *set, const char *name,
                                                           const assay_safetensors **file);

/* ---- writing ------------------------------------------------------------------------------------------------ */
typedef struct assay_safetensors_writer assay_safetensors_writer;

assay_safetensors_writer *assay_safetensors_writer_new(void);
void assay_safetensors_writer_free(assay_safetensors_writer *w);
void assay_safetensors_writer_set_metadata(assay_safetensors_writer *w, const char *key, const char *value);
/* Shape outermost first. `bytes` must equal the product of the shape times the dtype's element size
 * (ASSAY_ERR_ARG otherwise); names must be unique. Data is referenced until write. */
assay_status assay_safetensors_writer_add(assay_safetensors_writer *w, const char *name, const char *dtype, int n_dims,
                                          const int64_t *shape, const void *data, size_t bytes);
/* Header padded with spaces to a multiple of 8 bytes so the data section starts aligned; tensors in the
 * order added. Written to a temporary file and renamed into place. */
assay_status assay_safetensors_writer_write(assay_safetensors_writer *w, const char *path, int overwrite);

#endif
