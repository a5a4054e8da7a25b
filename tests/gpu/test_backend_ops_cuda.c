/* test_backend_ops_cuda.c — every op of the CUDA backend's table (src/backend/cuda/cuda_backend.c) against the CPU
 * backend's scalar kernel set and against plain double-precision math written here, in the manner of
 * tests/unit/test_backend_ops.c (itself after llama.cpp's test-backend-ops). Run on a GPU machine
 * (scripts/gpu-engine-check.sh runs it first); without a usable GPU it prints a SKIPPED line and exits 77. One line per
 * case, e.g.
 *
 *   matmul     type=q4_K,n_in=1024,n_out=136,n_tok=33    vs scalar: abs .. rel .. bound<=.. err/bound 0.071 |
 *              vs f64: abs .. rel .. bound<=.. err/bound 0.052  OK
 *
 * then a summary line; the exit status is 1 when any case fails. `test_backend_ops_cuda <seed>` reruns everything on
 * other random inputs. After its own cases it runs the attention cases once more in a child process with
 * ASSAY_CUDA_ATTN_REF=1 (the backend reads that switch once per process), so the reference kernel is checked on every
 * step shape the measured kernels take.
 *
 * Inputs. The CUDA backend keeps activations in bf16 (be->act_type), so every activation input here is rounded to
 * bf16 first and both backends get exactly those values (the CPU as f32): the comparisons measure what the CUDA
 * kernels add, never the rounding of the inputs. Vectors (norm weights, biases, RoPE frequencies) are f32 on both.
 * Device buffers come from ops->alloc and move with upload/download; outputs are read back as raw bf16 and widened
 * here (download_f32 is checked on its own). Ops that take host integer arrays (positions, ids, rows) get host arrays,
 * as the model hands them.
 *
 * Bounds, per element, from the inputs. u = 2^-24 (float), b = 2^-8 (bf16 keeps 8 significant bits, round to nearest
 * even: |bf16(x) - x| <= b|x|), a = 2^-22 (one fp32 addition inside a tensor core or a reduction tree: 2 ulps, which
 * allows the truncating alignment of tensor-core accumulation). Every GPU result is a float rounded to bf16 at the
 * end: a value within e of the exact v ends within e + b(|v| + e). "vs f64": the GPU against exact math (or, for the
 * buffer and graph checks, the bytes expected); "vs scalar": the GPU against the scalar set with bound = the GPU's
 * bound + the scalar set's own bound against exact math (triangle inequality; the scalar bounds are
 * test_backend_ops.c's, rounded up). "exact": bit for bit.
 * These are worst-case bounds for the arithmetic described below, not a statistical k 2^-8 sqrt(n): kernels that do
 * that arithmetic never miss them whatever the seed, while a wrong row, column, block, head, mask or scale misses them
 * by far (err/bound shows how close each case comes).
 *
 *  matmul, linear  y = sum_i W[o][i] x[i] (+ bias[o]). The roundings that are fixed by the inputs are done here
 *             exactly rather than bounded: "vs f64" is exact math on the operands the GPU multiplies, the weight as
 *             prepare_weight uploads it (the dequantized W rounded to bf16, exact for bf16 weights) and x. cuBLASLt
 *             multiplies bf16 exactly into fp32 and accumulates in fp32 (a split-K reduces fp32 partial sums):
 *               e = (n + 64) a T,  T = sum_i |bf16(W_i) x_i|
 *             (n + 64: the deepest chain of additions any split of the sum, split-K or tree, can give), then the output
 *             rounding; a bias is one fp32 addition and one more bf16 rounding: + (u + b(1 + u)) (|y + bias| + e).
 *             The act-order perm gathers x exactly. The scalar set against exact math on its own operands (W, and x as
 *             its Q8 quantizer leaves it for the legacy and k-quants): (n + 16) u sum (|W| + o)(|xq| + e_x) +
 *             sum m2 e_x + u|y| (o, m2, e_x as in test_backend_ops.c). "vs scalar": the two bounds plus the exact
 *             distance between the two targets (what the bf16 upload and the Q8 activations change, computed here).
 *             Types without a scalar kernel are compared with exact math only.
 *  linear W8A8 (--quantization fp8): e4m3 weight codes times one scale, activations quantized per token on the GPU
 *             (assay_cuda_quant_fp8_per_token: s = fl(amax/448), code = e4m3(fl(x * fl(448/amax))), done here the same
 *             way). Exact math on those codes, times the two scales: code products are exact; Hopper's FP8 tensor
 *             cores keep about 14 bits while they accumulate inside an MMA (cuBLASLt promotes to fp32 every few
 *             MMAs): 2^-8 T8, T8 = s w_scale sum |code_x code_w|; fp32 additions (n + 64) a T8; the two scale
 *             products 3u T8; then bf16 (and a bias as above). The scalar set quantizes with act_quant.h's reference
 *             (x * fl(1/s); its output is used here as is) and sums the f32 weights code * scale in f32:
 *             (n + 16) u T + u|y|. Both weight forms are run: the e4m3 codes with fp8_scale (what model.c keeps for a
 *             device backend) and the f32 values code * scale with fp8_scale.
 *  get_rows   exact: each row is bf16(the scalar set's dequantized row), what prepare_weight uploads.
 *  rmsnorm    the sum of squares in fp32 (relative (n + 16) u, halved by the root), rsqrtf 2 ulp, two products:
 *             |y| (n/2 + 16) u, then bf16. The scalar set: 4u|y| (sum in double).
 *  add_rmsnorm  x + h: one fp32 addition rounded to bf16, so exactly bf16(the scalar set's x + h); y against exact
 *             math from that rounded x with rmsnorm's bound; against the scalar set (which normalizes the unrounded
 *             sum) plus 2b/(1 - b)|y| (inputs each moved by <= b relative move y by at most that).
 *  rope       the angle pos * inv_freq rounded to float (u|angle|), sincosf 2 ulp each, two products and a sum:
 *             r u (|angle| + 12) with r = |(x0, x1)|, then bf16; the scalar set r u (|angle| + 4). Dims past n_rot
 *             and the rows' padding are untouched (exact). One case takes its positions from the step (begin_step's
 *             device copy).
 *  swiglu     expf 2 ulp (4u), 1 + e, the division, the product: 8u|y|, then bf16; the scalar set 5u(1 + 8u)|y|.
 *  geglu      test_backend_ops.c's bound (tanhf 2 ulp, the cube and constants 7u in the argument) doubled, then bf16.
 *  add, scale one fp32 operation rounded to bf16: exactly bf16(the scalar set's f32 result); against exact math
 *             (b + 2u)|y|.
 *  softmax    test_backend_ops.c's bound with expf at 2 ulp (4u) and the row sum (n + 16) u deep, then bf16.
 *  tanh_cap   8u|y| (tanhf 2 ulp, the division, the product), then bf16; the scalar set 6u|y|.
 *  buffers, download_f32, gather_rows, absmax, argmax: exact (argmax: the first of equal maxima, which bf16 values
 *             make common, against the scalar set on the same values and against a loop here).
 *  kv_store   exact: the same bytes and slot scales as the scalar set (K token rows; V transposed inside each block
 *             on the GPU: compared element by element) and as the encoder of test_backend_ops.c (round to nearest
 *             even of x * fl(1/scale), saturating; int8 rint clamped to +-127; scale static or fl(amax/qmax)).
 *  kv_copy_block exact. kv_requantize (the CPU leaves it NULL): exact against the kernel's arithmetic done here,
 *             new code = encode(fl(fl(c * old) / new)) for slots whose recorded scale differs, others untouched.
 *  attention  exact: softmax(softcap(scale q.k)) . v in double over the cache's decoded values (code * slot scale).
 *             Whichever kernel runs (paged split-KV decode, the varlen prefill kernel over the slots gathered to bf16,
 *             the reference kernel), each score is within
 *               s_j = A_j (c_k + (hd + 16) a) + scale K_j u + 2^-20 (|s| + |c|)
 *             (A_j = scale sum_d |q_d k_jd|; c_k = b for 8-bit caches, whose prefill path rounds code * scale to
 *             bf16, 0 for bf16 caches; K_j = sum_d |k_jd| covers q converted to f16 below f16's normal range in the
 *             decode kernel on 8-bit caches; 2^-20 the scale products, the softcap's tanhf), and each weight's
 *             exponent within a_j = s_j + 2^-20 (|c_j - m| + |m| + R + 8) (the scale folded with log2 e, exp2f,
 *             the online and split-KV rescaling with their log-sum-exps; R = the row's score range). With
 *             rho = expm1(max a_j) and w = 2 rho / (1 - rho):
 *               |out - exact| <= w M + (2b + c_v + (N + 64) a)(1 + w) M + (N + 16) u max|v|, then bf16,
 *             M = sum_j p_j |v_j| (2b: P rounded to bf16 or f16 for the P.V MMA, in the numerator and possibly in the
 *             row sum; c_v = b for 8-bit caches (V gathered to bf16); N keys; the last term: P in f16 below its
 *             normal range). The scalar set: test_backend_ops.c's attention bound.
 *             Every case is a real step: begin_step, kv_store of the step's tokens (rewriting what the fill steps
 *             wrote), attention. Sequences A..E, P1..P3 of 1000, 37, 1, 129, 16, 100, 264 and 3 positions live in
 *             blocks shuffled over 128 physical ones. Steps: decode (A..E, one token each: the split-KV kernel),
 *             prefill (all of P1, P2's positions 200..263 after 200 cached ones, all of P3: the varlen kernel),
 *             mixed (A, C, E decoding around chunks of P2 and P1: decode rows gathered and scattered back), the mixed
 *             step's tokens interleaved without cu_seqlens_q, and the mixed step with a sliding window and a softcap
 *             (the last two: the reference kernel); bf16 caches with sharp scores (q 8x) too. Caches: bf16, fp8
 *             e4m3/e5m2 and int8 with one static scale per layer (the measured kernels) and per-slot dynamic scales
 *             (the reference kernel); GQA 4 (head size 128), GQA 16 and MHA (64), head size 96 and GQA 32 (the
 *             reference kernel). Each line names the kernel the backend's rules pick.
 *  graphs     a decode step with a padding row (slot -1) and graph_ctx (model.c's captured steps), run eagerly
 *             (within the attention bounds), captured, replayed: the three outputs are equal bit for bit, and the
 *             padding row writes nothing (the cache equals the scalar set's, which never saw that row).
 *
 * Not run, because the backend exits the process on them (an op cannot return an error): W8A8 below compute
 * capability 8.9 (cuBLASLt has no FP8 GEMM there; the section says SKIPPED), linear with the fp8 group,
 * fp8 static and int8 input treatments; matmul shapes whose n_in or n_out is not a multiple of 8 (cuBLASLt); f16 and
 * f32 KV caches (the engine maps them to bf16). scatter_rows is internal to the backend (the mixed step uses it).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "assay/backend.h"
#include "assay/dequant.h"
#include "assay/dtype.h"
#include "assay/quant_fp8.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kq_inline.h"
#include "check.h"

extern char **environ;

#define U 0x1p-24  /* unit roundoff of float */
#define UB 0x1p-8  /* of bf16 */
#define UA 0x1p-22 /* one fp32 addition in a tensor core or a reduction tree */

static assay_backend *gpu, *cpu;
static const assay_backend_ops *G, *C;
static int forced_ref; /* ASSAY_CUDA_ATTN_REF is set: every attention call takes the reference kernel */

/* ---- random inputs (test_backend_ops.c's) ---------------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float frand(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2 - 1); } /* [-1, 1) */
/* activations: mostly [-1, 1), now and then an outlier 8x larger, as real hidden states have */
static float arand(void) { return frand() * ((rnd() % 64) == 0 ? 8.0f : 1.0f); }

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    ASSAY_ASSERT(p);
    return p;
}

/* x rounded to bf16 (nearest even): the values the GPU holds */
static float bf(float x) { return assay_bf16_to_f32(assay_f32_to_bf16(x)); }

/* the error bound after a final rounding to bf16 of a value within e of v */
static double out_bf16(double v, double e) { return e + UB * (fabs(v) + e); }

/* ---- error statistics and the report (test_backend_ops.c's) ---------------------------------------------------- */

typedef struct errs {
    int exact; /* bound 0: values must be equal */
    double max_abs, max_rel, max_bound, max_ratio;
    int64_t n, bad;
} errs;

static errs errs_new(int exact) { return (errs){.exact = exact}; }

static void errs_add(errs *e, double got, double want, double bound) {
    double err = fabs(got - want);
    e->n++;
    if (err != err) err = INFINITY; /* NaN */
    if (err > e->max_abs) e->max_abs = err;
    if (want != 0 && err / fabs(want) > e->max_rel) e->max_rel = err / fabs(want);
    if (e->exact) {
        if (!(got == want)) e->bad++;
        return;
    }
    if (bound > e->max_bound) e->max_bound = bound;
    double ratio = bound > 0 ? err / bound : (err == 0 ? 0 : INFINITY);
    if (ratio > e->max_ratio) e->max_ratio = ratio;
    if (!(err <= bound)) e->bad++;
}

static void errs_fmt(char *buf, size_t cap, const errs *e, const char *none) {
    char t[128];
    if (!e) snprintf(t, sizeof t, "%s", none);
    else if (e->exact)
        snprintf(t, sizeof t, "exact: %lld of %lld differ%s", (long long)e->bad, (long long)e->n, e->bad ? " <-- FAIL" : "");
    else
        snprintf(t, sizeof t, "abs %8.2e rel %8.2e bound<=%8.2e err/bound %6.3f%s", e->max_abs, e->max_rel, e->max_bound,
                 e->max_ratio, e->bad ? " <-- FAIL" : "");
    snprintf(buf, cap, "%-62s", t);
}

static int n_cases, n_failed;

