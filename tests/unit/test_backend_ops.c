/* test_backend_ops.c — every op of the CPU backend, for every kernel set this CPU runs (scalar, avx2, avx512,
 * avx512bf16, amx),
 * against the scalar kernel set and against plain double-precision math written here, in the manner of llama.cpp's
 * tests/test-backend-ops.cpp. One line per (op, shape, kernel set), e.g.
 *
 *   matmul  type=q4_K,n_in=768,n_out=38,n_tok=5  avx512  vs scalar: abs 9.16e-05 rel 2.34e-05 bound<=4.53e-02
 *           err/bound  0.003 | vs f64: abs 9.30e+00 rel 5.40e+00 bound<=2.00e+02 err/bound  0.093  OK
 *
 * (random blocks: every bit pattern of the codes and sub-block scales, so outputs are large and often cancel; the
 * error against f64 here is the activations' 8-bit quantization)
 *
 * abs/rel: the largest absolute and relative error over the output; bound<=: the largest per-element bound;
 * err/bound: the largest ratio, which must stay <= 1 for every element ("exact": values must be equal). Sets the CPU
 * lacks are skipped and said so. The exit code is non-zero when any case fails. `test_backend_ops <seed>` reruns
 * everything on other random inputs.
 *
 * Bounds are per element, derived from the inputs; u = 2^-24 is the unit roundoff of float; libm's expf, cosf and
 * sinf are taken to be within 1 ulp (<= 2u relative), tanhf within 2 ulp. "vs scalar" uses the sum of the two
 * sets' bounds against exact math (triangle inequality) unless stated otherwise.
 *
 *  matmul     exact = sum_i W[o][i] x[t][i] in double, W from assay_dequantize. Float weights (f32, f16, bf16) and
 *             the packed group int4 types meet f32 activations; the legacy quants and k-quants meet activations
 *             quantized to Q8_0 / Q8_1 / Q8_K first, by every kernel set with the same integers (round to nearest
 *             even of x * (1/d), d = amax/127). Hence per output:
 *               vs scalar: 2 K u T + 2u|y|  — the same terms (for the quantized types: the same integer products and
 *                 block scales) summed in another float order: each set is within K u T of the real value of that
 *                 one sum, K = D + 8, D the deepest chain of roundings any term goes through (f32 activations: every
 *                 set accumulates in >= 8 lanes, so D = n/8 + 16; quantized: block terms summed over n/32 blocks or
 *                 16-element groups, D = n/16 + 8), +8 for the products and conversions that make a term, and
 *                 T = sum_i (|w_i| + o_i)(|xq_i| + e_i):
 *                 o_i the largest constant a kernel adds to the codes and takes out again as a float term (AVX-512
 *                 Q4_0/Q5_0/Q8_0 use unsigned codes q + 8/16/128; Q4_1/Q5_1 and the k-quants carry a min).
 *               vs f64: K u T + sum_i (|w_i| + 2|m_i|) e_i + u|y| — the activation quantization error: e_i bounds
 *                 |x_i - q_i d_h| for Q8_0/Q8_1, d (1/2 + 381u + 127 * 2^-11) + 127 * 2^-25 (half a step, the step
 *                 rounded to fp16, the product x * (1/d) rounded); for Q8_K (float d) d (1/2 + 300u); Q8_1's
 *                 fp16 block sums that meet a min m add at most the same per element.
 *             A set whose activations differ from the scalar set's (avx512bf16: bf16 weights meet activations rounded
 *             to bf16, as llama.cpp does) has its own terms: e_i = 2^-8 |x_i| (8 significant bits, round to nearest
 *             even), or |x_i| where |x_i| < 2^-126 (denormals taken as 0); D = n/16 + 8 (VDPBF16PS: two roundings
 *             per pair of elements in each of 16 lanes); plus K 2^-126 for results flushed to zero. Against the
 *             scalar set its bound is then the sum of the two sets' bounds against f64.
 *             The amx set's legacy-quant prefill (>= 16 tokens: the shapes with 33 and 67 tokens) forms each block's
 *             integer dot exactly in an AMX tile and then adds its two float terms per block, as the AVX-512 tiles do:
 *             the same bounds.
 *  get_rows   exact against the scalar set and bit for bit the rows assay_dequantize gives; against decoders here:
 *             f32/f16/bf16 and the fp16 scale times small integer types (Q4_0, Q5_0, Q8_0, Q8_1, Q4G*) exact;
 *             Q8_K (float scale times code) within u|x|; Q4_1/Q5_1 (d q + m: one more rounding) and the k-quants
 *             (scale q - min from the kernels' unpacking) within 2u (|scale q| + |min|).
 *  rmsnorm    sum of squares in double, 1/rms rounded once, two products: 3u|y| + (n + 8) 2^-53 |y|.
 *  rope       the angle pos * inv_freq rounded to float rotates by at most u|angle| (the kernel's float angle is
 *             the main error at large positions), cosf/sinf (1 ulp each), the two products and the sum add 4u:
 *             r u (|angle| + 4) with r = |(x0, x1)|; the dims past n_rot and the rows' padding past the heads must
 *             be untouched (exact).
 *  swiglu     expf, 1 + e, the division and the product: 5u|y| (the error of e enters 1 + e with weight <= 1).
 *             The AVX-512 sets' polynomial exp (exp512) is within 2u relative as well (measured against exp() in
 *             double on every float with |x| < 1e-3 and every 16th float of [-104, 88.7]: 1.999u), so swiglu and
 *             softmax keep these bounds; their rmsnorm (squares summed in double), rope (cosf/sinf as the loop, one
 *             FMA per output: fewer roundings) and add have the loops' bounds too.
 *  geglu      the tanh argument z (float constants, cube, sum) is off by dz <= 7u (|c g| + |c 0.044715 g^3|); that
 *             moves 1 + tanh by <= 2 (1 + tanh) dz (sech^2 <= 2 (1 + tanh)), tanhf by 4u|tanh|, and three float
 *             operations by 3u: 0.5 |g up| (2 (1 + t) dz + 4u|t| + 3u (1 + t)).
 *  add/scale  one correctly rounded float operation: exact against (float)(a + b) and (float)(y * s) in double.
 *  softmax    per element the weight's exponent is off by a_i = dc_i + u|c_i - m| + 2u (softcap: dc_i = u|v_i| +
 *             5u|c_i|); normalizing adds the others' and two roundings: p_i (a_i + sum_j p_j a_j + 3u), times
 *             (1 + 2 max a) for the second-order terms.
 *  kv_store   exact against an encoder written here: f32 copied, f16/bf16 round to nearest even, fp8 (e4m3fn, e5m2)
 *             round to nearest even of x * fl(1/scale) saturating at the finite max, int8 lrint clamped to +-127;
 *             the scale is the static one or fl(amax / qmax) (1 for an all-zero head); every other slot stays 0.
 *             Against the scalar set: the same bytes (every storage rounding is correctly rounded in every set).
 *  kv_copy    exact: the destination block's values and scales become the source's, every other byte unchanged.
 *  attention  exact: softmax(softcap(scale q.k)) . v in double over the cache's decoded values (code * scale).
 *             Each score is off by s_j <= (hd + 3) u scale sum |q k| (+ u|s| + 5u|c| with softcap); each weight's
 *             exponent by a_j = s_j + u|c_j - m| + 4u (expf: 1 ulp; the AVX-512 polynomial exp: about 1e-7 = 1.7u
 *             and its last rounding); the online softmax's rescaling adds u R + 4u per KV block (R = max - min
 *             score); with rho = expm1(max a_j + ...),
 *             out_d is off by (2 rho / (1 - rho) + (2N + 5 nb + 6) u) sum_j p_j |v_jd| (N keys, nb blocks: the
 *             accumulations of p v and of the sum of p, the decode of v, the final division).
 *
 * kv_store and attention take a step descriptor (assay_step) of tokens from three sequences of 70, 5 and 37 positions
 * whose blocks are shuffled over 16 physical ones; sequences interleave within a step, positions span several blocks.
 *
 * get_rows, geglu, scale, kv_copy_block, kv_store's fp8/int8 encoding and the attention's KV decoding are shared C
 * code today (matmul, f16 conversion, the attention dot/axpy/tile kernels and, in the AVX-512 sets, rmsnorm, rope,
 * swiglu, softmax and add differ per set); everything runs for every set so that a set that gains its own kernel is
 * covered. Large element-wise calls are split over the backend's threads by rows (the shapes with thousands of
 * elements here), small ones run on the calling thread.
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "assay/backend.h"
#include "assay/dequant.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kq_inline.h"
#include "check.h"

#define U 0x1p-24 /* unit roundoff of float */

/* ---- random inputs ------------------------------------------------------------------------------------------- */

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

/* ---- error statistics and the report ------------------------------------------------------------------------- */

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

static void errs_fmt(char *buf, size_t cap, const errs *e) {
    char t[128];
    if (!e) snprintf(t, sizeof t, "(reference)");
    else if (e->exact)
        snprintf(t, sizeof t, "exact: %lld of %lld differ%s", (long long)e->bad, (long long)e->n, e->bad ? " <-- FAIL" : "");
    else
        snprintf(t, sizeof t, "abs %8.2e rel %8.2e bound<=%8.2e err/bound %6.3f%s", e->max_abs, e->max_rel, e->max_bound,
                 e->max_ratio, e->bad ? " <-- FAIL" : "");
    snprintf(buf, cap, "%-62s", t);
}

