/* backend_ops.h — the CUDA kernels behind the backend's small ops (cuda_backend.c): element-wise work, embedding
 * lookup, the paged KV cache (store, gather, copy) and a reference paged attention for the cases the measured
 * attention kernels (cuda_kernels.h) do not cover. Plain C entry points; every call is asynchronous on `stream`
 * and returns 0, or -1 with assay_cuda_last_error() set.
 *
 * Activations are bf16 row-major; vectors (norm weights, biases, RoPE frequencies) are f32; index arrays are device
 * int32/int64. The KV cache of one layer, per block of ASSAY_KV_BLOCK (16) tokens and KV head:
 *   K [n_blocks][n_head_kv][16][head_dim]  (token rows)
 *   V [n_blocks][n_head_kv][head_dim][16]  (transposed inside the block: the layout the decode kernel reads)
 * in the cache's element type; the scaled types record the scale of every (block, head, slot) in k_scale/v_scale
 * ([n_blocks][n_head_kv][16]): the static one when the layer has it, else the slot's own absmax scale.
 */
#ifndef ASSAY_CUDA_BACKEND_OPS_H
#define ASSAY_CUDA_BACKEND_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "assay/cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cache's element types on the GPU (kv_type.h's, less f16/f32 which the decode kernel has no path for). */
typedef enum cuda_kv_elem { CUDA_KV_BF16, CUDA_KV_FP8_E4M3, CUDA_KV_FP8_E5M2, CUDA_KV_INT8 } cuda_kv_elem;

typedef struct cuda_kv_view {
    void *k, *v;
    float *k_scale, *v_scale; /* per-slot scales (scaled types without a static scale) */
    float k_static, v_static; /* > 0: kv_store writes with this scale (and records it per slot) */
    int uniform;              /* every written slot carries the static scales (backend.h, static_uniform) */
    cuda_kv_elem elem;
    int32_t n_head_kv, head_dim;
} cuda_kv_view;

int cuda_op_f32_to_bf16(const float *x, void *y, int64_t n, assay_cuda_stream st);
int cuda_op_bf16_to_f32(const void *x, float *y, int64_t n, assay_cuda_stream st);
/* w[i] (bf16, i < n) = assay_dummy_value(seed, i, range) (dummy_weights.h), rounded through f16 first when via_f16:
 * a dummy weight made on the device, equal to the host's fill uploaded the way prepare_weight uploads weights. */
int cuda_op_dummy_fill(void *w, int64_t n, uint64_t seed, float range, int via_f16, assay_cuda_stream st);
int cuda_op_rmsnorm(void *y, const void *x, const float *gamma, int64_t n, int64_t rows, float eps, assay_cuda_stream st);
/* x += h (rounded to bf16), then y = rmsnorm(x) * gamma */
int cuda_op_add_rmsnorm(void *y, void *x, const void *h, const float *gamma, int64_t n, int64_t rows, float eps,
                        assay_cuda_stream st);
int cuda_op_rope(void *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride, const int32_t *pos,
                 int neox, int64_t n_rot, const float *inv_freq, assay_cuda_stream st);
/* out[r][i] = act(gate[r*stride+i]) * up[r*stride+i]; gelu: the tanh approximation */
int cuda_op_glu(void *out, const void *gate, const void *up, int64_t n, int64_t rows, int64_t stride, int gelu,
                assay_cuda_stream st);
int cuda_op_add(void *y, const void *a, const void *b, int64_t n, assay_cuda_stream st);
int cuda_op_scale(void *y, float s, int64_t n, assay_cuda_stream st);
int cuda_op_tanh_cap(void *x, int64_t n, float cap, assay_cuda_stream st);
int cuda_op_softmax(void *x, int64_t n, int64_t rows, float softcap, assay_cuda_stream st);
/* y[t] = w[ids[t]] (bf16 rows of width n) */
int cuda_op_get_rows(void *y, const void *w, const int32_t *ids, int64_t n_ids, int64_t width, assay_cuda_stream st);
/* dst[r] = src[rows[r]] */
int cuda_op_gather_rows(void *dst, const void *src, const int32_t *rows, int64_t n_rows, int64_t width,
                        assay_cuda_stream st);
/* dst[rows[r]] = src[r] */
int cuda_op_scatter_rows(void *dst, const void *src, const int32_t *rows, int64_t n_rows, int64_t width,
                         assay_cuda_stream st);
/* y[t][c] = x[t][perm[c]] (act-order inputs) */
int cuda_op_gather_cols(void *y, const void *x, const int32_t *perm, int64_t n_tok, int64_t n, assay_cuda_stream st);
/* y[t][o] += bias[o] */
int cuda_op_add_bias(void *y, const float *bias, int64_t n_tok, int64_t n, assay_cuda_stream st);
/* ids[r] = index of the largest of row r (bf16, n values), the first on ties (device int32) */
int cuda_op_argmax(const void *x, int64_t n, int64_t rows, int32_t *ids, assay_cuda_stream st);
/* max |x| into *out (device float) */
int cuda_op_absmax(const void *x, int64_t n, float *out, assay_cuda_stream st);

/* Writes rows k/v ([n_tok][n_head_kv*head_dim] bf16) at their slots. */
int cuda_op_kv_store(const cuda_kv_view *kv, const void *k, const void *v, const int64_t *slot, int64_t n_tok,
                     assay_cuda_stream st);
/* Re-encodes every slot whose recorded scale differs from the static scales with them (n_blocks of the layer). */
int cuda_op_kv_requantize(const cuda_kv_view *kv, int64_t n_blocks, assay_cuda_stream st);
/* k/v [n_rows][n_head_kv*head_dim] bf16 = the decoded cache slots slot[r] (prefill attention over the cache). */
int cuda_op_kv_gather(const cuda_kv_view *kv, const int64_t *slot, int64_t n_rows, void *k, void *v,
                      assay_cuda_stream st);
/* Reference paged attention for every case: token t (sequence seq_of_tok[t], position pos[t]) attends to positions
 * max(0, pos - window + 1) .. pos of its sequence, whose block j is tables[seq * table_stride + j]. */
typedef struct cuda_attn_ref_args {
    void *out;
    const void *q;
    const int32_t *pos, *seq_of_tok, *tables;
    int64_t n_tok, table_stride;
    int32_t n_head, head_dim;
    float scale, softcap;
    int64_t window;
} cuda_attn_ref_args;
int cuda_op_attention_ref(const cuda_attn_ref_args *a, const cuda_kv_view *kv, assay_cuda_stream st);

#ifdef __cplusplus
}
#endif
#endif
