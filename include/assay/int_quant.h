/* int_quant.h — integer weight quantization for the safetensors ecosystems: INT4 RTN / GPTQ / AWQ and
 * W8A8 INT8 SmoothQuant, plus the packers for the GPTQ and AWQ (GEMM) checkpoint layouts.
 *
 *   // one linear layer, W row-major [n_out][n_in] (HF layout; ggml ne = {n_in, n_out})
 *   assay_int4_params p = assay_int4_params_default();     // 4 bits, group 128, asymmetric
 *   assay_int4_result r;
 *   assay_int4_rtn(W, n_out, n_in, &p, &r);                        // or:
 *   assay_int4_gptq(W, n_out, n_in, H, &p, &r);                    // H = Σ x xᵀ over calibration tokens [n_in][n_in]
 *   assay_int4_dequantize(&r, W_hat);                              // what the packed file will give back
 *   int32_t *qw = ...; assay_int4_pack_gptq(&r, qw, qz, sc);       // [n_in/8][n_out], [n_groups][n_out/8], fp16 [n_groups][n_out]
 *   assay_int4_result_free(&r);
 *
 * Conventions (matching the reference implementations, see ../shared/research/quant.md §0-§3):
 *  - asymmetric: scale = (max − min)/15 with the range widened to include 0 (GPTQ) and zero = round(−min/scale);
 *    symmetric (GPTQ's "sym"): scale = 2·amax/15, zero = 8. Rounding is half to even (torch.round).
 *  - scales are rounded to fp16 before the codes are chosen, so the packed file dequantizes to exactly
 *    assay_int4_dequantize's values.
 *  - groups run along the input dimension; with act-order (desc_act) a group is 128 consecutive columns of the
 *    permuted order and g_idx[i] names the group of input column i.
 */
#ifndef ASSAY_INT_QUANT_H
#define ASSAY_INT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"

typedef struct assay_int4_params {
    int bits;          /* 4 (2..8 work for RTN/GPTQ; the packers need 4) */
    int64_t group_size;/* 128 default; -1 = one group per row */
    int sym;           /* GPTQ symmetric grid (zero = 8) */
    int act_order;     /* GPTQ desc_act: columns in order of decreasing Hessian diagonal */
    double damp;       /* GPTQ dampening, fraction of the mean Hessian diagonal (0.01) */
    int64_t block;     /* GPTQ lazy-batch width (128) */
    int mse;           /* GPTQ group parameters by gptq's quantizer mse search (shrunk ranges, |err|^2.4) */
    int awq_range;     /* RTN with AWQ's quantizer (pseudo_quantize_tensor): the group's min/max as they are, not
                          widened to contain 0, scale >= 1e-5; the ranges AWQ's clipping search assumed */
    int awq_clip_two_sided; /* AWQ clipping: shrink the group's low and high ends independently (0: AutoAWQ's
                          symmetric [−m, m]) */
} assay_int4_params;

assay_int4_params assay_int4_params_default(void);

typedef struct assay_int4_result {
    int64_t n_out, n_in, n_groups, group_size;
    int bits;
    uint8_t *q;       /* [n_out][n_in] codes 0..2^bits-1 */
    float *scales;    /* [n_out][n_groups], fp16-representable */
    int32_t *zeros;   /* [n_out][n_groups] */
    int32_t *g_idx;   /* [n_in] group of each input column */
    int act_order;
} assay_int4_result;

void assay_int4_result_free(assay_int4_result *r);
/* W_hat[o][i] = scales[o][g] · (q[o][i] − zeros[o][g]), g = g_idx[i]. */
void assay_int4_dequantize(const assay_int4_result *r, float *w_hat);

/* Round to nearest per group (no calibration); p->awq_range picks AWQ's range rule. Errors: n_in not a multiple
 * of the group size. */
assay_status assay_int4_rtn(const float *w, int64_t n_out, int64_t n_in, const assay_int4_params *p,
                            assay_int4_result *out);

/* GPTQ (Frantar et al.): H is the [n_in][n_in] input Gram matrix (any positive scale; it is copied). Dead inputs
 * (H_ii = 0) are zeroed; dampening p->damp · mean(diag H) is added, raised by 0.0025 steps if Cholesky fails. */
assay_status assay_int4_gptq(const float *w, int64_t n_out, int64_t n_in, const double *h, const assay_int4_params *p,
                             assay_int4_result *out);

/* Accumulates H += Σ_t x_t x_tᵀ for n_tok rows of x [n_tok][n_in] (upper and lower triangle). */
void assay_gram_accumulate(double *h, const float *x, int64_t n_tok, int64_t n_in);

/* ---- AWQ ------------------------------------------------------------------------------------------------ */
/* Per-input-channel scale search for linears that share one input (q/k/v, or gate/up, or one alone):
 * s = mean|x|^α normalised by sqrt(max·min), α on a grid of n_grid points in [0, 1) (AWQ: 20), scoring
 * Σ_linears ‖X Wᵀ − X (Q(W·s)/s)ᵀ‖² on the calibration rows x [n_tok][n_in]. Writes the best s [n_in] and
 * returns the chosen α in *alpha (may be NULL). The caller multiplies each W's columns by s and divides the
 * producer of x (RMSNorm weight, or the previous linear's output rows) by s. */