/* vs_ref NULL: the scalar set has no such kernel (no_ref says what is shown instead) */
static void report(const char *op, const char *shape, const errs *vs_ref, const char *no_ref, const errs *vs_f64) {
    char a[160], b[160];
    errs_fmt(a, sizeof a, vs_ref, no_ref ? no_ref : "-");
    errs_fmt(b, sizeof b, vs_f64, "-");
    int ok = (!vs_ref || vs_ref->bad == 0) && (!vs_f64 || vs_f64->bad == 0);
    printf("  %-10s %-70s vs scalar: %s | vs f64: %s  %s\n", op, shape, a, b, ok ? "OK" : "FAIL");
    fflush(stdout);
    n_cases++;
    n_failed += !ok;
    CHECK(ok);
}

/* a case that could not run (an op returned an error) */
static void report_fail(const char *op, const char *shape, const char *why) {
    printf("  %-10s %-70s FAIL: %s\n", op, shape, why);
    fflush(stdout);
    n_cases++;
    n_failed++;
    CHECK(0);
}

/* 1 when the CUDA backend has the op; else a SKIPPED line */
static int have(int present, const char *op) {
    if (present) return 1;
    printf("  %-10s SKIPPED: the CUDA backend's op table leaves it NULL\n", op);
    return 0;
}

/* ---- device buffers -------------------------------------------------------------------------------------------- */