static int n_cases, n_failed;

static void report(const char *op, const char *shape, const char *set, const errs *vs_ref, const errs *vs_f64) {
    char a[128], b[128];
    errs_fmt(a, sizeof a, vs_ref);
    errs_fmt(b, sizeof b, vs_f64);
    int ok = (!vs_ref || vs_ref->bad == 0) && (!vs_f64 || vs_f64->bad == 0);
    printf("  %-9s %-58s %-7s vs scalar: %s | vs f64: %s  %s\n", op, shape, set, a, b, ok ? "OK" : "FAIL");
    fflush(stdout);
    n_cases++;
    n_failed += !ok;
    CHECK(ok);
}

/* ---- the kernel sets ------------------------------------------------------------------------------------------- */

enum { MAX_SETS = 8, N_THREADS = 2 };
static struct {
    const char *name;
    assay_backend *be;
} sets[MAX_SETS];
static int n_sets; /* sets[0] is the scalar set */

static void open_sets(void) {
    const char *const *names = assay_backend_cpu_kernel_sets();
    for (int i = 0; names[i]; i++) {
        assay_backend *be = NULL;
        assay_status st = assay_backend_cpu_open_kernels(&be, N_THREADS, names[i]);
        if (!assay_backend_cpu_kernels_supported(names[i])) {
            CHECK(st == ASSAY_ERR_UNSUPPORTED);
            printf("kernel set %-7s SKIPPED: %s\n", names[i], assay_last_error());
            continue;
        }
        CHECK_OK(st);
        if (st != ASSAY_OK) continue;
        CHECK(strcmp(assay_backend_cpu_kernels(be), names[i]) == 0);
        ASSAY_ASSERT(n_sets < MAX_SETS);
        sets[n_sets].name = names[i];
        sets[n_sets++].be = be;
        printf("kernel set %-7s runs on this CPU\n", names[i]);
    }
    ASSAY_ASSERT(n_sets > 0 && strcmp(sets[0].name, "scalar") == 0);
    assay_backend *be = NULL;
    CHECK(assay_backend_cpu_open_kernels(&be, 1, "avx9") == ASSAY_ERR_ARG && !be);
    CHECK(!assay_backend_cpu_kernels_supported("avx9") && !assay_backend_cpu_kernels_supported(NULL));
    CHECK_OK(assay_backend_cpu_open_kernels(&be, 1, "auto")); /* the cpuid choice, as assay_backend_cpu_open */
    if (be) printf("auto picks %s\n", assay_backend_cpu_kernels(be));
    assay_backend_close(be);
}

/* ---- weights of every type ------------------------------------------------------------------------------------- */

/* Byte offsets of a block's fp16 scale fields (-1: none); every other byte random, so every bit pattern of the packed
 * codes, sub-block scales and zero points occurs. */
static const struct {
    assay_type t;
    int half[2];
} wlayout[] = {
    {ASSAY_TYPE_Q4_0, {0, -1}},   {ASSAY_TYPE_Q4_1, {0, 2}},     {ASSAY_TYPE_Q5_0, {0, -1}},  {ASSAY_TYPE_Q5_1, {0, 2}},
    {ASSAY_TYPE_Q8_0, {0, -1}},   {ASSAY_TYPE_Q8_1, {0, 2}},     {ASSAY_TYPE_Q2_K, {80, 82}}, {ASSAY_TYPE_Q3_K, {108, -1}},
    {ASSAY_TYPE_Q4_K, {0, 2}},    {ASSAY_TYPE_Q5_K, {0, 2}},     {ASSAY_TYPE_Q6_K, {208, -1}}, {ASSAY_TYPE_Q4G32, {0, -1}},
    {ASSAY_TYPE_Q4G64, {0, -1}},  {ASSAY_TYPE_Q4G128, {0, -1}},
};

/* n elements of type t at dst; 0 when this test has no generator for the type. */
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

/* ---- matmul ---------------------------------------------------------------------------------------------------- */

/* Per element of a weight row: o = the largest constant any kernel adds to the codes and subtracts again as a float
 * term (the rounding magnitude beyond |w|), m2 = twice the block's min (it meets Q8_1's rounded block sums). */
static void weight_extras(assay_type t, const uint8_t *row, int64_t n, double *o, double *m2) {
    for (int64_t i = 0; i < n; i++) o[i] = m2[i] = 0;
    const assay_type_info *ti = assay_type_get(t);
    switch (t) {
    case ASSAY_TYPE_Q4_0:
    case ASSAY_TYPE_Q5_0:
    case ASSAY_TYPE_Q8_0: {
        double c = t == ASSAY_TYPE_Q4_0 ? 8 : t == ASSAY_TYPE_Q5_0 ? 16 : 128; /* the AVX-512 unsigned codes q + c */
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

/* x rounded to bf16 here (round to nearest even; what VCVTNE2PS2BF16 does for normal and zero inputs) */
static double round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* x quantized for vec_dot_type vt as the sets do it: xq = the values the kernels multiply, e = the bound on
 * |x - xq| per element. F32: xq = x, e = 0. BF16: xq = x rounded to bf16 here, e = 2^-8 |x| (8 significant bits),
 * or |x| where |x| < 2^-126 (the conversion and VDPBF16PS take denormals as 0). The Q8 types: the scalar set's
 * quantizer (every set makes the same integers). */
static void act_quant(assay_type vt, const float *x, int64_t n, double *xq, double *e) {
    if (vt == ASSAY_TYPE_F32) {
        for (int64_t i = 0; i < n; i++) xq[i] = x[i], e[i] = 0;
        return;
    }
    if (vt == ASSAY_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            int tiny = fabsf(x[i]) < 0x1p-126f;
            xq[i] = tiny ? 0 : round_bf16(x[i]);
            e[i] = tiny ? fabsf(x[i]) : 0x1p-8 * fabsf(x[i]);
        }
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
            double dr = amax / 127.0f; /* the block scale before its rounding to fp16 */
            eb = dr * (0.5 + 381 * U + 127 * 0x1p-11) + 127 * 0x1p-25;
        }
        for (int j = 0; j < qb; j++) {
            xq[b * qb + j] = qs[j] * d;
            e[b * qb + j] = eb;
        }
    }
    free(buf);
}

/* The kernel table of a set, by name (its vec_dot_type per weight type says how it treats the activations). */
static const assay_cpu_kernels *set_table(const char *name) {
    if (strcmp(name, "scalar") == 0) return assay_cpu_kernels_ref();
    if (strcmp(name, "avx2") == 0) return assay_cpu_kernels_avx2();
    if (strcmp(name, "avx512") == 0) return assay_cpu_kernels_avx512();
    if (strcmp(name, "avx512bf16") == 0) return assay_cpu_kernels_avx512bf16();
    if (strcmp(name, "amx") == 0) return assay_cpu_kernels_amx();
    fprintf(stderr, "test_backend_ops: kernel set %s unknown here: add it to set_table\n", name);
    ASSAY_ASSERT(0);
    return NULL;
}

/* The per-element bounds of a matmul whose activations are treated as vt (see the header): b_same against another
 * set with the same activations, b_f64 against exact math; want = the exact product (wd: dequantized weights). */
static void matmul_bounds(assay_type type, assay_type vt, const uint8_t *w, size_t rb, const float *wd, const float *x,
                          int64_t n_in, int64_t n_out, int64_t n_tok, double *want, double *b_same, double *b_f64) {
    double *o = xcalloc(n_out * n_in, 8), *m2 = xcalloc(n_out * n_in, 8);
    for (int64_t r = 0; r < n_out; r++) weight_extras(type, w + r * rb, n_in, o + r * n_in, m2 + r * n_in);
    double *xq = xcalloc(n_tok * n_in, 8), *e = xcalloc(n_tok * n_in, 8);
    for (int64_t tk = 0; tk < n_tok; tk++) act_quant(vt, x + tk * n_in, n_in, xq + tk * n_in, e + tk * n_in);
    /* f32 activations: >= 8 lanes, n/8 + 16; quantized (block sums) and bf16 (VDPBF16PS: two roundings per pair of
     * elements in each of 16 lanes): n/16 + 8 */
    double D = vt == ASSAY_TYPE_F32 ? ceil(n_in / 8.0) + 16 : n_in / 16.0 + 8, K = D + 8;
    /* bf16: results below 2^-126 are flushed to zero, at most 2^-126 per rounding */
    double ftz = vt == ASSAY_TYPE_BF16 ? K * 0x1p-126 : 0;
    for (int64_t tk = 0; tk < n_tok; tk++)
        for (int64_t r = 0; r < n_out; r++) {
            const float *wr = wd + r * n_in, *xt = x + tk * n_in;
            const double *orow = o + r * n_in, *mrow = m2 + r * n_in, *xqt = xq + tk * n_in, *et = e + tk * n_in;
            double y = 0, T = 0, A = 0;
            for (int64_t i = 0; i < n_in; i++) {
                y += (double)wr[i] * xt[i];
                T += (fabs(wr[i]) + orow[i]) * (fabs(xqt[i]) + et[i]);
                A += (fabs(wr[i]) + mrow[i]) * et[i];
            }
            want[tk * n_out + r] = y;
            b_same[tk * n_out + r] = 2 * K * U * T + 2 * U * fabs(y) + 2 * ftz;
            b_f64[tk * n_out + r] = K * U * T + A + U * fabs(y) + ftz;
        }
    free(o); free(m2); free(xq); free(e);
}

static void test_matmul(void) {
    printf("\nmatmul: y[t][o] = sum_i W[o][i] x[t][i], every weight type with a kernel\n");
    const assay_cpu_kernels *rk = assay_cpu_kernels_ref();
    /* (blocks of the type along n_in, n_out, n_tok): one block and odd block counts, row counts off the 4-row tiles
     * (remainders 1, 2, 3), one token and token counts off the 4-token tiles (5, 7, 3, 2), a 600-row matrix (thread
     * slabs past the 64-row chunks of the packed int4 prefill), 67 tokens (past the 64-token blocks of the AVX-512
     * quantized gemm), a long row (16 blocks: 4096 for the k-quants) and 100 rows of one token (the decode tiles of
     * 8 rows, several per thread slab, and their remainders) */
    static const int64_t shapes[][3] = {{1, 13, 1}, {3, 38, 5}, {8, 71, 4}, {2, 600, 7},
                                        {5, 20, 67}, {1, 5, 3}, {16, 9, 2}, {4, 100, 1}, {3, 150, 33}};
    /* n_in of the element types: odd, off every SIMD width */
    static const int64_t float_n_in[] = {67, 257, 1000, 129, 100, 33, 4099, 515, 96};
    for (int t = 0; t < ASSAY_TYPE_COUNT; t++) {
        if (!assay_type_get((assay_type)t) || !rk->type[t].vec_dot) continue;
        assay_type type = (assay_type)t, vt = rk->type[t].vec_dot_type;
        int64_t blk = assay_type_get(type)->block_elems;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t n_in = blk == 1 ? float_n_in[si] : shapes[si][0] * blk, n_out = shapes[si][1], n_tok = shapes[si][2];
            size_t rb = assay_type_row_bytes(type, n_in);
            uint8_t *w = xcalloc(n_out, rb);
            int gen = 1;
            for (int64_t r = 0; r < n_out; r++) gen &= fill_weight(type, w + r * rb, n_in);
            if (!gen) {
                fprintf(stderr, "matmul: no weight generator for type %s: add it to this test\n", assay_type_name(type));
                CHECK(0);
                free(w);
                break;
            }
            float *x = xcalloc(n_tok * n_in, 4), *wd = xcalloc(n_out * n_in, 4);
            for (int64_t i = 0; i < n_tok * n_in; i++) x[i] = arand();
            if (n_tok > 1) /* an all-zero activation block (scale 0) in the last token */
                for (int64_t i = 0; i < (blk > 32 ? blk : 32) && i < n_in; i++) x[(n_tok - 1) * n_in + i] = 0;
            CHECK_OK(assay_dequantize(type, w, wd, n_out * n_in));
            size_t ny = (size_t)(n_tok * n_out);
            double *want = xcalloc(ny, 8), *b_ref = xcalloc(ny, 8), *b_f64 = xcalloc(ny, 8);
            double *b_same_s = xcalloc(ny, 8), *b_f64_s = xcalloc(ny, 8);
            matmul_bounds(type, vt, w, rb, wd, x, n_in, n_out, n_tok, want, b_ref, b_f64);
            assay_weight aw = {.type = type, .data = w, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .name = "w"};
            float *y_ref = xcalloc(n_tok * n_out, 4), *y = xcalloc(n_tok * n_out, 4);
            char shape[96];
            snprintf(shape, sizeof shape, "type=%s,n_in=%lld,n_out=%lld,n_tok=%lld", assay_type_name(type),
                     (long long)n_in, (long long)n_out, (long long)n_tok);
            for (int s = 0; s < n_sets; s++) {
                assay_backend *be = sets[s].be;
                float *out = s == 0 ? y_ref : y;
                /* a set that treats the activations otherwise (bf16 for bf16 weights) has bounds of its own; against
                 * the scalar set then: the sum of the two sets' bounds against exact math */
                assay_type svt = set_table(sets[s].name)->type[t].vec_dot_type;
                const double *bs = b_ref, *bf = b_f64;
                if (svt != vt) {
                    double *dummy = xcalloc(ny, 8);
                    matmul_bounds(type, svt, w, rb, wd, x, n_in, n_out, n_tok, dummy, b_same_s, b_f64_s);
                    for (size_t i = 0; i < ny; i++) b_same_s[i] = b_f64_s[i] + b_f64[i];
                    free(dummy);
                    bs = b_same_s;
                    bf = b_f64_s;
                }
                for (int64_t i = 0; i < n_tok * n_out; i++) out[i] = NAN;
                be->ops->matmul(be, out, &aw, x, n_tok);
                errs er = errs_new(0), ex = errs_new(0);
                for (int64_t i = 0; i < n_tok * n_out; i++) {
                    if (s) errs_add(&er, out[i], y_ref[i], bs[i]);
                    errs_add(&ex, out[i], want[i], bf[i]);
                }
                report("matmul", shape, sets[s].name, s ? &er : NULL, &ex);
            }
            free(w); free(x); free(wd); free(want); free(b_ref); free(b_f64); free(b_same_s); free(b_f64_s);
            free(y_ref); free(y);
        }
    }
}

