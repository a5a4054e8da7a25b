/* cpu_kernels.h — the CPU backend's per-type kernel table and the kernels shared by scalar and AVX2 builds.
 *
 * A weight row is multiplied with an activation row that was first converted to the weight type's
 * `vec_dot_type`: F32 for float weights, Q8_0/Q8_1 blocks for the legacy quants, Q8_K super-blocks for the
 * k-quants (the llama.cpp scheme: integer dot products, one float multiply per block). With AVX512_BF16 (the
 * avx512bf16 table) bf16 weights meet activations rounded to bf16 (vec_dot_type BF16), as in llama.cpp.
 * The packed group-int4 types of GPTQ / AWQ checkpoints (Q4G32/64/128) meet f32 activations: those checkpoints are
 * W4A16 (the GPU kernels that run them, Marlin / ExLlama / AWQ GEMM, keep activations in 16-bit float), so the CPU
 * decodes the nibbles in registers and multiplies in f32; the result differs from the f32-dequantized weight's only
 * by float summation order.
 */
#ifndef ASSAY_CPU_KERNELS_H
#define ASSAY_CPU_KERNELS_H

#include <stdint.h>

#include "assay/weight_type.h"
#include "quant/quant_blocks.h"

typedef void (*assay_cpu_from_float_fn)(const float *x, void *dst, int64_t n);
/* *s = dot(weight row w, converted activation row x), n elements. */
typedef void (*assay_cpu_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);

/* s[j] = dot(w, activation row j) for j < 4, rows x_stride bytes apart: one weight row decoded once for four
 * tokens (prefill). */
typedef void (*assay_cpu_vec_dot4_fn)(int64_t n, float *s, const void *w, const void *x, size_t x_stride);

/* s[4*r + j] = dot(weight row r, activation row j) for r < 2, j < 4: two weight rows (w_stride bytes apart) share
 * every activation load, so float-weight prefill does 8 FMAs per 6 loads instead of 4 per 5. */
typedef void (*assay_cpu_vec_dot2x4_fn)(int64_t n, float *s, const void *w, size_t w_stride, const void *x,
                                        size_t x_stride);

/* Tiled matrix multiply over a slab of weight rows and any number of tokens (prefill and decode):
 * y[t * y_stride + r] = dot(weight row r, activation row t) for r < n_rows, t < n_tok; weight rows w_stride bytes
 * apart; activation rows x_stride bytes apart, in the gemm's own format (gemm_pack; f32 rows when gemm_pack is NULL);
 * scratch: gemm_scratch_bytes(n) bytes (none when NULL) owned by the calling thread. */
typedef void (*assay_cpu_gemm_fn)(int64_t n, int64_t n_rows, int64_t n_tok, const void *w, size_t w_stride,
                                  const void *x, size_t x_stride, float *y, int64_t y_stride, void *scratch);

/* Attention, one KV block of 16 keys (kT: key j's element d at kT[d * 16 + j]; v: 16 rows of hd) against n_rows query
 * rows (q, hd apart; the GQA heads of one token) that may see keys [a, b) of the block: online-softmax update of each
 * row's running max m, running sum l and unnormalized output acc (hd floats per row). hd is a multiple of 16. */
typedef void (*assay_cpu_attn_block_fn)(int64_t hd, int64_t n_rows, const float *q, const float *kT, const float *v,
                                        int a, int b, float scale, float softcap, float *m, float *l, float *acc);

typedef struct assay_cpu_type_kernels {
    assay_type vec_dot_type;        /* ASSAY_TYPE_F32, _BF16, _Q8_0, _Q8_1 or _Q8_K */
    assay_cpu_vec_dot_fn vec_dot;   /* NULL: no kernel for this weight type */
    assay_cpu_vec_dot4_fn vec_dot4; /* optional */
    assay_cpu_vec_dot2x4_fn vec_dot2x4; /* optional */
    assay_cpu_gemm_fn gemm;             /* optional: used for every matmul when present */
    assay_cpu_from_float_fn gemm_pack;  /* activation row -> the gemm's format; NULL: f32 rows */
    size_t (*gemm_act_bytes)(int64_t n);     /* bytes of one packed activation row (with gemm_pack) */
    size_t (*gemm_scratch_bytes)(int64_t n); /* per-thread scratch; NULL: none */
    /* optional, with gemm_pack: after every row is packed, gemm_act_finish(xa, xs, n, n_tok) may write a second
     * layout of the whole batch, gemm_act_extra(n, n_tok) bytes, into the buffer right after the rows (at xa + n_tok *
     * xs, 64-byte aligned), where the gemm finds it (tile layouts that interleave tokens) */
    size_t (*gemm_act_extra)(int64_t n, int64_t n_tok);
    void (*gemm_act_finish)(void *xa, size_t xs, int64_t n, int64_t n_tok);
} assay_cpu_type_kernels;

