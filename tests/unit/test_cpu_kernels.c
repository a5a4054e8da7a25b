/* test_cpu_kernels.c — every CPU kernel against its reference, with stated tolerances.
 *
 *  1. Weight-row dot products, each weight type (random blocks: every bit pattern of the packed fields):
 *     spec  = sum dequantize(w)[i] * x[i] in double (dequant.c, itself checked against gguf-py);
 *     ref   = scalar kernel with x quantized to the type's activation format (Q8_0/Q8_1/Q8_K);
 *     avx2  = AVX2 kernel.
 *     |ref - spec| <= sum_i |w_i| * (activation quantization step of x_i) * 0.6 + 2e-3 * sum |w_i x_i|
 *       (half a step of rounding, the step itself rounded to fp16, and the fp16-rounded block sums of Q8_1);
 *     |avx2 - ref| <= 1e-5 * sum |w_i x_i| (same integers, different float summation order);
 *     the four-token and two-row-by-four-token kernels (prefill) equal single-token AVX2 dot products within the
 *     same bound.
 *  1b. Tiled gemms (AVX-512/VNNI table, where the CPU has it): an 11-row x 7-token (and x 1-token) product, rows
 *     and tokens not multiples of the 4 x 4 tile, block counts odd and even, float rows with a partial 16-lane
 *     tail, each element against the scalar reference dot on the reference-quantized activation row:
 *     |gemm - ref| <= 2e-5 * sum |w_i x_i| + 1e-5 (same integers; float summation order, and for Q4_0/Q5_0/Q8_0
 *     the offset of the unsigned codes subtracted as a per-block float term). The AVX512_BF16 table's bf16 gemm
 *     (activations rounded to bf16) against the reference dot on the activations rounded to bf16 the same way.
 *  1c. Packed group int4 (Q4G32/64/128, f32 activations): rows packed by assay_q4g_pack from codes, zeros and fp16
 *     scales (with and without a column permutation) dequantize to exactly d * (q - z) of the original columns; the
 *     AVX2 dot kernels (1 token, 4 tokens, 2 rows x 4 tokens) and the AVX-512 gemm (decode path for 1, 3, 4 tokens and
 *     the chunked prefill path for 7, 70 rows) give the SAME BITS as the f32 kernels on the dequantized rows (tolerance 0: they load
 *     the same weights into the same accumulators in the same order).
 *  2. AVX2 (and AVX-512) activation quantizers produce the same bytes as the scalar ones; f16 conversions are exact.
 *  3. Attention (online softmax over a paged cache with a shuffled block table) against a naive two-pass
 *     softmax in double: f32 cache 1e-5, f16 cache 2e-3, fp8/int8 caches 0.1 (relative to max |v|).
 */
#include <stdint.h>
#include <stdlib.h>

#include "assay/backend.h"
#include "assay/dequant.h"
#include "backend/cpu/cpu_kernels.h"
#include "quant/q4g.h"
#include "check.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float frand(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2 - 1); }

typedef struct { assay_type t; int block, size, halves[2]; } tinfo;
static const tinfo types[] = {
    {ASSAY_TYPE_Q4_0, 32, 18, {0, -1}}, {ASSAY_TYPE_Q4_1, 32, 20, {0, 2}},  {ASSAY_TYPE_Q5_0, 32, 22, {0, -1}},
    {ASSAY_TYPE_Q5_1, 32, 24, {0, 2}},  {ASSAY_TYPE_Q8_0, 32, 34, {0, -1}}, {ASSAY_TYPE_Q2_K, 256, 84, {80, 82}},
    {ASSAY_TYPE_Q3_K, 256, 110, {108, -1}}, {ASSAY_TYPE_Q4_K, 256, 144, {0, 2}}, {ASSAY_TYPE_Q5_K, 256, 176, {0, 2}},
    {ASSAY_TYPE_Q6_K, 256, 210, {208, -1}}, {ASSAY_TYPE_F32, 1, 4, {-1, -1}}, {ASSAY_TYPE_F16, 1, 2, {-1, -1}},
    {ASSAY_TYPE_BF16, 1, 2, {-1, -1}},
    /* packed group int4: random zero bytes (0..255) and pad too, the fp16 scale at offset 0 */
    {ASSAY_TYPE_Q4G32, 32, 20, {0, -1}}, {ASSAY_TYPE_Q4G64, 64, 36, {0, -1}}, {ASSAY_TYPE_Q4G128, 128, 68, {0, -1}},
};