/* ---- get_rows --------------------------------------------------------------------------------------------------- */

static double dec_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h >> 15 ? -v : v;
}
static double dec_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element i of a row decoded here (not by dequant.c): the value in double and the bound on dequant's float rounding. */
static void decode_ref(assay_type t, const uint8_t *row, int64_t n, double *v, double *bound) {
    const assay_type_info *ti = assay_type_get(t);
    for (int64_t i = 0; i < n; i++) bound[i] = 0;
    switch (t) {
    case ASSAY_TYPE_F32:
        for (int64_t i = 0; i < n; i++) v[i] = ((const float *)row)[i];
        return;
    case ASSAY_TYPE_F16:
    case ASSAY_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = ((const uint16_t *)row)[i];
            v[i] = t == ASSAY_TYPE_F16 ? dec_f16(h) : dec_bf16(h);
        }
        return;
    case ASSAY_TYPE_Q8_K:
        for (int64_t i = 0; i < n; i++) {
            const assay_block_q8_K *b = (const assay_block_q8_K *)row + i / 256;
            v[i] = (double)b->d * b->qs[i % 256];
            bound[i] = U * fabs(v[i]); /* a float scale times the code: one rounding */
        }
        return;
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
            for (int i = 0; i < 256; i++) {
                double sq = (double)u.scale[i / 16] * u.q[i], mn = u.min[i / 16];
                v[b * 256 + i] = sq - mn;
                bound[b * 256 + i] = 2 * U * (fabs(sq) + fabs(mn));
            }
        }
        return;
    default: break;
    }
    /* legacy blocks of 32 and packed group int4 */
    for (int64_t i = 0; i < n; i++) {
        int64_t ib = i / ti->block_elems, j = i % ti->block_elems;
        const uint8_t *blk = row + ib * ti->block_bytes;
        uint16_t dh, mh;
        memcpy(&dh, blk, 2);
        memcpy(&mh, blk + 2, 2);
        double d = assay_half_to_float(dh), m = assay_half_to_float(mh);
        int lo = j < 16, jj = j % 16;
        switch (t) {
        case ASSAY_TYPE_Q4_0: v[i] = d * ((lo ? blk[2 + jj] & 15 : blk[2 + jj] >> 4) - 8); break;
        case ASSAY_TYPE_Q4_1:
            v[i] = d * (lo ? blk[4 + jj] & 15 : blk[4 + jj] >> 4) + m;
            bound[i] = 2 * U * (fabs(v[i] - m) + fabs(m));
            break;
        case ASSAY_TYPE_Q5_0:
        case ASSAY_TYPE_Q5_1: {
            int q1 = t == ASSAY_TYPE_Q5_1;
            const uint8_t *qh = blk + (q1 ? 4 : 2), *qs = blk + (q1 ? 8 : 6);
            uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
            int q = (lo ? qs[jj] & 15 : qs[jj] >> 4) | (int)((h >> j) & 1) << 4;
            v[i] = q1 ? d * q + m : d * (q - 16);
            if (q1) bound[i] = 2 * U * (fabs(d * q) + fabs(m));
            break;
        }
        case ASSAY_TYPE_Q8_0:
        case ASSAY_TYPE_Q8_1: v[i] = d * (int8_t)blk[(t == ASSAY_TYPE_Q8_0 ? 2 : 4) + j]; break;
        case ASSAY_TYPE_Q4G32:
        case ASSAY_TYPE_Q4G64:
        case ASSAY_TYPE_Q4G128: {
            const uint8_t *qs = blk + 4 + 16 * (j / 32);
            int jj32 = j % 32;
            int q = jj32 < 16 ? qs[jj32] & 15 : qs[jj32 - 16] >> 4;
            v[i] = d * (q - blk[2]);
            break;
        }
        default: v[i] = NAN; break;
        }
    }
}