static void *dalloc(size_t bytes) {
    void *p = G->alloc(gpu, bytes);
    if (!p) {
        fprintf(stderr, "test_backend_ops_cuda: no GPU memory for %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}
static void dfree(void *p) { G->free(gpu, p); }
/* n activations x (bf16 values) into device buffer d */
static void dput(void *d, const float *x, int64_t n) {
    uint16_t *h = xcalloc((size_t)n, 2);
    for (int64_t i = 0; i < n; i++) h[i] = assay_f32_to_bf16(x[i]);
    G->upload(gpu, d, h, (size_t)n * 2);
    G->synchronize(gpu);
    free(h);
}
static float *dact(const float *x, int64_t n) {
    float *d = dalloc((size_t)n * 2);
    dput(d, x, n);
    return d;
}
/* f32 vectors (norm weights, biases, RoPE frequencies) */
static float *dvec(const float *x, int64_t n) {
    float *d = dalloc((size_t)n * 4);
    G->upload(gpu, d, x, (size_t)n * 4);
    G->synchronize(gpu);
    return d;
}
/* n activations back, widened here */
static void dget(float *x, const void *d, int64_t n) {
    uint16_t *h = xcalloc((size_t)n, 2);
    G->download(gpu, h, d, (size_t)n * 2);
    for (int64_t i = 0; i < n; i++) x[i] = assay_bf16_to_f32(h[i]);
    free(h);
}
/* n activations of NaN (an output an op leaves unwritten shows) */
static float *dnan(int64_t n) {
    float *d = dalloc((size_t)n * 2);
    uint16_t *h = xcalloc((size_t)n, 2);
    for (int64_t i = 0; i < n; i++) h[i] = 0x7fc0;
    G->upload(gpu, d, h, (size_t)n * 2);
    G->synchronize(gpu);
    free(h);
    return d;
}
/* the device activation `elems` bf16 elements past d */
static float *dat(float *d, int64_t elems) { return (float *)(void *)((uint16_t *)(void *)d + elems); }

/* ---- buffers ----------------------------------------------------------------------------------------------------- */

static void test_buffers(void) {
    printf("\nbuffers: alloc (zeroed), upload, copy, download; download_f32 (bf16 activations -> host f32)\n");
    const int64_t n = 4099;
    uint8_t *src = xcalloc(n, 1), *got = xcalloc(n, 1);
    for (int64_t i = 0; i < n; i++) src[i] = (uint8_t)rnd();
    void *d1 = dalloc(n), *d2 = dalloc(n);
    G->download(gpu, got, d1, n);
    errs ez = errs_new(1);
    for (int64_t i = 0; i < n; i++) errs_add(&ez, got[i], 0, 0);
    report("alloc", "4099 bytes read back before any write", NULL, "-", &ez);
    G->upload(gpu, d1, src, n);
    G->copy(gpu, d2, d1, n);
    G->download(gpu, got, d2, n);
    G->synchronize(gpu);
    errs eb = errs_new(1);
    for (int64_t i = 0; i < n; i++) errs_add(&eb, got[i], src[i], 0);
    report("buffers", "4099 bytes: upload, copy, download", NULL, "-", &eb);
    dfree(d1);
    dfree(d2);
    if (have(G->download_f32 != NULL, "dl_f32")) {
        const int64_t m = 3001;
        float *x = xcalloc(m, 4), *y = xcalloc(m, 4);
        for (int64_t i = 0; i < m; i++) x[i] = bf(arand() * 100);
        float *dx = dact(x, m);
        G->download_f32(gpu, y, dx, m);
        errs e = errs_new(1);
        for (int64_t i = 0; i < m; i++) errs_add(&e, y[i], x[i], 0);
        report("dl_f32", "3001 activations", NULL, "-", &e);
        dfree(dx);
        free(x);
        free(y);
    }
    free(src);
    free(got);
}

/* ---- weights of every type (test_backend_ops.c's generators) ------------------------------------------------------ */

static const struct {
    assay_type t;
    int half[2];
} wlayout[] = {
    {ASSAY_TYPE_Q4_0, {0, -1}},   {ASSAY_TYPE_Q4_1, {0, 2}},     {ASSAY_TYPE_Q5_0, {0, -1}},  {ASSAY_TYPE_Q5_1, {0, 2}},
    {ASSAY_TYPE_Q8_0, {0, -1}},   {ASSAY_TYPE_Q8_1, {0, 2}},     {ASSAY_TYPE_Q2_K, {80, 82}}, {ASSAY_TYPE_Q3_K, {108, -1}},
    {ASSAY_TYPE_Q4_K, {0, 2}},    {ASSAY_TYPE_Q5_K, {0, 2}},     {ASSAY_TYPE_Q6_K, {208, -1}}, {ASSAY_TYPE_Q4G32, {0, -1}},
    {ASSAY_TYPE_Q4G64, {0, -1}},  {ASSAY_TYPE_Q4G128, {0, -1}},
};

/* n elements of type t at dst: random blocks (every bit pattern of codes, sub-block scales and zero points) with
 * fp16 scales in range; 0 when this test has no generator for the type. */
static int fill_weight(assay_type t, uint8_t *dst, int64_t n) {
    const assay_type_info *ti = assay_type_get(t);
    if (t == ASSAY_TYPE_F32) {
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = frand();
        return 1;
    }
    if (t == ASSAY_TYPE_F16 || t == ASSAY_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = t == ASSAY_TYPE_F16 ? assay_float_to_half(frand()) : assay_float_to_bf16(frand());
        return 1;
    }
    int64_t nb = n / ti->block_elems;
    if (t == ASSAY_TYPE_Q8_K) {
        assay_block_q8_K *b = (assay_block_q8_K *)dst;
        for (int64_t i = 0; i < nb; i++) {
            b[i].d = frand() * 0.01f;
            for (int j = 0; j < 256; j++) b[i].qs[j] = (int8_t)((int)(rnd() % 255) - 127);
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
                b[i].bsums[g] = (int16_t)s;
            }
        }
        return 1;
    }
    for (size_t k = 0; k < sizeof wlayout / sizeof wlayout[0]; k++) {
        if (wlayout[k].t != t) continue;
        for (int64_t i = 0; i < nb; i++) {
            uint8_t *blk = dst + i * ti->block_bytes;
            for (size_t j = 0; j < ti->block_bytes; j++) blk[j] = (uint8_t)rnd();
            for (int h = 0; h < 2; h++)
                if (wlayout[k].half[h] >= 0) {
                    uint16_t v = assay_float_to_half(frand() * 0.05f);
                    memcpy(blk + wlayout[k].half[h], &v, 2);
                }
        }
        return 1;
    }
    return 0;
}

/* Per element of a weight row: o = the largest constant any CPU kernel adds to the codes and subtracts again as a float
 * term, m2 = twice the block's min (test_backend_ops.c). */
static void weight_extras(assay_type t, const uint8_t *row, int64_t n, double *o, double *m2) {
    for (int64_t i = 0; i < n; i++) o[i] = m2[i] = 0;
    const assay_type_info *ti = assay_type_get(t);
    switch (t) {
    case ASSAY_TYPE_Q4_0:
    case ASSAY_TYPE_Q5_0:
    case ASSAY_TYPE_Q8_0: {
        double c = t == ASSAY_TYPE_Q4_0 ? 8 : t == ASSAY_TYPE_Q5_0 ? 16 : 128;
        for (int64_t i = 0; i < n; i++) {
            uint16_t dh;
            memcpy(&dh, row + (i / 32) * ti->block_bytes, 2);
            o[i] = 2 * c * fabs(assay_half_to_float(dh));
        }
        break;
    }
    case ASSAY_TYPE_Q4_1:
    case ASSAY_TYPE_Q5_1:
        for (int64_t i = 0; i < n; i++) {
            uint16_t mh;
            memcpy(&mh, row + (i / 32) * ti->block_bytes + 2, 2);
            o[i] = m2[i] = 2 * fabs(assay_half_to_float(mh));
        }
        break;
    case ASSAY_TYPE_Q2_K:
    case ASSAY_TYPE_Q3_K:
    case ASSAY_TYPE_Q4_K:
    case ASSAY_TYPE_Q5_K:
    case ASSAY_TYPE_Q6_K:
        for (int64_t b = 0; b < n / 256; b++) {
            kq_unpacked u;
            const void *blk = row + b * ti->block_bytes;
            if (t == ASSAY_TYPE_Q2_K) kq_unpack_q2_K(blk, &u);
            else if (t == ASSAY_TYPE_Q3_K) kq_unpack_q3_K(blk, &u);
            else if (t == ASSAY_TYPE_Q4_K) kq_unpack_q4_K(blk, &u);
            else if (t == ASSAY_TYPE_Q5_K) kq_unpack_q5_K(blk, &u);
            else kq_unpack_q6_K(blk, &u);
            for (int i = 0; i < 256; i++) o[b * 256 + i] = 2 * fabs(u.min[i / 16]);
        }
        break;
    default: break;
    }
}

/* x as the scalar set treats it for vec_dot_type vt: xq = the values it multiplies, e = the bound on |x - xq|
 * (test_backend_ops.c's act_quant, scalar set only). */
static void act_quant_scalar(assay_type vt, const float *x, int64_t n, double *xq, double *e) {
    if (vt == ASSAY_TYPE_F32) {
        for (int64_t i = 0; i < n; i++) xq[i] = x[i], e[i] = 0;
        return;
    }
    const assay_cpu_kernels *rk = assay_cpu_kernels_ref();
    int64_t qb = vt == ASSAY_TYPE_Q8_K ? 256 : 32;
    uint8_t *buf = xcalloc(1, assay_type_row_bytes(vt, n));
    rk->from_float[vt](x, buf, n);
    for (int64_t b = 0; b < n / qb; b++) {
        const float *xb = x + b * qb;
        float amax = 0;
        for (int j = 0; j < qb; j++) amax = fmaxf(amax, fabsf(xb[j]));
        double d, eb;
        const int8_t *qs;
        if (vt == ASSAY_TYPE_Q8_K) {
            const assay_block_q8_K *blk = (const assay_block_q8_K *)buf + b;
            d = blk->d;
            qs = blk->qs;
            eb = d * (0.5 + 300 * U);
        } else {
            const uint8_t *blk = buf + b * (vt == ASSAY_TYPE_Q8_0 ? sizeof(assay_block_q8_0) : sizeof(assay_block_q8_1));
            uint16_t dh;
            memcpy(&dh, blk, 2);
            d = assay_half_to_float(dh);
            qs = (const int8_t *)(blk + (vt == ASSAY_TYPE_Q8_0 ? 2 : 4));
            double dr = amax / 127.0f;
            eb = dr * (0.5 + 381 * U + 127 * 0x1p-11) + 127 * 0x1p-25;
        }
        for (int j = 0; j < qb; j++) {
            xq[b * qb + j] = qs[j] * d;
            e[b * qb + j] = eb;
        }
    }
    free(buf);
}

/* ---- matmul / linear --------------------------------------------------------------------------------------------- */

static const assay_act_quant act_none = {ASSAY_ACT_QUANT_NONE, 0, 0, 0};

typedef struct lin_case {
    assay_type type;
    const uint8_t *w; /* [n_out] rows of rb bytes */
    size_t rb;
    const float *wd;  /* dequantized [n_out][n_in] */
    int64_t n_in, n_out, n_tok;
    const float *x;   /* [n_tok][n_in], bf16 values */
    const int32_t *perm;
    const float *bias;
} lin_case;

/* Per output (bias included): want = exact math on the operands the GPU multiplies (W rounded to bf16 as the upload
 * rounds it, x), bg = the GPU's bound against it; bc = the scalar set's bound against exact math on its own operands
 * (W, x as its Q8 quantizer leaves it); dt = the exact distance between the two targets. */
static void linear_bounds(const lin_case *c, const float *xp, double *want, double *bg, double *bc, double *dt) {
    const assay_cpu_kernels *rk = assay_cpu_kernels_ref();
    int64_t n_in = c->n_in, n_out = c->n_out;
    assay_type vt = rk->type[c->type].vec_dot ? rk->type[c->type].vec_dot_type : ASSAY_TYPE_F32;
    double *o = xcalloc(n_in, 8), *m2 = xcalloc(n_in, 8), *xq = xcalloc(n_in * c->n_tok, 8), *e = xcalloc(n_in * c->n_tok, 8);
    float *wb = xcalloc(n_in, 4);
    for (int64_t t = 0; t < c->n_tok; t++) act_quant_scalar(vt, xp + t * n_in, n_in, xq + t * n_in, e + t * n_in);
    for (int64_t r = 0; r < n_out; r++) {
        weight_extras(c->type, c->w + r * c->rb, n_in, o, m2);
        const float *wr = c->wd + r * n_in;
        for (int64_t i = 0; i < n_in; i++) wb[i] = bf(wr[i]);
        for (int64_t t = 0; t < c->n_tok; t++) {
            const float *xt = xp + t * n_in;
            const double *xqt = xq + t * n_in, *et = e + t * n_in;
            double yb = 0, Tb = 0, yq = 0, Tq = 0, M2 = 0;
            for (int64_t i = 0; i < n_in; i++) {
                yb += (double)wb[i] * xt[i];
                Tb += fabs((double)wb[i] * xt[i]);
                yq += wr[i] * xqt[i];
                Tq += (fabs(wr[i]) + o[i]) * (fabs(xqt[i]) + et[i]);
                M2 += m2[i] * et[i];
            }
            double g = out_bf16(yb, (double)(n_in + 64) * UA * Tb);
            double s = (double)(n_in + 16) * U * Tq + M2 + U * fabs(yq);
            if (c->bias) {
                yb += c->bias[r];
                yq += c->bias[r];
                g += (U + UB * (1 + U)) * (fabs(yb) + g);
                s += U * (fabs(yq) + s);
            }
            want[t * n_out + r] = yb;
            bg[t * n_out + r] = g + 1e-30;
            bc[t * n_out + r] = s + 1e-30;
            dt[t * n_out + r] = fabs(yb - yq);
        }
    }
    free(o); free(m2); free(xq); free(e); free(wb);
}

static void run_linear(const lin_case *c) {
    const assay_cpu_kernels *rk = assay_cpu_kernels_ref();
    int cpu_has = rk->type[c->type].vec_dot != NULL;
    int plain = !c->perm && !c->bias;
    const char *op = plain ? "matmul" : "linear";
    char shape[128];
    snprintf(shape, sizeof shape, "type=%s,n_in=%lld,n_out=%lld,n_tok=%lld%s%s", assay_type_name(c->type),
             (long long)c->n_in, (long long)c->n_out, (long long)c->n_tok, c->perm ? ",perm" : "", c->bias ? ",bias" : "");
    assay_weight gw = {c->type, c->w, c->n_in, c->n_out, c->rb, "w", c->perm, NULL, 0, 0, 0};
    if (G->prepare_weight(gpu, &gw) != ASSAY_OK) {
        report_fail(op, shape, assay_last_error());
        return;
    }
    int64_t n_in = c->n_in, ny = c->n_tok * c->n_out;
    float *xp = xcalloc(c->n_tok * n_in, 4); /* x as the weight's columns see it (act order) */
    for (int64_t t = 0; t < c->n_tok; t++)
        for (int64_t i = 0; i < n_in; i++) xp[t * n_in + i] = c->x[t * n_in + (c->perm ? c->perm[i] : i)];
    double *want = xcalloc(ny, 8), *bg = xcalloc(ny, 8), *bc = xcalloc(ny, 8), *dt = xcalloc(ny, 8);
    linear_bounds(c, xp, want, bg, bc, dt);
    float *dx = dact(c->x, c->n_tok * n_in), *dy = dnan(ny), *db = c->bias ? dvec(c->bias, c->n_out) : NULL;
    if (plain) G->matmul(gpu, dy, &gw, dx, c->n_tok);
    else G->linear(gpu, dy, &gw, &act_none, dx, c->n_tok, db);
    float *y = xcalloc(ny, 4), *yc = NULL;
    dget(y, dy, ny);
    if (cpu_has) {
        assay_weight cw = {c->type, c->w, c->n_in, c->n_out, c->rb, "w", c->perm, NULL, 0, 0, 0};
        CHECK_OK(C->prepare_weight(cpu, &cw));
        yc = xcalloc(ny, 4);
        if (plain) C->matmul(cpu, yc, &cw, c->x, c->n_tok);
        else C->linear(cpu, yc, &cw, &act_none, c->x, c->n_tok, c->bias);
    }
    errs er = errs_new(0), ex = errs_new(0);
    for (int64_t i = 0; i < ny; i++) {
        if (yc) errs_add(&er, y[i], yc[i], bg[i] + dt[i] + bc[i]);
        errs_add(&ex, y[i], want[i], bg[i]);
    }
    report(op, shape, yc ? &er : NULL, "(no scalar kernel for the type)", &ex);
    dfree(dx);
    dfree(dy);
    if (db) dfree(db);
    free(xp); free(want); free(bg); free(bc); free(dt); free(y); free(yc);
}

static void test_linear(void) {
    printf("\nmatmul, linear: y = x . W^T (+ bias, act-order perm), every weight type the CUDA backend uploads\n");
    if (!have(G->prepare_weight != NULL, "prepare") || !have(G->matmul != NULL, "matmul") ||
        !have(G->linear != NULL, "linear"))
        return;
    /* n_in, n_out, n_tok: one token (cuBLASLt's GEMV shapes), a few, a prefill of 130; n_in multiples of 256 (a whole
     * number of k-quant blocks), n_out multiples of 8 (cuBLASLt); a float-only n_in of 264 (not a multiple of 16) */
    static const int64_t shapes[][3] = {{256, 64, 1}, {512, 200, 7}, {1024, 136, 33}, {4096, 48, 3}, {768, 256, 130},
                                        {264, 24, 5}};
    for (int t = 0; t < ASSAY_TYPE_COUNT; t++) {
        assay_type type = (assay_type)t;
        if (!assay_type_get(type) || !assay_dequant_row_get(type)) continue; /* prepare_weight refuses it too */
        int64_t blk = assay_type_get(type)->block_elems;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t n_in = shapes[si][0], n_out = shapes[si][1], n_tok = shapes[si][2];
            if (n_in % blk) continue;
            size_t rb = assay_type_row_bytes(type, n_in);
            uint8_t *w = xcalloc(n_out, rb);
            int gen = 1;
            for (int64_t r = 0; r < n_out; r++) gen &= fill_weight(type, w + r * rb, n_in);
            if (!gen) {
                printf("  %-10s SKIPPED: type %s: no weight generator here\n", "matmul", assay_type_name(type));
                free(w);
                break;
            }
            float *wd = xcalloc(n_out * n_in, 4), *x = xcalloc(n_tok * n_in, 4);
            CHECK_OK(assay_dequantize(type, w, wd, n_out * n_in));
            for (int64_t i = 0; i < n_tok * n_in; i++) x[i] = bf(arand());
            if (n_tok > 1) /* an all-zero activation block (scale 0) in the last token */
                for (int64_t i = 0; i < (blk > 32 ? blk : 32); i++) x[(n_tok - 1) * n_in + i] = 0;
            lin_case c = {type, w, rb, wd, n_in, n_out, n_tok, x, NULL, NULL};
            run_linear(&c);
            /* the linear op's extras on the types that come with them: f32 (biases of float checkpoints) and the
             * packed group int4 of act-order GPTQ checkpoints */
            if (si == 1 && (type == ASSAY_TYPE_F32 || type == ASSAY_TYPE_Q4G128)) {
                float *bias = xcalloc(n_out, 4);
                int32_t *perm = xcalloc(n_in, 4);
                for (int64_t i = 0; i < n_out; i++) bias[i] = frand();
                for (int64_t i = 0; i < n_in; i++) perm[i] = (int32_t)((i * 37 + 5) % n_in); /* 37 is prime to 512 */
                c.bias = bias;
                run_linear(&c);
                c.perm = perm;
                run_linear(&c);
                c.bias = NULL;
                run_linear(&c);
                free(bias);
                free(perm);
            }
            free(w); free(wd); free(x);
        }
    }
}

/* ---- linear W8A8 (on-the-fly fp8) ------------------------------------------------------------------------------ */

static void test_fp8_linear(void) {
    printf("\nlinear W8A8: e4m3 weights (one scale) x per-token e4m3 activations (--quantization fp8)\n");
    if (!have(G->linear != NULL, "linear")) return;
    /* cuBLASLt's FP8 GEMM needs compute capability 8.9 or 9.0; below, the backend would exit on the first call */
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major * 10 + prop.minor < 89) {
        printf("  %-10s SKIPPED: compute capability %d.%d has no FP8 GEMM (8.9 or later)\n", "linear", prop.major, prop.minor);
        return;
    }
    static const int64_t shapes[][3] = {{256, 64, 1}, {1024, 144, 9}, {4096, 256, 40}}; /* multiples of 16 */
    const assay_act_quant aq = {ASSAY_ACT_QUANT_FP8_TOKEN, ASSAY_FP8_E4M3, 0, 0};
    const float scale = 0.00217f;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n_in = shapes[si][0], n_out = shapes[si][1], n_tok = shapes[si][2], ny = n_tok * n_out;
        uint8_t *codes = xcalloc(n_in * n_out, 1);
        float *wf = xcalloc(n_in * n_out, 4), *x = xcalloc(n_tok * n_in, 4), *bias = xcalloc(n_out, 4);
        double *wx = xcalloc(n_in * n_out, 8);
        for (int64_t i = 0; i < n_in * n_out; i++) {
            uint8_t q;
            do q = (uint8_t)rnd(); while ((q & 0x7f) == 0x7f); /* not NaN */
            codes[i] = q;
            wf[i] = assay_fp8_e4m3_to_f32(q) * scale; /* model.c's f32 values for a host backend */
            wx[i] = (double)assay_fp8_e4m3_to_f32(q) * scale;
        }
        for (int64_t i = 0; i < n_tok * n_in; i++) x[i] = bf(arand());
        if (si == 1) /* an all-zero token: amax 0 */
            for (int64_t i = 0; i < n_in; i++) x[(n_tok - 1) * n_in + i] = 0;
        for (int64_t i = 0; i < n_out; i++) bias[i] = frand();
        for (int form = 0; form < 2; form++) { /* 0: the codes (type F8_E4M3), 1: the f32 values, with a bias */
            const float *bs = form ? bias : NULL;
            char shape[128];
            snprintf(shape, sizeof shape, "w=%s*scale,n_in=%lld,n_out=%lld,n_tok=%lld%s", form ? "f32(e4m3)" : "F8_E4M3",
                     (long long)n_in, (long long)n_out, (long long)n_tok, bs ? ",bias" : "");
            assay_weight gw = {form ? ASSAY_TYPE_F32 : ASSAY_TYPE_F8_E4M3, form ? (const void *)wf : (const void *)codes,
                               n_in, n_out, (size_t)n_in * (form ? 4 : 1), "w_fp8", NULL, NULL, scale, 0, 0};
            if (G->prepare_weight(gpu, &gw) != ASSAY_OK) {
                report_fail("linear", shape, assay_last_error());
                continue;
            }
            double *want = xcalloc(ny, 8), *bg = xcalloc(ny, 8), *bc = xcalloc(ny, 8), *dt = xcalloc(ny, 8);
            float *xg = xcalloc(n_in, 4), *xc = xcalloc(n_in, 4), sc_c;
            uint8_t *cc = xcalloc(n_in, 1);
            for (int64_t t = 0; t < n_tok; t++) {
                const float *xt = x + t * n_in;
                /* the GPU's quantizer (assay_cuda_quant_fp8_per_token): s = amax/448, code = e4m3(x * fl(448/amax)) */
                float amax = 0;
                for (int64_t i = 0; i < n_in; i++) amax = fmaxf(amax, fabsf(xt[i]));
                float inv = amax > 0 ? 448.0f / amax : 0.0f, sg = amax / 448.0f;
                for (int64_t i = 0; i < n_in; i++) xg[i] = assay_fp8_decode(ASSAY_FP8_E4M3, assay_fp8_encode(ASSAY_FP8_E4M3, xt[i] * inv));
                /* the scalar set's (act_quant.h's reference) */
                assay_act_quant_apply(&aq, xt, 1, n_in, xc, cc, &sc_c);
                for (int64_t o = 0; o < n_out; o++) {
                    const double *wr = wx + o * n_in;
                    const float *wfr = wf + o * n_in;
                    double y8 = 0, T8 = 0, yc = 0, Tc = 0;
                    for (int64_t i = 0; i < n_in; i++) {
                        y8 += wr[i] * xg[i];
                        T8 += fabs(wr[i] * xg[i]);
                        yc += (double)wfr[i] * xc[i];
                        Tc += fabs((double)wfr[i] * xc[i]);
                    }
                    y8 *= sg;
                    T8 *= sg;
                    double g = out_bf16(y8, (0x1p-8 + (double)(n_in + 64) * UA + 3 * U) * T8);
                    double sc = (double)(n_in + 16) * U * Tc + U * fabs(yc);
                    if (bs) {
                        y8 += bs[o];
                        yc += bs[o];
                        g += (U + UB * (1 + U)) * (fabs(y8) + g);
                        sc += U * (fabs(yc) + sc);
                    }
                    want[t * n_out + o] = y8;
                    bg[t * n_out + o] = g + 1e-30;
                    bc[t * n_out + o] = sc + 1e-30;
                    dt[t * n_out + o] = fabs(y8 - yc);
                }
            }
            free(xg); free(xc); free(cc);
            float *dx = dact(x, n_tok * n_in), *dy = dnan(ny), *db = bs ? dvec(bs, n_out) : NULL;
            G->linear(gpu, dy, &gw, &aq, dx, n_tok, db);
            float *y = xcalloc(ny, 4), *yc = xcalloc(ny, 4);
            dget(y, dy, ny);
            assay_weight cw = {ASSAY_TYPE_F32, wf, n_in, n_out, (size_t)n_in * 4, "w_fp8", NULL, NULL, scale, 0, 0};
            CHECK_OK(C->prepare_weight(cpu, &cw));
            C->linear(cpu, yc, &cw, &aq, x, n_tok, bs);
            errs er = errs_new(0), ex = errs_new(0);
            for (int64_t i = 0; i < ny; i++) {
                errs_add(&er, y[i], yc[i], bg[i] + dt[i] + bc[i]);
                errs_add(&ex, y[i], want[i], bg[i]);
            }
            report("linear", shape, &er, NULL, &ex);
            dfree(dx);
            dfree(dy);
            if (db) dfree(db);
            free(want); free(bg); free(bc); free(dt); free(y); free(yc);
        }
        free(codes); free(wf); free(x); free(bias); free(wx);
    }
}

/* ---- get_rows ------------------------------------------------------------------------------------------------------- */

