/* ggml_quantize.c — reference encoders for llama.cpp's GGUF block formats (legacy 32-element quants and k-quants).
 *
 * The byte layouts are ggml's (ggml-common.h) and the scale searches follow ggml's reference quantizers
 * step for step, in float arithmetic in the same order, so that files we write match llama-quantize's for the
 * same input; tests compare with gguf-py's quantizer (legacy types, bit for bit), gguf-py's dequantizer (all
 * types) and, when a llama.cpp library is available, llama.cpp's own encoder.
 * Three rounding rules appear on purpose (they are part of the format's reproducibility):
 *   kq_nearest: round half to even (ggml's nearest_int, used by every search),
 *   q4_0/q5_0:  (int)(x + 8.5) truncation with a clamp (round half up on the shifted value),
 *   q8_0:       roundf (half away from zero).
 */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant_blocks.h"
#include "assay/dtype.h"
#include "assay/ggml_quant.h"
#include "assay/status.h"

#define KQ_SUPER 256       /* QK_K: super-block of the k-quants */
#define KQ_EPS 1e-15f      /* a group whose max |x| is below this is all zero (ggml's GROUP_MAX_EPS) */

/* ---- block structs: the one definition in quant_blocks.h (ggml-common.h layouts, size-checked there) ---- */
typedef assay_block_q4_0 kq_block_q4_0;
typedef assay_block_q4_1 kq_block_q4_1;
typedef assay_block_q5_0 kq_block_q5_0;
typedef assay_block_q5_1 kq_block_q5_1;
typedef assay_block_q8_0 kq_block_q8_0;
typedef assay_block_q2_K kq_block_q2_k;
typedef assay_block_q3_K kq_block_q3_k;
typedef assay_block_q4_K kq_block_q4_k;
typedef assay_block_q5_K kq_block_q5_k;
typedef assay_block_q6_K kq_block_q6_k;

/* fp16 scales: round to nearest even, as ggml converts them */
#define F16(x) assay_f32_to_f16(x)
#define F32(h) assay_f16_to_f32(h)

/* Round half to even for |f| < 2^22 by adding 1.5*2^23 (the sum's low mantissa bits are the integer).
 * Out of that range (never for sane weights) fall back to nearbyintf, which rounds the same way. */
