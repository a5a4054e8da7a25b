/* assay CUDA kernels: plain C entry points for the GPU engine (src/backend/cuda, built when nvcc exists).
 *
 * Usage (all pointers are device pointers; every call is asynchronous on `stream`):
 *
 *   // prefill attention over a batch of variable-length sequences (token-major [tokens][heads][d] bf16)
 *   assay_cuda_attn_prefill_args a = {0};
 *   a.q = dq; a.k = dk; a.v = dv; a.o = dout;
 *   a.cu_seqlens_q = dcuq; a.cu_seqlens_k = dcuk;          // int32 [batch+1] prefix sums
 *   a.batch = 4; a.max_seqlen_q = 4096; a.n_heads_q = 32; a.n_heads_kv = 8; a.head_dim = 128;
 *   a.scale = 1.0f / sqrtf(128.0f); a.causal = 1;
 *   if (assay_cuda_attn_prefill(&a, stream) != 0) puts(assay_cuda_last_error());
 *
 *   // paged decode attention (one query token per sequence), split-KV with a combine step
 *   assay_cuda_attn_decode_args d = {0};
 *   ... fill d ...; d.workspace = dws; d.workspace_bytes = assay_cuda_attn_decode_workspace(&d);
 *   assay_cuda_attn_decode(&d, stream);
 *
 * Conventions
 *   - Element types are assay_cuda_dtype values. bf16 activations in and out.
 *   - Causal masks are aligned bottom-right: query i of a sequence with Lq queries and Lk keys sees
 *     keys j <= i + (Lk - Lq) (the convention of FlashAttention 2 for Lq != Lk). A query row that sees no
 *     key gets a zero output.
 *   - Paged KV cache, per layer: K pages [n_pages][n_heads_kv][page_size][head_dim] (token rows),
 *     V pages [n_pages][n_heads_kv][head_dim][page_size] (V transposed inside a page, so that the
 *     tensor-core P*V product reads contiguous token pairs). block_table [batch][max_pages_per_seq] int32.
 *     Quantized caches dequantize as value = stored * scale[kv_head]; per-layer scaling = equal scales.
 *   - Decode GEMMs compute Y[m][n] = sum_k X[m][k] * W[n][k] (W in ggml order: ne[0] = K contiguous)
 *     with M <= 16 rows of activations; X and Y are bf16 row-major.
 * Functions return 0 on success and -1 on a bad argument or CUDA error (message in assay_cuda_last_error()).
 */
#ifndef ASSAY_CUDA_KERNELS_H
#define ASSAY_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *assay_cuda_stream; /* same type as cudaStream_t; NULL = default stream */

typedef enum assay_cuda_dtype {
    ASSAY_CUDA_BF16 = 0,
    ASSAY_CUDA_FP8_E4M3 = 1,
    ASSAY_CUDA_FP8_E5M2 = 2,
    ASSAY_CUDA_INT8 = 3,
} assay_cuda_dtype;

/* Message of the last failed call on this thread ("" if none). */
const char *assay_cuda_last_error(void);

/* ---- prefill attention (bf16; wgmma + TMA on compute capability 9.0, FlashAttention-2 style mma.sync elsewhere) */
typedef struct assay_cuda_attn_prefill_args {
    const void *q;              /* bf16 [total_q][n_heads_q][head_dim] */
    const void *k;              /* bf16 [total_k][n_heads_kv][head_dim] */
    const void *v;              /* bf16 [total_k][n_heads_kv][head_dim] */
    void *o;                    /* bf16 [total_q][n_heads_q][head_dim] */
    float *lse;                 /* optional fp32 [n_heads_q][total_q], natural-log sum-exp of scaled scores */
    const int32_t *cu_seqlens_q; /* [batch+1] */
    const int32_t *cu_seqlens_k; /* [batch+1] */
    int32_t batch, max_seqlen_q, n_heads_q, n_heads_kv, head_dim; /* head_dim 64 or 128 */
    float scale;                /* softmax scale, usually 1/sqrt(head_dim) */
    int32_t causal;
    int32_t total_q, total_k;   /* cu_seqlens_q[batch], cu_seqlens_k[batch] (the Hopper kernel's TMA maps need the
                                   token counts on the host); 0 = read them back from the device (synchronizes) */
} assay_cuda_attn_prefill_args;