static void test_get_rows(void) {
    printf("\nget_rows: y[t] = dequantized row ids[t] of W, every type with a dequantizer\n");
    static const int32_t ids1[] = {6}, ids7[] = {10, 3, 3, 0, 7, 10, 1};
    for (int t = 0; t < ASSAY_TYPE_COUNT; t++) {
        assay_type type = (assay_type)t;
        if (!assay_type_get(type) || !assay_dequant_row_get(type)) continue;
        int64_t blk = assay_type_get(type)->block_elems;
        for (int si = 0; si < 2; si++) {
            int64_t n_in = blk == 1 ? (si ? 67 : 7) : blk * (si ? 3 : 1), n_out = 11, n = si ? 7 : 1;
            const int32_t *ids = si ? ids7 : ids1;
            size_t rb = assay_type_row_bytes(type, n_in);
            uint8_t *w = xcalloc(n_out, rb);
            int gen = 1;
            for (int64_t r = 0; r < n_out; r++) gen &= fill_weight(type, w + r * rb, n_in);
            if (!gen) {
                fprintf(stderr, "get_rows: no weight generator for type %s: add it to this test\n", assay_type_name(type));
                CHECK(0);
                free(w);
                break;
            }
            float *want = xcalloc(n * n_in, 4), *y = xcalloc(n * n_in, 4), *y_ref = xcalloc(n * n_in, 4);
            double *v = xcalloc(n * n_in, 8), *bd = xcalloc(n * n_in, 8);
            for (int64_t k = 0; k < n; k++) {
                CHECK_OK(assay_dequantize(type, w + ids[k] * rb, want + k * n_in, n_in));
                decode_ref(type, w + ids[k] * rb, n_in, v + k * n_in, bd + k * n_in);
            }
            assay_weight aw = {.type = type, .data = w, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .name = "emb"};
            char shape[96];
            snprintf(shape, sizeof shape, "type=%s,n_in=%lld,n_rows=%lld,n=%lld", assay_type_name(type), (long long)n_in,
                     (long long)n_out, (long long)n);
            for (int s = 0; s < n_sets; s++) {
                assay_backend *be = sets[s].be;
                float *out = s == 0 ? y_ref : y;
                for (int64_t i = 0; i < n * n_in; i++) out[i] = NAN;
                be->ops->get_rows(be, out, &aw, ids, n);
                /* vs scalar: bit for bit; vs f64: the decoders here; and bit for bit the rows of assay_dequantize */
                errs er = errs_new(1), ex = errs_new(0);
                int64_t differ = 0;
                for (int64_t i = 0; i < n * n_in; i++) {
                    if (s) {
                        errs_add(&er, out[i], y_ref[i], 0);
                        if (memcmp(&out[i], &y_ref[i], 4) != 0 && out[i] == y_ref[i]) er.bad++; /* -0 vs +0 */
                    }
                    errs_add(&ex, out[i], v[i], bd[i]);
                    differ += memcmp(&out[i], &want[i], 4) != 0;
                }
                if (differ)
                    fprintf(stderr, "get_rows %s %s: %lld values differ from assay_dequantize's\n", shape, sets[s].name,
                            (long long)differ);
                CHECK(differ == 0);
                report("get_rows", shape, sets[s].name, s ? &er : NULL, &ex);
            }
            free(w); free(want); free(y); free(y_ref); free(v); free(bd);
        }
    }
}

/* ---- element-wise ops --------------------------------------------------------------------------------------------- */

static void test_rmsnorm(void) {
    printf("\nrmsnorm: y = x / rms(x) * gamma, rows of n\n");
    static const struct { int64_t n, rows; float eps; int inplace; } shapes[] = {
        {1, 1, 1e-6f, 0}, {7, 3, 1e-5f, 0}, {67, 2, 1e-6f, 1}, {256, 5, 1e-6f, 0}, {4097, 2, 1e-5f, 0},
        {1000, 37, 1e-5f, 1}}; /* the last: over the threads */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si].n, rows = shapes[si].rows, N = n * rows;
        float eps = shapes[si].eps;
        float *x = xcalloc(N, 4), *g = xcalloc(n, 4), *y = xcalloc(N, 4), *y_ref = xcalloc(N, 4);
        double *want = xcalloc(N, 8), *bnd = xcalloc(N, 8);
        for (int64_t i = 0; i < N; i++) x[i] = frand() * 4;
        for (int64_t i = 0; i < n; i++) g[i] = 1 + frand() * 0.5f;
        for (int64_t r = 0; r < rows; r++) {
            double ss = 0;
            for (int64_t i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
            double inv = 1 / sqrt(ss / n + (double)eps);
            for (int64_t i = 0; i < n; i++) {
                want[r * n + i] = x[r * n + i] * inv * g[i];
                bnd[r * n + i] = (3 * U + 4 * U * U + (n + 8) * 0x1p-53) * fabs(want[r * n + i]);
            }
        }
        char shape[96];
        snprintf(shape, sizeof shape, "n=%lld,rows=%lld,eps=%g%s", (long long)n, (long long)rows, eps,
                 shapes[si].inplace ? ",in-place" : "");
        for (int s = 0; s < n_sets; s++) {
            assay_backend *be = sets[s].be;
            float *out = s == 0 ? y_ref : y;
            const float *in = x;
            if (shapes[si].inplace) {
                memcpy(out, x, N * 4);
                in = out;
            }
            be->ops->rmsnorm(be, out, in, g, n, rows, eps);
            errs er = errs_new(0), ex = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                if (s) errs_add(&er, out[i], y_ref[i], 2 * bnd[i]);
                errs_add(&ex, out[i], want[i], bnd[i]);
            }
            report("rmsnorm", shape, sets[s].name, s ? &er : NULL, &ex);
        }
        free(x); free(g); free(y); free(y_ref); free(want); free(bnd);
    }
}

static void test_rope(void) {
    printf("\nrope: heads rotated in place by pos * inv_freq (norm: pairs (2i, 2i+1); neox: (i, i + n_rot/2))\n");
    static const struct { int64_t n_tok, n_head, hd, n_rot, pad; assay_rope_mode mode; } shapes[] = {
        {1, 1, 8, 8, 0, ASSAY_ROPE_MODE_NORM},     {5, 3, 64, 64, 0, ASSAY_ROPE_MODE_NEOX},
        {4, 2, 64, 32, 16, ASSAY_ROPE_MODE_NORM},  {3, 4, 80, 24, 7, ASSAY_ROPE_MODE_NEOX},
        {7, 2, 128, 128, 0, ASSAY_ROPE_MODE_NORM}, {6, 2, 128, 64, 3, ASSAY_ROPE_MODE_NEOX},
        {41, 8, 64, 64, 5, ASSAY_ROPE_MODE_NORM},  {37, 8, 128, 128, 0, ASSAY_ROPE_MODE_NEOX}}; /* over the threads */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n_tok = shapes[si].n_tok, nh = shapes[si].n_head, hd = shapes[si].hd, n_rot = shapes[si].n_rot;
        int64_t stride = nh * hd + shapes[si].pad, N = n_tok * stride, half = n_rot / 2;
        assay_rope_mode mode = shapes[si].mode;
        float *x = xcalloc(N, 4), *y = xcalloc(N, 4), *y_ref = xcalloc(N, 4), *inv_freq = xcalloc(hd / 2, 4);
        double *want = xcalloc(N, 8), *bnd = xcalloc(N, 8);
        int32_t *pos = xcalloc(n_tok, 4);
        for (int64_t i = 0; i < N; i++) x[i] = frand() * 2;
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
                    bnd[a] = bnd[b] = r * U * (fabs(ang) + 4);
                }
        char shape[96];
        snprintf(shape, sizeof shape, "mode=%s,n_tok=%lld,n_head=%lld,hd=%lld,n_rot=%lld,stride=%lld",
                 mode == ASSAY_ROPE_MODE_NORM ? "norm" : "neox", (long long)n_tok, (long long)nh, (long long)hd,
                 (long long)n_rot, (long long)stride);
        for (int s = 0; s < n_sets; s++) {
            assay_backend *be = sets[s].be;
            assay_rope_params rp = {mode, n_rot, inv_freq};
            float *out = s == 0 ? y_ref : y;
            memcpy(out, x, N * 4);
            be->ops->rope(be, out, n_tok, nh, hd, stride, pos, &rp);
            errs er = errs_new(0), ex = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                if (s) errs_add(&er, out[i], y_ref[i], 2 * bnd[i]);
                errs_add(&ex, out[i], want[i], bnd[i]);
            }
            report("rope", shape, sets[s].name, s ? &er : NULL, &ex);
        }
        free(x); free(y); free(y_ref); free(inv_freq); free(want); free(bnd); free(pos);
    }
}

