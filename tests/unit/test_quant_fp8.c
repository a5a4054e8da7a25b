/* test_quant_fp8.c — FP8 quantization of weights/activations and the emulated scaled FP8 GEMM.
 *
 * The GEMM emulation is checked against an f64 reference over the same codes and scales (the only difference
 * allowed is f32 accumulation: |y - y64| <= (K + 2) * 2^-24 * sum|terms|), and against the unquantized f64
 * product within FP8's rounding bound. Scale rules are checked on hand-made rows (vLLM's per-token lower clamp,
 * the group eps, saturation). Weight codes themselves are checked against numpy/ml_dtypes in
 * tests/py/test_quantize_fp8.py. */
#include <float.h>
#include <stdint.h>

#include "assay/dtype.h"
#include "assay/quant_fp8.h"
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

enum { M = 7, N = 5, K = 300 };

static void check_gemm(assay_fp8_format f, assay_fp8_granularity ga, assay_fp8_granularity gw, const float *a,
                       const float *w, const char *label) {
    static uint8_t qa[M * K], qw[N * K];
    static float sa[M * 3], sw[N * 3], y[M * N];
    float static_scale = 0;
    if (ga == ASSAY_FP8_GRAN_TENSOR) {
        float amax = 0;
        for (int i = 0; i < M * K; i++) amax = fmaxf(amax, fabsf(a[i]));
        static_scale = assay_fp8_act_static_scale(f, amax);
        sa[0] = static_scale;
        assay_fp8_quantize_act_static(f, a, M, K, static_scale, qa);
    } else if (ga == ASSAY_FP8_GRAN_CHANNEL) {
        assay_fp8_quantize_act_token(f, a, M, K, qa, sa);
    } else {
        assay_fp8_quantize_act_group(f, a, M, K, 128, qa, sa);
    }
    assay_fp8_quantize_weight(f, gw, 128, 128, 1, w, N, K, qw, sw);
    assay_fp8_operand A = {f, ga, 1, 128, M, K, qa, sa}, B = {f, gw, 128, 128, N, K, qw, sw};
    assay_fp8_gemm(&A, &B, y);
    int64_t nga = (K + 127) / 128;
    double worst_acc = 0, worst_q = 0;
    int bad_acc = 0, bad_q = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double y64 = 0, mag = 0, exact = 0, mag_exact = 0;
            for (int k = 0; k < K; k++) {
                double s_a = ga == ASSAY_FP8_GRAN_TENSOR ? sa[0] : ga == ASSAY_FP8_GRAN_CHANNEL ? sa[i] : sa[i * nga + k / 128];
                double s_w = gw == ASSAY_FP8_GRAN_TENSOR ? sw[0] : gw == ASSAY_FP8_GRAN_CHANNEL ? sw[j] : sw[k / 128];
                double term = (double)assay_fp8_decode(f, qa[i * K + k]) * s_a * (double)assay_fp8_decode(f, qw[j * K + k]) * s_w;
                y64 += term;
                mag += fabs(term);
                exact += (double)a[i * K + k] * w[j * K + k];
                mag_exact += fabs((double)a[i * K + k] * w[j * K + k]);
            }
            double e = fabs(y[i * N + j] - y64), bound = (K + 2) * 0x1p-24 * mag + 1e-30;
            if (e > bound) bad_acc++;
            if (e / bound > worst_acc) worst_acc = e / bound;
            /* FP8 rounding: each operand within half an ulp relative (2^-4 E4M3, 2^-3 E5M2) plus the subnormal
             * step; the product error is then at most (1+u)^2 - 1 of each term's magnitude. */
            double u = f == ASSAY_FP8_E4M3 ? 0x1p-4 : 0x1p-3;
            double qb = ((1 + u) * (1 + u) - 1) * mag_exact * 1.01 + 1e-6;
            if (fabs(y64 - exact) > qb) bad_q++;
            if (fabs(y64 - exact) / qb > worst_q) worst_q = fabs(y64 - exact) / qb;
        }
    printf("%s: accumulation error %.3f of its bound, quantization error %.3f of its bound\n", label, worst_acc, worst_q);
    CHECK(bad_acc == 0);
    CHECK(bad_q == 0);
}