typedef struct assay_cpu_kernels {
    const char *name;
    assay_cpu_type_kernels type[ASSAY_TYPE_COUNT]; /* ggml's types and assay's packed ones (Q4G*) */
    assay_cpu_from_float_fn from_float[ASSAY_TYPE_GGML_COUNT]; /* activation quantizers, by vec_dot_type */
    float (*dot_f32)(int64_t n, const float *a, const float *b);
    /* y[i] += a * x[i] */
    void (*axpy_f32)(int64_t n, float *y, float a, const float *x);
    /* kv element rows <-> float */
    void (*f16_to_f32)(const uint16_t *x, float *y, int64_t n);
    void (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);
    assay_cpu_attn_block_fn attn_block16; /* optional: tiled attention (cpu_backend.c) */
    /* Optional element-wise ops over rows (NULL: cpu_backend.c's C loops), the backend ops of the same names with the
     * same arithmetic (see test_backend_ops.c for the bounds): */
    void (*rmsnorm)(float *y, const float *x, const float *gamma, int64_t n, int64_t n_rows, float eps);
    void (*swiglu)(float *out, const float *gate, const float *up, int64_t n, int64_t n_rows, int64_t stride);
    void (*softmax)(float *x, int64_t n, int64_t n_rows, float softcap);
    void (*add)(float *y, const float *a, const float *b, int64_t n);
    /* rope of rows [0, n_tok): n_rot dims of each head, pairs (2i, 2i+1) (neox = 0) or (i, i + n_rot/2) (neox = 1) */
    void (*rope)(float *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride, const int32_t *pos,
                 int neox, int64_t n_rot, const float *inv_freq);
} assay_cpu_kernels;

const assay_cpu_kernels *assay_cpu_kernels_ref(void);
const assay_cpu_kernels *assay_cpu_kernels_avx2(void); /* NULL when not compiled in */
int assay_cpu_has_avx2(void);                          /* AVX2 + FMA + F16C, by cpuid and OS support */
/* AVX2 table plus AVX-512 (F/BW/VL/DQ) + VNNI tiled gemms; NULL when not compiled in. */
const assay_cpu_kernels *assay_cpu_kernels_avx512(void);
int assay_cpu_has_avx512(void); /* AVX-512 F/BW/VL/DQ + VNNI, by cpuid and OS support (zmm/opmask state) */
/* The AVX-512 table plus bf16 weights x bf16-rounded activations (VDPBF16PS); NULL when not compiled in. */
const assay_cpu_kernels *assay_cpu_kernels_avx512bf16(void);
int assay_cpu_has_avx512bf16(void); /* assay_cpu_has_avx512 and AVX512_BF16 */
/* The avx512bf16 table plus AMX int8 tiles for the prefill of the legacy quants; NULL when not compiled in. */
const assay_cpu_kernels *assay_cpu_kernels_amx(void);
/* assay_cpu_has_avx512bf16, AMX-TILE and AMX-INT8 with the OS saving tile state, and (Linux) the process granted the
 * tile data state (asked for once, on the first call). */
int assay_cpu_has_amx(void);

/* Decode prefetch: a tile of rm weight rows (ws bytes apart, consecutive) prefetches the same columns of the rows a
 * few tiles on, returned as a byte offset: whole tiles, as many as fit in 8 KiB, 1 to 4. Short rows are short
 * streams that the hardware prefetcher does not catch up with; long rows it does. */
static inline size_t assay_cpu_prefetch_ahead(int rm, size_t ws) {
    size_t tile = (size_t)rm * ws, k = tile ? 8192 / tile : 1;
    return (k < 1 ? 1 : k > 4 ? 4 : k) * tile;
}

/* Activation quantizers (reference; the AVX2 table may use its own). */
void assay_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n);
void assay_quantize_row_q8_1_ref(const float *x, void *dst, int64_t n);
void assay_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n);

#endif