static void test_glu(int geglu) {
    printf("\n%s: out = %s(gate) * up, gate/up rows `stride` apart\n", geglu ? "geglu" : "swiglu",
           geglu ? "gelu_tanh" : "silu");
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 3, 7}, {67, 3, 134}, {1000, 2, 1000},
                                        {1408, 27, 2816}}; /* n, rows, stride; the last over the threads */
    const double c = sqrt(2 / M_PI), k3 = 0.044715;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si][0], rows = shapes[si][1], stride = shapes[si][2], N = n * rows;
        /* gate and up as the two halves of one fused projection when stride = 2n */
        float *buf = xcalloc(rows * stride + n, 4), *gate = buf, *up = stride == 2 * n ? buf + n : xcalloc(rows * stride, 4);
        float *y = xcalloc(N, 4), *y_ref = xcalloc(N, 4);
        double *want = xcalloc(N, 8), *bnd = xcalloc(N, 8);
        for (int64_t i = 0; i < rows * stride + n; i++) buf[i] = frand() * 8;
        if (up != buf + n)
            for (int64_t i = 0; i < rows * stride; i++) up[i] = frand() * 2;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) {
                double g = gate[r * stride + i], u = up[r * stride + i], o;
                if (!geglu) {
                    o = g / (1 + exp(-g)) * u;
                    bnd[r * n + i] = 5 * U * (1 + 8 * U) * fabs(o);
                } else {
                    double z = c * (g + k3 * g * g * g), t = tanh(z);
                    o = 0.5 * g * (1 + t) * u;
                    double dz = 7 * U * (fabs(c * g) + fabs(c * k3 * g * g * g));
                    double rel = 2 * (1 + t) * dz * (1 + 4 * dz) + 4 * U * fabs(t) + 3 * U * (1 + t);
                    bnd[r * n + i] = 0.5 * fabs(g * u) * rel * (1 + 8 * U);
                }
                want[r * n + i] = o;
            }
        char shape[96];
        snprintf(shape, sizeof shape, "n=%lld,rows=%lld,stride=%lld", (long long)n, (long long)rows, (long long)stride);
        for (int s = 0; s < n_sets; s++) {
            assay_backend *be = sets[s].be;
            float *out = s == 0 ? y_ref : y;
            (geglu ? be->ops->geglu : be->ops->swiglu)(be, out, gate, up, n, rows, stride);
            errs er = errs_new(0), ex = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                if (s) errs_add(&er, out[i], y_ref[i], 2 * bnd[i]);
                errs_add(&ex, out[i], want[i], bnd[i]);
            }
            report(geglu ? "geglu" : "swiglu", shape, sets[s].name, s ? &er : NULL, &ex);
        }
        if (up != buf + n) free(up);
        free(buf); free(y); free(y_ref); free(want); free(bnd);
    }
}

static void test_add_scale(void) {
    printf("\nadd, scale: y = a + b, y *= s (one correctly rounded operation: exact)\n");
    static const int64_t sizes[] = {1, 7, 67, 4097, 40001}; /* the last over the threads */
    for (int op = 0; op < 3; op++) /* add, add in place (y = a), scale */
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            float *a = xcalloc(n, 4), *b = xcalloc(n, 4), *y = xcalloc(n, 4), sc = frand() * 3;
            double *want = xcalloc(n, 8);
            /* magnitudes within 2^-6..2^4 of each other: a + b is exact in double, then rounded once to float */
            for (int64_t i = 0; i < n; i++) {
                a[i] = frand() * (float)ldexp(1, (int)(rnd() % 8) - 4);
                b[i] = frand() * (float)ldexp(1, (int)(rnd() % 8) - 4);
                want[i] = op < 2 ? (float)((double)a[i] + b[i]) : (float)((double)a[i] * sc);
            }
            char shape[64];
            snprintf(shape, sizeof shape, "n=%lld%s", (long long)n, op == 1 ? ",in-place" : "");
            for (int s = 0; s < n_sets; s++) {
                assay_backend *be = sets[s].be;
                if (op == 0) be->ops->add(be, y, a, b, n);
                else {
                    memcpy(y, a, n * 4);
                    if (op == 1) be->ops->add(be, y, y, b, n);
                    else be->ops->scale(be, y, sc, n);
                }
                errs er = errs_new(1), ex = errs_new(1);
                for (int64_t i = 0; i < n; i++) {
                    if (s) errs_add(&er, y[i], want[i], 0);
                    errs_add(&ex, y[i], want[i], 0);
                }
                report(op < 2 ? "add" : "scale", shape, sets[s].name, s ? &er : NULL, &ex);
            }
            free(a); free(b); free(y); free(want);
        }
}

static void test_softmax(void) {
    printf("\nsoftmax: rows of n, in place, optional softcap first\n");
    static const struct { int64_t n, rows; float softcap, amp; } shapes[] = {
        {1, 1, 0, 10}, {7, 3, 0, 10}, {1000, 2, 0, 10}, {33, 4, 30, 80}, {257, 2, 30, 80}, {16, 3, 5, 8}, {3000, 13, 0, 10}}; /* the last over the threads */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si].n, rows = shapes[si].rows, N = n * rows;
        float sc = shapes[si].softcap;
        float *x = xcalloc(N, 4), *y = xcalloc(N, 4), *y_ref = xcalloc(N, 4);
        double *want = xcalloc(N, 8), *bnd = xcalloc(N, 8), *cv = xcalloc(n, 8), *av = xcalloc(n, 8);
        for (int64_t i = 0; i < N; i++) x[i] = frand() * shapes[si].amp;
        for (int64_t r = 0; r < rows; r++) {
            const float *v = x + r * n;
            double m = -INFINITY, sum = 0, sa = 0, amax = 0;
            for (int64_t i = 0; i < n; i++) {
                cv[i] = sc > 0 ? sc * tanh(v[i] / (double)sc) : v[i];
                m = fmax(m, cv[i]);
            }
            for (int64_t i = 0; i < n; i++) sum += exp(cv[i] - m);
            for (int64_t i = 0; i < n; i++) {
                double dc = sc > 0 ? U * fabs(v[i]) + 5 * U * fabs(cv[i]) : 0;
                av[i] = dc + U * fabs(cv[i] - m) + 2 * U;
                want[r * n + i] = exp(cv[i] - m) / sum;
                sa += want[r * n + i] * av[i];
                amax = fmax(amax, av[i]);
            }
            for (int64_t i = 0; i < n; i++) bnd[r * n + i] = want[r * n + i] * (av[i] + sa + 3 * U) * (1 + 2 * amax);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld,rows=%lld,softcap=%g,|x|<%g", (long long)n, (long long)rows, sc,
                 shapes[si].amp);
        for (int s = 0; s < n_sets; s++) {
            assay_backend *be = sets[s].be;
            float *out = s == 0 ? y_ref : y;
            memcpy(out, x, N * 4);
            be->ops->softmax(be, out, n, rows, sc);
            errs er = errs_new(0), ex = errs_new(0);
            for (int64_t i = 0; i < N; i++) {
                if (s) errs_add(&er, out[i], y_ref[i], 2 * bnd[i]);
                errs_add(&ex, out[i], want[i], bnd[i]);
            }
            report("softmax", shape, sets[s].name, s ? &er : NULL, &ex);
        }
        free(x); free(y); free(y_ref); free(want); free(bnd); free(cv); free(av);
    }
}

/* ---- KV cache ----------------------------------------------------------------------------------------------------- */

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

/* x rounded to nearest, ties to even, to a binary format with `mant` fraction bits and smallest normal exponent emin;
 * past max: +-max when saturating, else +-inf. */
static double round_fmt(double x, int mant, int emin, double max, int saturate) {
    if (x == 0) return x;
    int e;
    frexp(x, &e);
    int lead = e - 1 < emin ? emin : e - 1;
    double v = ldexp(nearbyint(ldexp(x, mant - lead)), lead - mant);
    if (fabs(v) > max) v = copysign(saturate ? max : INFINITY, x);
    return v;
}

static double kv_qmax(assay_kv_dtype t) { return t == ASSAY_KV_INT8 ? 127 : t == ASSAY_KV_FP8_E4M3 ? 448 : 57344; }
static int kv_scaled(assay_kv_dtype t) { return t == ASSAY_KV_FP8_E4M3 || t == ASSAY_KV_FP8_E5M2 || t == ASSAY_KV_INT8; }

/* The value element i of a cache buffer holds (before its slot's scale). */
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

/* What kv_store must write for x (before the scale): see the header. inv = fl(1 / scale). */
static double kv_encode_ref(assay_kv_dtype t, float x, float inv) {
    float xs = (float)((double)x * inv); /* the float product, exactly rounded */
    switch (t) {
    case ASSAY_KV_F32: return x;
    case ASSAY_KV_F16: return round_fmt(x, 10, -14, 65504, 0);
    case ASSAY_KV_BF16: return round_fmt(x, 7, -126, 0x1.fep127, 0);
    case ASSAY_KV_FP8_E4M3: return round_fmt(xs, 3, -6, 448, 1);
    case ASSAY_KV_FP8_E5M2: return round_fmt(xs, 2, -14, 57344, 1);
    case ASSAY_KV_INT8: {
        double q = nearbyint(xs);
        return q > 127 ? 127 : q < -127 ? -127 : q;
    }
    default: return NAN;
    }
}

typedef struct kv_cache {
    assay_kv_layer L;
    assay_kv_geom g;
    int64_t n_phys;
} kv_cache;

static kv_cache kv_new(assay_kv_dtype dt, int64_t n_kv, int64_t hd, int64_t n_phys, float k_static, float v_static) {
    kv_cache c = {.g = {dt, n_kv, hd}, .n_phys = n_phys};
    size_t slots = (size_t)(n_phys * n_kv * ASSAY_KV_BLOCK), es = assay_kv_dtype_size(dt);
    c.L.k = xcalloc(slots * hd, es);
    c.L.v = xcalloc(slots * hd, es);
    c.L.k_scale = xcalloc(slots, 4);
    c.L.v_scale = xcalloc(slots, 4);
    c.L.k_static = k_static;
    c.L.v_static = v_static;
    return c;
}
static void kv_free(kv_cache *c) { free(c->L.k); free(c->L.v); free(c->L.k_scale); free(c->L.v_scale); }
static size_t kv_slots(const kv_cache *c) { return (size_t)(c->n_phys * c->g.n_head_kv * ASSAY_KV_BLOCK); }

/* Three sequences of different lengths in one cache, their blocks shuffled over the physical ones. */
enum { N_SEQ = 3, N_PHYS = 16 };
static const int32_t seq_table[N_SEQ][5] = {{9, 2, 14, 5, 0}, {7}, {3, 12, 1}};
static const int64_t seq_len[N_SEQ] = {70, 5, 37};