int main(void) {
    static float a[M * K], w[N * K];
    for (int i = 0; i < M * K; i++) a[i] = frand() * (i % 37 == 0 ? 20.0f : 1.0f); /* a few outliers */
    for (int i = 0; i < N * K; i++) w[i] = frand() * 0.05f;
    a[3 * K + 5] = 0; /* and exact zeros */
    for (int f = 0; f < 2; f++) {
        assay_fp8_format fmt = f ? ASSAY_FP8_E5M2 : ASSAY_FP8_E4M3;
        check_gemm(fmt, ASSAY_FP8_GRAN_CHANNEL, ASSAY_FP8_GRAN_CHANNEL, a, w, f ? "e5m2 token x channel" : "e4m3 token x channel");
        check_gemm(fmt, ASSAY_FP8_GRAN_TENSOR, ASSAY_FP8_GRAN_TENSOR, a, w, f ? "e5m2 static x tensor" : "e4m3 static x tensor");
        check_gemm(fmt, ASSAY_FP8_GRAN_BLOCK, ASSAY_FP8_GRAN_BLOCK, a, w, f ? "e5m2 group128 x block128" : "e4m3 group128 x block128");
    }

    /* per-token scale rules: amax/448, clamped below at 1/(448*512); the max element lands on +-448 */
    float x[2 * 4] = {896.0f, -1.0f, 0.5f, 3.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    uint8_t q[8];
    float s[2];
    assay_fp8_quantize_act_token(ASSAY_FP8_E4M3, x, 2, 4, q, s);
    CHECK(s[0] == 2.0f);
    CHECK(q[0] == 0x7e);                            /* 896 / 2 = 448 */
    CHECK(s[1] == 1.0f / (448.0f * 512.0f));        /* an all-zero token gets the lower clamp */
    CHECK(q[4] == 0 && q[7] == 0);
    /* groups: each 1x2 group has its own amax/448 scale, eps 1e-10 on the amax */
    float gs[4];
    assay_fp8_quantize_act_group(ASSAY_FP8_E4M3, x, 2, 4, 2, q, gs);
    CHECK(gs[0] == 896.0f / 448.0f && gs[1] == 3.0f / 448.0f && gs[2] == 1e-10f / 448.0f);
    CHECK(q[3] == 0x7e);
    /* static: values past the calibrated range saturate instead of overflowing */
    float st = assay_fp8_act_static_scale(ASSAY_FP8_E4M3, 1.0f);
    assay_fp8_quantize_act_static(ASSAY_FP8_E4M3, x, 1, 4, st, q);
    CHECK(q[0] == 0x7e && q[1] == 0xfe);
    /* weight scale: f32 eps floor, bf16 rounding */
    CHECK(assay_fp8_weight_scale(ASSAY_FP8_E4M3, 0.0f, 1) == assay_bf16_to_f32(assay_f32_to_bf16(FLT_EPSILON)));
    CHECK(assay_fp8_weight_scale(ASSAY_FP8_E4M3, 448.0f, 1) == 1.0f);
    CHECK(assay_fp8_weight_scale(ASSAY_FP8_E5M2, 57344.0f, 0) == 1.0f);
    /* block scale count and partial edge tiles */
    CHECK(assay_fp8_weight_scale_count(ASSAY_FP8_GRAN_BLOCK, 128, 128, 1408, 512) == 11 * 4);
    CHECK(assay_fp8_weight_scale_count(ASSAY_FP8_GRAN_BLOCK, 128, 128, 129, 1) == 2);
    return check_finish("quant_fp8");
}