static void test_get_rows(void) {
    printf("\nget_rows: y[t] = row ids[t] of W as prepare_weight uploaded it (bf16 of the dequantized row)\n");
    if (!have(G->get_rows != NULL, "get_rows")) return;
    static const int32_t ids1[] = {6}, ids7[] = {10, 3, 3, 0, 7, 10, 1};
    for (int t = 0; t < ASSAY_TYPE_COUNT; t++) {
        assay_type type = (assay_type)t;
        if (!assay_type_get(type) || !assay_dequant_row_get(type)) continue;
        int64_t blk = assay_type_get(type)->block_elems;
        for (int si = 0; si < 2; si++) {
            int64_t n_in = blk == 1 ? (si ? 67 : 8) : blk * (si ? 3 : 1), n_out = 11, n = si ? 7 : 1;
            const int32_t *ids = si ? ids7 : ids1;
            size_t rb = assay_type_row_bytes(type, n_in);
            uint8_t *w = xcalloc(n_out, rb);
            int gen = 1;
            for (int64_t r = 0; r < n_out; r++) gen &= fill_weight(type, w + r * rb, n_in);
            char shape[96];
            snprintf(shape, sizeof shape, "type=%s,n_in=%lld,n_ids=%lld", assay_type_name(type), (long long)n_in, (long long)n);
            if (!gen) {
                printf("  %-10s SKIPPED: type %s: no weight generator here\n", "get_rows", assay_type_name(type));
                free(w);
                break;
            }
            assay_weight gw = {type, w, n_in, n_out, rb, "emb", NULL, NULL, 0, 0, 0};
            assay_weight cw = gw; /* the CPU's get_rows reads the stored rows: nothing to prepare */
            if (G->prepare_weight(gpu, &gw) != ASSAY_OK) {
                report_fail("get_rows", shape, assay_last_error());
                free(w);
                continue;
            }
            float *wd = xcalloc(n_out * n_in, 4), *y = xcalloc(n * n_in, 4), *yc = xcalloc(n * n_in, 4);
            CHECK_OK(assay_dequantize(type, w, wd, n_out * n_in));
            float *dy = dnan(n * n_in);
            G->get_rows(gpu, dy, &gw, ids, n);
            dget(y, dy, n * n_in);
            C->get_rows(cpu, yc, &cw, ids, n);
            errs er = errs_new(1), ex = errs_new(1);
            for (int64_t r = 0; r < n; r++)
                for (int64_t i = 0; i < n_in; i++) {
                    errs_add(&er, y[r * n_in + i], bf(yc[r * n_in + i]), 0);
                    errs_add(&ex, y[r * n_in + i], bf(wd[(int64_t)ids[r] * n_in + i]), 0);
                }
            report("get_rows", shape, &er, NULL, &ex);
            dfree(dy);
            free(w); free(wd); free(y); free(yc);
        }
    }
}

/* ---- rmsnorm, add_rmsnorm ------------------------------------------------------------------------------------------ */

/* exact rmsnorm rows of x (double), the GPU's and the scalar set's bounds */
static void rms_exact(const float *x, const float *g, int64_t n, int64_t rows, float eps, double *want, double *bg,
                      double *bc) {
    double e1 = (n / 2.0 + 16) * U;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
        double inv = 1 / sqrt(ss / n + (double)eps);
        for (int64_t i = 0; i < n; i++) {
            double y = x[r * n + i] * inv * g[i];
            want[r * n + i] = y;
            bg[r * n + i] = out_bf16(y, e1 * fabs(y)) + 1e-30;
            bc[r * n + i] = 4 * U * fabs(y) + 1e-30;
        }
    }
}

static void test_rmsnorm(void) {
    printf("\nrmsnorm: y = x / rms(x) * gamma; add_rmsnorm: x += h, y = rmsnorm(x) * gamma\n");
    if (have(G->rmsnorm != NULL, "rmsnorm")) {
        static const struct { int64_t n, rows; float eps; int inplace; } shapes[] = {
            {1, 1, 1e-6f, 0}, {7, 3, 1e-5f, 0}, {67, 2, 1e-6f, 1}, {256, 5, 1e-6f, 0}, {4096, 2, 1e-5f, 0},
            {5120, 7, 1e-5f, 1}, {128, 96, 1e-6f, 1}}; /* the last: q_norm's many rows of one head */
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t n = shapes[si].n, rows = shapes[si].rows, N = n * rows;
            float eps = shapes[si].eps;
            float *x = xcalloc(N, 4), *g = xcalloc(n, 4), *y = xcalloc(N, 4), *yc = xcalloc(N, 4);
            double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8);
            for (int64_t i = 0; i < N; i++) x[i] = bf(frand() * 4);
            for (int64_t i = 0; i < n; i++) g[i] = 1 + frand() * 0.5f;
            rms_exact(x, g, n, rows, eps, want, bg, bc);
            float *dx = dact(x, N), *dg = dvec(g, n), *dy = shapes[si].inplace ? dx : dnan(N);
            G->rmsnorm(gpu, dy, dx, dg, n, rows, eps);
            dget(y, dy, N);
            memcpy(yc, x, N * 4);
            C->rmsnorm(cpu, yc, shapes[si].inplace ? yc : x, g, n, rows, eps);
            errs er = errs_new(0), ex = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                errs_add(&er, y[i], yc[i], bg[i] + bc[i]);
                errs_add(&ex, y[i], want[i], bg[i]);
            }
            char shape[96];
            snprintf(shape, sizeof shape, "n=%lld,rows=%lld,eps=%g%s", (long long)n, (long long)rows, eps,
                     shapes[si].inplace ? ",in-place" : "");
            report("rmsnorm", shape, &er, NULL, &ex);
            dfree(dx); dfree(dg);
            if (dy != dx) dfree(dy);
            free(x); free(g); free(y); free(yc); free(want); free(bg); free(bc);
        }
    }
    if (have(G->add_rmsnorm != NULL, "add_rms")) {
        /* y aliasing h is the model's call: add_rmsnorm(h, x, h, ...) */
        static const struct { int64_t n, rows; int alias; } shapes[] = {{67, 3, 0}, {4096, 4, 1}, {5120, 9, 0}};
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t n = shapes[si].n, rows = shapes[si].rows, N = n * rows;
            float *x = xcalloc(N, 4), *h = xcalloc(N, 4), *g = xcalloc(n, 4), *xg = xcalloc(N, 4), *y = xcalloc(N, 4);
            float *xc = xcalloc(N, 4), *yc = xcalloc(N, 4);
            double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8);
            for (int64_t i = 0; i < N; i++) x[i] = bf(arand()), h[i] = bf(arand());
            for (int64_t i = 0; i < n; i++) g[i] = frand() + 1.5f;
            float *dx = dact(x, N), *dh = dact(h, N), *dg = dvec(g, n), *dy = shapes[si].alias ? dh : dnan(N);
            G->add_rmsnorm(gpu, dy, dx, dh, dg, n, rows, 1e-5f);
            dget(xg, dx, N);
            dget(y, dy, N);
            memcpy(xc, x, N * 4);
            C->add_rmsnorm(cpu, yc, xc, h, g, n, rows, 1e-5f);
            char shape[96];
            snprintf(shape, sizeof shape, "n=%lld,rows=%lld%s: x += h", (long long)n, (long long)rows,
                     shapes[si].alias ? ",y=h" : "");
            errs er = errs_new(1), ex = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                double s = (double)x[i] + h[i];
                errs_add(&er, xg[i], bf(xc[i]), 0);
                errs_add(&ex, xg[i], s, (UB + 2 * U) * fabs(s) + 1e-30);
            }
            report("add_rms", shape, &er, NULL, &ex);
            rms_exact(xg, g, n, rows, 1e-5f, want, bg, bc);
            errs er2 = errs_new(0), ex2 = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                errs_add(&er2, y[i], yc[i], bg[i] + bc[i] + 2 * UB / (1 - UB) * (1 + 2 * UB) * fabs(want[i]));
                errs_add(&ex2, y[i], want[i], bg[i]);
            }
            snprintf(shape, sizeof shape, "n=%lld,rows=%lld%s: y = rmsnorm(x)", (long long)n, (long long)rows,
                     shapes[si].alias ? ",y=h" : "");
            report("add_rms", shape, &er2, NULL, &ex2);
            dfree(dx); dfree(dh); dfree(dg);
            if (dy != dh) dfree(dy);
            free(x); free(h); free(g); free(xg); free(y); free(xc); free(yc); free(want); free(bg); free(bc);
        }
    }
}

/* ---- rope ---------------------------------------------------------------------------------------------------------- */

/* a step that carries the rope case's positions (the model's rope takes step->pos: the backend's device copy) */
static int32_t rope_tok[64], rope_seq[64], rope_len[1], rope_table[320], rope_pos[2][64];
static int64_t rope_slot[64];
static const int32_t *rope_tables[1] = {rope_table};
static assay_step rope_step;

static void test_rope(void) {
    printf("\nrope: heads rotated in place by pos * inv_freq (norm: pairs (2i, 2i+1); neox: (i, i + n_rot/2))\n");
    if (!have(G->rope != NULL, "rope")) return;
    static const struct { int64_t n_tok, n_head, hd, n_rot, pad; assay_rope_mode mode; int from_step; } shapes[] = {
        {1, 1, 8, 8, 0, ASSAY_ROPE_MODE_NORM, 0},     {5, 3, 64, 64, 0, ASSAY_ROPE_MODE_NEOX, 0},
        {4, 2, 64, 32, 16, ASSAY_ROPE_MODE_NORM, 0},  {3, 4, 80, 24, 7, ASSAY_ROPE_MODE_NEOX, 0},
        {7, 2, 128, 128, 0, ASSAY_ROPE_MODE_NORM, 0}, {6, 2, 128, 64, 3, ASSAY_ROPE_MODE_NEOX, 0},
        {41, 8, 64, 64, 5, ASSAY_ROPE_MODE_NORM, 1},  {37, 8, 128, 128, 0, ASSAY_ROPE_MODE_NEOX, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n_tok = shapes[si].n_tok, nh = shapes[si].n_head, hd = shapes[si].hd, n_rot = shapes[si].n_rot;
        int64_t stride = nh * hd + shapes[si].pad, N = n_tok * stride, half = n_rot / 2;
        assay_rope_mode mode = shapes[si].mode;
        float *x = xcalloc(N, 4), *y = xcalloc(N, 4), *yc = xcalloc(N, 4), *inv_freq = xcalloc(hd / 2, 4);
        double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8);
        /* a step's positions stay where they are: the backend matches later host arrays against the last step's */
        static int n_rope_steps;
        int32_t *pos = shapes[si].from_step ? rope_pos[n_rope_steps++ % 2] : xcalloc(n_tok, 4);
        for (int64_t i = 0; i < N; i++) x[i] = bf(frand() * 2);
        for (int64_t i = 0; i < hd / 2; i++) inv_freq[i] = (float)pow(10000.0, -2.0 * i / n_rot);
        for (int64_t t = 0; t < n_tok; t++) pos[t] = t == 0 ? 0 : (int32_t)(rnd() % 4096);
        for (int64_t i = 0; i < N; i++) want[i] = x[i]; /* untouched unless rotated below (bound 0) */
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t h = 0; h < nh; h++)
                for (int64_t i = 0; i < half; i++) {
                    int64_t base = t * stride + h * hd;
                    int64_t a = base + (mode == ASSAY_ROPE_MODE_NORM ? 2 * i : i);
                    int64_t b = base + (mode == ASSAY_ROPE_MODE_NORM ? 2 * i + 1 : i + half);
                    double ang = (double)pos[t] * inv_freq[i], c = cos(ang), s = sin(ang);
                    double r = hypot(x[a], x[b]);
                    want[a] = x[a] * c - x[b] * s;
                    want[b] = x[a] * s + x[b] * c;
                    bg[a] = out_bf16(want[a], r * U * (fabs(ang) + 12));
                    bg[b] = out_bf16(want[b], r * U * (fabs(ang) + 12));
                    bc[a] = bc[b] = r * U * (fabs(ang) + 4);
                }
        if (shapes[si].from_step) { /* one sequence of n_tok tokens; no cu_seqlens_q (positions not in order) */
            int32_t maxp = 0;
            for (int64_t t = 0; t < n_tok; t++) {
                rope_seq[t] = 0;
                rope_slot[t] = t;
                maxp = pos[t] > maxp ? pos[t] : maxp;
            }
            rope_len[0] = maxp + 1;
            rope_step = (assay_step){.n_tokens = n_tok, .token = rope_tok, .pos = pos, .seq_of_tok = rope_seq,
                                     .slot = rope_slot, .n_seqs = 1, .seq_lens = rope_len, .block_tables = rope_tables};
            if (G->begin_step) G->begin_step(gpu, &rope_step);
        }
        float *dx = dact(x, N), *dinv = dvec(inv_freq, hd / 2);
        assay_rope_params rg = {mode, n_rot, dinv}, rc = {mode, n_rot, inv_freq};
        G->rope(gpu, dx, n_tok, nh, hd, stride, pos, &rg);
        dget(y, dx, N);
        memcpy(yc, x, N * 4);
        C->rope(cpu, yc, n_tok, nh, hd, stride, pos, &rc);
        errs er = errs_new(0), ex = errs_new(0);
        for (int64_t i = 0; i < N; i++) {
            errs_add(&er, y[i], yc[i], bg[i] + bc[i]);
            errs_add(&ex, y[i], want[i], bg[i]);
        }
        char shape[112];
        snprintf(shape, sizeof shape, "mode=%s,n_tok=%lld,n_head=%lld,hd=%lld,n_rot=%lld,stride=%lld%s",
                 mode == ASSAY_ROPE_MODE_NORM ? "norm" : "neox", (long long)n_tok, (long long)nh, (long long)hd,
                 (long long)n_rot, (long long)stride, shapes[si].from_step ? ",pos=step's" : "");
        report("rope", shape, &er, NULL, &ex);
        dfree(dx);
        dfree(dinv);
        free(x); free(y); free(yc); free(inv_freq); free(want); free(bg); free(bc);
        if (!shapes[si].from_step) free(pos);
    }
}

/* ---- swiglu, geglu -------------------------------------------------------------------------------------------------- */

