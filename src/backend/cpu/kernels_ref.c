/* kernels_ref.c — scalar CPU kernels: the activation quantizers and weight-row dot products for every type
 * the CPU backend runs. Portable C; the AVX2 kernels (kernels_avx2.c) are tested against these and against the
 * dequantize-then-dot spec. */
#include <math.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kq_inline.h"

/* ---- activation quantizers -------------------------------------------------------------------------------- */

void assay_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) {
    assay_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[i].d = assay_float_to_half(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)lrintf(x[j] * id);
    }
}

void assay_quantize_row_q8_1_ref(const float *x, void *dst, int64_t n) {
    assay_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            y[i].qs[j] = (int8_t)lrintf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = assay_float_to_half(d);
        y[i].s = assay_float_to_half(d * (float)sum);
    }
}

/* Q8_K: one float scale per 256 so that the largest |x| maps to 127 (sign kept: -128 is reachable only by it). */
void assay_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) {
    assay_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float amax = 0;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(x[j]));
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = 127.0f / amax;
        for (int j = 0; j < 256; j++) {
            long v = lrintf(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}

static void quantize_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }

/* ---- weight row . activation row -------------------------------------------------------------------------- */

static void vd_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w, *b = x;
    double sum = 0; /* double: this is the reference */
    for (int64_t i = 0; i < n; i++) sum += (double)a[i] * b[i];
    *s = (float)sum;
}

static void vd_f16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)assay_half_to_float(a[i]) * b[i];
    *s = (float)sum;
}

static void vd_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)assay_bf16_to_float(a[i]) * b[i];
    *s = (float)sum;
}

static void vd_q4_0(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q4_0 *b = w;
    const assay_block_q8_0 *a = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((b[i].qs[j] & 0xf) - 8) * a[i].qs[j] + ((b[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
        sum += assay_half_to_float(b[i].d) * assay_half_to_float(a[i].d) * (float)isum;
    }
    *s = sum;
}

static void vd_q4_1(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q4_1 *b = w;
    const assay_block_q8_1 *a = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += (b[i].qs[j] & 0xf) * a[i].qs[j] + (b[i].qs[j] >> 4) * a[i].qs[j + 16];
        /* sum_j (d q_j + m) a_j = d da isum + m * (da sum q_a) */
        sum += assay_half_to_float(b[i].d) * assay_half_to_float(a[i].d) * (float)isum +
               assay_half_to_float(b[i].m) * assay_half_to_float(a[i].s);
    }
    *s = sum;
}

static void vd_q5_0(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q5_0 *b = w;
    const assay_block_q8_0 *a = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = ((b[i].qs[j] & 0xf) | (((qh >> j) & 1) << 4)) - 16;
            int q1 = ((b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            isum += q0 * a[i].qs[j] + q1 * a[i].qs[j + 16];
        }
        sum += assay_half_to_float(b[i].d) * assay_half_to_float(a[i].d) * (float)isum;
    }
    *s = sum;
}

static void vd_q5_1(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q5_1 *b = w;
    const assay_block_q8_1 *a = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 0xf) | (((qh >> j) & 1) << 4);
            int q1 = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            isum += q0 * a[i].qs[j] + q1 * a[i].qs[j + 16];
        }
        sum += assay_half_to_float(b[i].d) * assay_half_to_float(a[i].d) * (float)isum +
               assay_half_to_float(b[i].m) * assay_half_to_float(a[i].s);
    }
    *s = sum;
}

static void vd_q8_0(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q8_0 *b = w, *a = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += b[i].qs[j] * a[i].qs[j];
        sum += assay_half_to_float(b[i].d) * assay_half_to_float(a[i].d) * (float)isum;
    }
    *s = sum;
}

