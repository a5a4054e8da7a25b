/* kernels_avx512bf16.c — the AVX-512 table plus bf16 weights multiplied by VDPBF16PS (AVX512_BF16), for CPUs that
 * have it (compiled with those flags, chosen at run time by cpuid; without AVX512_BF16 the plain avx512 table runs).
 *
 * A bf16 weight row meets an activation row converted to bf16 once per matmul (round to nearest even, f32 inputs
 * below 2^-126 taken as zero: VCVTNE2PS2BF16), zero-padded to a multiple of 32 elements. One VDPBF16PS takes 32
 * weights and 32 activations as 16 pairs and adds each pair's two products (exact in f32: 8-bit significands) to
 * one f32 lane, rounding after each add; so every 64-byte weight load feeds one instruction with no conversion,
 * where the f32 path spends a widen and a shift per 16 weights. This is llama.cpp's scheme for bf16 weights
 * (vec_dot_type bf16).
 *
 * The numeric difference from the f32-activation kernels: each activation carries a relative error of at most 2^-9
 * (|x| < 2^-126 counts as 0); tests/unit/test_backend_ops.c bounds it per element.
 *
 * Tiles: decode (one token) streams 8 weight rows at a time, so eight independent accumulator chains hide the
 * instruction latency while the rows' cache lines are fetched in parallel; prefill runs 4 rows x 4 tokens, each
 * weight load serving four tokens and each activation load four rows. */
#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"

#define AI static inline __attribute__((always_inline))

enum { BT_RM = 8, BT_RN = 4 };

static int64_t pad32(int64_t n) { return (n + 31) & ~(int64_t)31; }

/* bytes of one packed activation row: n bf16, zero-padded to a multiple of 32 */
static size_t bfp_bytes(int64_t n) { return (size_t)pad32(n) * 2; }

/* f32 -> bf16 (round to nearest even); pad = 1: the row is zero-filled to a multiple of 32 elements */
AI void to_bf16(const float *x, uint16_t *o, int64_t n, int pad) {
    int64_t k = 0;
    for (; k + 32 <= n; k += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k));
        _mm512_storeu_si512(o + k, (__m512i)v);
    }
    if (k < n) {
        int64_t left = n - k;
        __mmask16 m0 = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        __mmask16 m1 = left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + k + 16), _mm512_maskz_loadu_ps(m0, x + k));
        if (pad) _mm512_storeu_si512(o + k, (__m512i)v);
        else _mm512_mask_storeu_epi16(o + k, (__mmask32)((1ull << left) - 1), (__m512i)v);
    }
}

static void pack_bf16(const float *x, void *dst, int64_t n) { to_bf16(x, dst, n, 1); }
static void quantize_bf16(const float *x, void *dst, int64_t n) { to_bf16(x, dst, n, 0); }

/* [sum a, sum b, sum c, sum d] */
AI __m128 red4(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m256 a2 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m256 b2 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    __m256 c2 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m256 d2 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a2, b2), _mm256_hadd_ps(c2, d2));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* y[t * ys + r] = the sum of acc[r][t]'s lanes, r < RM, t < RN */
AI void store_tile(const int RM, const int RN, __m512 acc[BT_RM][BT_RN], float *y, int64_t ys) {
    const __m512 z = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < RN; t++)
#pragma GCC unroll 2
        for (int r0 = 0; r0 < RM; r0 += 4) {
            int m = RM - r0 < 4 ? RM - r0 : 4;
            __m128 v = red4(acc[r0][t], m > 1 ? acc[r0 + 1][t] : z, m > 2 ? acc[r0 + 2][t] : z, m > 3 ? acc[r0 + 3][t] : z);
            if (m == 4) _mm_storeu_ps(y + t * ys + r0, v);
            else _mm_mask_storeu_ps(y + t * ys + r0, (__mmask8)((1u << m) - 1), v);
        }
}

/* RM weight rows (ws bytes apart) x RN packed activation rows (xs bytes apart), n elements; pf: decode prefetch of
 * later rows (assay_cpu_prefetch_ahead; past the slab's end the prefetches are harmless) */
AI void btile(size_t pf, const int RM, const int RN, int64_t n, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs,
              float *y, int64_t ys) {
    __m512 acc[BT_RM][BT_RN];
#pragma GCC unroll 8
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= n; k += 32) {
        __m512i wv[BT_RM];
#pragma GCC unroll 8
        for (int r = 0; r < RM; r++) wv[r] = _mm512_loadu_si512(w + r * ws + 2 * k);
        if (pf) /* later rows, same columns (assay_cpu_prefetch_ahead) */
#pragma GCC unroll 8
            for (int r = 0; r < RM; r++) _mm_prefetch((const char *)w + r * ws + pf + 2 * k, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x + t * xs + 2 * k);
#pragma GCC unroll 8
            for (int r = 0; r < RM; r++) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], xv);
        }
    }
    if (k < n) { /* the weights' tail masked; the activations are zero-padded */
        __mmask32 m = (__mmask32)((1ull << (n - k)) - 1);
        __m512i wv[BT_RM];
#pragma GCC unroll 8
        for (int r = 0; r < RM; r++) wv[r] = _mm512_maskz_loadu_epi16(m, w + r * ws + 2 * k);
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x + t * xs + 2 * k);
#pragma GCC unroll 8
            for (int r = 0; r < RM; r++) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], xv);
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