static void test_glu(int geglu) {
    const char *name = geglu ? "geglu" : "swiglu";
    printf("\n%s: out = %s(gate) * up, gate/up rows `stride` apart\n", name, geglu ? "gelu_tanh" : "silu");
    if (!have(geglu ? G->geglu != NULL : G->swiglu != NULL, name)) return;
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 3, 7}, {67, 3, 134}, {1000, 2, 1000}, {1408, 27, 2816}};
    const double c = sqrt(2 / M_PI), k3 = 0.044715;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si][0], rows = shapes[si][1], stride = shapes[si][2], N = n * rows;
        int fused = stride == 2 * n; /* gate and up: the two halves of one projection */
        int64_t nb = rows * stride + n;
        float *buf = xcalloc(nb, 4), *up = fused ? buf + n : xcalloc(rows * stride, 4), *gate = buf;
        float *y = xcalloc(N, 4), *yc = xcalloc(N, 4);
        double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8);
        for (int64_t i = 0; i < nb; i++) buf[i] = bf(frand() * 8);
        if (!fused)
            for (int64_t i = 0; i < rows * stride; i++) up[i] = bf(frand() * 2);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) {
                double g = gate[r * stride + i], u = up[r * stride + i], o, bcpu;
                if (!geglu) {
                    o = g / (1 + exp(-g)) * u;
                    bcpu = 5 * U * (1 + 8 * U) * fabs(o);
                    bg[r * n + i] = out_bf16(o, 8 * U * (1 + 8 * U) * fabs(o)) + 1e-30;
                } else {
                    double z = c * (g + k3 * g * g * g), t = tanh(z);
                    o = 0.5 * g * (1 + t) * u;
                    double dz = 7 * U * (fabs(c * g) + fabs(c * k3 * g * g * g));
                    double rel = 2 * (1 + t) * dz * (1 + 4 * dz) + 4 * U * fabs(t) + 3 * U * (1 + t);
                    bcpu = 0.5 * fabs(g * u) * rel * (1 + 8 * U);
                    bg[r * n + i] = out_bf16(o, 2 * bcpu) + 1e-30;
                }
                want[r * n + i] = o;
                bc[r * n + i] = bcpu + 1e-30;
            }
        float *dbuf = dact(buf, nb), *dup = fused ? dat(dbuf, n) : dact(up, rows * stride), *dy = dnan(N);
        (geglu ? G->geglu : G->swiglu)(gpu, dy, dbuf, dup, n, rows, stride);
        dget(y, dy, N);
        (geglu ? C->geglu : C->swiglu)(cpu, yc, gate, up, n, rows, stride);
        errs er = errs_new(0), ex = errs_new(0);
        for (int64_t i = 0; i < N; i++) {
            errs_add(&er, y[i], yc[i], bg[i] + bc[i]);
            errs_add(&ex, y[i], want[i], bg[i]);
        }
        char shape[96];
        snprintf(shape, sizeof shape, "n=%lld,rows=%lld,stride=%lld", (long long)n, (long long)rows, (long long)stride);
        report(name, shape, &er, NULL, &ex);
        dfree(dbuf);
        if (!fused) dfree(dup), free(up);
        dfree(dy);
        free(buf); free(y); free(yc); free(want); free(bg); free(bc);
    }
}

/* ---- add, scale ----------------------------------------------------------------------------------------------------- */

static void test_add_scale(void) {
    printf("\nadd, scale: y = a + b, y *= s (one fp32 operation rounded to bf16)\n");
    static const int64_t sizes[] = {1, 7, 67, 4097, 40001};
    for (int op = 0; op < 3; op++) { /* add, add in place (y = a), scale */
        if (!have(op < 2 ? G->add != NULL : G->scale != NULL, op < 2 ? "add" : "scale"))
            continue;
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            float *a = xcalloc(n, 4), *b = xcalloc(n, 4), *y = xcalloc(n, 4), *yc = xcalloc(n, 4), sc = frand() * 3;
            for (int64_t i = 0; i < n; i++) {
                a[i] = bf(frand() * (float)ldexp(1, (int)(rnd() % 8) - 4));
                b[i] = bf(frand() * (float)ldexp(1, (int)(rnd() % 8) - 4));
            }
            float *da = dact(a, n), *db = dact(b, n), *dy = op == 0 ? dnan(n) : da;
            memcpy(yc, a, n * 4);
            if (op < 2) {
                G->add(gpu, dy, da, db, n);
                C->add(cpu, yc, op == 0 ? a : yc, b, n);
            } else {
                G->scale(gpu, dy, sc, n);
                C->scale(cpu, yc, sc, n);
            }
            dget(y, dy, n);
            errs er = errs_new(1), ex = errs_new(0);
            for (int64_t i = 0; i < n; i++) {
                double want = op < 2 ? (double)a[i] + b[i] : (double)a[i] * sc;
                errs_add(&er, y[i], bf(yc[i]), 0);
                errs_add(&ex, y[i], want, (UB + 2 * U) * fabs(want) + 1e-30);
            }
            char shape[64];
            snprintf(shape, sizeof shape, "n=%lld%s", (long long)n, op == 1 ? ",in-place" : op == 2 ? ",s=random" : "");
            report(op < 2 ? "add" : "scale", shape, &er, NULL, &ex);
            dfree(da);
            dfree(db);
            if (op == 0) dfree(dy);
            free(a); free(b); free(y); free(yc);
        }
    }
}

/* ---- softmax, tanh_cap ---------------------------------------------------------------------------------------------- */

static void test_softmax(void) {
    printf("\nsoftmax: rows of n, in place, optional softcap first\n");
    if (!have(G->softmax != NULL, "softmax")) return;
    static const struct { int64_t n, rows; float softcap, amp; } shapes[] = {
        {1, 1, 0, 10}, {7, 3, 0, 10}, {1000, 2, 0, 10}, {33, 4, 30, 80}, {257, 2, 30, 80}, {16, 3, 5, 8}, {3000, 13, 0, 10},
        {32000, 2, 0, 20}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si].n, rows = shapes[si].rows, N = n * rows;
        float sc = shapes[si].softcap;
        float *x = xcalloc(N, 4), *y = xcalloc(N, 4), *yc = xcalloc(N, 4);
        double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8), *cv = xcalloc(n, 8);
        double *ag = xcalloc(n, 8), *ac = xcalloc(n, 8);
        for (int64_t i = 0; i < N; i++) x[i] = bf(frand() * shapes[si].amp);
        for (int64_t r = 0; r < rows; r++) {
            const float *v = x + r * n;
            double m = -INFINITY, sum = 0, sg = 0, scp = 0, amg = 0, amc = 0;
            for (int64_t i = 0; i < n; i++) {
                cv[i] = sc > 0 ? sc * tanh(v[i] / (double)sc) : v[i];
                m = fmax(m, cv[i]);
            }
            for (int64_t i = 0; i < n; i++) sum += exp(cv[i] - m);
            for (int64_t i = 0; i < n; i++) {
                double dc = sc > 0 ? U * fabs(v[i]) + 5 * U * fabs(cv[i]) : 0;
                ag[i] = dc + U * fabs(cv[i] - m) + 4 * U;
                ac[i] = dc + U * fabs(cv[i] - m) + 2 * U;
                want[r * n + i] = exp(cv[i] - m) / sum;
                sg += want[r * n + i] * ag[i];
                scp += want[r * n + i] * ac[i];
                amg = fmax(amg, ag[i]);
                amc = fmax(amc, ac[i]);
            }
            for (int64_t i = 0; i < n; i++) {
                double p = want[r * n + i];
                bg[r * n + i] = out_bf16(p, p * (ag[i] + sg + (double)(n + 18) * U) * (1 + 2 * amg)) + 1e-45;
                bc[r * n + i] = p * (ac[i] + scp + 3 * U) * (1 + 2 * amc) + 1e-45;
            }
        }
        float *dx = dact(x, N);
        G->softmax(gpu, dx, n, rows, sc);
        dget(y, dx, N);
        memcpy(yc, x, N * 4);
        C->softmax(cpu, yc, n, rows, sc);
        errs er = errs_new(0), ex = errs_new(0);
        for (int64_t i = 0; i < N; i++) {
            errs_add(&er, y[i], yc[i], bg[i] + bc[i]);
            errs_add(&ex, y[i], want[i], bg[i]);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld,rows=%lld,softcap=%g,|x|<%g", (long long)n, (long long)rows, sc,
                 shapes[si].amp);
        report("softmax", shape, &er, NULL, &ex);
        dfree(dx);
        free(x); free(y); free(yc); free(want); free(bg); free(bc); free(cv); free(ag); free(ac);
    }
}

static void test_tanh_cap(void) {
    printf("\ntanh_cap: x = cap * tanh(x / cap) (the final logit softcap)\n");
    if (!have(G->tanh_cap != NULL, "tanh_cap")) return;
    static const struct { int64_t n; float cap, amp; } shapes[] = {{480, 30, 40}, {32000, 30, 60}, {7, 5, 20}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si].n;
        float cap = shapes[si].cap;
        float *x = xcalloc(n, 4), *y = xcalloc(n, 4), *yc = xcalloc(n, 4);
        for (int64_t i = 0; i < n; i++) x[i] = bf(arand() * shapes[si].amp);
        float *dx = dact(x, n);
        G->tanh_cap(gpu, dx, n, cap);
        dget(y, dx, n);
        memcpy(yc, x, n * 4);
        C->tanh_cap(cpu, yc, n, cap);
        errs er = errs_new(0), ex = errs_new(0);
        for (int64_t i = 0; i < n; i++) {
            double want = cap * tanh((double)x[i] / cap), bg = out_bf16(want, 8 * U * fabs(want)) + 1e-30;
            errs_add(&er, y[i], yc[i], bg + 6 * U * fabs(want));
            errs_add(&ex, y[i], want, bg);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld,cap=%g,|x|<%g", (long long)n, cap, shapes[si].amp * 8);
        report("tanh_cap", shape, &er, NULL, &ex);
        dfree(dx);
        free(x); free(y); free(yc);
    }
}

/* ---- gather_rows, absmax, argmax ------------------------------------------------------------------------------------- */

static void test_rows_reductions(void) {
    printf("\ngather_rows, absmax, argmax (exact)\n");
    if (have(G->gather_rows != NULL, "gather")) {
        static const struct { int64_t rows, width, n; } shapes[] = {{5, 96, 3}, {100, 4096, 37}, {9, 8, 9}};
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t R = shapes[si].rows, W = shapes[si].width, n = shapes[si].n;
            float *x = xcalloc(R * W, 4), *y = xcalloc(n * W, 4), *yc = xcalloc(n * W, 4);
            int32_t *rows = xcalloc(n, 4);
            for (int64_t i = 0; i < R * W; i++) x[i] = bf(arand());
            for (int64_t r = 0; r < n; r++) rows[r] = r == 0 ? (int32_t)(R - 1) : (int32_t)(rnd() % R); /* repeats */
            float *dx = dact(x, R * W), *dy = dnan(n * W);
            G->gather_rows(gpu, dy, dx, rows, n, W);
            dget(y, dy, n * W);
            C->gather_rows(cpu, yc, x, rows, n, W);
            errs er = errs_new(1), ex = errs_new(1);
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = 0; c < W; c++) {
                    errs_add(&er, y[r * W + c], yc[r * W + c], 0);
                    errs_add(&ex, y[r * W + c], x[(int64_t)rows[r] * W + c], 0);
                }
            char shape[64];
            snprintf(shape, sizeof shape, "%lld of %lld rows of %lld", (long long)n, (long long)R, (long long)W);
            report("gather", shape, &er, NULL, &ex);
            dfree(dx); dfree(dy);
            free(x); free(y); free(yc); free(rows);
        }
    }
    if (have(G->absmax != NULL, "absmax")) {
        static const int64_t sizes[] = {1, 480, 100000, 3000001, 64};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            float *x = xcalloc(n, 4);
            if (si < 4)
                for (int64_t i = 0; i < n; i++) x[i] = bf(arand());
            if (si == 2) x[n / 3] = -50; /* the largest magnitude negative */
            /* si == 4: all zero */
            float *dx = dact(x, n);
            float got = G->absmax(gpu, dx, n), gc = C->absmax(cpu, x, n), want = 0;
            for (int64_t i = 0; i < n; i++) want = fmaxf(want, fabsf(x[i]));
            errs er = errs_new(1), ex = errs_new(1);
            errs_add(&er, got, gc, 0);
            errs_add(&ex, got, want, 0);
            char shape[64];
            snprintf(shape, sizeof shape, "n=%lld%s", (long long)n, si == 2 ? ",max negative" : si == 4 ? ",all zero" : "");
            report("absmax", shape, &er, NULL, &ex);
            dfree(dx);
            free(x);
        }
    }
    if (have(G->argmax != NULL, "argmax")) {
        static const int64_t shapes[][2] = {{1, 3}, {5, 4}, {1000, 3}, {32000, 5}, {151936, 2}};
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t n = shapes[si][0], rows = shapes[si][1];
            float *x = xcalloc(n * rows, 4);
            for (int64_t i = 0; i < n * rows; i++) x[i] = bf(frand() * 4); /* bf16: many equal maxima in long rows */
            if (rows > 2) x[(rows - 1) * n + n - 1] = 100;                 /* the last row's max at its end */
            if (rows > 3)
                for (int64_t i = 0; i < n; i++) x[n + i] = 1.5f; /* row 1: all equal */
            int32_t *ids = xcalloc(rows, 4), *ic = xcalloc(rows, 4);
            float *dx = dact(x, n * rows);
            G->argmax(gpu, ids, dx, n, rows);
            C->argmax(cpu, ic, x, n, rows);
            errs er = errs_new(1), ex = errs_new(1);
            for (int64_t r = 0; r < rows; r++) {
                int64_t best = 0;
                for (int64_t i = 1; i < n; i++)
                    if (x[r * n + i] > x[r * n + best]) best = i;
                errs_add(&er, ids[r], ic[r], 0);
                errs_add(&ex, ids[r], (double)best, 0);
            }
            char shape[64];
            snprintf(shape, sizeof shape, "n=%lld,rows=%lld", (long long)n, (long long)rows);
            report("argmax", shape, &er, NULL, &ex);
            dfree(dx);
            free(x); free(ids); free(ic);
        }
    }
}