assay_status assay_awq_search_scale(const float *x, int64_t n_tok, int64_t n_in, const float *const *w,
                                    const int64_t *n_out, int n_lin, const assay_int4_params *p, int n_grid,
                                    float *s, float *alpha);
/* Mean |x| per input channel over n_tok rows (AWQ's activation statistic). */
void assay_awq_absmean(const float *x, int64_t n_tok, int64_t n_in, float *out);
/* The same search with the loss computed by the caller: loss(ctx, w_q) gets every linear's candidate weights
 * w_q[k] = Q(W_k·s)/s ([n_out[k]][n_in]) and returns the error of the output the caller inspects against the
 * unquantized one (AutoAWQ scores the whole attention or MLP block: module2inspect). x_absmean is mean |x| per
 * channel over all calibration tokens. duo != 0: AutoAWQ's duo scaling, s = x_absmean^α / (w_mean^(1−α) + 1e-4)
 * with w_mean[c] the mean over the linears' rows of |W[r,c]| / (max |W| of that row's group of c), at
 * α = i / n_grid (AutoAWQ's grid); duo == 2: llm-compressor's grid, the identity (s = 1, *alpha = -1 when it
 * wins) and then duo scaling at α = i / (n_grid − 2), i = 0 .. n_grid − 2. */
typedef double (*assay_awq_loss_fn)(void *ctx, const float *const *w_q);
assay_status assay_awq_search_scale_fn(const float *x_absmean, int64_t n_in, const float *const *w,
                                       const int64_t *n_out, int n_lin, const assay_int4_params *p, int n_grid, int duo,
                                       assay_awq_loss_fn loss, void *ctx, float *s, float *alpha);
/* AWQ clipping: per output row and group, the clamp range that minimises the group's output error on the rows x
 * (already divided by s); W (already multiplied by s) is clamped in place. Candidates: AutoAWQ's [−m, m] with
 * m = max |w| · (1 − i/20), i = 0..9; with p->awq_clip_two_sided, [min · (1 − b/20), max · (1 − a/20)] for
 * a, b = 0..9 (asymmetric groups get their own ends). */
void assay_awq_clip(float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok, const assay_int4_params *p);

/* ---- packing (4 bits) ------------------------------------------------------------------------------------ */
/* GPTQ checkpoint (AutoGPTQ "gptq" format, read by transformers and vLLM):
 *   qweight int32 [n_in/8][n_out]   : word (i, o) holds input rows 8i..8i+7 of column o, row 8i+k at bits 4k;
 *   qzeros  int32 [n_groups][n_out/8]: zero − 1 of outputs 8j..8j+7, output 8j+k at bits 4k;
 *   scales  fp16  [n_groups][n_out]; g_idx int32 [n_in] (r->g_idx). */
void assay_int4_pack_gptq(const assay_int4_result *r, int32_t *qweight, int32_t *qzeros, uint16_t *scales);
/* AWQ GEMM checkpoint (AutoAWQ version "gemm"):
 *   qweight int32 [n_in][n_out/8]   : outputs 8j..8j+7 interleaved, nibble k (bits 4k) holds output 8j+order[k],
 *                                     order = {0, 2, 4, 6, 1, 3, 5, 7};
 *   qzeros  int32 [n_groups][n_out/8]: zeros (no offset), same interleaving; scales fp16 [n_groups][n_out].
 * Needs r without act-order. */
void assay_int4_pack_awq(const assay_int4_result *r, int32_t *qweight, int32_t *qzeros, uint16_t *scales);

/* Readers of the two layouts (inverse of the packers), as transformers / vLLM dequantize them:
 * w[o][i] = scales[g][o] · (q − zero) in f32, w row-major [n_out][n_in]; scales already widened to f32.
 * GPTQ: g = g_idx[i] (each < the number of groups: the caller checks), zero = stored nibble + zero_offset (1 for
 * the "gptq" v1 format this library writes, 0 for "gptq_v2"). AWQ GEMM: g = i / group_size, zero = the nibble. */
void assay_int4_unpack_gptq(const void *qweight, const void *qzeros, const float *scales, const int32_t *g_idx,
                            int64_t n_in, int64_t n_out, int zero_offset, float *w);
void assay_int4_unpack_awq(const void *qweight, const void *qzeros, const float *scales, int64_t n_in, int64_t n_out,
                           int64_t group_size, float *w);

/* ---- INT8 W8A8 (SmoothQuant) ------------------------------------------------------------------------------ */
/* s_j = max|X_j|^α / max|W_j|^(1−α), max|W_j| over every consumer of the input; clamped >= 1e-5. */
void assay_smoothquant_scales(const float *act_absmax, int64_t n_in, const float *const *w, const int64_t *n_out,
                              int n_lin, float alpha, float *s);
/* Per-output-channel symmetric int8: scale = amax/127, q = clamp(round(w/scale), −127, 127). */
void assay_int8_quantize_rows(const float *w, int64_t n_out, int64_t n_in, int8_t *q, float *scales);
/* Per-token dynamic activation quantization as the W8A8 kernels do it (same rule, one scale per row of x). */
void assay_int8_quantize_token(const float *x, int64_t n, int8_t *q, float *scale);

#endif
