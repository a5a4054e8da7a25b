/* fp8.c — FP8 weight/activation quantization and the emulated scaled FP8 GEMM (see quant_fp8.h for the scale
 * conventions and why each one is what it is). Plain C reference; everything is row-major with K innermost. */
#include "assay/quant_fp8.h"

#include <float.h>
#include <math.h>

#include "assay/dtype.h"
#include "assay/status.h"

float assay_fp8_max(assay_fp8_format f) { return f == ASSAY_FP8_E5M2 ? ASSAY_FP8_E5M2_MAX : ASSAY_FP8_E4M3_MAX; }

uint8_t assay_fp8_encode(assay_fp8_format f, float x) {
    return f == ASSAY_FP8_E5M2 ? assay_f32_to_fp8_e5m2(x) : assay_f32_to_fp8_e4m3(x);
}

float assay_fp8_decode(assay_fp8_format f, uint8_t q) {
    return f == ASSAY_FP8_E5M2 ? assay_fp8_e5m2_to_f32(q) : assay_fp8_e4m3_to_f32(q);
}

float assay_fp8_weight_scale(assay_fp8_format f, float amax, int bf16_scale) {
    float s = amax / assay_fp8_max(f);
    if (!(s >= FLT_EPSILON)) s = FLT_EPSILON; /* also catches NaN */
    if (bf16_scale) s = assay_bf16_to_f32(assay_f32_to_bf16(s));
    return s;
}

static float absmax(const float *x, int64_t n, int64_t stride, int64_t count) {
    /* max |x| over `count` runs of n contiguous elements, runs `stride` apart */
    float m = 0.0f;
    for (int64_t r = 0; r < count; r++)
        for (int64_t i = 0; i < n; i++) {
            float a = fabsf(x[r * stride + i]);
            if (a > m) m = a;
        }
    return m;
}

static void encode_div(assay_fp8_format f, const float *x, int64_t n, float scale, uint8_t *q) {
    for (int64_t i = 0; i < n; i++) q[i] = assay_fp8_encode(f, x[i] / scale);
}

static void encode_mul(assay_fp8_format f, const float *x, int64_t n, float inv, uint8_t *q) {
    for (int64_t i = 0; i < n; i++) q[i] = assay_fp8_encode(f, x[i] * inv);
}

int64_t assay_fp8_weight_scale_count(assay_fp8_granularity g, int64_t bm, int64_t bn, int64_t rows, int64_t cols) {
    switch (g) {
    case ASSAY_FP8_GRAN_TENSOR: return 1;
    case ASSAY_FP8_GRAN_CHANNEL: return rows;
    case ASSAY_FP8_GRAN_BLOCK: return ((rows + bm - 1) / bm) * ((cols + bn - 1) / bn);
    }
    return 0;
}

void assay_fp8_quantize_weight(assay_fp8_format f, assay_fp8_granularity g, int64_t bm, int64_t bn, int bf16_scales,
                               const float *w, int64_t rows, int64_t cols, uint8_t *q, float *scales) {
    if (g == ASSAY_FP8_GRAN_TENSOR) {
        float s = assay_fp8_weight_scale(f, absmax(w, cols, cols, rows), bf16_scales);
        scales[0] = s;
        encode_div(f, w, rows * cols, s, q);
    } else if (g == ASSAY_FP8_GRAN_CHANNEL) {
        for (int64_t r = 0; r < rows; r++) {
            float s = assay_fp8_weight_scale(f, absmax(w + r * cols, cols, cols, 1), bf16_scales);
            scales[r] = s;
            encode_div(f, w + r * cols, cols, s, q + r * cols);
        }
    } else {
        ASSAY_ASSERT(bm > 0 && bn > 0);
        int64_t tiles_c = (cols + bn - 1) / bn;
        for (int64_t r0 = 0; r0 < rows; r0 += bm)
            for (int64_t c0 = 0; c0 < cols; c0 += bn) {
                int64_t h = rows - r0 < bm ? rows - r0 : bm, wd = cols - c0 < bn ? cols - c0 : bn;
                float s = assay_fp8_weight_scale(f, absmax(w + r0 * cols + c0, wd, cols, h), bf16_scales);
                scales[(r0 / bm) * tiles_c + c0 / bn] = s;
                for (int64_t r = r0; r < r0 + h; r++) encode_div(f, w + r * cols + c0, wd, s, q + r * cols + c0);
            }
    }
}