int assay_cuda_attn_prefill(const assay_cuda_attn_prefill_args *a, assay_cuda_stream stream);

/* ---- FP8 prefill attention (e4m3 Q/K/V, one fp32 scale per token and head) ------------------------------- */
/* Quantizes rows of d values (x: bf16 [rows][d], e.g. [tokens][heads][d] flattened) to e4m3 with
 * scale[row] = max|row| / 448. With signs (device, d values of +1/-1) each row is first rotated by
 * diag(signs) H / sqrt(d) (H the Sylvester Hadamard matrix): apply the same signs to Q and K, never to V. */
int assay_cuda_fp8_quant_rows(const void *x_bf16, int64_t rows, int32_t d, const int8_t *signs, uint8_t *out,
                              float *scale, assay_cuda_stream stream);

typedef struct assay_cuda_attn_prefill_fp8_args {
    const uint8_t *q, *k, *v;   /* e4m3 codes, layouts as in assay_cuda_attn_prefill_args */
    const float *q_scale;       /* [total_q][n_heads_q] */
    const float *k_scale;       /* [total_k][n_heads_kv] */
    const float *v_scale;       /* [total_k][n_heads_kv] */
    void *o;                    /* bf16 [total_q][n_heads_q][head_dim] */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    int32_t batch, max_seqlen_q, n_heads_q, n_heads_kv, head_dim;
    float scale;
    int32_t causal;
} assay_cuda_attn_prefill_fp8_args;

int assay_cuda_attn_prefill_fp8(const assay_cuda_attn_prefill_fp8_args *a, assay_cuda_stream stream);

/* Hopper FP8 attention (e4m3 wgmma, TMA, compute capability 9.0, head_dim 128). Q and K as above (codes and one
 * scale per token and head), or K with one scale per 128-key block (k_block_scale: the faster kernel, which writes P
 * as e4m3 codes without exponentials and takes its row sums from the tensor cores; its output error is level with
 * exponentials on outlier data and 1.6x theirs on flat N(0, 1) scores). K's per-token scales transposed to
 * [n_heads_kv][vt_stride] (assay_cuda_transpose_scales) and V transposed to e4m3 V^T codes [n_heads_kv][128][vt_stride]
 * with one scale per (kv head, channel) (assay_cuda_fp8_quant_vt), sequence b at columns cu_seqlens_vt[b] .. of both. */
typedef struct assay_cuda_attn_prefill_fp8_sm90_args {
    const uint8_t *q, *k, *vt;
    const float *q_scale;       /* [total_q][n_heads_q] */
    const float *k_scale_t;     /* [n_heads_kv][vt_stride] */
    const float *v_scale;       /* [n_heads_kv][128] */
    void *o;                    /* bf16 [total_q][n_heads_q][128] */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    const int32_t *cu_seqlens_vt; /* [batch+1] first V^T column of each sequence, multiples of 32 */
    int32_t batch, max_seqlen_q, n_heads_q, n_heads_kv, head_dim;
    int32_t total_q, total_k, vt_stride; /* vt_stride >= cu_seqlens_vt[batch], multiple of 32 */
    float scale;
    int32_t causal;
    const float *k_block_scale; /* NULL: K scales per token (k_scale_t). Else K codes carry one scale per (kv head,
                                   128-key tile of a sequence) (assay_cuda_fp8_quant_k_blocks), [n_heads_kv]
                                   [vt_stride / 32], the tile starting at V^T column c at index c / 32; k_scale_t
                                   is then unused */
} assay_cuda_attn_prefill_fp8_sm90_args;

int assay_cuda_attn_prefill_fp8_sm90(const assay_cuda_attn_prefill_fp8_sm90_args *a, assay_cuda_stream stream);
/* K bf16 [total_k][n_heads_kv][d] -> e4m3 codes [total_k][n_heads_kv][d], rotated like assay_cuda_fp8_quant_rows
 * when signs is not NULL, with one scale per (kv head, 128-key block of a sequence) = block amax / 448:
 * block i of sequence b -> block_scale[hk * (vt_stride / 32) + (cu_seqlens_vt[b] + 128 i) / 32] (the layout
 * assay_cuda_attn_prefill_fp8_sm90 reads as k_block_scale). d = 128. */