/* The step descriptor of tokens (seq[t], pos[t]), t < n: the step's sequences in order of first appearance, their
 * block tables and lengths (the highest position + 1), each token's slot from its sequence's table. */
enum { MAX_STEP = 80 };
typedef struct step_buf {
    int32_t pos[MAX_STEP], seq[MAX_STEP], lens[N_SEQ];
    int64_t slot[MAX_STEP];
    const int32_t *tables[N_SEQ];
    assay_step st;
} step_buf;

static void make_step(step_buf *b, int n, const int *seq, const int32_t *pos) {
    ASSAY_ASSERT(n <= MAX_STEP);
    int local[N_SEQ] = {-1, -1, -1}, n_seqs = 0;
    for (int t = 0; t < n; t++) {
        int s = seq[t];
        if (local[s] < 0) {
            local[s] = n_seqs;
            b->tables[n_seqs] = seq_table[s];
            b->lens[n_seqs++] = 0;
        }
        b->seq[t] = local[s];
        b->pos[t] = pos[t];
        b->slot[t] = (int64_t)seq_table[s][pos[t] / ASSAY_KV_BLOCK] * ASSAY_KV_BLOCK + pos[t] % ASSAY_KV_BLOCK;
        if (pos[t] + 1 > b->lens[local[s]]) b->lens[local[s]] = pos[t] + 1;
    }
    b->st = (assay_step){.n_tokens = n, .pos = b->pos, .seq_of_tok = b->seq, .slot = b->slot, .n_seqs = n_seqs,
                         .seq_lens = b->lens, .block_tables = b->tables};
}

static void test_kv_store(void) {
    printf("\nkv_store: k/v rows written into a paged cache (3 sequences, shuffled blocks), every KV dtype\n");
    static const int64_t hds[] = {36, 64, 264}; /* off the 8-lane f16 conversion; > 256 (the fp8 encoder's chunks) */
    const int64_t n_kv = 2;
    /* one call: sequence 0 positions 0..34 with sequence 1 positions 0..5 in the middle (n_tok 41), then one token
     * (sequence 2 position 33, in its third block) */
    int32_t pos[42];
    int seq[42], n_tok = 0;
    for (int i = 0; i < 35; i++) {
        if (i == 12)
            for (int j = 0; j < 6; j++) seq[n_tok] = 1, pos[n_tok++] = j;
        seq[n_tok] = 0, pos[n_tok++] = i;
    }
    seq[n_tok] = 2, pos[n_tok] = 33;
    step_buf batch, one;
    make_step(&batch, n_tok, seq, pos);
    make_step(&one, 1, seq + n_tok, pos + n_tok);
    for (int dt = 0; dt < ASSAY_KV_DTYPE_COUNT; dt++)
        for (int stat = 0; stat <= kv_scaled((assay_kv_dtype)dt); stat++)
            for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
                assay_kv_dtype t = (assay_kv_dtype)dt;
                int64_t hd = hds[hi], kvd = n_kv * hd;
                float *k = xcalloc((n_tok + 1) * kvd, 4), *v = xcalloc((n_tok + 1) * kvd, 4);
                for (int64_t i = 0; i < (n_tok + 1) * kvd; i++) {
                    k[i] = frand() * 3 * ((rnd() % 50) == 0 ? 20 : 1);
                    v[i] = frand() * 3;
                }
                for (int64_t i = 0; i < hd; i++) k[5 * kvd + hd + i] = 0; /* one all-zero head: its dynamic scale is 1 */
                /* static scales small enough that the larger values saturate */
                float st = stat ? (float)(0.7 * 3 / kv_qmax(t)) : 0;
                kv_cache ref = kv_new(t, n_kv, hd, N_PHYS, st, st);
                char shape[96];
                snprintf(shape, sizeof shape, "dtype=%s%s,n_kv=%lld,hd=%lld,n_tok=%d+1", assay_kv_dtype_name(t),
                         stat ? "(static)" : "", (long long)n_kv, (long long)hd, n_tok);
                for (int s = 0; s < n_sets; s++) {
                    assay_backend *be = sets[s].be;
                    kv_cache c = s == 0 ? ref : kv_new(t, n_kv, hd, N_PHYS, st, st);
                    be->ops->kv_store(be, &c.L, &c.g, k, v, &batch.st);
                    be->ops->kv_store(be, &c.L, &c.g, k + n_tok * kvd, v + n_tok * kvd, &one.st);
                    /* expected image of the whole cache: zero except the slots written */
                    size_t slots = kv_slots(&c);
                    double *want = xcalloc(slots * hd * 2, 8), *want_sc = xcalloc(slots * 2, 8);
                    for (int tk = 0; tk <= n_tok; tk++)
                        for (int64_t h = 0; h < n_kv; h++) {
                            int64_t blk = seq_table[seq[tk]][pos[tk] / ASSAY_KV_BLOCK];
                            int64_t slot = (blk * n_kv + h) * ASSAY_KV_BLOCK + pos[tk] % ASSAY_KV_BLOCK;
                            for (int kv = 0; kv < 2; kv++) {
                                const float *src = (kv ? v : k) + tk * kvd + h * hd;
                                float sc = 1;
                                if (kv_scaled(t)) {
                                    sc = st;
                                    if (!(sc > 0)) {
                                        float amax = 0;
                                        for (int64_t i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(src[i]));
                                        sc = amax > 0 ? amax / (float)kv_qmax(t) : 1.0f;
                                    }
                                    want_sc[kv * slots + slot] = sc;
                                }
                                float inv = 1.0f / sc;
                                for (int64_t i = 0; i < hd; i++) want[(kv * slots + slot) * hd + i] = kv_encode_ref(t, src[i], inv);
                            }
                        }
                    errs er = errs_new(1), ex = errs_new(1);
                    size_t bytes = slots * hd * assay_kv_dtype_size(t);
                    if (s) {
                        const uint8_t *p[4] = {c.L.k, c.L.v, (uint8_t *)c.L.k_scale, (uint8_t *)c.L.v_scale};
                        const uint8_t *q[4] = {ref.L.k, ref.L.v, (uint8_t *)ref.L.k_scale, (uint8_t *)ref.L.v_scale};
                        size_t len[4] = {bytes, bytes, slots * 4, slots * 4};
                        for (int b = 0; b < 4; b++)
                            for (size_t i = 0; i < len[b]; i++) errs_add(&er, p[b][i], q[b][i], 0);
                    }
                    for (int kv = 0; kv < 2; kv++) {
                        const void *buf = kv ? c.L.v : c.L.k;
                        const float *scv = kv ? c.L.v_scale : c.L.k_scale;
                        for (size_t i = 0; i < slots * hd; i++)
                            errs_add(&ex, kv_elem(t, buf, (int64_t)i), want[kv * slots * hd + i], 0);
                        for (size_t i = 0; i < slots; i++) errs_add(&ex, scv[i], want_sc[kv * slots + i], 0);
                    }
                    report("kv_store", shape, sets[s].name, s ? &er : NULL, &ex);
                    free(want);
                    free(want_sc);
                    if (s) kv_free(&c);
                }
                kv_free(&ref);
                free(k);
                free(v);
            }
}

static void test_kv_copy_block(void) {
    printf("\nkv_copy_block: one physical block copied onto another (values and scales), every KV dtype\n");
    static const int64_t copies[][2] = {{3, 11}, {0, 15}, {15, 0}}; /* src, dst: the first and last blocks too */
    const int64_t n_kv = 2, hd = 40;
    for (int dt = 0; dt < ASSAY_KV_DTYPE_COUNT; dt++) {
        assay_kv_dtype t = (assay_kv_dtype)dt;
        kv_cache c = kv_new(t, n_kv, hd, N_PHYS, 0, 0), ref = kv_new(t, n_kv, hd, N_PHYS, 0, 0);
        size_t slots = kv_slots(&c), blk_slots = (size_t)(n_kv * ASSAY_KV_BLOCK);
        size_t bytes = slots * hd * assay_kv_dtype_size(t), blk_bytes = blk_slots * hd * assay_kv_dtype_size(t);
        /* every byte random (scales too, for the scaled types; the others' scales stay 0, as kv_store leaves them) */
        uint8_t *img[4], *want[4];
        size_t len[4] = {bytes, bytes, slots * 4, slots * 4}, unit[4] = {blk_bytes, blk_bytes, blk_slots * 4, blk_slots * 4};
        for (int b = 0; b < 4; b++) {
            img[b] = xcalloc(len[b], 1);
            want[b] = xcalloc(len[b], 1);
            if (b < 2 || kv_scaled(t))
                for (size_t i = 0; i < len[b]; i++) img[b][i] = (uint8_t)rnd();
            memcpy(want[b], img[b], len[b]);
        }
        for (size_t ci = 0; ci < sizeof copies / sizeof copies[0]; ci++)
            for (int b = 0; b < 4; b++) memmove(want[b] + copies[ci][1] * unit[b], want[b] + copies[ci][0] * unit[b], unit[b]);
        char shape[96];
        snprintf(shape, sizeof shape, "dtype=%s,n_kv=%lld,hd=%lld,copies=3->11,0->15,15->0", assay_kv_dtype_name(t),
                 (long long)n_kv, (long long)hd);
        for (int s = 0; s < n_sets; s++) {
            assay_backend *be = sets[s].be;
            kv_cache *kc = s == 0 ? &ref : &c;
            uint8_t *buf[4] = {kc->L.k, kc->L.v, (uint8_t *)kc->L.k_scale, (uint8_t *)kc->L.v_scale};
            uint8_t *rbuf[4] = {ref.L.k, ref.L.v, (uint8_t *)ref.L.k_scale, (uint8_t *)ref.L.v_scale};
            for (int b = 0; b < 4; b++) memcpy(buf[b], img[b], len[b]);
            for (size_t ci = 0; ci < sizeof copies / sizeof copies[0]; ci++)
                be->ops->kv_copy_block(be, &kc->L, &kc->g, copies[ci][0], copies[ci][1]);
            errs er = errs_new(1), ex = errs_new(1);
            for (int b = 0; b < 4; b++)
                for (size_t i = 0; i < len[b]; i++) {
                    if (s) errs_add(&er, buf[b][i], rbuf[b][i], 0);
                    errs_add(&ex, buf[b][i], want[b][i], 0);
                }
            report("kv_copy", shape, sets[s].name, s ? &er : NULL, &ex);
        }
        for (int b = 0; b < 4; b++) free(img[b]), free(want[b]);
        kv_free(&c);
        kv_free(&ref);
    }
}