/* ---- the KV cache ------------------------------------------------------------------------------------------------------ */

static double dec_f16(uint16_t h) { return assay_f16_to_f32(h); }
static double dec_bf16(uint16_t h) { return assay_bf16_to_f32(h); }
static double dec_e4m3(uint8_t c) {
    int e = (c >> 3) & 15, m = c & 7;
    double v = e == 15 && m == 7 ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return c >> 7 ? -v : v;
}
static double dec_e5m2(uint8_t c) {
    int e = (c >> 2) & 31, m = c & 3;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -16) : ldexp(4 + m, e - 17);
    return c >> 7 ? -v : v;
}

/* x rounded to nearest even to `mant` fraction bits, smallest normal exponent emin; past max: +-max (saturate) */
static double round_fmt(double x, int mant, int emin, double max) {
    if (x == 0) return x;
    int e;
    frexp(x, &e);
    int lead = e - 1 < emin ? emin : e - 1;
    double v = ldexp(nearbyint(ldexp(x, mant - lead)), lead - mant);
    if (fabs(v) > max) v = copysign(max, x);
    return v;
}

static double kv_qmax(assay_kv_dtype t) { return t == ASSAY_KV_INT8 ? 127 : t == ASSAY_KV_FP8_E4M3 ? 448 : 57344; }
static int kv_scaled(assay_kv_dtype t) { return t == ASSAY_KV_FP8_E4M3 || t == ASSAY_KV_FP8_E5M2 || t == ASSAY_KV_INT8; }

/* the value element i of a cache buffer holds (before its slot's scale) */
static double kv_elem(assay_kv_dtype t, const void *buf, int64_t i) {
    switch (t) {
    case ASSAY_KV_F32: return ((const float *)buf)[i];
    case ASSAY_KV_F16: return dec_f16(((const uint16_t *)buf)[i]);
    case ASSAY_KV_BF16: return dec_bf16(((const uint16_t *)buf)[i]);
    case ASSAY_KV_FP8_E4M3: return dec_e4m3(((const uint8_t *)buf)[i]);
    case ASSAY_KV_FP8_E5M2: return dec_e5m2(((const uint8_t *)buf)[i]);
    case ASSAY_KV_INT8: return ((const int8_t *)buf)[i];
    default: return NAN;
    }
}
/* its stored bits, as an integer (bit-for-bit comparisons: -0 and 0 differ) */
static double kv_bits(assay_kv_dtype t, const void *buf, int64_t i) {
    size_t es = assay_kv_dtype_size(t);
    return es == 1 ? ((const uint8_t *)buf)[i] : es == 2 ? ((const uint16_t *)buf)[i] : ((const uint32_t *)buf)[i];
}

/* what an encoder must store for the float xs = x * inv (fp8: nearest even, saturating; int8: rint, +-127) */
static double kv_encode(assay_kv_dtype t, float xs) {
    switch (t) {
    case ASSAY_KV_BF16: return round_fmt(xs, 7, -126, 0x1.fep127);
    case ASSAY_KV_FP8_E4M3: return round_fmt(xs, 3, -6, 448);
    case ASSAY_KV_FP8_E5M2: return round_fmt(xs, 2, -14, 57344);
    case ASSAY_KV_INT8: {
        double q = nearbyint(xs);
        return q > 127 ? 127 : q < -127 ? -127 : q;
    }
    default: return NAN;
    }
}

/* Sequences and their blocks: A..E decode in the decode step, P1..P3 prefill; blocks shuffled over N_PHYS. */
enum { N_SEQ = 8, N_PHYS = 128, MAX_TOK = 1024, MAX_BLK = 64 };
static const int32_t seq_len[N_SEQ] = {1000, 37, 1, 129, 16, 100, 264, 3};
enum { SA, SB, SC, SD, SE, P1, P2, P3 };
static int32_t seq_blocks[N_SEQ][MAX_BLK];
static int32_t spare_block;
static const int32_t empty_table[1] = {0};