static size_t act_bytes(assay_type vt, int64_t n) {
    return vt == ASSAY_TYPE_Q8_0 ? n / 32 * 34 : vt == ASSAY_TYPE_Q8_1 ? n / 32 * 36 : vt == ASSAY_TYPE_Q8_K ? n / 256 * 292 : n * 4;
}

static void test_vec_dot(const assay_cpu_kernels *ref, const assay_cpu_kernels *avx) {
    const int64_t n = 1024;
    uint8_t *w = malloc(n * 4), *xr = malloc(n * 4 + 64), *xa = malloc(n * 4 + 64);
    float *x = malloc(n * 4), *wd = malloc(n * 4);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const tinfo *T = &types[ti];
        for (int rep = 0; rep < 20; rep++) {
            int64_t nb = n / T->block;
            if (T->t == ASSAY_TYPE_F32) for (int64_t i = 0; i < n; i++) ((float *)w)[i] = frand();
            else if (T->t == ASSAY_TYPE_F16) for (int64_t i = 0; i < n; i++) ((uint16_t *)w)[i] = assay_float_to_half(frand());
            else if (T->t == ASSAY_TYPE_BF16) for (int64_t i = 0; i < n; i++) ((uint16_t *)w)[i] = assay_float_to_bf16(frand());
            else
                for (int64_t b = 0; b < nb; b++) {
                    uint8_t *blk = w + b * T->size;
                    for (int i = 0; i < T->size; i++) blk[i] = (uint8_t)rnd();
                    for (int h = 0; h < 2; h++)
                        if (T->halves[h] >= 0) {
                            uint16_t v = assay_float_to_half(frand() * 0.05f);
                            memcpy(blk + T->halves[h], &v, 2);
                        }
                }
            /* activations with an outlier now and then, as real hidden states have */
            for (int64_t i = 0; i < n; i++) x[i] = frand() * ((rnd() % 64) == 0 ? 8.0f : 1.0f);
            CHECK_OK(assay_dequantize(T->t, w, wd, n));
            double spec = 0, mag = 0, step = 0;
            for (int64_t i = 0; i < n; i++) {
                spec += (double)wd[i] * x[i];
                mag += fabs((double)wd[i] * x[i]);
            }
            assay_type vt = ref->type[T->t].vec_dot_type;
            int qb = vt == ASSAY_TYPE_Q8_K ? 256 : 32;
            if (vt != ASSAY_TYPE_F32)
                for (int64_t b = 0; b < n / qb; b++) {
                    float am = 0, sw = 0;
                    for (int i = 0; i < qb; i++) {
                        am = fmaxf(am, fabsf(x[b * qb + i]));
                        sw += fabsf(wd[b * qb + i]);
                    }
                    step += sw * am / 127.0f;
                }
            ref->from_float[vt](x, xr, n);
            float sr, sa;
            ref->type[T->t].vec_dot(n, &sr, w, xr);
            double tol = step * 0.6 + 2e-3 * mag + (vt == ASSAY_TYPE_F32 ? 1e-5 * mag : 0);
            if (fabs(sr - spec) > tol) fprintf(stderr, "type %s ref %g spec %g tol %g\n", ref->name, sr, spec, tol);
            CHECK(fabs(sr - spec) <= tol);
            if (vt != ASSAY_TYPE_F32 && assay_cpu_has_avx512() && assay_cpu_kernels_avx512()) { /* its own Q8_K */
                assay_cpu_kernels_avx512()->from_float[vt](x, xa, n);
                CHECK(memcmp(xa, xr, act_bytes(vt, n)) == 0);
            }
            if (avx) {
                CHECK(avx->type[T->t].vec_dot_type == vt);
                avx->from_float[vt](x, xa, n);
                CHECK(memcmp(xa, xr, act_bytes(vt, n)) == 0);
                avx->type[T->t].vec_dot(n, &sa, w, xa);
                if (fabs(sa - sr) > 1e-5 * mag + 1e-6) fprintf(stderr, "type %d avx2 %g ref %g\n", T->t, sa, sr);
                CHECK(fabs(sa - sr) <= 1e-5 * mag + 1e-6);
                if (avx->type[T->t].vec_dot4) { /* rows 0..3: x, then x scaled and shifted (distinct rows) */
                    size_t rb = act_bytes(vt, n);
                    uint8_t *x4 = malloc(4 * rb);
                    float *xs = malloc(n * 4), s4[4], s1;
                    for (int j = 0; j < 4; j++) {
                        for (int64_t i = 0; i < n; i++) xs[i] = x[(i + 37 * j) % n] * (1.0f + 0.5f * j);
                        avx->from_float[vt](xs, x4 + j * rb, n);
                    }
                    avx->type[T->t].vec_dot4(n, s4, w, x4, rb);
                    for (int j = 0; j < 4; j++) {
                        avx->type[T->t].vec_dot(n, &s1, w, x4 + j * rb);
                        CHECK(fabs(s4[j] - s1) <= 1e-5 * mag * (1 + j) + 1e-5);
                    }
                    if (avx->type[T->t].vec_dot2x4) { /* two weight rows: w and w rotated by 5 elements (blocks) */
                        size_t wb = (size_t)(n / T->block) * T->size, es = (size_t)T->size; /* rotated by 5 blocks */
                        uint8_t *w2 = malloc(2 * wb);
                        memcpy(w2, w, wb);
                        memcpy(w2 + wb, w + 5 * es, wb - 5 * es);
                        memcpy(w2 + 2 * wb - 5 * es, w, 5 * es);
                        float s8[8];
                        avx->type[T->t].vec_dot2x4(n, s8, w2, wb, x4, rb);
                        for (int r2 = 0; r2 < 2; r2++)
                            for (int j = 0; j < 4; j++) {
                                avx->type[T->t].vec_dot(n, &s1, w2 + r2 * wb, x4 + j * rb);
                                CHECK(fabs(s8[4 * r2 + j] - s1) <= 1e-5 * mag * (1 + j) + 1e-5);
                            }
                        free(w2);
                    }
                    free(x4);
                    free(xs);
                }
            }
        }
    }
    free(w); free(xr); free(xa); free(x); free(wd);
}