/* Rows [0, n_rows) x tokens [0, n_tok). One token: 8-row tiles. More: a group of 4 tokens (4 packed rows, in L1)
 * meets every 4-row group of the slab in turn, so the slab's weights come from L2 once per 4 tokens. */
static void gemm_bf16(int64_t n, int64_t n_rows, int64_t n_tok, const void *wv, size_t ws, const void *xv, size_t xs,
                      float *y, int64_t ys, void *scratch) {
    (void)scratch;
    const uint8_t *w = wv, *x = xv;
    if (n_tok == 1) {
        int64_t r = 0;
        size_t pf = assay_cpu_prefetch_ahead(8, ws);
        for (; r + 8 <= n_rows; r += 8) btile(pf, 8, 1, n, w + r * ws, ws, x, xs, y + r, ys);
        int64_t rm = n_rows - r;
        if (rm >= 4) btile(0, 4, 1, n, w + r * ws, ws, x, xs, y + r, ys), r += 4, rm -= 4;
        if (rm == 3) btile(0, 3, 1, n, w + r * ws, ws, x, xs, y + r, ys);
        else if (rm == 2) btile(0, 2, 1, n, w + r * ws, ws, x, xs, y + r, ys);
        else if (rm == 1) btile(0, 1, 1, n, w + r * ws, ws, x, xs, y + r, ys);
        return;
    }
    for (int64_t t = 0; t < n_tok;) {
        int64_t rn = n_tok - t < BT_RN ? n_tok - t : BT_RN;
        const uint8_t *xt = x + t * xs;
        for (int64_t r = 0; r < n_rows; r += 4) {
            const uint8_t *wr = w + r * ws;
            int64_t rm = n_rows - r < 4 ? n_rows - r : 4;
            float *yt = y + t * ys + r;
#define BT(RM_, RN_) btile(0, RM_, RN_, n, wr, ws, xt, xs, yt, ys)
            if (rm == 4) {
                if (rn == 4) BT(4, 4); else if (rn == 3) BT(4, 3); else if (rn == 2) BT(4, 2); else BT(4, 1);
            } else if (rm == 3) {
                if (rn == 4) BT(3, 4); else if (rn == 3) BT(3, 3); else if (rn == 2) BT(3, 2); else BT(3, 1);
            } else if (rm == 2) {
                if (rn == 4) BT(2, 4); else if (rn == 3) BT(2, 3); else if (rn == 2) BT(2, 2); else BT(2, 1);
            } else {
                if (rn == 4) BT(1, 4); else if (rn == 3) BT(1, 3); else if (rn == 2) BT(1, 2); else BT(1, 1);
            }
#undef BT
        }
        t += rn;
    }
}

/* one bf16 weight row x one bf16 activation row (vec_dot_type BF16; rows need no padding) */
static void vd_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) {
        acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(a + k), (__m512bh)_mm512_loadu_si512(b + k));
        acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_loadu_si512(a + k + 32), (__m512bh)_mm512_loadu_si512(b + k + 32));
    }
    for (; k < n; k += 32) {
        __mmask32 m = n - k >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1ull << (n - k)) - 1);
        acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_maskz_loadu_epi16(m, a + k), (__m512bh)_mm512_maskz_loadu_epi16(m, b + k));
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

static assay_cpu_kernels kernels_avx512bf16;

static void init_table(void) {
    kernels_avx512bf16 = *assay_cpu_kernels_avx512();
    kernels_avx512bf16.name = "avx512bf16";
    assay_cpu_type_kernels *t = &kernels_avx512bf16.type[ASSAY_TYPE_BF16];
    *t = (assay_cpu_type_kernels){.vec_dot_type = ASSAY_TYPE_BF16, .vec_dot = vd_bf16, .gemm = gemm_bf16,
                                  .gemm_pack = pack_bf16, .gemm_act_bytes = bfp_bytes};
    kernels_avx512bf16.from_float[ASSAY_TYPE_BF16] = quantize_bf16;
}

const assay_cpu_kernels *assay_cpu_kernels_avx512bf16(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_table);
    return &kernels_avx512bf16;
}