static void make_blocks(void) {
    int32_t perm[N_PHYS];
    for (int i = 0; i < N_PHYS; i++) perm[i] = i;
    for (int i = N_PHYS - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint32_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int k = 0;
    for (int s = 0; s < N_SEQ; s++)
        for (int j = 0; j < (seq_len[s] + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK; j++) {
            ASSAY_ASSERT(j < MAX_BLK && k < N_PHYS);
            seq_blocks[s][j] = perm[k++];
        }
    ASSAY_ASSERT(k < N_PHYS);
    spare_block = perm[k];
}

/* A step descriptor of tokens (gseq[t], pos[t]); gseq -1: a padding row (slot -1, an empty sequence of its own, as
 * model.c pads captured steps). with_cu: each sequence's tokens are contiguous and end at its last position. */
typedef struct step_buf {
    int32_t tok[MAX_TOK], pos[MAX_TOK], seq[MAX_TOK], gseq[MAX_TOK], cu[N_SEQ + 9], lens[N_SEQ + 8];
    int64_t slot[MAX_TOK];
    int8_t want[MAX_TOK];
    const int32_t *tables[N_SEQ + 8];
    assay_step st;
    char what[96];
} step_buf;

static void make_step(step_buf *b, int n, const int *gseq, const int32_t *pos, int with_cu, int64_t graph_ctx,
                      const char *what) {
    ASSAY_ASSERT(n <= MAX_TOK);
    int local[N_SEQ], n_seqs = 0;
    for (int s = 0; s < N_SEQ; s++) local[s] = -1;
    for (int t = 0; t < n; t++) {
        int s = gseq[t], l;
        if (s < 0) { /* padding */
            ASSAY_ASSERT(n_seqs < N_SEQ + 8);
            l = n_seqs++;
            b->tables[l] = empty_table;
            b->lens[l] = 0;
            b->slot[t] = -1;
            b->pos[t] = 0;
        } else {
            if (local[s] < 0) {
                local[s] = n_seqs++;
                b->tables[local[s]] = seq_blocks[s];
                b->lens[local[s]] = 0;
            }
            l = local[s];
            b->pos[t] = pos[t];
            b->slot[t] = (int64_t)seq_blocks[s][pos[t] / ASSAY_KV_BLOCK] * ASSAY_KV_BLOCK + pos[t] % ASSAY_KV_BLOCK;
            if (pos[t] + 1 > b->lens[l]) b->lens[l] = pos[t] + 1;
        }
        b->seq[t] = l;
        b->gseq[t] = s;
        b->tok[t] = 0;
        b->want[t] = 1;
    }
    if (with_cu) {
        b->cu[0] = 0;
        for (int t = 0; t < n; t++) {
            ASSAY_ASSERT(t == 0 || b->seq[t] == b->seq[t - 1] || b->seq[t] == b->seq[t - 1] + 1);
            b->cu[b->seq[t] + 1] = t + 1;
        }
        for (int t = 0; t < n; t++) /* each sequence's queries are its last positions */
            ASSAY_ASSERT(gseq[t] < 0 || b->pos[t] == b->lens[b->seq[t]] - (b->cu[b->seq[t] + 1] - t));
    }
    b->st = (assay_step){.n_tokens = n, .token = b->tok, .pos = b->pos, .seq_of_tok = b->seq, .slot = b->slot,
                         .want_logits = b->want, .n_logits = n, .n_seqs = n_seqs, .cu_seqlens_q = with_cu ? b->cu : NULL,
                         .seq_lens = b->lens, .block_tables = b->tables, .graph_ctx = graph_ctx};
    snprintf(b->what, sizeof b->what, "%s", what);
}

/* The steps live as long as the backend may hold a pointer to one (it keeps the last begin_step's). */
static step_buf fill_steps[N_SEQ], st_dec, st_pre, st_mix, st_nocu, st_graph, st_graph_cpu;

static void make_steps(void) {
    static int gs[MAX_TOK];
    static int32_t ps[MAX_TOK];
    for (int s = 0; s < N_SEQ; s++) {
        for (int p = 0; p < seq_len[s]; p++) gs[p] = s, ps[p] = p;
        make_step(&fill_steps[s], seq_len[s], gs, ps, 1, 0, "fill");
    }
    int n = 0; /* decode: A..E, one token each at its last position */
    for (int s = SA; s <= SE; s++) gs[n] = s, ps[n++] = seq_len[s] - 1;
    make_step(&st_dec, n, gs, ps, 1, 0, "decode(A..E)");
    n = 0; /* prefill: all of P1, P2 200..263 after 200 cached positions, all of P3 */
    for (int p = 0; p < 100; p++) gs[n] = P1, ps[n++] = p;
    for (int p = 200; p < 264; p++) gs[n] = P2, ps[n++] = p;
    for (int p = 0; p < 3; p++) gs[n] = P3, ps[n++] = p;
    make_step(&st_pre, n, gs, ps, 1, 0, "prefill(P1 0..99,P2 200..263,P3 0..2)");
    n = 0; /* mixed: decode rows around two prefill chunks */
    gs[n] = SA, ps[n++] = 999;
    for (int p = 150; p < 200; p++) gs[n] = P2, ps[n++] = p;
    gs[n] = SC, ps[n++] = 0;
    for (int p = 90; p < 100; p++) gs[n] = P1, ps[n++] = p;
    gs[n] = SE, ps[n++] = 15;
    make_step(&st_mix, n, gs, ps, 1, 0, "mixed(A,P2 150..199,C,P1 90..99,E)");
    /* the mixed step's tokens interleaved, no cu_seqlens_q */
    static int gs2[MAX_TOK];
    static int32_t ps2[MAX_TOK];
    for (int t = 0; t < n; t++) {
        int u = (t * 17 + 3) % n; /* 17 is prime to 63 */
        gs2[t] = gs[u];
        ps2[t] = ps[u];
    }
    ASSAY_ASSERT(n == 63);
    make_step(&st_nocu, n, gs2, ps2, 0, 0, "mixed tokens interleaved,no cu_seqlens_q");
    /* a captured decode step: three sequences and one padding row, laid out for contexts up to 1024 */
    int gg[4] = {SA, SB, SC, -1};
    int32_t pg[4] = {999, 36, 0, 0};
    make_step(&st_graph, 4, gg, pg, 1, 1024, "decode(A,B,C,pad),graph_ctx=1024");
    make_step(&st_graph_cpu, 3, gg, pg, 1, 0, "decode(A,B,C)");
}

/* One layer's cache on both backends (the GPU's in device memory, kept until the end: the backend caches per-layer
 * scale vectors by the storage's address) and the K/V rows every sequence position holds. */
typedef struct kv_pair {
    assay_kv_layer Lg, Lc;
    assay_kv_geom g;
    size_t slots;           /* N_PHYS * n_kv * ASSAY_KV_BLOCK */
    float *K[N_SEQ], *V[N_SEQ]; /* [len][n_kv * hd], bf16 values */
} kv_pair;

static void *kept_dev[256];
static int n_kept_dev;
static void *keep_dev(void *p) {
    ASSAY_ASSERT(n_kept_dev < 256);
    return kept_dev[n_kept_dev++] = p;
}

static kv_pair kv_pair_new(assay_kv_dtype dt, int64_t n_kv, int64_t hd, float st) {
    kv_pair p = {.g = {dt, n_kv, hd}};
    size_t es = assay_kv_dtype_size(dt);
    p.slots = (size_t)(N_PHYS * n_kv * ASSAY_KV_BLOCK);
    p.Lg.k = keep_dev(dalloc(p.slots * hd * es));
    p.Lg.v = keep_dev(dalloc(p.slots * hd * es));
    p.Lc.k = xcalloc(p.slots * hd, es);
    p.Lc.v = xcalloc(p.slots * hd, es);
    if (kv_scaled(dt)) {
        p.Lg.k_scale = keep_dev(dalloc(p.slots * 4));
        p.Lg.v_scale = keep_dev(dalloc(p.slots * 4));
        p.Lc.k_scale = xcalloc(p.slots, 4);
        p.Lc.v_scale = xcalloc(p.slots, 4);
    }
    p.Lg.k_static = p.Lg.v_static = p.Lc.k_static = p.Lc.v_static = st;
    p.Lg.static_uniform = p.Lc.static_uniform = st > 0;
    int64_t kvd = n_kv * hd;
    for (int s = 0; s < N_SEQ; s++) {
        p.K[s] = xcalloc(seq_len[s] * kvd, 4);
        p.V[s] = xcalloc(seq_len[s] * kvd, 4);
        for (int64_t i = 0; i < seq_len[s] * kvd; i++) {
            p.K[s][i] = bf(frand() * 2 * ((rnd() % 64) == 0 ? 8.0f : 1.0f));
            p.V[s][i] = bf(frand());
        }
    }
    for (int64_t d = 0; d < hd; d++) p.K[SB][5 * kvd + d] = 0; /* one all-zero head: its dynamic scale is 1 */
    return p;
}
static void kv_pair_free(kv_pair *p) {
    free(p->Lc.k); free(p->Lc.v); free(p->Lc.k_scale); free(p->Lc.v_scale);
    for (int s = 0; s < N_SEQ; s++) free(p->K[s]), free(p->V[s]);
}

/* The GPU's cache image: values in the CPU's layout (V transposed back), the slot scales. */
typedef struct kv_image {
    void *k, *v; /* CPU layout */
    float *ks, *vs;
} kv_image;

static kv_image kv_download(const kv_pair *p) {
    size_t es = assay_kv_dtype_size(p->g.dtype), n = p->slots * p->g.head_dim * es;
    int64_t hd = p->g.head_dim, B = ASSAY_KV_BLOCK;
    kv_image im = {xcalloc(n, 1), xcalloc(n, 1), xcalloc(p->slots, 4), xcalloc(p->slots, 4)};
    uint8_t *vt = xcalloc(n, 1);
    G->download(gpu, im.k, p->Lg.k, n);
    G->download(gpu, vt, p->Lg.v, n);
    if (p->Lg.k_scale) {
        G->download(gpu, im.ks, p->Lg.k_scale, p->slots * 4);
        G->download(gpu, im.vs, p->Lg.v_scale, p->slots * 4);
    }
    /* V[blk][h][d][off] -> [blk][h][off][d] */
    for (size_t bh = 0; bh < p->slots / B; bh++)
        for (int64_t d = 0; d < hd; d++)
            for (int64_t off = 0; off < B; off++)
                memcpy((uint8_t *)im.v + ((bh * B + off) * hd + d) * es, vt + ((bh * hd + d) * B + off) * es, es);
    free(vt);
    return im;
}
static void kv_image_free(kv_image *im) { free(im->k); free(im->v); free(im->ks); free(im->vs); }

/* GPU cache == CPU cache, bit for bit (values and scales) */
static void kv_compare(const kv_pair *p, const kv_image *im, errs *e) {
    int64_t n = (int64_t)(p->slots * p->g.head_dim);
    for (int64_t i = 0; i < n; i++) {
        errs_add(e, kv_bits(p->g.dtype, im->k, i), kv_bits(p->g.dtype, p->Lc.k, i), 0);
        errs_add(e, kv_bits(p->g.dtype, im->v, i), kv_bits(p->g.dtype, p->Lc.v, i), 0);
    }
    if (kv_scaled(p->g.dtype))
        for (size_t i = 0; i < p->slots; i++) {
            errs_add(e, im->ks[i], p->Lc.k_scale[i], 0);
            errs_add(e, im->vs[i], p->Lc.v_scale[i], 0);
        }
}

/* GPU cache == the encoder's image of every sequence written (zero elsewhere) */
static void kv_check_encoding(const kv_pair *p, const kv_image *im, errs *e) {
    assay_kv_dtype t = p->g.dtype;
    int64_t n_kv = p->g.n_head_kv, hd = p->g.head_dim, kvd = n_kv * hd;
    double *want = xcalloc(p->slots * hd * 2, 8), *want_sc = xcalloc(p->slots * 2, 8);
    for (int s = 0; s < N_SEQ; s++)
        for (int32_t pos = 0; pos < seq_len[s]; pos++)
            for (int64_t h = 0; h < n_kv; h++) {
                int64_t slot = ((int64_t)seq_blocks[s][pos / ASSAY_KV_BLOCK] * n_kv + h) * ASSAY_KV_BLOCK + pos % ASSAY_KV_BLOCK;
                for (int kv = 0; kv < 2; kv++) {
                    const float *src = (kv ? p->V[s] : p->K[s]) + pos * kvd + h * hd;
                    float sc = 1;
                    if (kv_scaled(t)) {
                        sc = p->Lc.k_static;
                        if (!(sc > 0)) {
                            float amax = 0;
                            for (int64_t i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(src[i]));
                            sc = amax > 0 ? amax / (float)kv_qmax(t) : 1.0f;
                        }
                        want_sc[kv * p->slots + slot] = sc;
                    }
                    float inv = 1.0f / sc;
                    for (int64_t i = 0; i < hd; i++)
                        want[(kv * p->slots + slot) * hd + i] = kv_encode(t, t == ASSAY_KV_BF16 ? src[i] : src[i] * inv);
                }
            }
    for (int kv = 0; kv < 2; kv++) {
        const void *buf = kv ? im->v : im->k;
        const float *scv = kv ? im->vs : im->ks;
        for (size_t i = 0; i < p->slots * hd; i++) errs_add(e, kv_elem(t, buf, (int64_t)i), want[kv * p->slots * hd + i], 0);
        if (kv_scaled(t))
            for (size_t i = 0; i < p->slots; i++) errs_add(e, scv[i], want_sc[kv * p->slots + i], 0);
    }
    free(want);
    free(want_sc);
}

/* the step's K (kv = 0) or V rows, [n_tokens][n_kv * hd] (zeros for padding rows) */
static float *step_rows(const kv_pair *p, const step_buf *b, int kv) {
    int64_t n = b->st.n_tokens, kvd = p->g.n_head_kv * p->g.head_dim;
    float *r = xcalloc(n * kvd, 4);
    for (int64_t t = 0; t < n; t++)
        if (b->gseq[t] >= 0) memcpy(r + t * kvd, (kv ? p->V : p->K)[b->gseq[t]] + (int64_t)b->pos[t] * kvd, kvd * 4);
    return r;
}

/* GPU: begin_step, kv_store of the step's rows, optionally attention into dout */
static void gpu_step(kv_pair *p, const step_buf *b, const float *dq, const assay_attn_params *ap, float *dout) {
    float *k = step_rows(p, b, 0), *v = step_rows(p, b, 1);
    int64_t kvd = p->g.n_head_kv * p->g.head_dim;
    float *dk = dact(k, b->st.n_tokens * kvd), *dv = dact(v, b->st.n_tokens * kvd);
    if (G->begin_step) G->begin_step(gpu, &b->st);
    G->kv_store(gpu, &p->Lg, &p->g, dk, dv, &b->st);
    if (dout) G->attention(gpu, dout, dq, ap, &p->Lg, &p->g, &b->st);
    G->synchronize(gpu);
    dfree(dk);
    dfree(dv);
    free(k);
    free(v);
}
static void cpu_step(kv_pair *p, const step_buf *b, const float *q, const assay_attn_params *ap, float *out) {
    float *k = step_rows(p, b, 0), *v = step_rows(p, b, 1);
    C->kv_store(cpu, &p->Lc, &p->g, k, v, &b->st);
    if (out) C->attention(cpu, out, q, ap, &p->Lc, &p->g, &b->st);
    free(k);
    free(v);
}

/* Exact attention of the step's tokens over the CPU cache (which kv_store checks hold the GPU's values), the GPU's
 * bound (the header) and the scalar set's (test_backend_ops.c's). */
static void attn_exact(const kv_pair *p, const assay_attn_params *ap, const step_buf *b, const float *q, double *want,
                       double *bg, double *bc) {
    const int64_t hd = p->g.head_dim, n_kv = p->g.n_head_kv, grp = ap->n_head / n_kv, B = ASSAY_KV_BLOCK;
    const assay_kv_dtype t = p->g.dtype;
    const int sc8 = kv_scaled(t);
    const double ck = sc8 ? UB : 0, cv = sc8 ? UB : 0, scale = ap->scale;
    int64_t maxn = 1;
    for (int s = 0; s < N_SEQ; s++) maxn = seq_len[s] > maxn ? seq_len[s] : maxn;
    double *s = xcalloc(maxn, 8), *c = xcalloc(maxn, 8), *sg = xcalloc(maxn, 8), *sc = xcalloc(maxn, 8);
    double *pr = xcalloc(maxn, 8), *kd = xcalloc(maxn * hd, 8), *vd = xcalloc(maxn * hd, 8);
    for (int64_t tk = 0; tk < b->st.n_tokens; tk++) {
        int gs = b->gseq[tk];
        if (gs < 0) continue;
        int64_t P = b->pos[tk], start = ap->window > 0 && P - ap->window + 1 > 0 ? P - ap->window + 1 : 0;
        int64_t N = P - start + 1, nb = P / B - start / B + 1;
        for (int64_t h = 0; h < ap->n_head; h++) {
            int64_t kvh = h / grp;
            const float *qh = q + (tk * ap->n_head + h) * hd;
            double m = -INFINITY, cmin = INFINITY, vmax = 0;
            for (int64_t j = 0; j < N; j++) {
                int64_t pj = start + j;
                int64_t slot = ((int64_t)seq_blocks[gs][pj / B] * n_kv + kvh) * B + pj % B;
                double ks = sc8 ? p->Lc.k_scale[slot] : 1, vs = sc8 ? p->Lc.v_scale[slot] : 1;
                double dot = 0, dabs = 0, kabs = 0;
                for (int64_t d = 0; d < hd; d++) {
                    kd[j * hd + d] = kv_elem(t, p->Lc.k, slot * hd + d) * ks;
                    vd[j * hd + d] = kv_elem(t, p->Lc.v, slot * hd + d) * vs;
                    dot += (double)qh[d] * kd[j * hd + d];
                    dabs += fabs((double)qh[d] * kd[j * hd + d]);
                    kabs += fabs(kd[j * hd + d]);
                    vmax = fmax(vmax, fabs(vd[j * hd + d]));
                }
                s[j] = scale * dot;
                sg[j] = scale * dabs * (ck + (double)(hd + 16) * UA) + scale * kabs * U + 0x1p-20 * fabs(s[j]);
                sc[j] = (double)(hd + 3) * U * scale * dabs;
                if (ap->softcap > 0) {
                    c[j] = ap->softcap * tanh(s[j] / ap->softcap);
                    sg[j] += 0x1p-20 * fabs(c[j]);
                    sc[j] += U * fabs(s[j]) + 5 * U * fabs(c[j]);
                } else c[j] = s[j];
                m = fmax(m, c[j]);
                cmin = fmin(cmin, c[j]);
            }
            double l = 0, ag = 0, ac = 0;
            for (int64_t j = 0; j < N; j++) {
                ag = fmax(ag, sg[j] + 0x1p-20 * (fabs(c[j] - m) + fabs(m) + (m - cmin) + 8));
                ac = fmax(ac, sc[j] + U * fabs(c[j] - m) + 4 * U);
                pr[j] = exp(c[j] - m);
                l += pr[j];
            }
            double rg = expm1(ag), rc = expm1(ac + U * (m - cmin) + 4 * U * nb);
            double wg = rg < 1 ? 2 * rg / (1 - rg) : INFINITY;
            double wc = (rc < 1 ? 2 * rc / (1 - rc) : INFINITY) + (double)(2 * N + 5 * nb + 6) * U;
            for (int64_t d = 0; d < hd; d++) {
                double o = 0, mag = 0;
                for (int64_t j = 0; j < N; j++) {
                    o += pr[j] / l * vd[j * hd + d];
                    mag += pr[j] / l * fabs(vd[j * hd + d]);
                }
                int64_t i = (tk * ap->n_head + h) * hd + d;
                want[i] = o;
                bg[i] = out_bf16(o, wg * mag + (2 * UB + cv + (double)(N + 64) * UA) * (1 + wg) * mag +
                                        (double)(N + 16) * U * vmax) + 1e-30;
                bc[i] = wc * mag + 1e-30;
            }
        }
    }
    free(s); free(c); free(sg); free(sc); free(pr); free(kd); free(vd);
}

/* the kernel the backend's rules (cuda_backend.c: use_reference_attention, the step plan) pick for a step */
static void route_name(char *buf, size_t cap, const kv_pair *p, const assay_attn_params *ap, const step_buf *b) {
    const char *why = NULL;
    if (forced_ref) why = "ASSAY_CUDA_ATTN_REF";
    else if (!b->st.cu_seqlens_q) why = "no cu_seqlens_q";
    else if (ap->window > 0 || ap->softcap > 0) why = "window/softcap";
    else if (ap->head_dim != 64 && ap->head_dim != 128) why = "head size";
    else if (kv_scaled(p->g.dtype) && !(p->Lg.k_static > 0 && p->Lg.v_static > 0 && p->Lg.static_uniform))
        why = "per-slot scales";
    else if (ap->n_head / ap->n_head_kv > 16) why = "group > 16";
    if (why) {
        snprintf(buf, cap, "ref kernel (%s)", why);
        return;
    }
    int dec = 0, pre = 0;
    for (int64_t i = 0; i < b->st.n_seqs; i++) {
        int nq = b->st.cu_seqlens_q[i + 1] - b->st.cu_seqlens_q[i];
        dec += nq == 1;
        pre += nq > 1;
    }
    snprintf(buf, cap, "%s", dec && pre ? "decode+prefill kernels" : dec ? "split-KV decode kernel" : "varlen prefill kernel");
}

static float *make_q(int64_t n, int64_t qd, float amp) {
    float *q = xcalloc(n * qd, 4);
    for (int64_t i = 0; i < n * qd; i++) q[i] = bf(frand() * 2 * amp);
    return q;
}

static void run_attention(kv_pair *p, const char *cfg, const step_buf *b, const assay_attn_params *ap, float amp) {
    int64_t n = b->st.n_tokens, qd = ap->n_head * ap->head_dim, N = n * qd;
    float *q = make_q(n, qd, amp), *y = xcalloc(N, 4), *yc = xcalloc(N, 4);
    double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8);
    attn_exact(p, ap, b, q, want, bg, bc);
    float *dq = dact(q, N), *dout = dnan(N);
    gpu_step(p, b, dq, ap, dout);
    dget(y, dout, N);
    cpu_step(p, b, q, ap, yc);
    errs er = errs_new(0), ex = errs_new(0);
    for (int64_t i = 0; i < N; i++) {
        errs_add(&er, y[i], yc[i], bg[i] + bc[i]);
        errs_add(&ex, y[i], want[i], bg[i]);
    }
    char route[64], shape[200];
    route_name(route, sizeof route, p, ap, b);
    snprintf(shape, sizeof shape, "%s,%s%s%s,n_tok=%lld -> %s", cfg, b->what, ap->window > 0 ? ",window/softcap" : "",
             amp > 1 ? ",sharp" : "", (long long)n, route);
    report("attention", shape, &er, NULL, &ex);
    dfree(dq);
    dfree(dout);
    free(q); free(y); free(yc); free(want); free(bg); free(bc);
}

/* A decode step run eagerly, captured into a graph, replayed: the same output bit for bit; the padding row (slot -1)
 * writes nothing. */
static void run_graph(kv_pair *p, const char *cfg, const assay_attn_params *ap) {
    char shape[256];
    snprintf(shape, sizeof shape, "%s,%s", cfg, st_graph.what);
    if (!G->graph_capture_begin || !G->graph_capture_end || !G->graph_launch || !G->begin_step) {
        printf("  %-10s SKIPPED: the CUDA backend's op table has no graph capture\n", "graph");
        return;
    }
    const int64_t key = 4, rows = 3; /* the real rows */
    int64_t qd = ap->n_head * ap->head_dim, N = st_graph.st.n_tokens * qd;
    float *q = make_q(st_graph.st.n_tokens, qd, 1);
    float *ye = xcalloc(N, 4), *yg = xcalloc(N, 4), *yr = xcalloc(N, 4);
    double *want = xcalloc(N, 8), *bg = xcalloc(N, 8), *bc = xcalloc(N, 8);
    attn_exact(p, ap, &st_graph_cpu, q, want, bg, bc);
    float *dq = dact(q, N), *dout = dnan(N);
    gpu_step(p, &st_graph, dq, ap, dout); /* eager: every buffer reaches its size */
    dget(ye, dout, N);
    float *k = step_rows(p, &st_graph, 0), *v = step_rows(p, &st_graph, 1);
    int64_t kvd = p->g.n_head_kv * p->g.head_dim;
    float *dk = dact(k, st_graph.st.n_tokens * kvd), *dv = dact(v, st_graph.st.n_tokens * kvd);
    dfree(dout);
    dout = dnan(N);
    G->begin_step(gpu, &st_graph.st);
    G->graph_capture_begin(gpu, key);
    G->kv_store(gpu, &p->Lg, &p->g, dk, dv, &st_graph.st);
    G->attention(gpu, dout, dq, ap, &p->Lg, &p->g, &st_graph.st);
    int captured = G->graph_capture_end(gpu, key);
    G->synchronize(gpu);
    dget(yg, dout, N);
    dfree(dout);
    dout = dnan(N);
    G->begin_step(gpu, &st_graph.st);
    int replayed = captured && G->graph_launch(gpu, key);
    G->synchronize(gpu);
    dget(yr, dout, N);
    float *yc = xcalloc(rows * qd, 4);
    cpu_step(p, &st_graph_cpu, q, ap, yc);
    kv_image im = kv_download(p);
    errs er = errs_new(0), ex = errs_new(0), eg = errs_new(1), ec = errs_new(1);
    for (int64_t i = 0; i < rows * qd; i++) {
        errs_add(&er, ye[i], yc[i], bg[i] + bc[i]);
        errs_add(&ex, ye[i], want[i], bg[i]);
        if (captured) errs_add(&eg, yg[i], ye[i], 0);
        if (replayed) errs_add(&eg, yr[i], ye[i], 0);
    }
    kv_compare(p, &im, &ec);
    report("graph", shape, &er, NULL, &ex);
    snprintf(shape, sizeof shape, "%s,%s: captured, replayed = eager", cfg, st_graph.what);
    if (!captured) /* allowed by the op table (nothing ran; the caller runs the ops itself) */
        printf("  %-10s %-70s not captured (graph_capture_end returned 0: ASSAY_CUDA_GRAPHS=0?)\n", "graph", shape);
    else if (!replayed) report_fail("graph", shape, "graph_launch found no graph for the key just captured");
    else report("graph", shape, NULL, "-", &eg);
    snprintf(shape, sizeof shape, "%s,%s: the cache after (the padding row writes nothing)", cfg, st_graph.what);
    report("graph", shape, &ec, NULL, NULL);
    G->graph_reset(gpu);
    kv_image_free(&im);
    dfree(dq);
    dfree(dk);
    dfree(dv);
    dfree(dout);
    free(q); free(k); free(v); free(ye); free(yg); free(yr); free(yc); free(want); free(bg); free(bc);
}

/* kv_requantize on the GPU (the CPU backend has none): every slot whose recorded scale differs from the new static
 * scales re-encoded as the kernel does, code = encode(fl(fl(c * old) / new)); others unchanged. */
static void run_requantize(kv_pair *p, const char *cfg) {
    if (!have(G->kv_requantize != NULL, "kv_requant")) return;
    assay_kv_dtype t = p->g.dtype;
    int64_t hd = p->g.head_dim;
    kv_image before = kv_download(p);
    float kmax = 0, vmax = 0; /* the largest slot scales, past the all-zero head's 1 */
    for (size_t i = 0; i < p->slots; i++) {
        if (before.ks[i] != 1.0f) kmax = fmaxf(kmax, before.ks[i]);
        if (before.vs[i] != 1.0f) vmax = fmaxf(vmax, before.vs[i]);
    }
    assay_kv_layer L = p->Lg;
    L.k_static = 0.9f * kmax; /* below the largest slot scales: those saturate */
    L.v_static = 0.9f * vmax;
    G->kv_requantize(gpu, &L, &p->g, N_PHYS);
    G->synchronize(gpu);
    kv_image after = kv_download(p);
    errs e = errs_new(1);
    for (size_t sl = 0; sl < p->slots; sl++)
        for (int kv = 0; kv < 2; kv++) {
            float old = kv ? before.vs[sl] : before.ks[sl], now = kv ? L.v_static : L.k_static;
            const void *b0 = kv ? before.v : before.k, *b1 = kv ? after.v : after.k;
            int change = old != now && old > 0;
            errs_add(&e, kv ? after.vs[sl] : after.ks[sl], change ? now : old, 0);
            for (int64_t d = 0; d < hd; d++) {
                int64_t i = (int64_t)sl * hd + d;
                if (!change) {
                    errs_add(&e, kv_bits(t, b1, i), kv_bits(t, b0, i), 0);
                    continue;
                }
                float x = (float)kv_elem(t, b0, i) * old;
                x = x / now;
                errs_add(&e, kv_elem(t, b1, i), kv_encode(t, x), 0);
            }
        }
    char shape[160];
    snprintf(shape, sizeof shape, "%s: per-slot scales -> static %.3g/%.3g", cfg, L.k_static, L.v_static);
    report("kv_requant", shape, NULL, "(the CPU backend leaves it NULL)", &e);
    kv_image_free(&before);
    kv_image_free(&after);
}

static void test_attention(void) {
    printf("\nkv_store, attention, kv_copy_block, kv_requantize, graphs: real steps over a paged cache of 8 sequences%s\n",
           forced_ref ? " (ASSAY_CUDA_ATTN_REF=1: every attention call on the reference kernel)" : "");
    if (!have(G->kv_store != NULL, "kv_store") || !have(G->attention != NULL, "attention")) return;
    if (!G->begin_step) printf("  (the CUDA backend has no begin_step: steps go to the ops as they are)\n");
    static const struct {
        assay_kv_dtype dt;
        int stat;
        int64_t n_head, n_kv, hd;
        int sharp, graph;
    } cfgs[] = {
        {ASSAY_KV_BF16, 0, 8, 2, 128, 1, 1},      {ASSAY_KV_BF16, 0, 16, 1, 64, 1, 0},
        {ASSAY_KV_BF16, 0, 4, 4, 64, 0, 0},       {ASSAY_KV_BF16, 0, 6, 2, 96, 0, 0},
        {ASSAY_KV_BF16, 0, 32, 1, 128, 0, 0},     {ASSAY_KV_FP8_E4M3, 1, 8, 2, 128, 0, 1},
        {ASSAY_KV_FP8_E4M3, 1, 16, 1, 64, 0, 0},  {ASSAY_KV_FP8_E4M3, 1, 4, 4, 64, 0, 0},
        {ASSAY_KV_FP8_E4M3, 0, 8, 2, 128, 0, 0},  {ASSAY_KV_FP8_E5M2, 1, 8, 2, 128, 0, 0},
        {ASSAY_KV_FP8_E5M2, 0, 4, 4, 64, 0, 0},   {ASSAY_KV_INT8, 1, 8, 2, 128, 0, 1},
        {ASSAY_KV_INT8, 1, 16, 1, 64, 0, 0},      {ASSAY_KV_INT8, 0, 8, 2, 128, 0, 0},
    };
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        assay_kv_dtype dt = cfgs[ci].dt;
        int64_t hd = cfgs[ci].hd, n_kv = cfgs[ci].n_kv, n_head = cfgs[ci].n_head;
        float st = cfgs[ci].stat ? (float)(0.7 * 2 / kv_qmax(dt)) : 0; /* the larger values saturate */
        kv_pair p = kv_pair_new(dt, n_kv, hd, st);
        char cfg[96];
        snprintf(cfg, sizeof cfg, "kv=%s%s,heads=%lld/%lld,hd=%lld", assay_kv_dtype_name(dt),
                 !kv_scaled(dt) ? "" : cfgs[ci].stat ? "(static)" : "(dynamic)", (long long)n_head, (long long)n_kv,
                 (long long)hd);
        /* kv_store: every position of every sequence, one fill step per sequence */
        for (int s = 0; s < N_SEQ; s++) {
            gpu_step(&p, &fill_steps[s], NULL, NULL, NULL);
            cpu_step(&p, &fill_steps[s], NULL, NULL, NULL);
        }
        kv_image im = kv_download(&p);
        errs er = errs_new(1), ex = errs_new(1);
        kv_compare(&p, &im, &er);
        kv_check_encoding(&p, &im, &ex);
        char shape[200];
        snprintf(shape, sizeof shape, "%s,8 fill steps (1550 positions)", cfg);
        report("kv_store", shape, &er, NULL, &ex);
        kv_image_free(&im);
        /* attention over the steps */
        float scale = 1.0f / sqrtf((float)hd);
        assay_attn_params ap = {n_head, n_kv, hd, scale, 0, 0}, apw = {n_head, n_kv, hd, scale, 48, 3};
        const step_buf *steps[] = {&st_dec, &st_pre, &st_mix, &st_nocu};
        for (int si = 0; si < 4; si++) run_attention(&p, cfg, steps[si], &ap, 1);
        run_attention(&p, cfg, &st_mix, &apw, 1);
        if (cfgs[ci].sharp) {
            run_attention(&p, cfg, &st_dec, &ap, 8);
            run_attention(&p, cfg, &st_pre, &ap, 8);
        }
        if (cfgs[ci].graph) run_graph(&p, cfg, &ap);
        /* kv_copy_block: a block of A onto the spare block */
        if (have(G->kv_copy_block != NULL, "kv_copy")) {
            G->kv_copy_block(gpu, &p.Lg, &p.g, seq_blocks[SA][2], spare_block);
            C->kv_copy_block(cpu, &p.Lc, &p.g, seq_blocks[SA][2], spare_block);
            G->synchronize(gpu);
            im = kv_download(&p);
            errs ec = errs_new(1);
            kv_compare(&p, &im, &ec);
            snprintf(shape, sizeof shape, "%s,block %d -> %d", cfg, seq_blocks[SA][2], spare_block);
            report("kv_copy", shape, &ec, NULL, NULL);
            kv_image_free(&im);
        }
        if (kv_scaled(dt) && !cfgs[ci].stat) run_requantize(&p, cfg);
        kv_pair_free(&p);
    }
}

