/* quant_fp8.h — FP8 (E4M3 / E5M2) quantization of weights and activations, and an exact CPU emulation of the
 * scaled FP8 GEMM that Hopper runs (CUTLASS / DeepGEMM: FP8 x FP8 products, f32 accumulation, scales applied
 * to the f32 result).
 *
 *   // weights: w is [rows = out_features][cols = in_features], row-major (ggml ne = {cols, rows})
 *   assay_fp8_quantize_weight(ASSAY_FP8_E4M3, ASSAY_FP8_GRAN_CHANNEL, w, rows, cols, q, scales);
 *   // activations: x is [tokens][dim]
 *   assay_fp8_quantize_act_token(ASSAY_FP8_E4M3, x, tokens, dim, xq, xs);
 *   assay_fp8_gemm(&a, &b, y);    // y[t][r] = sum_k xq*q with the scales of a and b
 *
 * Scale conventions (what vLLM and compressed-tensors expect; all scales are dequantization multipliers,
 * x ~= code * scale, and stored as f32 here):
 *   - weights, every granularity: scale = max(amax / FP8_MAX, FLT_EPSILON) (compressed-tensors' observer),
 *     then rounded to bf16 when `bf16_scales` is set (compressed-tensors stores scales in the model's dtype),
 *     and the codes are computed from that rounded scale: code = sat(RNE(w / scale)) in f32. compressed-tensors
 *     divides in bf16 (a second rounding); we divide in f32 and round once, so a few codes can differ by one.
 *     Granularities: per tensor (1 scale), per channel (one per output row), per block (bm x bn tiles,
 *     ceil(rows/bm) x ceil(cols/bn) scales, row-major; edge tiles are partial).
 *   - dynamic per-token activations (vLLM's dynamic_per_token_scaled_fp8_quant): scale =
 *     max(amax_row / FP8_MAX, 1 / (FP8_MAX * 512)); code = sat(RNE(x * (1 / scale))) — the kernel multiplies by
 *     the f32 reciprocal, and so do we, to get the GPU's codes bit for bit.
 *   - dynamic 1 x G group activations (vLLM's per_token_group_quant_fp8, DeepSeek-style): scale =
 *     max(amax_group, 1e-10) / FP8_MAX; code = sat(RNE(x / scale)) (that kernel divides).
 *   - static per-tensor activations: the scale is fixed from calibration, scale = max(amax_calib / FP8_MAX,
 *     FLT_EPSILON); code = sat(RNE(x * (1 / scale))) (vLLM's static scaled_fp8_quant multiplies by the
 *     reciprocal too).
 * "sat" is the saturating conversion of dtype.h (values past ±FP8_MAX become ±FP8_MAX, as after vLLM's clamp).
 */
#ifndef ASSAY_QUANT_FP8_H
#define ASSAY_QUANT_FP8_H

#include <stdint.h>

typedef enum assay_fp8_format { ASSAY_FP8_E4M3 = 0, ASSAY_FP8_E5M2 = 1 } assay_fp8_format;

typedef enum assay_fp8_granularity {
    ASSAY_FP8_GRAN_TENSOR = 0,  /* one scale */
    ASSAY_FP8_GRAN_CHANNEL = 1, /* one scale per row (output channel for weights, token for activations) */
    ASSAY_FP8_GRAN_BLOCK = 2,   /* weights: bm x bn tiles; activations: 1 x bn groups */
} assay_fp8_granularity;

#define ASSAY_FP8_MIN_TOKEN_SCALE (1.0f / (448.0f * 512.0f)) /* vLLM's per-token lower clamp (E4M3) */

float assay_fp8_max(assay_fp8_format f);
uint8_t assay_fp8_encode(assay_fp8_format f, float x);
float assay_fp8_decode(assay_fp8_format f, uint8_t q);

/* Weight scale from an absolute maximum, rounded to bf16 when `bf16_scale`: see the conventions above. */
float assay_fp8_weight_scale(assay_fp8_format f, float amax, int bf16_scale);

/* Quantizes w [rows][cols] to codes q (same layout). `scales` receives 1, rows, or ceil(rows/bm)*ceil(cols/bn)
 * f32 scales (row-major over tiles). bm/bn are used only for ASSAY_FP8_GRAN_BLOCK. */
void assay_fp8_quantize_weight(assay_fp8_format f, assay_fp8_granularity g, int64_t bm, int64_t bn, int bf16_scales,
                               const float *w, int64_t rows, int64_t cols, uint8_t *q, float *scales);
/* Number of scales assay_fp8_quantize_weight writes. */
int64_t assay_fp8_weight_scale_count(assay_fp8_granularity g, int64_t bm, int64_t bn, int64_t rows, int64_t cols);
/* w ~= decode(q) * scale, for any granularity. */
void assay_fp8_dequantize_weight(assay_fp8_format f, assay_fp8_granularity g, int64_t bm, int64_t bn,
                                 const uint8_t *q, const float *scales, int64_t rows, int64_t cols, float *w);

/* Activations x [tokens][dim]. */
void assay_fp8_quantize_act_token(assay_fp8_format f, const float *x, int64_t tokens, int64_t dim, uint8_t *q,
                                  float *scales /* [tokens] */);
void assay_fp8_quantize_act_group(assay_fp8_format f, const float *x, int64_t tokens, int64_t dim, int64_t group,
                                  uint8_t *q, float *scales /* [tokens][ceil(dim/group)] */);
/* Static per-tensor: `scale` from assay_fp8_act_static_scale(). */
float assay_fp8_act_static_scale(assay_fp8_format f, float calib_amax);
void assay_fp8_quantize_act_static(assay_fp8_format f, const float *x, int64_t tokens, int64_t dim, float scale,
                                   uint8_t *q);

/* An FP8 operand with its scales: rows x cols codes (row-major, K = cols innermost) and the scale layout. */
typedef struct assay_fp8_operand {
    assay_fp8_format format;
    assay_fp8_granularity gran; /* TENSOR: scales[0]; CHANNEL: scales[row]; BLOCK: tiles of bm x bn */
    int64_t bm, bn;             /* BLOCK only (activations: bm = 1) */
    int64_t rows, cols;
    const uint8_t *q;
    const float *scales;
} assay_fp8_operand;

/* y[i][j] = sum_k a(i,k) * b(j,k) with both operands dequantized by their scales, computed as the GPU does:
 * code products are exact in f32 (FP8 x FP8 needs at most 8 significant bits), summed in f32 in k order over each
 * K block (the whole row unless a scale varies along K), and each block's f32 partial sum is multiplied by
 * (scale_a * scale_b) and added to the f32 result. Requires a.cols == b.cols and, when scales vary along K
 * (BLOCK), the same bn for both. y is [a.rows][b.rows]. */
void assay_fp8_gemm(const assay_fp8_operand *a, const assay_fp8_operand *b, float *y);

#endif