static inline int kq_nearest(float f) {
    if (!(fabsf(f) <= 4194303.f)) return (int)nearbyintf(f);
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int kq_clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* ---- scale searches ------------------------------------------------------------------------------------- */

/* Symmetric grid [-nmax, nmax-1] with weights w (NULL: w = x^2). Starts at the scale that maps the largest |x|
 * to -nmax, then tries 18 nearby inverse scales and keeps the one that maximises (Σw·x·l)²/Σw·l², i.e. the
 * least-squares scale with the smallest weighted error. L gets codes + nmax. Returns the scale. */
static float kq_search_symmetric(int n, int nmax, const float *x, int8_t *L, const float *w) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < KQ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_clampi(kq_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float wi = w ? w[i] : x[i] * x[i];
        sumlx += wi * x[i] * l;
        suml2 += wi * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        iscale = -(nmax + 0.1f * step) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = kq_clampi(kq_nearest(iscale * x[i]), -nmax, nmax - 1);
            float wi = w ? w[i] : x[i] * x[i];
            sumlx += wi * x[i] * l;
            suml2 += wi * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + kq_clampi(kq_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* q3_K without imatrix: symmetric RTN on [-nmax, nmax-1], then coordinate descent (up to 5 sweeps): each code
 * moves to the value the current least-squares scale suggests when that raises (Σw·x·l)²/Σw·l², w = x². */
static float kq_search_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < KQ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_clampi(kq_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = kq_clampi(kq_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Affine grid x ≈ scale·l − mn, l in [0, nmax], min forced ≤ 0. Tries nstep+1 inverse scales
 * (nmax + rmin + rdelta·k)/(max − min); for each, solves the weighted 2×2 least-squares problem for (scale, min)
 * and keeps the lowest weighted error (|err| when use_mad, err² otherwise). w NULL: w = x².
 * Returns scale; *neg_min gets −min (≥ 0, stored subtracted). This is ggml's make_qkx2/qkx3 search. */
static float kq_search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w ? w[0] : x[0] * x[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float wi = w ? w[i] : x[i] * x[i];
        sum_w += wi;
        sum_x += wi * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_nearest(iscale * (x[i] - min));
        L[i] = (uint8_t)kq_clampi(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float wi = w ? w[i] : x[i] * x[i];
        best += wi * diff;
    }
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * step + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = kq_clampi(kq_nearest(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float wi = w ? w[i] : x[i] * x[i];
            sum_l += wi * l;
            sum_l2 += wi * l * l;
            sum_xl += wi * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float wi = w ? w[i] : x[i] * x[i];
                err += wi * diff;
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Quantizes n non-negative values (sub-block scales or mins) to [0, nmax] with one scale, weighted by w:
 * 9 candidate scales around max/nmax, then coordinate-descent refinement. Returns the scale. */
static float kq_search_positive(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < KQ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)kq_nearest(iscale * x[i]);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best += w[i] * diff * diff;
    }
    for (int step = -4; step <= 4; step++) {
        if (step == 0) continue;
        float is_try = (0.1f * step + nmax) / max;
        float s_try = 1 / is_try;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = kq_nearest(is_try * x[i]);
            if (l > nmax) l = nmax;
            float diff = x[i] - s_try * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best) {
            best = mse;
            iscale = is_try;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_nearest(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = kq_nearest(x[i] * sl2 / slx);
                if (nl > nmax) nl = nmax;
                if (nl != L[i]) {
                    slx += w[i] * x[i] * nl;
                    sl2 += w[i] * nl * nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- packing helpers ------------------------------------------------------------------------------------- */

/* 2-bit planes (q2_K, low bits of q3_K): per 128 elements 32 bytes; byte l = elements l, l+32, l+64, l+96. */
static void kq_pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < KQ_SUPER; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* q4_K/q5_K: eight 6-bit scales and eight 6-bit mins in 12 bytes. */
static void kq_pack_scale_min(uint8_t *s, const uint8_t *ls, const uint8_t *lm) {
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

static void kq_unpack_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* q3_K: sixteen 6-bit scales (stored biased by 32) in 12 bytes. */
static void kq_pack_q3_scales(uint8_t *s, const int *l6) {
    memset(s, 0, 12);
    for (int j = 0; j < 16; j++) {
        int l = l6[j];
        if (j < 8) s[j] = (uint8_t)(l & 0xF);
        else s[j - 8] |= (uint8_t)((l & 0xF) << 4);
        s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

static int kq_unpack_q3_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Per-row σ² term of the imatrix weights: w_i = qw_i · sqrt(σ² + x_i²). */
static float kq_sum_sq(const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* ---- legacy 32-element types ------------------------------------------------------------------------------ */

static void kq_row_q4_0(const float *x, kq_block_q4_0 *y, int64_t n, const float *qw) {
    int64_t nb = n / 32;
    if (!qw) {
        for (int64_t b = 0; b < nb; b++, x += 32) {
            float amax = 0, max = 0;
            for (int j = 0; j < 32; j++)
                if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
            float d = max / -8;
            float id = d ? 1.0f / d : 0.0f;
            y[b].d = F16(d);
            for (int j = 0; j < 16; j++) {
                int a = (int8_t)(x[j] * id + 8.5f), c = (int8_t)(x[j + 16] * id + 8.5f);
                y[b].qs[j] = (uint8_t)((a < 15 ? a : 15) | ((c < 15 ? c : 15) << 4));
            }
        }
        return;
    }
    float sigma2 = kq_sum_sq(x, n) / n;
    float w[32];
    int8_t L[32];
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        for (int j = 0; j < 32; j++) w[j] = qw[32 * b + j] * sqrtf(sigma2 + xb[j] * xb[j]);
        y[b].d = F16(kq_search_symmetric(32, 8, xb, L, w));
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void kq_row_q4_1(const float *x, kq_block_q4_1 *y, int64_t n, const float *qw) {
    int64_t nb = n / 32;
    if (!qw) {
        for (int64_t b = 0; b < nb; b++, x += 32) {
            float min = FLT_MAX, max = -FLT_MAX;
            for (int j = 0; j < 32; j++) {
                if (x[j] < min) min = x[j];
                if (x[j] > max) max = x[j];
            }
            float d = (max - min) / 15;
            float id = d ? 1.0f / d : 0.0f;
            y[b].d = F16(d);
            y[b].m = F16(min);
            for (int j = 0; j < 16; j++) {
                int a = (int8_t)((x[j] - min) * id + 0.5f), c = (int8_t)((x[j + 16] - min) * id + 0.5f);
                y[b].qs[j] = (uint8_t)((a < 15 ? a : 15) | ((c < 15 ? c : 15) << 4));
            }
        }
        return;
    }
    float sigma2 = kq_sum_sq(x, n) / n;
    float w[32], neg_min;
    uint8_t L[32], Laux[32];
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        for (int j = 0; j < 32; j++) w[j] = qw[32 * b + j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = kq_search_affine(32, 15, xb, w, L, &neg_min, Laux, -0.9f, 0.05f, 36, 0);
        y[b].d = F16(d);
        y[b].m = F16(-neg_min);
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* 5-bit codes: low nibbles like q4, fifth bit of element j at bit j of qh (little-endian u32). */
static void kq_pack_q5(const uint8_t *q, uint8_t *qs, uint8_t *qh_bytes) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
        qh |= (uint32_t)((q[j] >> 4) & 1) << j;
        qh |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh_bytes[k] = (uint8_t)(qh >> (8 * k));
}

static void kq_row_q5_0(const float *x, kq_block_q5_0 *y, int64_t n, const float *qw) {
    int64_t nb = n / 32;
    uint8_t q[32];
    if (!qw) {
        for (int64_t b = 0; b < nb; b++, x += 32) {
            float amax = 0, max = 0;
            for (int j = 0; j < 32; j++)
                if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
            float d = max / -16;
            float id = d ? 1.0f / d : 0.0f;
            y[b].d = F16(d);
            for (int j = 0; j < 32; j++) {
                int a = (int8_t)(x[j] * id + 16.5f);
                q[j] = (uint8_t)(a < 31 ? a : 31);
            }
            kq_pack_q5(q, y[b].qs, y[b].qh);
        }
        return;
    }
    float sigma2 = kq_sum_sq(x, n) / n;
    float w[32];
    int8_t L[32];
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        for (int j = 0; j < 32; j++) w[j] = qw[32 * b + j] * sqrtf(sigma2 + xb[j] * xb[j]);
        y[b].d = F16(kq_search_symmetric(32, 16, xb, L, w));
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)L[j];
        kq_pack_q5(q, y[b].qs, y[b].qh);
    }
}

static void kq_row_q5_1(const float *x, kq_block_q5_1 *y, int64_t n, const float *qw) {
    int64_t nb = n / 32;
    uint8_t q[32];
    if (!qw) {
        for (int64_t b = 0; b < nb; b++, x += 32) {
            float min = FLT_MAX, max = -FLT_MAX;
            for (int j = 0; j < 32; j++) {
                if (x[j] < min) min = x[j];
                if (x[j] > max) max = x[j];
            }
            float d = (max - min) / 31;
            float id = d ? 1.0f / d : 0.0f;
            y[b].d = F16(d);
            y[b].m = F16(min);
            for (int j = 0; j < 32; j++) q[j] = (uint8_t)((x[j] - min) * id + 0.5f);
            kq_pack_q5(q, y[b].qs, y[b].qh);
        }
        return;
    }
    float sigma2 = kq_sum_sq(x, n) / n;
    float w[32], neg_min;
    uint8_t Laux[32];
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        for (int j = 0; j < 32; j++) w[j] = qw[32 * b + j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = kq_search_affine(32, 31, xb, w, q, &neg_min, Laux, -0.9f, 0.05f, 36, 0);
        y[b].d = F16(d);
        y[b].m = F16(-neg_min);
        kq_pack_q5(q, y[b].qs, y[b].qh);
    }
}

static void kq_row_q8_0(const float *x, kq_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        float d = amax / 127;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = F16(d);
        for (int j = 0; j < 32; j++) y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* ---- k-quants ------------------------------------------------------------------------------------------ */

static void kq_row_q2_k(const float *x, kq_block_q2_k *y, int64_t n, const float *qw) {
    uint8_t L[KQ_SUPER], Laux[16], Ls[16], Lm[16];
    float w[16], scales[16], mins[16], sw[16];
    for (int64_t b = 0; b < n / KQ_SUPER; b++, x += KQ_SUPER) {
        if (!qw) {
            /* ref: sub-blocks of 16 fit with |x| weights and MAD error; super scales by plain 4-bit RTN */
            float max_scale = 0, max_min = 0;
            for (int j = 0; j < 16; j++) {
                for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
                scales[j] = kq_search_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
                if (scales[j] > max_scale) max_scale = scales[j];
                if (mins[j] > max_min) max_min = mins[j];
            }
            if (max_scale > 0) {
                float is = 15.f / max_scale;
                for (int j = 0; j < 16; j++) y[b].scales[j] = (uint8_t)kq_nearest(is * scales[j]);
                y[b].d = F16(max_scale / 15.f);
            } else {
                memset(y[b].scales, 0, 16);
                y[b].d = F16(0.f);
            }
            if (max_min > 0) {
                float is = 15.f / max_min;
                for (int j = 0; j < 16; j++) y[b].scales[j] |= (uint8_t)(kq_nearest(is * mins[j]) << 4);
                y[b].dmin = F16(max_min / 15.f);
            } else {
                y[b].dmin = F16(0.f);
            }
        } else {
            float sigma2 = kq_sum_sq(x, KQ_SUPER) / KQ_SUPER;
            for (int j = 0; j < 16; j++) {
                const float *q = qw + b * KQ_SUPER + 16 * j;
                sw[j] = 0;
                for (int l = 0; l < 16; l++) w[l] = q[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
                for (int l = 0; l < 16; l++) sw[j] += w[l];
                scales[j] = kq_search_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, 0);
            }
            float dm = kq_search_positive(16, 15, scales, Ls, sw);
            float mm = kq_search_positive(16, 15, mins, Lm, sw);
            y[b].d = F16(dm);
            y[b].dmin = F16(mm);
            for (int j = 0; j < 16; j++) y[b].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        }
        /* re-quantize every element with the scales as stored */
        float dd = F32(y[b].d), dmn = F32(y[b].dmin);
        for (int j = 0; j < 16; j++) {
            float d = dd * (y[b].scales[j] & 0xF);
            if (!d) continue;
            float m = dmn * (y[b].scales[j] >> 4);
            for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)kq_clampi(kq_nearest((x[16 * j + i] + m) / d), 0, 3);
        }
        kq_pack_2bit(L, y[b].qs);
    }
}

static void kq_row_q3_k(const float *x, kq_block_q3_k *y, int64_t n, const float *qw) {
    int8_t L[KQ_SUPER], Ls[16];
    float scales[16], w[16], sw[16];
    int l6[16];
    for (int64_t b = 0; b < n / KQ_SUPER; b++, x += KQ_SUPER) {
        if (!qw) {
            float max_scale = 0, amax = 0;
            for (int j = 0; j < 16; j++) {
                scales[j] = kq_search_q3(16, 4, x + 16 * j, L + 16 * j);
                if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
            }
            if (max_scale) {
                float is = -32.f / max_scale;
                for (int j = 0; j < 16; j++) {
                    int8_t l = (int8_t)kq_nearest(is * scales[j]);
                    l6[j] = kq_clampi(l, -32, 31) + 32;
                }
                kq_pack_q3_scales(y[b].scales, l6);
                y[b].d = F16(1 / is);
            } else {
                memset(y[b].scales, 0, 12);
                y[b].d = F16(0.f);
            }
        } else {
            float sigma2 = 2 * kq_sum_sq(x, KQ_SUPER) / KQ_SUPER;
            for (int j = 0; j < 16; j++) {
                const float *q = qw + b * KQ_SUPER + 16 * j;
                for (int l = 0; l < 16; l++) w[l] = q[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
                float s = 0;
                for (int l = 0; l < 16; l++) s += w[l];
                sw[j] = s;
                scales[j] = kq_search_symmetric(16, 4, x + 16 * j, L + 16 * j, w);
            }
            float d_block = kq_search_symmetric(16, 32, scales, Ls, sw);
            for (int j = 0; j < 16; j++) l6[j] = Ls[j];
            kq_pack_q3_scales(y[b].scales, l6);
            y[b].d = F16(d_block);
        }
        float dd = F32(y[b].d);
        for (int j = 0; j < 16; j++) {
            float d = dd * kq_unpack_q3_scale(y[b].scales, j);
            if (!d) continue;
            for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(kq_clampi(kq_nearest(x[16 * j + i] / d), -4, 3) + 4);
        }
        /* high bit of element j goes to hmask[j % 32] bit j / 32 */
        memset(y[b].hmask, 0, 32);
        uint8_t low[KQ_SUPER];
        for (int j = 0; j < KQ_SUPER; j++) {
            int v = L[j];
            if (v > 3) {
                y[b].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                v -= 4;
            }
            low[j] = (uint8_t)v;
        }
        kq_pack_2bit(low, y[b].qs);
    }
}

/* Shared by q4_K (nmax 15) and q5_K (nmax 31): eight sub-blocks of 32, affine with 6-bit scale and min. */
static void kq_super_scale_min(const float *x, int nmax, const float *qw, uint8_t *scales12, uint16_t *d_out,
                               uint16_t *dmin_out, uint8_t *L) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float w[32], scales[8], mins[8], sw[8];
    if (!qw) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            float s2 = 0;
            for (int l = 0; l < 32; l++) s2 += x[32 * j + l] * x[32 * j + l];
            float av = sqrtf(s2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av + fabsf(x[32 * j + l]);
            scales[j] = nmax == 15
                ? kq_search_affine(32, 15, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, 0)
                : kq_search_affine(32, 31, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        float inv_s = max_scale > 0 ? 63.f / max_scale : 0.f;
        float inv_m = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < 8; j++) {
            uint8_t ls = (uint8_t)kq_nearest(inv_s * scales[j]);
            uint8_t lm = (uint8_t)kq_nearest(inv_m * mins[j]);
            Ls[j] = ls < 63 ? ls : 63;
            Lm[j] = lm < 63 ? lm : 63;
        }
        kq_pack_scale_min(scales12, Ls, Lm);
        *d_out = F16(max_scale / 63.f);
        *dmin_out = F16(max_min / 63.f);
    } else {
        float sigma2 = 2 * kq_sum_sq(x, KQ_SUPER) / KQ_SUPER;
        for (int j = 0; j < 8; j++) {
            for (int l = 0; l < 32; l++) w[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
            float s = 0;
            for (int l = 0; l < 32; l++) s += w[l];
            sw[j] = s;
            scales[j] = kq_search_affine(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, 0);
        }
        float d_block = kq_search_positive(8, 63, scales, Ls, sw);
        float m_block = kq_search_positive(8, 63, mins, Lm, sw);
        kq_pack_scale_min(scales12, Ls, Lm);
        *d_out = F16(d_block);
        *dmin_out = F16(m_block);
    }
    float dd = F32(*d_out), dmn = F32(*dmin_out);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        kq_unpack_scale_min(j, scales12, &sc, &m);
        float d = dd * sc;
        if (!d) continue;
        float dm = dmn * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)kq_clampi(kq_nearest((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

static void kq_row_q4_k(const float *x, kq_block_q4_k *y, int64_t n, const float *qw) {
    uint8_t L[KQ_SUPER];
    for (int64_t b = 0; b < n / KQ_SUPER; b++, x += KQ_SUPER) {
        kq_super_scale_min(x, 15, qw ? qw + b * KQ_SUPER : NULL, y[b].scales, &y[b].d, &y[b].dmin, L);
        /* 4-bit plane: per 64 elements 32 bytes, byte l = element l (low) | element l+32 (high) */
        for (int j = 0; j < KQ_SUPER; j += 64)
            for (int l = 0; l < 32; l++) y[b].qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void kq_row_q5_k(const float *x, kq_block_q5_k *y, int64_t n, const float *qw) {
    uint8_t L[KQ_SUPER];
    for (int64_t b = 0; b < n / KQ_SUPER; b++, x += KQ_SUPER) {
        kq_super_scale_min(x, 31, qw ? qw + b * KQ_SUPER : NULL, y[b].scales, &y[b].d, &y[b].dmin, L);
        /* fifth bits: chunk c of 64 elements uses qh bits 2c (first 32) and 2c+1 (second 32) */
        memset(y[b].qh, 0, 32);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int a = L[64 * c + l], e = L[64 * c + 32 + l];
                if (a > 15) { a -= 16; y[b].qh[l] |= (uint8_t)(1u << (2 * c)); }
                if (e > 15) { e -= 16; y[b].qh[l] |= (uint8_t)(1u << (2 * c + 1)); }
                y[b].qs[32 * c + l] = (uint8_t)(a | (e << 4));
            }
        }
    }
}

static void kq_row_q6_k(const float *x, kq_block_q6_k *y, int64_t n, const float *qw) {
    int8_t L[KQ_SUPER];
    float scales[16];
    for (int64_t b = 0; b < n / KQ_SUPER; b++, x += KQ_SUPER) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            /* with an imatrix, ggml weights by the imatrix alone (no σ² term) for q6_K */
            scales[j] = kq_search_symmetric(16, 32, x + 16 * j, L + 16 * j, qw ? qw + b * KQ_SUPER + 16 * j : NULL);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        if (amax < KQ_EPS) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float is = -128.f / max_scale;
        y[b].d = F16(1 / is);
        for (int j = 0; j < 16; j++) {
            int v = kq_nearest(is * scales[j]);
            y[b].scales[j] = (int8_t)(v < 127 ? v : 127);
        }
        float dd = F32(y[b].d);
        for (int j = 0; j < 16; j++) {
            float d = dd * y[b].scales[j];
            if (!d) continue;
            for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(kq_clampi(kq_nearest(x[16 * j + i] / d), -32, 31) + 32);
        }
        /* per 128 elements: ql[l] = low nibbles of l, l+64; ql[l+32] = of l+32, l+96; qh[l] = top 2 bits of all four */
        for (int c = 0; c < 2; c++) {
            const int8_t *Lc = L + 128 * c;
            uint8_t *ql = y[b].ql + 64 * c, *qh = y[b].qh + 32 * c;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lc[l] & 0xF) | ((Lc[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lc[l + 32] & 0xF) | ((Lc[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lc[l] >> 4) | ((Lc[l + 32] >> 4) << 2) | ((Lc[l + 64] >> 4) << 4) | ((Lc[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ---- public entry points ------------------------------------------------------------------------------- */

int64_t assay_ggml_quant_block_elems(assay_type type) {
    switch (type) {
    case ASSAY_TYPE_Q4_0: case ASSAY_TYPE_Q4_1: case ASSAY_TYPE_Q5_0: case ASSAY_TYPE_Q5_1: case ASSAY_TYPE_Q8_0:
        return 32;
    case ASSAY_TYPE_Q2_K: case ASSAY_TYPE_Q3_K: case ASSAY_TYPE_Q4_K: case ASSAY_TYPE_Q5_K: case ASSAY_TYPE_Q6_K:
        return KQ_SUPER;
    default:
        return 0;
    }
}

size_t assay_ggml_quant_block_bytes(assay_type type) {
    switch (type) {
    case ASSAY_TYPE_Q4_0: return sizeof(kq_block_q4_0);
    case ASSAY_TYPE_Q4_1: return sizeof(kq_block_q4_1);
    case ASSAY_TYPE_Q5_0: return sizeof(kq_block_q5_0);
    case ASSAY_TYPE_Q5_1: return sizeof(kq_block_q5_1);
    case ASSAY_TYPE_Q8_0: return sizeof(kq_block_q8_0);
    case ASSAY_TYPE_Q2_K: return sizeof(kq_block_q2_k);
    case ASSAY_TYPE_Q3_K: return sizeof(kq_block_q3_k);
    case ASSAY_TYPE_Q4_K: return sizeof(kq_block_q4_k);
    case ASSAY_TYPE_Q5_K: return sizeof(kq_block_q5_k);
    case ASSAY_TYPE_Q6_K: return sizeof(kq_block_q6_k);
    default: return 0;
    }
}

int assay_ggml_quant_supported(assay_type type) { return assay_ggml_quant_block_elems(type) != 0; }

size_t assay_ggml_quant_bytes(assay_type type, int64_t nrow, int64_t n_per_row) {
    int64_t be = assay_ggml_quant_block_elems(type);
    ASSAY_ASSERT(be > 0 && n_per_row % be == 0 && nrow >= 0);
    return (size_t)nrow * (size_t)(n_per_row / be) * assay_ggml_quant_block_bytes(type);
}

assay_status assay_ggml_quantize(assay_type type, const float *src, void *dst, int64_t nrow, int64_t n_per_row,
                                 const float *imatrix) {
    int64_t be = assay_ggml_quant_block_elems(type);
    if (!be) return assay_fail(ASSAY_ERR_UNSUPPORTED, "no GGUF encoder for ggml type id %d", (int)type);
    if (n_per_row <= 0 || n_per_row % be)
        return assay_fail(ASSAY_ERR_ARG, "row length %lld is not a multiple of the block size %lld of ggml type %d",
                          (long long)n_per_row, (long long)be, (int)type);
    if (imatrix)
        for (int64_t i = 0; i < n_per_row; i++)
            if (!isfinite(imatrix[i]) || imatrix[i] < 0)
                return assay_fail(ASSAY_ERR_ARG, "importance matrix value %lld is %g (must be finite and >= 0)",
                                  (long long)i, (double)imatrix[i]);
    size_t row_bytes = assay_ggml_quant_bytes(type, 1, n_per_row);
    for (int64_t r = 0; r < nrow; r++) {
        const float *x = src + r * n_per_row;
        void *y = (uint8_t *)dst + (size_t)r * row_bytes;
        switch (type) {
        case ASSAY_TYPE_Q4_0: kq_row_q4_0(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q4_1: kq_row_q4_1(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q5_0: kq_row_q5_0(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q5_1: kq_row_q5_1(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q8_0: kq_row_q8_0(x, y, n_per_row); break;
        case ASSAY_TYPE_Q2_K: kq_row_q2_k(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q3_K: kq_row_q3_k(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q4_K: kq_row_q4_k(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q5_K: kq_row_q5_k(x, y, n_per_row, imatrix); break;
        case ASSAY_TYPE_Q6_K: kq_row_q6_k(x, y, n_per_row, imatrix); break;
        default: ASSAY_ASSERT(0);
        }
    }
    return ASSAY_OK;
}