/* ---- attention --------------------------------------------------------------------------------------------------- */

typedef struct attn_case {
    int64_t n_head, n_kv, hd;
    int64_t window;
    float softcap;
} attn_case;

/* out[t] and the bound for the tokens (seq[t], pos[t]) against the decoded cache c. */
static void attn_exact(const kv_cache *c, const attn_case *ac, float scale, const float *q, int n_tok, const int *seq,
                       const int32_t *pos, double *want, double *bnd) {
    const int64_t hd = ac->hd, grp = ac->n_head / ac->n_kv, B = ASSAY_KV_BLOCK;
    double *s = xcalloc(128, 8), *cs = xcalloc(128, 8), *a = xcalloc(128, 8), *p = xcalloc(128, 8);
    double *kd = xcalloc(128 * hd, 8), *vd = xcalloc(128 * hd, 8);
    for (int t = 0; t < n_tok; t++) {
        int64_t P = pos[t], start = ac->window > 0 && P - ac->window + 1 > 0 ? P - ac->window + 1 : 0;
        int64_t N = P - start + 1, nb = P / B - start / B + 1;
        for (int64_t h = 0; h < ac->n_head; h++) {
            int64_t kvh = h / grp;
            const float *qh = q + (t * ac->n_head + h) * hd;
            double m = -INFINITY, cmin = INFINITY, amax = 0;
            for (int64_t j = 0; j < N; j++) {
                int64_t pj = start + j;
                int64_t slot = (seq_table[seq[t]][pj / B] * ac->n_kv + kvh) * B + pj % B;
                int sc = kv_scaled(c->g.dtype);
                double ks = sc ? c->L.k_scale[slot] : 1, vs = sc ? c->L.v_scale[slot] : 1;
                double dot = 0, dabs = 0;
                for (int64_t d = 0; d < hd; d++) {
                    kd[j * hd + d] = kv_elem(c->g.dtype, c->L.k, (int64_t)slot * hd + d) * ks;
                    vd[j * hd + d] = kv_elem(c->g.dtype, c->L.v, (int64_t)slot * hd + d) * vs;
                    dot += (double)qh[d] * kd[j * hd + d];
                    dabs += fabs((double)qh[d] * kd[j * hd + d]);
                }
                s[j] = scale * dot;
                double sig = (hd + 3) * U * scale * dabs;
                if (ac->softcap > 0) {
                    cs[j] = ac->softcap * tanh(s[j] / ac->softcap);
                    sig += U * fabs(s[j]) + 5 * U * fabs(cs[j]);
                } else cs[j] = s[j];
                a[j] = sig;
                m = fmax(m, cs[j]);
                cmin = fmin(cmin, cs[j]);
            }
            double l = 0;
            for (int64_t j = 0; j < N; j++) {
                a[j] += U * fabs(cs[j] - m) + 4 * U;
                amax = fmax(amax, a[j]);
                p[j] = exp(cs[j] - m);
                l += p[j];
            }
            double rho = expm1(amax + U * (m - cmin) + 4 * U * nb);
            double wfac = 2 * rho / (1 - rho) + (2 * N + 5 * nb + 6) * U;
            for (int64_t d = 0; d < hd; d++) {
                double o = 0, mag = 0;
                for (int64_t j = 0; j < N; j++) {
                    o += p[j] / l * vd[j * hd + d];
                    mag += p[j] / l * fabs(vd[j * hd + d]);
                }
                want[(t * ac->n_head + h) * hd + d] = o;
                bnd[(t * ac->n_head + h) * hd + d] = wfac * mag;
            }
        }
    }
    free(s); free(cs); free(a); free(p); free(kd); free(vd);
}

static void test_attention(void) {
    printf("\nattention: online softmax over the paged cache, 3 sequences of 70, 5 and 37 tokens in one call\n");
    /* heads / kv heads / head_dim: GQA 2 with the AVX-512 tiled path (hd % 16 == 0), GQA 2 on the per-token path with
     * dot/axpy tails (hd 36), MQA (one kv head for 8 query heads) */
    static const attn_case geoms[] = {{4, 2, 64, 0, 0}, {6, 3, 36, 0, 0}, {8, 1, 32, 0, 0}};
    /* plain; sliding window with softcap; sharp scores (|q| 16x: scores of tens, the running max jumps, far keys'
     * weights underflow) */
    static const struct { int64_t window; float softcap, qamp; } variants[] = {{0, 0, 1}, {20, 3, 1}, {0, 0, 16}};
    /* the batch: sequence 0 positions 50..69 (20 tokens in a row: query tiles of 16 and 4), then sequence 2 positions
     * 30..36 with sequence 1 positions 4 and 0 among them; then one token alone (sequence 0 at 69: decode) */
    int seq[40];
    int32_t pos[40];
    int n_tok = 0;
    for (int i = 50; i < 70; i++) seq[n_tok] = 0, pos[n_tok++] = i;
    seq[n_tok] = 2, pos[n_tok++] = 30;
    seq[n_tok] = 2, pos[n_tok++] = 31;
    seq[n_tok] = 1, pos[n_tok++] = 4;
    seq[n_tok] = 1, pos[n_tok++] = 0;
    for (int i = 32; i < 37; i++) seq[n_tok] = 2, pos[n_tok++] = i;
    int t_last = 0; /* sequence 0 at position 69 */
    for (int i = 0; i < n_tok; i++)
        if (seq[i] == 0 && pos[i] == 69) t_last = i;
    step_buf batch, one, fill[N_SEQ];
    make_step(&batch, n_tok, seq, pos);
    make_step(&one, 1, seq + t_last, pos + t_last);
    for (int s = 0; s < N_SEQ; s++) { /* each whole sequence, as a prefill writes it */
        int sq[MAX_STEP];
        int32_t ps[MAX_STEP];
        for (int i = 0; i < seq_len[s]; i++) sq[i] = s, ps[i] = i;
        make_step(&fill[s], (int)seq_len[s], sq, ps);
    }
    for (int dt = 0; dt < ASSAY_KV_DTYPE_COUNT; dt++)
        for (int stat = 0; stat <= kv_scaled((assay_kv_dtype)dt); stat++)
            for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
                assay_kv_dtype t = (assay_kv_dtype)dt;
                attn_case ac = geoms[gi];
                int64_t hd = ac.hd, kvd = ac.n_kv * hd, qd = ac.n_head * hd;
                float st = stat ? (float)(0.7 * 2 / kv_qmax(t)) : 0;
                kv_cache c = kv_new(t, ac.n_kv, hd, N_PHYS, st, st);
                /* fill every sequence's cache with the scalar set (kv_store is checked on its own above) */
                for (int s = 0; s < N_SEQ; s++) {
                    int64_t n = seq_len[s];
                    float *k = xcalloc(n * kvd, 4), *v = xcalloc(n * kvd, 4);
                    for (int64_t i = 0; i < n * kvd; i++) k[i] = frand() * 2, v[i] = frand();
                    sets[0].be->ops->kv_store(sets[0].be, &c.L, &c.g, k, v, &fill[s].st);
                    free(k); free(v);
                }
                float *q = xcalloc(n_tok * qd, 4), *y = xcalloc(n_tok * qd, 4), *y_ref = xcalloc(n_tok * qd, 4);
                double *want = xcalloc(n_tok * qd, 8), *bnd = xcalloc(n_tok * qd, 8);
                float *q0 = xcalloc(n_tok * qd, 4);
                for (int64_t i = 0; i < n_tok * qd; i++) q0[i] = frand() * 2;
                for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
                    ac.window = variants[vi].window;
                    ac.softcap = variants[vi].softcap;
                    for (int64_t i = 0; i < n_tok * qd; i++) q[i] = q0[i] * variants[vi].qamp;
                    float scale = 1.0f / sqrtf((float)hd);
                    assay_attn_params ap = {ac.n_head, ac.n_kv, hd, scale, ac.window, ac.softcap};
                    attn_exact(&c, &ac, scale, q, n_tok, seq, pos, want, bnd);
                    for (int dec = 0; dec < 2; dec++) { /* the batch, then one token of it alone */
                        int nt = dec ? 1 : n_tok, t0 = dec ? t_last : 0;
                        char shape[112];
                        snprintf(shape, sizeof shape, "kv=%s%s,heads=%lld/%lld,hd=%lld,n_tok=%d,win=%lld,softcap=%g%s",
                                 assay_kv_dtype_name(t), stat ? "(static)" : "", (long long)ac.n_head, (long long)ac.n_kv,
                                 (long long)hd, nt, (long long)ac.window, ac.softcap, variants[vi].qamp > 1 ? ",sharp" : "");
                        for (int s = 0; s < n_sets; s++) {
                            assay_backend *be = sets[s].be;
                            float *out = s == 0 ? y_ref : y;
                            for (int64_t i = 0; i < nt * qd; i++) out[i] = NAN;
                            be->ops->attention(be, out, q + t0 * qd, &ap, &c.L, &c.g, dec ? &one.st : &batch.st);
                            errs er = errs_new(0), ex = errs_new(0);
                            for (int64_t i = 0; i < nt * qd; i++) {
                                if (s) errs_add(&er, out[i], y_ref[i], 2 * bnd[t0 * qd + i]);
                                errs_add(&ex, out[i], want[t0 * qd + i], bnd[t0 * qd + i]);
                            }
                            report("attention", shape, sets[s].name, s ? &er : NULL, &ex);
                        }
                    }
                }
                kv_free(&c);
                free(q0); free(q); free(y); free(y_ref); free(want); free(bnd);
            }
}

