/* test_int_quant.c — INT4 RTN / GPTQ / AWQ and INT8 on a small random layer with correlated inputs.
 *
 * C checks: GPTQ lowers the layer-output error ‖X(W − Ŵ)ᵀ‖² against RTN at the same group size (the point of
 * GPTQ), AWQ's scaled-and-clipped quantization lowers it too, INT8 rows round-trip within half a step.
 * Then the layer, the calibration rows and every result (packed tensors and our dequantization) go to a
 * safetensors file for tests/py/int_quant_oracle.py, which unpacks the GPTQ and AWQ layouts with its own numpy
 * code (the documented packing) and reruns GPTQ with an independent numpy transcription of the reference
 * algorithm (gptq.py: Cholesky of the inverse, lazy batches, act-order with g_idx) to compare the codes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/backend.h"
#include "assay/int_quant.h"
#include "assay/safetensors.h"
#include "check.h"

enum { NOUT = 64, NIN = 256, NTOK = 512, GS = 64 };

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static double uni(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return ((rs >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2 * log(uni())) * cos(6.283185307179586 * uni())); }

static double out_err(const float *x, const float *w, const float *wh) {
    double s = 0;
    for (int t = 0; t < NTOK; t++)
        for (int o = 0; o < NOUT; o++) {
            double d = 0;
            for (int i = 0; i < NIN; i++) d += (double)x[t * NIN + i] * (w[o * NIN + i] - wh[o * NIN + i]);
            s += d * d;
        }
    return s;
}

typedef struct {
    int32_t qw[NIN / 8 * NOUT], qz[NIN / GS * NOUT / 8];
    uint16_t sc[NIN / GS * NOUT];
    int32_t gidx[NIN];
    float deq[NOUT * NIN];
} packed;

static void add(assay_safetensors_writer *wr, const char *name, const char *dt, int64_t d0, int64_t d1, const void *p,
                size_t bytes) {
    int64_t shape[2] = {d0, d1};
    CHECK_OK(assay_safetensors_writer_add(wr, name, dt, d1 ? 2 : 1, shape, p, bytes));
}

static void add_packed(assay_safetensors_writer *wr, const char *v, const packed *pk, int awq) {
    char n[64];
    snprintf(n, sizeof n, "%s.qweight", v);
    if (awq) add(wr, n, "I32", NIN, NOUT / 8, pk->qw, sizeof pk->qw);
    else add(wr, n, "I32", NIN / 8, NOUT, pk->qw, sizeof pk->qw);
    snprintf(n, sizeof n, "%s.qzeros", v);
    add(wr, n, "I32", NIN / GS, NOUT / 8, pk->qz, sizeof pk->qz);
    snprintf(n, sizeof n, "%s.scales", v);
    add(wr, n, "F16", NIN / GS, NOUT, pk->sc, sizeof pk->sc);
    snprintf(n, sizeof n, "%s.g_idx", v);
    add(wr, n, "I32", NIN, 0, pk->gidx, sizeof pk->gidx);
    snprintf(n, sizeof n, "%s.deq", v);
    add(wr, n, "F32", NOUT, NIN, pk->deq, sizeof pk->deq);
}

/* AWQ scale search with a caller loss: the outputs of two linears sharing x (a block that concatenates them) */
typedef struct {
    const float *x;
    const float *w[2];
} two_lin;

static double two_lin_loss(void *ctx, const float *const *wq) {
    two_lin *c = ctx;
    double s = 0;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < NTOK; t++)
            for (int o = 0; o < NOUT; o++) {
                double a = 0, b = 0;
                for (int i = 0; i < NIN; i++) {
                    a += (double)c->x[t * NIN + i] * c->w[k][o * NIN + i];
                    b += (double)c->x[t * NIN + i] * wq[k][o * NIN + i];
                }
                s += (a - b) * (a - b);
            }
    return s;
}

