/* ggml_quant.h — encode float rows into llama.cpp's GGUF block formats, and pick llama.cpp's per-tensor mix.
 *
 *   // one tensor: nrow rows of n_per_row floats (ggml ne = {n_per_row, nrow}); imatrix: n_per_row floats or NULL
 *   size_t bytes = assay_ggml_quant_bytes(ASSAY_TYPE_Q4_K, nrow, n_per_row);
 *   void *dst = assay_xmalloc(bytes);
 *   assay_ggml_quantize(ASSAY_TYPE_Q4_K, src, dst, nrow, n_per_row, imatrix);
 *
 *   // the mixes (q4_k_m ...): one chooser per model, asked once per tensor in file order
 *   assay_ggml_mix mix;
 *   assay_ggml_mix_init(&mix, ASSAY_GGML_FTYPE_Q4_K_M, n_layer, n_head, n_head_kv, 0);
 *   for each tensor: assay_ggml_mix_count(&mix, name);       // first pass: counts attn_v tensors, sees output.weight
 *   for each tensor: t = assay_ggml_mix_tensor_type(&mix, name, n_dims, ne);   // second pass, same order
 *
 *   // or the whole model, as llama-quantize does it
 *   assay_ggml_model_options o = {.ftype = ASSAY_GGML_FTYPE_Q4_K_M};
 *   assay_ggml_quantize_model(mf, "model-q4_k_m.gguf", &o, NULL);
 *
 * Types: q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K. Byte layouts, rounding and scale searches are those
 * of ggml's reference quantizers (ggml-quants.c): without an imatrix the "_ref" searches, with one the
 * importance-weighted searches (llama-quantize --imatrix). q8_0 ignores the imatrix, as ggml does.
 * Decoding is dequant.h's (assay_dequantize). The imatrix holds one weight per input column (mean squared activation of that column, llama-imatrix's value).
 */
#ifndef ASSAY_GGML_QUANT_H
#define ASSAY_GGML_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/weight_type.h"

/* 1 for the types assay_ggml_quantize encodes. */
int assay_ggml_quant_supported(assay_type type);
/* Elements per block (32 or 256) and bytes per block; 0 for unsupported types. */
int64_t assay_ggml_quant_block_elems(assay_type type);
size_t assay_ggml_quant_block_bytes(assay_type type);
/* Bytes of nrow rows; n_per_row must be a multiple of the block (asserted). */
size_t assay_ggml_quant_bytes(assay_type type, int64_t nrow, int64_t n_per_row);

/* Encodes nrow rows. Errors: unsupported type, row length not a multiple of the block, non-finite imatrix. */
assay_status assay_ggml_quantize(assay_type type, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                                 const float *imatrix);

/* ---- llama.cpp quantization mixes (llama_tensor_get_type) ---------------------------------------------- */
/* llama.cpp's llama_ftype numbers: written as general.file_type. */
typedef enum assay_ggml_ftype {
    ASSAY_GGML_FTYPE_ALL_F32 = 0,
    ASSAY_GGML_FTYPE_F16 = 1,
    ASSAY_GGML_FTYPE_Q4_0 = 2,
    ASSAY_GGML_FTYPE_Q4_1 = 3,
    ASSAY_GGML_FTYPE_Q8_0 = 7,
    ASSAY_GGML_FTYPE_Q5_0 = 8,
    ASSAY_GGML_FTYPE_Q5_1 = 9,
    ASSAY_GGML_FTYPE_Q2_K = 10,
    ASSAY_GGML_FTYPE_Q3_K_S = 11,
    ASSAY_GGML_FTYPE_Q3_K_M = 12,
    ASSAY_GGML_FTYPE_Q3_K_L = 13,
    ASSAY_GGML_FTYPE_Q4_K_S = 14,
    ASSAY_GGML_FTYPE_Q4_K_M = 15,
    ASSAY_GGML_FTYPE_Q5_K_S = 16,
    ASSAY_GGML_FTYPE_Q5_K_M = 17,
    ASSAY_GGML_FTYPE_Q6_K = 18,
    ASSAY_GGML_FTYPE_BF16 = 32,
} assay_ggml_ftype;