/* ---- the device-shaped ops: buffers, linear, the ops that replaced host loops --------------------------------- */

/* linear = the input treatment (act_quant.h's reference), the act-order gather, the set's own matmul and the bias,
 * composed by hand: the CPU backend must give exactly that. Buffers round-trip through upload/download/copy;
 * gather_rows and absmax are exact; add_rmsnorm equals add then rmsnorm; tanh_cap is within 3 ulp of
 * cap * tanh(x / cap) in double (libm's tanhf within 2 ulp, the division and product one rounding each). */
static void test_device_ops(void) {
    printf("\nbuffers, linear (act quant + perm + matmul + bias), gather_rows, tanh_cap, absmax, add_rmsnorm\n");
    const int64_t n_in = 96, n_out = 37, n_tok = 5;
    float *w = xcalloc(n_in * n_out, 4), *x = xcalloc(n_tok * n_in, 4), *bias = xcalloc(n_out, 4);
    int32_t *perm = xcalloc(n_in, 4);
    for (int64_t i = 0; i < n_in * n_out; i++) w[i] = frand();
    for (int64_t i = 0; i < n_tok * n_in; i++) x[i] = arand();
    for (int64_t i = 0; i < n_out; i++) bias[i] = frand();
    for (int64_t i = 0; i < n_in; i++) perm[i] = (int32_t)((i * 37 + 5) % n_in); /* 37 is prime to 96: a permutation */
    const assay_act_quant treatments[] = {{ASSAY_ACT_QUANT_NONE, 0, 0, 0},
                                          {ASSAY_ACT_QUANT_FP8_TOKEN, 0, 0, 0},
                                          {ASSAY_ACT_QUANT_FP8_GROUP, 0, 32, 0},
                                          {ASSAY_ACT_QUANT_FP8_STATIC, 0, 0, 0.01f},
                                          {ASSAY_ACT_QUANT_INT8_TOKEN, 0, 0, 0}};
    const char *tnames[] = {"none", "fp8-token", "fp8-group32", "fp8-static", "int8-token"};
    float *y = xcalloc(n_tok * n_out, 4), *y2 = xcalloc(n_tok * n_out, 4), *xq = xcalloc(n_tok * n_in, 4);
    float *xp = xcalloc(n_tok * n_in, 4), *scales = xcalloc(n_tok * 8, 4);
    uint8_t *codes = xcalloc(n_tok * n_in, 1);
    for (int s = 0; s < n_sets; s++) {
        assay_backend *be = sets[s].be;
        for (int ti = 0; ti < 5; ti++)
            for (int use_perm = 0; use_perm < 2; use_perm++) {
                assay_weight wt = {ASSAY_TYPE_F32, w, n_in, n_out, (size_t)n_in * 4, "w", use_perm ? perm : NULL, NULL, 0, 0, 0};
                CHECK_OK(be->ops->prepare_weight(be, &wt));
                be->ops->linear(be, y, &wt, &treatments[ti], x, n_tok, bias);
                assay_act_quant_apply(&treatments[ti], x, n_tok, n_in, xq, codes, scales);
                for (int64_t t = 0; t < n_tok; t++)
                    for (int64_t c = 0; c < n_in; c++) xp[t * n_in + c] = xq[t * n_in + (use_perm ? perm[c] : c)];
                assay_weight plain = wt;
                plain.perm = NULL;
                be->ops->matmul(be, y2, &plain, xp, n_tok);
                errs ex = errs_new(1);
                for (int64_t t = 0; t < n_tok; t++)
                    for (int64_t o = 0; o < n_out; o++) errs_add(&ex, y[t * n_out + o], y2[t * n_out + o] + bias[o], 0);
                char shape[64];
                snprintf(shape, sizeof shape, "f32 %lldx%lld n_tok=%lld %s%s", (long long)n_out, (long long)n_in,
                         (long long)n_tok, tnames[ti], use_perm ? " perm" : "");
                report("linear", shape, sets[s].name, NULL, &ex);
            }
        /* buffers: upload, copy, download */
        float *d1 = be->ops->alloc(be, n_tok * n_in * 4), *d2 = be->ops->alloc(be, n_tok * n_in * 4);
        be->ops->upload(be, d1, x, n_tok * n_in * 4);
        be->ops->copy(be, d2, d1, n_tok * n_in * 4);
        be->ops->download(be, xq, d2, n_tok * n_in * 4);
        be->ops->synchronize(be);
        errs eb = errs_new(1);
        for (int64_t i = 0; i < n_tok * n_in; i++) errs_add(&eb, xq[i], x[i], 0);
        report("buffers", "upload, copy, download", sets[s].name, NULL, &eb);
        /* gather_rows and absmax */
        int32_t rows[3] = {4, 0, 4};
        be->ops->gather_rows(be, d1, d2, rows, 3, n_in);
        errs eg = errs_new(1), ea = errs_new(1);
        for (int r = 0; r < 3; r++)
            for (int64_t c = 0; c < n_in; c++) errs_add(&eg, d1[r * n_in + c], x[rows[r] * n_in + c], 0);
        report("gather", "3 of 5 rows (one twice)", sets[s].name, NULL, &eg);
        float am = 0;
        for (int64_t i = 0; i < n_tok * n_in; i++) am = fmaxf(am, fabsf(x[i]));
        errs_add(&ea, be->ops->absmax(be, d2, n_tok * n_in), am, 0);
        report("absmax", "480 values", sets[s].name, NULL, &ea);
        /* tanh_cap */
        errs et = errs_new(0);
        for (int64_t i = 0; i < n_tok * n_in; i++) d1[i] = x[i] * 40;
        be->ops->tanh_cap(be, d1, n_tok * n_in, 30.0f);
        for (int64_t i = 0; i < n_tok * n_in; i++) {
            double want = 30.0 * tanh((double)x[i] * 40 / 30.0);
            errs_add(&et, d1[i], want, 3 * ldexp(fabs(want), -23) + 1e-30);
        }
        report("tanh_cap", "480 values, cap 30", sets[s].name, NULL, &et);
        /* add_rmsnorm against add then rmsnorm of the same set */
        if (be->ops->add_rmsnorm) {
            const int64_t n = 67, nr = 3;
            float *xa = xcalloc(n * nr, 4), *xb = xcalloc(n * nr, 4), *h = xcalloc(n * nr, 4), *g = xcalloc(n, 4);
            float *ya = xcalloc(n * nr, 4), *yb = xcalloc(n * nr, 4);
            for (int64_t i = 0; i < n * nr; i++) xa[i] = xb[i] = arand(), h[i] = arand();
            for (int64_t i = 0; i < n; i++) g[i] = frand() + 1.5f;
            be->ops->add_rmsnorm(be, ya, xa, h, g, n, nr, 1e-5f);
            be->ops->add(be, xb, xb, h, n * nr);
            be->ops->rmsnorm(be, yb, xb, g, n, nr, 1e-5f);
            errs er = errs_new(1);
            for (int64_t i = 0; i < n * nr; i++) errs_add(&er, ya[i], yb[i], 0), errs_add(&er, xa[i], xb[i], 0);
            report("add_rms", "n=67 rows=3 (x and y)", sets[s].name, NULL, &er);
            free(xa); free(xb); free(h); free(g); free(ya); free(yb);
        }
        be->ops->free(be, d1);
        be->ops->free(be, d2);
    }
    free(w); free(x); free(bias); free(perm); free(y); free(y2); free(xq); free(xp); free(scales); free(codes);
}

int main(int argc, char **argv) {
    if (argc > 1) rng = strtoull(argv[1], NULL, 0) | 1; /* another seed: test_backend_ops <seed> */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    open_sets();
    test_matmul();
    test_get_rows();
    test_rmsnorm();
    test_rope();
    test_glu(0);
    test_glu(1);
    test_add_scale();
    test_softmax();
    test_kv_store();
    test_kv_copy_block();
    test_attention();
    test_device_ops();
    for (int s = 0; s < n_sets; s++) assay_backend_close(sets[s].be);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("\n%d cases over %d kernel set(s), %d failed (%.1f s)\n", n_cases, n_sets, n_failed,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return check_finish("backend_ops");
}