int main(void) {
    static float w[NOUT * NIN], x[NTOK * NIN], mix[16 * NIN], wa[NOUT * NIN], xa[NTOK * NIN], s[NIN];
    static double h[NIN * NIN];
    static packed rtn, gptq, gact, gmse, awq;
    /* inputs: a rank-16 correlated part plus noise, a few channels 20x louder (the outliers LLM activations have) */
    for (int i = 0; i < 16 * NIN; i++) mix[i] = gauss();
    for (int t = 0; t < NTOK; t++) {
        float z[16];
        for (int k = 0; k < 16; k++) z[k] = gauss();
        for (int i = 0; i < NIN; i++) {
            float v = 0.3f * gauss();
            for (int k = 0; k < 16; k++) v += z[k] * mix[k * NIN + i] * 0.25f;
            x[t * NIN + i] = v * (i % 37 == 3 ? 20.0f : 1.0f);
        }
    }
    for (int i = 0; i < NOUT * NIN; i++) w[i] = gauss() * 0.05f;
    for (int i = 0; i < NIN; i++) x[7 * NIN + i] = x[7 * NIN + i]; /* keep */
    assay_gram_accumulate(h, x, NTOK, NIN);

    assay_int4_params p = assay_int4_params_default();
    p.group_size = GS;
    assay_int4_result r;

    CHECK_OK(assay_int4_rtn(w, NOUT, NIN, &p, &r));
    assay_int4_dequantize(&r, rtn.deq);
    assay_int4_pack_gptq(&r, rtn.qw, rtn.qz, rtn.sc);
    memcpy(rtn.gidx, r.g_idx, sizeof rtn.gidx);
    assay_int4_result_free(&r);

    CHECK_OK(assay_int4_gptq(w, NOUT, NIN, h, &p, &r));
    assay_int4_dequantize(&r, gptq.deq);
    assay_int4_pack_gptq(&r, gptq.qw, gptq.qz, gptq.sc);
    memcpy(gptq.gidx, r.g_idx, sizeof gptq.gidx);
    assay_int4_result_free(&r);

    p.act_order = 1;
    CHECK_OK(assay_int4_gptq(w, NOUT, NIN, h, &p, &r));
    assay_int4_dequantize(&r, gact.deq);
    assay_int4_pack_gptq(&r, gact.qw, gact.qz, gact.sc);
    memcpy(gact.gidx, r.g_idx, sizeof gact.gidx);
    int monotone = 1;
    for (int i = 1; i < NIN; i++) monotone &= r.g_idx[i] >= r.g_idx[i - 1];
    CHECK(!monotone); /* act-order really permuted the groups */
    assay_int4_result_free(&r);
    /* act-order with group parameters from gptq's mse range search */
    p.mse = 1;
    CHECK_OK(assay_int4_gptq(w, NOUT, NIN, h, &p, &r));
    assay_int4_dequantize(&r, gmse.deq);
    assay_int4_pack_gptq(&r, gmse.qw, gmse.qz, gmse.sc);
    memcpy(gmse.gidx, r.g_idx, sizeof gmse.gidx);
    assay_int4_result_free(&r);
    p.mse = 0;
    p.act_order = 0;

    /* AWQ: scale search over the grid, apply s to W's columns (and 1/s to the inputs), clip, RTN */
    float alpha = -1;
    const float *ws[1] = {w};
    int64_t nouts[1] = {NOUT};
    CHECK_OK(assay_awq_search_scale(x, NTOK, NIN, ws, nouts, 1, &p, 20, s, &alpha));
    CHECK(alpha > 0); /* the loud channels make some activation awareness pay */
    for (int o = 0; o < NOUT; o++)
        for (int i = 0; i < NIN; i++) wa[o * NIN + i] = w[o * NIN + i] * s[i];
    for (int t = 0; t < NTOK; t++)
        for (int i = 0; i < NIN; i++) xa[t * NIN + i] = x[t * NIN + i] / s[i];
    /* the clipping search in both modes, for the oracle: AutoAWQ's [−m, m] and the two-sided ranges */
    static float clip_in[NOUT * NIN], clip_two[NOUT * NIN];
    memcpy(clip_in, wa, sizeof clip_in);
    memcpy(clip_two, wa, sizeof clip_two);
    p.awq_clip_two_sided = 1;
    assay_awq_clip(clip_two, NOUT, NIN, xa, NTOK, &p);
    p.awq_clip_two_sided = 0;
    assay_awq_clip(wa, NOUT, NIN, xa, NTOK, &p);
    CHECK_OK(assay_int4_rtn(wa, NOUT, NIN, &p, &r));
    assay_int4_dequantize(&r, awq.deq);
    assay_int4_pack_awq(&r, awq.qw, awq.qz, awq.sc);
    memcpy(awq.gidx, r.g_idx, sizeof awq.gidx);
    assay_int4_result_free(&r);
    /* effective weights seen by the original inputs: Q(W·s)/s */
    static float awq_eff[NOUT * NIN];
    for (int o = 0; o < NOUT; o++)
        for (int i = 0; i < NIN; i++) awq_eff[o * NIN + i] = awq.deq[o * NIN + i] / s[i];

    double e_rtn = out_err(x, w, rtn.deq), e_gptq = out_err(x, w, gptq.deq), e_act = out_err(x, w, gact.deq),
           e_awq = out_err(x, w, awq_eff);
    printf("output error: rtn %.4g  gptq %.4g  gptq+act-order %.4g  awq %.4g (alpha %.2f)\n", e_rtn, e_gptq, e_act,
           e_awq, alpha);
    CHECK(e_gptq < 0.8 * e_rtn);
    CHECK(e_act < 0.8 * e_rtn);
    CHECK(e_awq < e_rtn);

    /* AutoAWQ duo scaling with a block loss over two linears (w and a second random w2 sharing x) */
    static float w2[NOUT * NIN], s_duo[NIN], xmean[NIN];
    for (int i = 0; i < NOUT * NIN; i++) w2[i] = gauss() * 0.08f;
    assay_awq_absmean(x, NTOK, NIN, xmean);
    float alpha_duo = -1;
    const float *ws2[2] = {w, w2};
    int64_t nouts2[2] = {NOUT, NOUT};
    two_lin tl = {x, {w, w2}};
    CHECK_OK(assay_awq_search_scale_fn(xmean, NIN, ws2, nouts2, 2, &p, 20, 1, two_lin_loss, &tl, s_duo, &alpha_duo));
    float alpha_arr[1] = {alpha_duo};
    printf("AWQ duo search over two linears: alpha %.2f\n", alpha_duo);
    /* llm-compressor's grid (duo 2: the identity, then duo scaling at i / 18, 1.0 included) on the same data and on
     * inputs without outlier channels (xf), where the identity can win */
    static float s_lc[NIN], s_lcf[NIN], xf[NTOK * NIN], xmeanf[NIN];
    for (int i = 0; i < NTOK * NIN; i++) xf[i] = gauss();
    assay_awq_absmean(xf, NTOK, NIN, xmeanf);
    float alpha_lc[2] = {-2, -2};
    CHECK_OK(assay_awq_search_scale_fn(xmean, NIN, ws2, nouts2, 2, &p, 20, 2, two_lin_loss, &tl, s_lc, &alpha_lc[0]));
    two_lin tlf = {xf, {w, w2}};
    CHECK_OK(assay_awq_search_scale_fn(xmeanf, NIN, ws2, nouts2, 2, &p, 20, 2, two_lin_loss, &tlf, s_lcf, &alpha_lc[1]));
    printf("AWQ llm-compressor grid: alpha %.3f (outlier channels), %.3f (flat inputs; -1 = identity)\n", alpha_lc[0],
           alpha_lc[1]);

    /* INT8 rows: |w − q·s| <= s/2, and the max element maps to ±127 */
    static int8_t q8[NOUT * NIN];
    float sc8[NOUT];
    assay_int8_quantize_rows(w, NOUT, NIN, q8, sc8);
    int ok = 1, hit = 0;
    for (int o = 0; o < NOUT; o++)
        for (int i = 0; i < NIN; i++) {
            ok &= fabsf(w[o * NIN + i] - q8[o * NIN + i] * sc8[o]) <= sc8[o] * 0.5001f;
            hit += q8[o * NIN + i] == 127 || q8[o * NIN + i] == -127;
        }
    CHECK(ok);
    CHECK(hit >= NOUT);
    /* SmoothQuant: s = amax^a / wmax^(1-a) */
    float am[NIN], ss[NIN];
    for (int i = 0; i < NIN; i++) am[i] = (float)(i + 1);
    assay_smoothquant_scales(am, NIN, ws, nouts, 1, 0.5f, ss);
    float wm = 0;
    for (int o = 0; o < NOUT; o++) wm = fabsf(w[o * NIN + 3]) > wm ? fabsf(w[o * NIN + 3]) : wm;
    CHECK_NEAR(ss[3], sqrtf(4.0f) / sqrtf(wm), 1e-5);

    /* AWQ's final quantizer (awq_range): groups that lie on one side of 0 keep their own min/max (GPTQ's quantizer
     * would widen them to 0); rows 0-3 all positive, rows 4-7 all negative, the rest both signs */
    static float wr8[16 * 128], wr8q[16 * 128];
    for (int o = 0; o < 16; o++)
        for (int i = 0; i < 128; i++) {
            float v = gauss() * 0.02f;
            wr8[o * 128 + i] = o < 4 ? fabsf(v) + 0.05f : (o < 8 ? -fabsf(v) - 0.05f : v);
        }
    assay_int4_params pa = assay_int4_params_default();
    pa.group_size = 64;
    pa.awq_range = 1;
    CHECK_OK(assay_int4_rtn(wr8, 16, 128, &pa, &r));
    assay_int4_dequantize(&r, wr8q);
    assay_int4_result_free(&r);

    /* fixture for the python oracle */
    const char *build = getenv("ASSAY_BUILD_DIR"), *py = getenv("ASSAY_PYTHON"), *src = getenv("ASSAY_SOURCE_DIR");
    if (!build || !py || !src) {
        fprintf(stderr, "run through ctest (ASSAY_BUILD_DIR, ASSAY_PYTHON, ASSAY_SOURCE_DIR)\n");
        return 1;
    }
    char path[4096], cmd[8192];
    snprintf(path, sizeof path, "%s/int_quant_fixture.safetensors", build);
    assay_safetensors_writer *wr = assay_safetensors_writer_new();
    add(wr, "w", "F32", NOUT, NIN, w, sizeof w);
    add(wr, "x", "F32", NTOK, NIN, x, sizeof x);
    add(wr, "awq.s", "F32", NIN, 0, s, sizeof s);
    add(wr, "w2", "F32", NOUT, NIN, w2, sizeof w2);
    add(wr, "duo.s", "F32", NIN, 0, s_duo, sizeof s_duo);
    add(wr, "duo.alpha", "F32", 1, 0, alpha_arr, sizeof alpha_arr);
    add(wr, "lc.s", "F32", NIN, 0, s_lc, sizeof s_lc);
    add(wr, "lcf.s", "F32", NIN, 0, s_lcf, sizeof s_lcf);
    add(wr, "lcf.x", "F32", NTOK, NIN, xf, sizeof xf);
    add(wr, "lc.alpha", "F32", 2, 0, alpha_lc, sizeof alpha_lc);
    add_packed(wr, "rtn", &rtn, 0);
    add_packed(wr, "gptq", &gptq, 0);
    add_packed(wr, "gptq_act", &gact, 0);
    add_packed(wr, "gptq_mse", &gmse, 0);
    add_packed(wr, "awq", &awq, 1);
    add(wr, "awqr.w", "F32", 16, 128, wr8, sizeof wr8);
    add(wr, "awqr.deq", "F32", 16, 128, wr8q, sizeof wr8q);
    add(wr, "clip.w", "F32", NOUT, NIN, clip_in, sizeof clip_in);
    add(wr, "clip.x", "F32", NTOK, NIN, xa, sizeof xa);
    add(wr, "clip.sym", "F32", NOUT, NIN, wa, sizeof wa);
    add(wr, "clip.two", "F32", NOUT, NIN, clip_two, sizeof clip_two);
    CHECK_OK(assay_safetensors_writer_write(wr, path, 1));
    assay_safetensors_writer_free(wr);
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/int_quant_oracle.py' '%s' %d", py, src, path, GS);
    CHECK(system(cmd) == 0);
    return check_finish("int_quant");
}