/* ---- the attention cases again with ASSAY_CUDA_ATTN_REF=1 ------------------------------------------------------------- */

/* Runs this program again with --attention-only and ASSAY_CUDA_ATTN_REF=1 in its environment; its exit status. */
static int run_forced_ref(const char *seed) {
    size_t n = 0;
    while (environ[n]) n++;
    char **env = xcalloc(n + 2, sizeof *env);
    static char ref_on[] = "ASSAY_CUDA_ATTN_REF=1", arg0[] = "test_backend_ops_cuda", arg1[] = "--attention-only";
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ASSAY_CUDA_ATTN_REF=", 20) != 0) env[k++] = environ[i];
    env[k++] = ref_on;
    env[k] = NULL;
    char seed_arg[32];
    snprintf(seed_arg, sizeof seed_arg, "%s", seed);
    char *argv[] = {arg0, arg1, seed_arg, NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env);
    free(env);
    if (rc != 0) {
        printf("test_backend_ops_cuda: cannot start the ASSAY_CUDA_ATTN_REF=1 pass: %s\n", strerror(rc));
        return 1;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv) {
    int attention_only = 0;
    const char *seed = "0x9e3779b97f4a7c15";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--attention-only") == 0) attention_only = 1;
        else seed = argv[i]; /* another seed: test_backend_ops_cuda <seed> */
    }
    rng = strtoull(seed, NULL, 0) | 1;
    const char *ref = getenv("ASSAY_CUDA_ATTN_REF");
    forced_ref = ref && atoi(ref) != 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (assay_backend_open(&gpu, "cuda", 0) != ASSAY_OK) {
        printf("test_backend_ops_cuda: SKIPPED: %s\n", assay_last_error());
        return 77;
    }
    CHECK_OK(assay_backend_cpu_open_kernels(&cpu, 1, "scalar"));
    if (!cpu) return check_finish("backend_ops_cuda");
    G = gpu->ops;
    C = cpu->ops;
    printf("CUDA backend on %s (activations %s) against the CPU backend's scalar kernels; seed %s%s\n",
           assay_backend_cuda_device_name(gpu), assay_type_name(gpu->act_type), seed,
           attention_only ? "; attention cases only" : "");
    CHECK(gpu->act_type == ASSAY_TYPE_BF16 && assay_backend_act_size(gpu) == 2 && !gpu->host_memory);
    make_blocks();
    make_steps();
    if (!attention_only) {
        test_buffers();
        test_linear();
        test_fp8_linear();
        test_get_rows();
        test_rmsnorm();
        test_rope();
        test_glu(0);
        test_glu(1);
        test_add_scale();
        test_softmax();
        test_tanh_cap();
        test_rows_reductions();
    }
    test_attention();
    for (int i = 0; i < n_kept_dev; i++) dfree(kept_dev[i]);
    assay_backend_close(cpu);
    assay_backend_close(gpu);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (attention_only) {
        printf("\nattention cases%s: %d cases, %d failed (%.1f s)\n", forced_ref ? " with ASSAY_CUDA_ATTN_REF=1" : "",
               n_cases, n_failed, secs);
        return check_finish("backend_ops_cuda (attention)");
    }
    int child = 0;
    if (!forced_ref) {
        printf("\nthe attention cases again with ASSAY_CUDA_ATTN_REF=1 (a child process: the backend reads it once):\n");
        child = run_forced_ref(seed);
        CHECK(child == 0);
    }
    printf("\nbackend_ops_cuda: %d cases, %d failed (%.1f s)%s\n", n_cases, n_failed, secs,
           forced_ref ? "" : child == 0 ? "; the ASSAY_CUDA_ATTN_REF=1 pass passed" : "; the ASSAY_CUDA_ATTN_REF=1 pass FAILED");
    return check_finish("backend_ops_cuda");
}