static void test_gemm(const assay_cpu_kernels *ref, const assay_cpu_kernels *K) {
    const int64_t R = 11, T = 7;
    const int64_t sizes[] = {1024, 608, 1000};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const tinfo *Ti = &types[ti];
        const assay_cpu_type_kernels *tk = &K->type[Ti->t];
        if (!tk->gemm) continue;
        for (size_t si = 0; si < 3; si++) {
            int64_t n = sizes[si];
            if (n % Ti->block) continue;
            size_t rb = (size_t)(n / Ti->block) * Ti->size;
            uint8_t *w = malloc(rb * R);
            float *x = malloc(sizeof(float) * n * T), *wd = malloc(sizeof(float) * n * R), *y = malloc(sizeof(float) * R * T);
            for (int64_t r = 0; r < R; r++) {
                uint8_t *wr = w + r * rb;
                if (Ti->t == ASSAY_TYPE_F32) for (int64_t i = 0; i < n; i++) ((float *)wr)[i] = frand();
                else if (Ti->t == ASSAY_TYPE_F16) for (int64_t i = 0; i < n; i++) ((uint16_t *)wr)[i] = assay_float_to_half(frand());
                else if (Ti->t == ASSAY_TYPE_BF16) for (int64_t i = 0; i < n; i++) ((uint16_t *)wr)[i] = assay_float_to_bf16(frand());
                else
                    for (int64_t b = 0; b < n / Ti->block; b++) {
                        uint8_t *blk = wr + b * Ti->size;
                        for (int i = 0; i < Ti->size; i++) blk[i] = (uint8_t)rnd();
                        for (int h = 0; h < 2; h++)
                            if (Ti->halves[h] >= 0) {
                                uint16_t v = assay_float_to_half(frand() * 0.05f);
                                memcpy(blk + Ti->halves[h], &v, 2);
                            }
                    }
                CHECK_OK(assay_dequantize(Ti->t, wr, wd + r * n, n));
            }
            for (int64_t i = 0; i < n * T; i++) x[i] = frand() * ((rnd() % 64) == 0 ? 8.0f : 1.0f);
            assay_type vt = ref->type[Ti->t].vec_dot_type;
            size_t xs = tk->gemm_pack ? (tk->gemm_act_bytes(n) + 63) & ~(size_t)63 : (size_t)n * 4;
            /* C11: aligned_alloc's size must be a multiple of the alignment */
            uint8_t *xp = aligned_alloc(64, (xs * T + 63) & ~(size_t)63), *xr = malloc(act_bytes(vt, n) + 64);
            for (int64_t t = 0; t < T; t++) {
                if (tk->gemm_pack) tk->gemm_pack(x + t * n, xp + t * xs, n);
                else memcpy(xp + t * xs, x + t * n, (size_t)n * 4);
            }
            void *scratch = malloc(tk->gemm_scratch_bytes ? tk->gemm_scratch_bytes(n) : 1);
            for (int nt = 1; nt <= T; nt += T - 1) {
                for (int64_t i = 0; i < R * T; i++) y[i] = NAN;
                tk->gemm(n, R, nt, w, rb, xp, xs, y, R, scratch);
                int bad = 0;
                for (int64_t t = 0; t < nt; t++) {
                    if (tk->vec_dot_type == ASSAY_TYPE_BF16) { /* the set's bf16 activations, as f32 for the reference */
                        float *xb = malloc(sizeof(float) * n);
                        for (int64_t i = 0; i < n; i++)
                            xb[i] = fabsf(x[t * n + i]) < 0x1p-126f ? 0.0f : assay_bf16_to_float(assay_float_to_bf16(x[t * n + i]));
                        ref->from_float[vt](xb, xr, n);
                        free(xb);
                    } else
                        ref->from_float[vt](x + t * n, xr, n);
                    for (int64_t r = 0; r < R; r++) {
                        float sr;
                        ref->type[Ti->t].vec_dot(n, &sr, w + r * rb, xr);
                        double mag = 0;
                        for (int64_t i = 0; i < n; i++) mag += fabs((double)wd[r * n + i] * x[t * n + i]);
                        double e = fabs((double)y[t * R + r] - sr);
                        if (!(e <= 2e-5 * mag + 1e-5)) {
                            if (bad++ < 3)
                                fprintf(stderr, "gemm %s type %d n %lld row %lld tok %lld: %g vs ref %g (mag %g)\n", K->name,
                                        Ti->t, (long long)n, (long long)r, (long long)t, y[t * R + r], sr, mag);
                        }
                    }
                }
                CHECK(bad == 0);
            }
            free(w); free(x); free(wd); free(y); free(xp); free(xr); free(scratch);
        }
    }
}