int assay_cuda_fp8_quant_k_blocks(const void *k_bf16, const int32_t *cu_seqlens_k, const int32_t *cu_seqlens_vt,
                                  int32_t batch, int32_t max_seqlen_k, int32_t n_heads_kv, int32_t d,
                                  const int8_t *signs, uint8_t *out, float *block_scale, int32_t vt_stride,
                                  assay_cuda_stream stream);
/* V bf16 [total_k][n_heads_kv][d] -> vt e4m3 [n_heads_kv][d][vt_stride], sequence b's tokens at columns
 * cu_seqlens_vt[b] .. (each 32-key block in the attention kernel's fragment order; other columns zero), and
 * v_scale[n_heads_kv][d] = max over tokens |v| / 448. d = 128; amax_ws: n_heads_kv * d words of workspace. */
int assay_cuda_fp8_quant_vt(const void *v_bf16, const int32_t *cu_seqlens_k, const int32_t *cu_seqlens_vt,
                            int32_t batch, int32_t max_seqlen_k, int32_t total_k, int32_t n_heads_kv, int32_t d,
                            uint8_t *vt, int32_t vt_stride, float *v_scale, unsigned int *amax_ws,
                            assay_cuda_stream stream);
/* s [tokens][heads] -> st [heads][st_stride], sequence b's tokens at columns cu_seqlens_st[b] .. (others zero). */
int assay_cuda_transpose_scales(const float *s, const int32_t *cu_seqlens, const int32_t *cu_seqlens_st,
                                int32_t batch, int32_t max_seqlen, int32_t heads, float *st, int32_t st_stride,
                                assay_cuda_stream stream);

/* ---- paged decode attention (split-KV + combine) -------------------------------------------------------- */
typedef struct assay_cuda_attn_decode_args {
    const void *q;              /* bf16 [batch][n_heads_q][head_dim] */
    const void *k_pages;        /* kv_dtype, layout in the header comment */
    const void *v_pages;
    void *o;                    /* bf16 [batch][n_heads_q][head_dim] */
    const int32_t *block_table; /* [batch][max_pages_per_seq] */
    const int32_t *seq_lens;    /* [batch] tokens in the cache for each sequence (>= 0) */
    const float *k_scale;       /* [n_heads_kv] for quantized caches; NULL = 1 */
    const float *v_scale;
    int32_t batch, n_heads_q, n_heads_kv, head_dim; /* head_dim 64 or 128; n_heads_q / n_heads_kv <= 16 */
    int32_t page_size;          /* 16, 32, 64 or 128 */
    int32_t max_pages_per_seq;
    int32_t max_seq_len;        /* upper bound of seq_lens, sizes the split */
    float scale;
    assay_cuda_dtype kv_dtype;
    int32_t num_splits;         /* 0 = choose from the machine's SM count */
    void *workspace;            /* partial outputs of the splits */
    size_t workspace_bytes;
} assay_cuda_attn_decode_args;

/* Bytes of workspace the call needs (chooses num_splits when it is 0 and writes it back to a). */
size_t assay_cuda_attn_decode_workspace(assay_cuda_attn_decode_args *a);
int assay_cuda_attn_decode(const assay_cuda_attn_decode_args *a, assay_cuda_stream stream);

/* ---- decode GEMMs (M <= 16) ------------------------------------------------------------------------------ */
/* On compute capability 9.0 the packed FP8 and the INT4 GEMMs launch with programmatic dependent launch: they may
 * start while the kernel launched just before them in the stream is still running and fetch their first weights
 * (and scales) then; they read X and write Y only after that kernel has completed. So the weights and scales
 * must not be written by the kernel launched immediately before the GEMM in the same stream (copies and any
 * earlier kernel are fine). */