/* Packed group int4 x f32: per block (one quantization group, or part of one) d * sum_j (q_j - z) x_j, in double. */
static void vd_q4g(int64_t g, int64_t n, float *s, const void *w, const void *x) {
    const uint8_t *p = w;
    const float *a = x;
    double sum = 0;
    for (int64_t i = 0; i < n / g; i++, p += 4 + g / 2, a += g) {
        uint16_t dh;
        memcpy(&dh, p, 2);
        int z = p[2];
        double bs = 0;
        for (int64_t k = 0; k < g / 32; k++)
            for (int j = 0; j < 16; j++) {
                uint8_t b = p[4 + 16 * k + j];
                bs += (double)((b & 0xf) - z) * a[32 * k + j] + (double)((b >> 4) - z) * a[32 * k + 16 + j];
            }
        sum += (double)assay_half_to_float(dh) * bs;
    }
    *s = (float)sum;
}
static void vd_q4g32(int64_t n, float *s, const void *w, const void *x) { vd_q4g(32, n, s, w, x); }
static void vd_q4g64(int64_t n, float *s, const void *w, const void *x) { vd_q4g(64, n, s, w, x); }
static void vd_q4g128(int64_t n, float *s, const void *w, const void *x) { vd_q4g(128, n, s, w, x); }

KQ_DEFINE_VEC_DOT(vd_q2_K, assay_block_q2_K, kq_unpack_q2_K)
KQ_DEFINE_VEC_DOT(vd_q3_K, assay_block_q3_K, kq_unpack_q3_K)
KQ_DEFINE_VEC_DOT(vd_q4_K, assay_block_q4_K, kq_unpack_q4_K)
KQ_DEFINE_VEC_DOT(vd_q5_K, assay_block_q5_K, kq_unpack_q5_K)
KQ_DEFINE_VEC_DOT(vd_q6_K, assay_block_q6_K, kq_unpack_q6_K)

static float dot_f32(int64_t n, const float *a, const float *b) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_f32(int64_t n, float *y, float a, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = assay_half_to_float(x[i]);
}

static void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = assay_float_to_half(x[i]);
}

static const assay_cpu_kernels kernels_ref = {
    .name = "scalar",
    .type =
        {
            [ASSAY_TYPE_F32] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_f32},
            [ASSAY_TYPE_F16] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_f16},
            [ASSAY_TYPE_BF16] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_bf16},
            [ASSAY_TYPE_Q4_0] = {.vec_dot_type = ASSAY_TYPE_Q8_0, .vec_dot = vd_q4_0},
            [ASSAY_TYPE_Q4_1] = {.vec_dot_type = ASSAY_TYPE_Q8_1, .vec_dot = vd_q4_1},
            [ASSAY_TYPE_Q5_0] = {.vec_dot_type = ASSAY_TYPE_Q8_0, .vec_dot = vd_q5_0},
            [ASSAY_TYPE_Q5_1] = {.vec_dot_type = ASSAY_TYPE_Q8_1, .vec_dot = vd_q5_1},
            [ASSAY_TYPE_Q8_0] = {.vec_dot_type = ASSAY_TYPE_Q8_0, .vec_dot = vd_q8_0},
            [ASSAY_TYPE_Q2_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q2_K},
            [ASSAY_TYPE_Q3_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q3_K},
            [ASSAY_TYPE_Q4_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q4_K},
            [ASSAY_TYPE_Q5_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q5_K},
            [ASSAY_TYPE_Q6_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q6_K},
            [ASSAY_TYPE_Q4G32] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_q4g32},
            [ASSAY_TYPE_Q4G64] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_q4g64},
            [ASSAY_TYPE_Q4G128] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_q4g128},
        },
    .from_float =
        {
            [ASSAY_TYPE_F32] = quantize_f32,
            [ASSAY_TYPE_Q8_0] = assay_quantize_row_q8_0_ref,
            [ASSAY_TYPE_Q8_1] = assay_quantize_row_q8_1_ref,
            [ASSAY_TYPE_Q8_K] = assay_quantize_row_q8_K_ref,
        },
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .f16_to_f32 = f16_to_f32,
    .f32_to_f16 = f32_to_f16,
};

const assay_cpu_kernels *assay_cpu_kernels_ref(void) { return &kernels_ref; }