static void test_q4g_exact(const assay_cpu_kernels *avx, const assay_cpu_kernels *k512) {
    /* groups of 32, 64, 128 (one block each), 256 and a whole row (several blocks per group), 128 act-order */
    const int64_t groups[] = {32, 64, 128, 256, 1408, 128};
    const assay_type want_type[] = {ASSAY_TYPE_Q4G32, ASSAY_TYPE_Q4G64, ASSAY_TYPE_Q4G128, ASSAY_TYPE_Q4G128,
                                    ASSAY_TYPE_Q4G128, ASSAY_TYPE_Q4G128};
    const int64_t R = 70, T = 7, n = 1408; /* the house model's n_ff: 11 groups of 128 */
    CHECK(assay_q4g_type(48, 96) == ASSAY_TYPE_COUNT && assay_q4g_type(128, 1000) == ASSAY_TYPE_COUNT);
    for (int gi = 0; gi < 6; gi++) {
        {
            int permuted = gi == 5;
            int64_t group = groups[gi], ng = (n + group - 1) / group;
            CHECK(assay_q4g_type(group, n) == want_type[gi]);
            uint8_t *q = malloc(R * n), *z = malloc(R * ng);
            uint16_t *d = malloc(R * ng * 2);
            int32_t *perm = malloc(n * 4);
            for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
            for (int64_t i = n - 1; i > 0 && permuted; i--) { /* Fisher-Yates */
                int64_t j = rnd() % (i + 1);
                int32_t v = perm[i]; perm[i] = perm[j]; perm[j] = v;
            }
            for (int64_t i = 0; i < R * n; i++) q[i] = rnd() & 15;
            for (int64_t i = 0; i < R * ng; i++) {
                z[i] = (uint8_t)(rnd() % 17);
                d[i] = assay_float_to_half((frand() + 1.5f) * 0.01f);
            }
            assay_type pt = assay_q4g_type(group, n);
            size_t rb = assay_type_row_bytes(pt, n);
            uint8_t *w = malloc(rb * R);
            float *wd = malloc(sizeof(float) * R * n), *x = malloc(sizeof(float) * n * T);
            float *y1 = malloc(sizeof(float) * R * T), *y2 = malloc(sizeof(float) * R * T);
            assay_q4g_pack(pt, q, z, d, R, n, group, permuted ? perm : NULL, w);
            CHECK_OK(assay_dequantize(pt, w, wd, R * n));
            int bad = 0;
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < n; c++) {
                    int64_t src = permuted ? perm[c] : c, g = c / group;
                    float want = assay_half_to_float(d[r * ng + g]) * (float)(q[r * n + src] - z[r * ng + g]);
                    bad += memcmp(&want, &wd[r * n + c], 4) != 0;
                }
            CHECK(bad == 0);
            for (int64_t i = 0; i < n * T; i++) x[i] = frand() * ((rnd() % 64) == 0 ? 8.0f : 1.0f);
            if (avx) {
                const assay_cpu_type_kernels *kq = &avx->type[pt], *kf = &avx->type[ASSAY_TYPE_F32];
                float a[8], b[8];
                bad = 0;
                for (int64_t r = 0; r + 1 < R; r += 9) {
                    kq->vec_dot(n, a, w + r * rb, x);
                    kf->vec_dot(n, b, wd + r * n, x);
                    bad += memcmp(a, b, 4) != 0;
                    kq->vec_dot4(n, a, w + r * rb, x, n * 4);
                    kf->vec_dot4(n, b, wd + r * n, x, n * 4);
                    bad += memcmp(a, b, 16) != 0;
                    kq->vec_dot2x4(n, a, w + r * rb, rb, x, n * 4);
                    kf->vec_dot2x4(n, b, wd + r * n, n * 4, x, n * 4);
                    bad += memcmp(a, b, 32) != 0;
                }
                if (bad) fprintf(stderr, "q4g %s avx2: %d results differ from the f32 kernels'\n", assay_type_name(pt), bad);
                CHECK(bad == 0);
            }
            if (k512) {
                const assay_cpu_type_kernels *kq = &k512->type[pt], *kf = &k512->type[ASSAY_TYPE_F32];
                CHECK(kq->gemm && !kq->gemm_pack);
                void *scratch = malloc(kq->gemm_scratch_bytes(n));
                const int nts[] = {1, 3, 4, 7}; /* up to 4 tokens: decoded in the tiles; 7: chunks of f32 rows */
                for (int ni = 0; ni < 4; ni++) {
                    int nt = nts[ni];
                    kq->gemm(n, R, nt, w, rb, x, n * 4, y1, R, scratch);
                    kf->gemm(n, R, nt, wd, n * 4, x, n * 4, y2, R, NULL);
                    bad = 0;
                    for (int64_t i = 0; i < R * nt; i++) bad += memcmp(&y1[i], &y2[i], 4) != 0;
                    if (bad) fprintf(stderr, "q4g %s gemm %d tokens: %d of %lld differ\n", assay_type_name(pt), nt, bad, (long long)(R * nt));
                    CHECK(bad == 0);
                }
                free(scratch);
            }
            printf("q4g %s (groups of %lld%s): packed = f32 dequantization bit for bit, kernels equal the f32 ones\n",
                   assay_type_name(pt), (long long)group, permuted ? ", permuted columns" : "");
            free(q); free(z); free(d); free(perm); free(w); free(wd); free(x); free(y1); free(y2);
        }
    }
}