/* FP8 E4M3 weights [N][K] with one fp32 scale per output channel n. K % 64 == 0, N % 64 == 0. */
int assay_cuda_gemm_fp8w(const void *x_bf16, const uint8_t *w_e4m3, const float *w_scale, void *y_bf16,
                         int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);

/* The same product with the weights re-packed by assay_cuda_fp8w_pack (faster: each CTA streams contiguous
 * memory). K % 256 == 0, N % 128 == 0, compute capability 9.0 (Hopper). */
int assay_cuda_gemm_fp8w_packed(const void *x_bf16, const uint8_t *w_packed, const float *w_scale, void *y_bf16,
                                int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);

/* Host-side re-packing of FP8 weights w[n][k] (row-major codes) into 512-byte lane-order blocks, 128 rows x 64
 * columns per 16 blocks (layout in cuda_pack.c). out has n*k bytes. */
void assay_cuda_fp8w_pack(const uint8_t *w, int32_t n, int32_t k, uint8_t *out);

/* FP8 W8A8 (the operation of cuBLASLt FP8 with per-token x per-channel scales): e4m3 activations x[m][k] with
 * one fp32 scale per token (x_scale[m], e.g. from assay_cuda_quant_fp8_per_token) and e4m3 weights packed by
 * the packing assay_cuda_gemm_fp8_w8a8_layout(n) names (it depends on n and the device's SM count), with one fp32
 * scale per output channel (w_scale[n]):
 *   y[i][j] = bf16(x_scale[i] * w_scale[j] * sum_k X[i][k] W[j][k]), fp32 accumulation.
 * The codes go into the fp8 mma as stored. 1 <= m <= 16, N % 128 == 0,
 * K % 256 == 0, compute capability 9.x; launched with programmatic dependent launch like the packed FP8 GEMM
 * above (X is read after the previous kernel completed, the weights may be read before). */
int assay_cuda_gemm_fp8_w8a8(const uint8_t *x_e4m3, const float *x_scale, const uint8_t *w_packed,
                             const float *w_scale, void *y_bf16, int32_t m, int32_t n, int32_t k,
                             assay_cuda_stream stream);
/* The weight packing assay_cuda_gemm_fp8_w8a8 reads on the current device at n output channels: 1 =
 * assay_cuda_fp8w_pack_sw128 (n / 128 tiles fit one wave: the wgmma kernel), 0 = assay_cuda_fp8w_pack (more). */
int assay_cuda_gemm_fp8_w8a8_layout(int32_t n);
/* Host packing for the W8A8 wgmma kernel: per 128-row tile and 256-column stage, the 128-byte-swizzled K-major
 * shared-memory image of wgmma's A operand (layout in cuda_pack.c). n % 128 == 0, k % 256 == 0; out has n*k bytes. */
void assay_cuda_fp8w_pack_sw128(const uint8_t *w, int32_t n, int32_t k, uint8_t *out);

/* INT4 weights, symmetric (q - 8) * scale, groups of 128 along K, packed by assay_cuda_int4_pack.
 * Scales fp16 [K/128][N]. K % 128 == 0, N % 64 == 0. */