/* Scheme names as the CLI spells them: "q8_0" "q4_0" "q4_1" "q5_0" "q5_1" "q2_k" "q3_k_s" "q3_k_m" "q3_k_l"
 * "q4_k_s" "q4_k_m" "q5_k_s" "q5_k_m" "q6_k", plus the aliases "q3_k" (= q3_k_m), "q4_k" (= q4_k_m),
 * "q5_k" (= q5_k_m) that llama-quantize accepts. Case-insensitive. Returns 0 when not a GGUF scheme. */
int assay_ggml_ftype_from_name(const char *name, assay_ggml_ftype *out);
const char *assay_ggml_ftype_name(assay_ggml_ftype ftype);
/* The base tensor type of a mix (q4_k_m -> q4_K). */
assay_type assay_ggml_ftype_base_type(assay_ggml_ftype ftype);

typedef struct assay_ggml_mix {
    assay_ggml_ftype ftype;
    int n_layer;
    int n_gqa;                /* n_head / n_head_kv */
    int n_attention_wv, i_attention_wv; /* attn_v tensors: counted in pass 1, walked in pass 2 */
    int i_ffn_down;
    int has_tied_embeddings;  /* no output.weight seen in pass 1 */
    int has_imatrix;          /* set by the caller: q4_0/q5_0 then keep the first n/8 ffn_down in q4_1/q5_1 */
    int n_fallback;           /* tensors that fell back to another type because of their row length */
} assay_ggml_mix;

void assay_ggml_mix_init(assay_ggml_mix *mix, assay_ggml_ftype ftype, int n_layer, int n_head, int n_head_kv);
/* Pass 1 over the tensor names, in file order. */
void assay_ggml_mix_count(assay_ggml_mix *mix, const char *name);
/* 1 when llama.cpp would quantize this tensor at all (2-D+, name ends in "weight", not a norm, ...). */
int assay_ggml_mix_allows(const char *name, int n_dims);
/* Pass 2: the type for this tensor (the row-length fallback applied: q4_K -> q5_0 when ne[0] % 256 != 0, ...).
 * Returns ASSAY_TYPE_F32 for tensors that are not quantized (the caller keeps them in float). */
assay_type assay_ggml_mix_tensor_type(assay_ggml_mix *mix, const char *name, int n_dims, const int64_t *ne);

/* ---- a whole model -------------------------------------------------------------------------------------- */
typedef struct assay_model_file assay_model_file;
typedef struct assay_imatrix assay_imatrix;

typedef struct assay_ggml_model_options {
    assay_ggml_ftype ftype;
    const assay_imatrix *imatrix; /* NULL: no importance weighting */
    const char *imatrix_path;     /* recorded as quantize.imatrix.file */
    int threads;                  /* <= 0: every core */
    int overwrite;
    /* optional: tensors for which this returns nonzero keep their float type (--ignore) */
    int (*is_ignored)(void *ctx, const char *canonical_name, const char *source_name);
    void *ignore_ctx;
} assay_ggml_model_options;

typedef struct assay_ggml_model_report {
    double seconds;
    uint64_t tensor_bytes;
    int n_fallback;               /* tensors that took a fallback type (row length) */
    int64_t n_imatrix_used;       /* tensors quantized with an imatrix entry */
    int type_count[ASSAY_TYPE_COUNT];
} assay_ggml_model_report;

/* Writes `out_path` (.gguf, temp file + rename): every tensor of `mf` under the mix `o->ftype`. rep may be NULL. */
assay_status assay_ggml_quantize_model(const assay_model_file *mf, const char *out_path,
                                       const assay_ggml_model_options *o, assay_ggml_model_report *rep);

#endif