static void test_f16(const assay_cpu_kernels *ref, const assay_cpu_kernels *avx) {
    if (!avx) return;
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t hv = (uint16_t)h;
        float a, b;
        ref->f16_to_f32(&hv, &a, 1);
        avx->f16_to_f32(&hv, &b, 1);
        if (!(a == b || (a != a && b != b))) bad++;
        if (a == a) { /* round trip */
            uint16_t r1, r2;
            ref->f32_to_f16(&a, &r1, 1);
            avx->f32_to_f16(&a, &r2, 1);
            if (r1 != r2 || (r1 != hv && !(a == 0))) bad++;
        }
    }
    for (int i = 0; i < 100000; i++) { /* rounding of arbitrary floats, subnormals included */
        float f = frand() * (float)ldexp(1.0, (int)(rnd() % 40) - 28);
        uint16_t r1, r2;
        ref->f32_to_f16(&f, &r1, 1);
        avx->f32_to_f16(&f, &r2, 1);
        if (r1 != r2) bad++;
    }
    CHECK(bad == 0);
}

static void test_attention(assay_backend *be, assay_kv_dtype dt, double tol) {
    const int64_t n_head = 4, n_kv = 2, hd = 64, n_pos = 45, n_blocks = 8;
    int32_t table[4] = {5, 2, 7, 0}; /* shuffled physical blocks */
    const int32_t *tables[1] = {table};
    size_t es = assay_kv_dtype_size(dt);
    assay_kv_layer L = {calloc(n_blocks * n_kv * ASSAY_KV_BLOCK * hd, es), calloc(n_blocks * n_kv * ASSAY_KV_BLOCK * hd, es),
                        calloc(n_blocks * n_kv * ASSAY_KV_BLOCK, 4), calloc(n_blocks * n_kv * ASSAY_KV_BLOCK, 4), 0, 0, 0};
    assay_kv_geom g = {dt, n_kv, hd};
    float *k = malloc(n_pos * n_kv * hd * 4), *v = malloc(n_pos * n_kv * hd * 4), *q = malloc(n_pos * n_head * hd * 4);
    float *out = malloc(n_pos * n_head * hd * 4);
    int32_t pos[64], seq[64], len = (int32_t)n_pos;
    int64_t slot[64];
    for (int64_t i = 0; i < n_pos * n_kv * hd; i++) { k[i] = frand() * 2; v[i] = frand(); }
    for (int64_t i = 0; i < n_pos * n_head * hd; i++) q[i] = frand() * 2;
    for (int i = 0; i < n_pos; i++) {
        pos[i] = i;
        seq[i] = 0;
        slot[i] = (int64_t)table[i / ASSAY_KV_BLOCK] * ASSAY_KV_BLOCK + i % ASSAY_KV_BLOCK;
    }
    /* a step of the first tokens [t0, t0 + n) of the one sequence */
#define STEP(t0, n) \
    (assay_step) { .n_tokens = (n), .pos = pos + (t0), .seq_of_tok = seq + (t0), .slot = slot + (t0), .n_seqs = 1, \
                   .seq_lens = &len, .block_tables = tables }
    /* store in two calls (a prefill, then single tokens), as a generation would */
    assay_step prefill = STEP(0, 30);
    be->ops->kv_store(be, &L, &g, k, v, &prefill);
    for (int i = 30; i < n_pos; i++) {
        assay_step one = STEP(i, 1);
        be->ops->kv_store(be, &L, &g, k + i * n_kv * hd, v + i * n_kv * hd, &one);
    }
    assay_step all = STEP(0, n_pos), last = STEP(n_pos - 2, 1);
#undef STEP
    for (int win = 0; win <= 20; win += 20) {
        assay_attn_params ap = {n_head, n_kv, hd, 0.125f, win, 0};
        be->ops->attention(be, out, q, &ap, &L, &g, &all);
        double maxerr = 0;
        for (int t = 0; t < n_pos; t++)
            for (int h = 0; h < n_head; h++) {
                int kvh = h / (n_head / n_kv);
                double s[64], m = -1e300, l = 0;
                int start = win > 0 && t - win + 1 > 0 ? t - win + 1 : 0;
                for (int j = start; j <= t; j++) {
                    double d = 0;
                    for (int e = 0; e < hd; e++) d += (double)q[(t * n_head + h) * hd + e] * k[(j * n_kv + kvh) * hd + e];
                    s[j] = d * 0.125;
                    if (s[j] > m) m = s[j];
                }
                for (int j = start; j <= t; j++) l += exp(s[j] - m);
                for (int e = 0; e < hd; e++) {
                    double o = 0;
                    for (int j = start; j <= t; j++) o += exp(s[j] - m) / l * v[(j * n_kv + kvh) * hd + e];
                    double err = fabs(o - out[(t * n_head + h) * hd + e]);
                    if (err > maxerr) maxerr = err;
                }
            }
        printf("attention kv %s window %d: max |err| %.3g (tolerance %g)\n", assay_kv_dtype_name(dt), win, maxerr, tol);
        CHECK(maxerr <= tol);
        /* one token alone (decode) gives what it got inside the batch */
        float *o1 = malloc(n_head * hd * 4);
        double d1 = 0;
        be->ops->attention(be, o1, q + (n_pos - 2) * n_head * hd, &ap, &L, &g, &last);
        for (int64_t i = 0; i < n_head * hd; i++) d1 = fmax(d1, fabs(o1[i] - out[(n_pos - 2) * n_head * hd + i]));
        CHECK(d1 <= 1e-6);
        free(o1);
    }
    free(L.k); free(L.v); free(L.k_scale); free(L.v_scale); free(k); free(v); free(q); free(out);
}