int assay_cuda_gemm_int4g128(const void *x_bf16, const uint8_t *w_packed, const uint16_t *scales_f16,
                             void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
/* The same product on f16 activations (for an engine that keeps its INT4 layers' inputs in f16): the weights
 * dequantize to f16, which takes 9 instead of 11 instructions per 8 weights (an f16 mantissa holds two nibbles,
 * a bf16 one only one). Same packing, scales, shapes and output as assay_cuda_gemm_int4g128. The fast kernel needs
 * N % 128 == 0, K % 256 == 0 and compute capability 9.x (launched with programmatic dependent launch like the bf16
 * entry); other shapes and devices (sm_80 and up) take a direct kernel that scales the weights in f16. */
int assay_cuda_gemm_int4g128_xf16(const void *x_f16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                  void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);

/* Host-side packing of 4-bit weights q[n][k] (values 0..15, one per byte) into the layout the INT4 kernel
 * streams with one 16-byte load per lane: for each 8-row tile and 128-column group, 512 bytes in which
 * lane (g, t) finds row g's values for the mma fragments of all 8 k16 steps. out has n*k/2 bytes. */
void assay_cuda_int4_pack(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);

/* Per-token FP8 E4M3 quantization of bf16 activations x[m][k]: scale[m] = max|x| / 448, out = x / scale. */
int assay_cuda_quant_fp8_per_token(const void *x_bf16, uint8_t *out_e4m3, float *scale, int32_t m, int32_t k,
                                   assay_cuda_stream stream);

/* FP8 E4M3 quantization of bf16 activations x[m][k] in 1x128 groups (per token, per 128 channels):
 * scale[(c / 128) * m + t] = max |x[t][group]| / 448 (token index fastest, the layout ASSAY_CUDA_FP8_BLOCK_128
 * reads), out = x / scale. k % 128 == 0. */
int assay_cuda_quant_fp8_groups128(const void *x_bf16, uint8_t *out_e4m3, float *scale, int32_t m, int32_t k,
                                   assay_cuda_stream stream);

/* ---- large GEMMs through cuBLASLt (prefill and batched shapes) ----------------------------------------------
 * Y[m][n] = sum_k X[m][k] W[n][k] with X, W, Y row-major (W as stored: [out][in]) and bf16 output. A handle holds
 * the cuBLASLt context, a 32 MiB workspace and a cache of plans (descriptors + chosen algorithm) per shape.
 *
 *   assay_cuda_blas *blas; assay_cuda_blas_open(&blas);
 *   assay_cuda_blas_gemm_fp8(blas, x8, x_scale, w8, w_scale, ASSAY_CUDA_FP8_PER_TOKEN_CHANNEL, y, m, n, k, stream);
 *   assay_cuda_blas_close(blas);
 */
typedef struct assay_cuda_blas assay_cuda_blas;
int assay_cuda_blas_open(assay_cuda_blas **out);
void assay_cuda_blas_close(assay_cuda_blas *b);

/* bf16 x bf16 -> bf16 with fp32 accumulation. k and n multiples of 8. */
int assay_cuda_blas_gemm_bf16(assay_cuda_blas *b, const void *x_bf16, const void *w_bf16, void *y_bf16, int32_t m,
                              int32_t n, int32_t k, assay_cuda_stream stream);

/* How FP8 codes are scaled: value = code * scale. All scales are fp32 device arrays. */
typedef enum assay_cuda_fp8_scaling {
    ASSAY_CUDA_FP8_PER_TENSOR = 0,    /* x_scale[1], w_scale[1] */
    ASSAY_CUDA_FP8_PER_TOKEN_CHANNEL, /* x_scale[m] per token, w_scale[n] per output channel */
    ASSAY_CUDA_FP8_BLOCK_128,         /* x_scale[k/128][m] (1x128 groups, token index fastest),
                                         w_scale[n/128][stride] (128x128 blocks), stride =
                                         assay_cuda_blas_block_scale_stride(k) (k/128 rounded up to 4 floats:
                                         cuBLASLt reads 16-byte aligned scale rows); k, n multiples of 128, m of 4 */
    ASSAY_CUDA_FP8_SCALING_COUNT
} assay_cuda_fp8_scaling;

/* Row stride (floats) of the 128x128 weight-block scales for ASSAY_CUDA_FP8_BLOCK_128. */
int32_t assay_cuda_blas_block_scale_stride(int32_t k);

/* FP8 E4M3 x E4M3 -> bf16, fp32 accumulation. k and n multiples of 16. Needs compute capability 8.9 or 9.0
 * (Hopper); the vector and block scalings need a cuBLASLt that has those scale modes (checked with CUDA 13.0). */
int assay_cuda_blas_gemm_fp8(assay_cuda_blas *b, const uint8_t *x_e4m3, const float *x_scale, const uint8_t *w_e4m3,
                             const float *w_scale, assay_cuda_fp8_scaling scaling, void *y_bf16, int32_t m, int32_t n,
                             int32_t k, assay_cuda_stream stream);

/* Number of multiprocessors of the current device (0 on error). */
int assay_cuda_sm_count(void);

#ifdef __cplusplus
}
#endif
#endif