/* The scale of element (r, c) of an operand. */
static float scale_at(assay_fp8_granularity g, int64_t bm, int64_t bn, int64_t cols, const float *scales, int64_t r,
                      int64_t c) {
    if (g == ASSAY_FP8_GRAN_TENSOR) return scales[0];
    if (g == ASSAY_FP8_GRAN_CHANNEL) return scales[r];
    return scales[(r / bm) * ((cols + bn - 1) / bn) + c / bn];
}

void assay_fp8_dequantize_weight(assay_fp8_format f, assay_fp8_granularity g, int64_t bm, int64_t bn,
                                 const uint8_t *q, const float *scales, int64_t rows, int64_t cols, float *w) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            w[r * cols + c] = assay_fp8_decode(f, q[r * cols + c]) * scale_at(g, bm, bn, cols, scales, r, c);
}

void assay_fp8_quantize_act_token(assay_fp8_format f, const float *x, int64_t tokens, int64_t dim, uint8_t *q,
                                  float *scales) {
    const float fmax = assay_fp8_max(f), min_scale = 1.0f / (fmax * 512.0f);
    for (int64_t t = 0; t < tokens; t++) {
        float s = absmax(x + t * dim, dim, dim, 1) / fmax;
        if (!(s >= min_scale)) s = min_scale;
        scales[t] = s;
        encode_mul(f, x + t * dim, dim, 1.0f / s, q + t * dim);
    }
}

void assay_fp8_quantize_act_group(assay_fp8_format f, const float *x, int64_t tokens, int64_t dim, int64_t group,
                                  uint8_t *q, float *scales) {
    ASSAY_ASSERT(group > 0);
    const float fmax = assay_fp8_max(f);
    int64_t ng = (dim + group - 1) / group;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t gi = 0; gi < ng; gi++) {
            int64_t c0 = gi * group, n = dim - c0 < group ? dim - c0 : group;
            float amax = absmax(x + t * dim + c0, n, n, 1);
            if (!(amax >= 1e-10f)) amax = 1e-10f;
            float s = amax / fmax;
            scales[t * ng + gi] = s;
            encode_div(f, x + t * dim + c0, n, s, q + t * dim + c0);
        }
}

float assay_fp8_act_static_scale(assay_fp8_format f, float calib_amax) {
    return assay_fp8_weight_scale(f, calib_amax, 0);
}

void assay_fp8_quantize_act_static(assay_fp8_format f, const float *x, int64_t tokens, int64_t dim, float scale,
                                   uint8_t *q) {
    encode_mul(f, x, tokens * dim, 1.0f / scale, q);
}

void assay_fp8_gemm(const assay_fp8_operand *a, const assay_fp8_operand *b, float *y) {
    ASSAY_ASSERT(a->cols == b->cols);
    const int64_t K = a->cols;
    /* The K extent over which both scales are constant: the whole row, or the common block width. */
    int64_t kb = K;
    if (a->gran == ASSAY_FP8_GRAN_BLOCK) kb = a->bn;
    if (b->gran == ASSAY_FP8_GRAN_BLOCK) {
        ASSAY_ASSERT(a->gran != ASSAY_FP8_GRAN_BLOCK || a->bn == b->bn);
        kb = b->bn;
    }
    /* Decode tables: 256 entries each, so the inner loop is a lookup and an exact product. */
    float da[256], db[256];
    for (int i = 0; i < 256; i++) {
        da[i] = assay_fp8_decode(a->format, (uint8_t)i);
        db[i] = assay_fp8_decode(b->format, (uint8_t)i);
    }
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t j = 0; j < b->rows; j++) {
            const uint8_t *qa = a->q + i * K, *qb = b->q + j * K;
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += kb) {
                int64_t k1 = k0 + kb < K ? k0 + kb : K;
                float part = 0.0f;
                for (int64_t k = k0; k < k1; k++) part += da[qa[k]] * db[qb[k]];
                float s = scale_at(a->gran, a->bm, a->bn, K, a->scales, i, k0) *
                          scale_at(b->gran, b->bm, b->bn, K, b->scales, j, k0);
                acc += part * s;
            }
            y[i * b->rows + j] = acc;
        }
}