int main(void) {
    const assay_cpu_kernels *ref = assay_cpu_kernels_ref();
    const assay_cpu_kernels *avx = assay_cpu_has_avx2() ? assay_cpu_kernels_avx2() : NULL;
    if (!avx) printf("no AVX2 on this CPU: checking the scalar kernels against the spec only\n");
    test_vec_dot(ref, avx);
    test_f16(ref, avx);
    test_q4g_exact(avx, assay_cpu_has_avx512() ? assay_cpu_kernels_avx512() : NULL);
    if (assay_cpu_has_avx512() && assay_cpu_kernels_avx512()) test_gemm(ref, assay_cpu_kernels_avx512());
    else printf("no AVX-512/VNNI on this CPU: tiled gemms not checked\n");
    if (assay_cpu_has_avx512bf16() && assay_cpu_kernels_avx512bf16()) test_gemm(ref, assay_cpu_kernels_avx512bf16());
    else printf("no AVX512_BF16 on this CPU: the bf16 gemm not checked\n");
    assay_backend *be;
    CHECK_OK(assay_backend_cpu_open(&be, 2));
    test_attention(be, ASSAY_KV_F32, 1e-5);
    test_attention(be, ASSAY_KV_F16, 2e-3);
    test_attention(be, ASSAY_KV_BF16, 2e-2);
    test_attention(be, ASSAY_KV_FP8_E4M3, 0.1);
    test_attention(be, ASSAY_KV_FP8_E5M2, 0.2);
    test_attention(be, ASSAY_KV_INT8, 0.05);
    assay_backend_close(be);
    /* the same with the AVX2 tables (per-token attention walk) where the default picked the AVX-512 tiled one */
    if (assay_cpu_has_avx512()) {
        setenv("ASSAY_CPU_NO_AVX512", "1", 1);
        CHECK_OK(assay_backend_cpu_open(&be, 2));
        printf("kernels: %s\n", assay_backend_cpu_kernels(be));
        test_attention(be, ASSAY_KV_F32, 1e-5);
        test_attention(be, ASSAY_KV_F16, 2e-3);
        test_attention(be, ASSAY_KV_INT8, 0.05);
        assay_backend_close(be);
        unsetenv("ASSAY_CPU_NO_AVX512");
    }
    return check_finish("cpu_kernels");
}
