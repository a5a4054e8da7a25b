/* kernels_avx2.c — AVX2/FMA/F16C versions of the CPU kernels (compiled with -mavx2 -mfma -mf16c, chosen at run
 * time by cpuid). Quantized weights meet activations quantized to 8 bits, multiplied as int8 with
 * _mm256_maddubs_epi16 (unsigned x signed, so signed weights are made unsigned by the sign trick) and summed in
 * int32, with one float multiply per 32-element block. Checked against kernels_ref.c in tests/unit/test_cpu_kernels.c. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kq_inline.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* int8 x int8 over 32 lanes -> 8 int32 partial sums, as floats. */
static inline __m256 dot_i8_signed(__m256i x, __m256i y) {
    __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    __m256i p16 = _mm256_maddubs_epi16(ax, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* uint8 (0..127) x int8 -> 8 int32 sums, as floats. */
static inline __m256 dot_u8_i8(__m256i ux, __m256i y) {
    __m256i p16 = _mm256_maddubs_epi16(ux, y);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

static inline __m256i unpack_nibbles(const uint8_t *qs) { /* 16 bytes -> 32 values, low nibbles first */
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0xf)), hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xf));
    return _mm256_set_m128i(hi, lo);
}

/* The 5th bits of 32 elements (a 32-bit mask) -> 0x10 in each byte whose bit is set. */
static inline __m256i bits_to_bytes(uint32_t m) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfe);
    v = _mm256_or_si256(v, bit);
    v = _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

static void vd_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w, *b = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

static inline __m256 load_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

static void vd_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load_bf16(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load_bf16(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load_bf16(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load_bf16(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load_bf16(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += assay_bf16_to_float(a[i]) * b[i];
    *s = sum;
}

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static void vd_f16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load_f16(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load_f16(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load_f16(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load_f16(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load_f16(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += assay_half_to_float(a[i]) * b[i];
    *s = sum;
}

/* A block's two leading fp16 values (d and m of Q4_1/Q5_1 weights, d and s of Q8_1 activations; d and the first
 * quant bytes otherwise, where only lane 0 is used) as floats in lanes 0 and 1: one conversion instead of two. */
static inline __m128 load_f16x2(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)v));
}

/* The legacy-quant dots below run two blocks per step into two accumulators: one accumulator would make every
 * block wait for the previous block's FMA (4 cycles of latency), which made these kernels latency-bound. */
#define VD_LEGACY(fn, WT, AT, DOT, HAS_MIN)                                                        \
    static void fn(int64_t n, float *s, const void *w, const void *x) {                            \
        const WT *b = w;                                                                           \
        const AT *a = x;                                                                           \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                             \
        __m128 mins = _mm_setzero_ps(); /* lane 1: sum of m * s (HAS_MIN) */                       \
        int64_t nb = n / 32, i = 0;                                                                \
        for (; i + 2 <= nb; i += 2) {                                                              \
            __m128 f0 = _mm_mul_ps(load_f16x2(&b[i]), load_f16x2(&a[i]));                          \
            __m128 f1 = _mm_mul_ps(load_f16x2(&b[i + 1]), load_f16x2(&a[i + 1]));                  \
            if (HAS_MIN) mins = _mm_add_ps(mins, _mm_add_ps(f0, f1));                              \
            acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(f0), DOT(&b[i], &a[i]), acc0);            \
            acc1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(f1), DOT(&b[i + 1], &a[i + 1]), acc1);    \
        }                                                                                          \
        if (i < nb) {                                                                              \
            __m128 f0 = _mm_mul_ps(load_f16x2(&b[i]), load_f16x2(&a[i]));                          \
            if (HAS_MIN) mins = _mm_add_ps(mins, f0);                                              \
            acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(f0), DOT(&b[i], &a[i]), acc0);            \
        }                                                                                          \
        *s = hsum256(_mm256_add_ps(acc0, acc1)) + (HAS_MIN ? _mm_cvtss_f32(_mm_movehdup_ps(mins)) : 0.0f); \
    }

static inline __m256 dot_blk_q4_0(const assay_block_q4_0 *b, const assay_block_q8_0 *a) {
    return dot_i8_signed(_mm256_sub_epi8(unpack_nibbles(b->qs), _mm256_set1_epi8(8)), _mm256_loadu_si256((const __m256i *)a->qs));
}
static inline __m256 dot_blk_q4_1(const assay_block_q4_1 *b, const assay_block_q8_1 *a) {
    return dot_u8_i8(unpack_nibbles(b->qs), _mm256_loadu_si256((const __m256i *)a->qs));
}
static inline __m256 dot_blk_q5_0(const assay_block_q5_0 *b, const assay_block_q8_0 *a) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    __m256i q = _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(b->qs), bits_to_bytes(qh)), _mm256_set1_epi8(16));
    return dot_i8_signed(q, _mm256_loadu_si256((const __m256i *)a->qs));
}
static inline __m256 dot_blk_q5_1(const assay_block_q5_1 *b, const assay_block_q8_1 *a) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    return dot_u8_i8(_mm256_or_si256(unpack_nibbles(b->qs), bits_to_bytes(qh)), _mm256_loadu_si256((const __m256i *)a->qs));
}
static inline __m256 dot_blk_q8_0(const assay_block_q8_0 *b, const assay_block_q8_0 *a) {
    return dot_i8_signed(_mm256_loadu_si256((const __m256i *)b->qs), _mm256_loadu_si256((const __m256i *)a->qs));
}

VD_LEGACY(vd_q4_0, assay_block_q4_0, assay_block_q8_0, dot_blk_q4_0, 0)
VD_LEGACY(vd_q4_1, assay_block_q4_1, assay_block_q8_1, dot_blk_q4_1, 1)
VD_LEGACY(vd_q5_0, assay_block_q5_0, assay_block_q8_0, dot_blk_q5_0, 0)
VD_LEGACY(vd_q5_1, assay_block_q5_1, assay_block_q8_1, dot_blk_q5_1, 1)
VD_LEGACY(vd_q8_0, assay_block_q8_0, assay_block_q8_0, dot_blk_q8_0, 0)

/* ---- one weight row x four activation rows (prefill) ------------------------------------------------------ */

#define VD4_FLOAT(fn, T, LOAD, SCALAR)                                                             \
    static void fn(int64_t n, float *s, const void *w, const void *x, size_t xs) {                 \
        const T *a = w;                                                                            \
        const float *b0 = x, *b1 = (const float *)((const char *)x + xs),                          \
                    *b2 = (const float *)((const char *)x + 2 * xs), *b3 = (const float *)((const char *)x + 3 * xs); \
        __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps(); \
        __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps(), d2 = _mm256_setzero_ps(), d3 = _mm256_setzero_ps(); \
        int64_t i = 0;                                                                             \
        for (; i + 16 <= n; i += 16) {                                                             \
            __m256 wv = LOAD(a + i), wu = LOAD(a + i + 8);                                         \
            c0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b0 + i), c0);                                 \
            c1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b1 + i), c1);                                 \
            c2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b2 + i), c2);                                 \
            c3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b3 + i), c3);                                 \
            d0 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b0 + i + 8), d0);                             \
            d1 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b1 + i + 8), d1);                             \
            d2 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b2 + i + 8), d2);                             \
            d3 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b3 + i + 8), d3);                             \
        }                                                                                          \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 wv = LOAD(a + i);                                                               \
            c0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b0 + i), c0);                                 \
            c1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b1 + i), c1);                                 \
            c2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b2 + i), c2);                                 \
            c3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b3 + i), c3);                                 \
        }                                                                                          \
        float r0 = hsum256(_mm256_add_ps(c0, d0)), r1 = hsum256(_mm256_add_ps(c1, d1));            \
        float r2 = hsum256(_mm256_add_ps(c2, d2)), r3 = hsum256(_mm256_add_ps(c3, d3));            \
        for (; i < n; i++) {                                                                       \
            float wf = SCALAR(a[i]);                                                               \
            r0 += wf * b0[i]; r1 += wf * b1[i]; r2 += wf * b2[i]; r3 += wf * b3[i];                \
        }                                                                                          \
        s[0] = r0; s[1] = r1; s[2] = r2; s[3] = r3;                                                \
    }

static inline float id_f32(float v) { return v; }

VD4_FLOAT(vd4_f32, float, _mm256_loadu_ps, id_f32)
VD4_FLOAT(vd4_f16, uint16_t, load_f16, assay_half_to_float)
VD4_FLOAT(vd4_bf16, uint16_t, load_bf16, assay_bf16_to_float)

#define VD2X4_FLOAT(fn, T, LOAD, SCALAR)                                                           \
    static void fn(int64_t n, float *s, const void *w, size_t ws, const void *x, size_t xs) {      \
        const T *a0 = w, *a1 = (const T *)((const char *)w + ws);                                  \
        const float *b[4];                                                                         \
        for (int j = 0; j < 4; j++) b[j] = (const float *)((const char *)x + j * xs);              \
        __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c02 = _mm256_setzero_ps(), c03 = _mm256_setzero_ps(); \
        __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(), c12 = _mm256_setzero_ps(), c13 = _mm256_setzero_ps(); \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 w0 = LOAD(a0 + i), w1 = LOAD(a1 + i), x;                                        \
            x = _mm256_loadu_ps(b[0] + i); c00 = _mm256_fmadd_ps(w0, x, c00); c10 = _mm256_fmadd_ps(w1, x, c10); \
            x = _mm256_loadu_ps(b[1] + i); c01 = _mm256_fmadd_ps(w0, x, c01); c11 = _mm256_fmadd_ps(w1, x, c11); \
            x = _mm256_loadu_ps(b[2] + i); c02 = _mm256_fmadd_ps(w0, x, c02); c12 = _mm256_fmadd_ps(w1, x, c12); \
            x = _mm256_loadu_ps(b[3] + i); c03 = _mm256_fmadd_ps(w0, x, c03); c13 = _mm256_fmadd_ps(w1, x, c13); \
        }                                                                                          \
        float r[8] = {hsum256(c00), hsum256(c01), hsum256(c02), hsum256(c03),                      \
                      hsum256(c10), hsum256(c11), hsum256(c12), hsum256(c13)};                     \
        for (; i < n; i++) {                                                                       \
            float w0 = SCALAR(a0[i]), w1 = SCALAR(a1[i]);                                          \
            for (int j = 0; j < 4; j++) {                                                          \
                r[j] += w0 * b[j][i];                                                              \
                r[4 + j] += w1 * b[j][i];                                                          \
            }                                                                                      \
        }                                                                                          \
        memcpy(s, r, sizeof r);                                                                    \
    }

VD2X4_FLOAT(vd2x4_f32, float, _mm256_loadu_ps, id_f32)
VD2X4_FLOAT(vd2x4_f16, uint16_t, load_f16, assay_half_to_float)
VD2X4_FLOAT(vd2x4_bf16, uint16_t, load_bf16, assay_bf16_to_float)

/* Quantized weight blocks decoded to 32 int8 once, then multiplied with four Q8 activation rows. */
#define VD4_Q(fn, WT, AT, DECODE, SIGNED, HAS_MIN)                                              \
    static void fn(int64_t n, float *s, const void *w, const void *x, size_t xs) {                 \
        const WT *b = w;                                                                           \
        const AT *a[4];                                                                            \
        for (int j = 0; j < 4; j++) a[j] = (const AT *)((const char *)x + j * xs);                  \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        __m128 mins[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()}; \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            __m256i q = DECODE(&b[i]);                                                             \
            __m128 fw = load_f16x2(&b[i]); /* d (and m) of the weight block */                     \
            __m256i aq = SIGNED ? _mm256_sign_epi8(q, q) : q;                                      \
            for (int j = 0; j < 4; j++) {                                                          \
                __m256i y = _mm256_loadu_si256((const __m256i *)a[j][i].qs);                       \
                if (SIGNED) y = _mm256_sign_epi8(y, q);                                            \
                __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(aq, y), _mm256_set1_epi16(1))); \
                __m128 f = _mm_mul_ps(fw, load_f16x2(&a[j][i])); /* [wd * ad, wm * as] */          \
                acc[j] = _mm256_fmadd_ps(_mm256_broadcastss_ps(f), dot, acc[j]);                    \
                if (HAS_MIN) mins[j] = _mm_add_ps(mins[j], f);                                     \
            }                                                                                      \
        }                                                                                          \
        for (int j = 0; j < 4; j++) s[j] = hsum256(acc[j]) + (HAS_MIN ? _mm_cvtss_f32(_mm_movehdup_ps(mins[j])) : 0.0f); \
    }

static inline __m256i dec_q4_0(const assay_block_q4_0 *b) { return _mm256_sub_epi8(unpack_nibbles(b->qs), _mm256_set1_epi8(8)); }
static inline __m256i dec_q4_1(const assay_block_q4_1 *b) { return unpack_nibbles(b->qs); }
static inline __m256i dec_q8_0(const assay_block_q8_0 *b) { return _mm256_loadu_si256((const __m256i *)b->qs); }
VD4_Q(vd4_q4_0, assay_block_q4_0, assay_block_q8_0, dec_q4_0, 1, 0)
VD4_Q(vd4_q4_1, assay_block_q4_1, assay_block_q8_1, dec_q4_1, 0, 1)
VD4_Q(vd4_q8_0, assay_block_q8_0, assay_block_q8_0, dec_q8_0, 1, 0)

/* ---- packed group int4 (Q4G32/64/128) x f32 ---------------------------------------------------------------- */

/* One 32-element sub-block of a packed group-int4 row (16 bytes: low nibbles are elements 0..15, high nibbles
 * 16..31) dequantized in registers to exactly dequant.c's d * (q - z) (one f32 rounding, the same on both sides):
 * w[0..3] = elements 0..7, 8..15, 16..23, 24..31. The loops below are vd_f32, vd4_f32 and vd2x4_f32 with these
 * vectors in place of the f32 loads: same accumulators, same order, so a packed weight gives the same bits as its
 * f32 dequantization would (test_cpu_kernels.c checks that). Each block's scale and zero are broadcast once. */
static inline void q4g_dec32(const uint8_t *qs, __m256i z, __m256 d, __m256 w[4]) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m256i lo = _mm256_cvtepu8_epi32(b), hi = _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(b, b));
    const __m256i m = _mm256_set1_epi32(0xf);
    w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(lo, m), z)), d);
    w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(hi, m), z)), d);
    w[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(lo, 4), z)), d); /* bytes were < 256 */
    w[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(hi, 4), z)), d);
}

/* A block's scale and zero, broadcast. */
static inline void q4g_block(const uint8_t *blk, __m256 *d, __m256i *z) {
    uint16_t dh;
    memcpy(&dh, blk, 2);
    *d = _mm256_set1_ps(_cvtsh_ss(dh));
    *z = _mm256_set1_epi32(blk[2]);
}

#define Q4G_KERNELS(G)                                                                              \
    static void vd_q4g##G(int64_t n, float *s, const void *w, const void *x) {                     \
        const uint8_t *a = w;                                                                      \
        const float *b = x;                                                                        \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps(); \
        for (int64_t i0 = 0; i0 < n; i0 += G, a += 4 + G / 2) {                                    \
            __m256 d, wv[4];                                                                       \
            __m256i z;                                                                             \
            q4g_block(a, &d, &z);                                                                  \
            for (int64_t k = 0; k < G / 32; k++) {                                                 \
                const float *bi = b + i0 + 32 * k;                                                 \
                q4g_dec32(a + 4 + 16 * k, z, d, wv);                                               \
                acc0 = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(bi), acc0);                          \
                acc1 = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(bi + 8), acc1);                      \
                acc2 = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(bi + 16), acc2);                     \
                acc3 = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(bi + 24), acc3);                     \
            }                                                                                      \
        }                                                                                          \
        *s = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));         \
    }                                                                                              \
    static void vd4_q4g##G(int64_t n, float *s, const void *w, const void *x, size_t xs) {         \
        const uint8_t *a = w;                                                                      \
        const float *b0 = x, *b1 = (const float *)((const char *)x + xs),                          \
                    *b2 = (const float *)((const char *)x + 2 * xs), *b3 = (const float *)((const char *)x + 3 * xs); \
        __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps(); \
        __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps(), d2 = _mm256_setzero_ps(), d3 = _mm256_setzero_ps(); \
        for (int64_t i0 = 0; i0 < n; i0 += G, a += 4 + G / 2) {                                    \
            __m256 d, wq[4];                                                                       \
            __m256i z;                                                                             \
            q4g_block(a, &d, &z);                                                                  \
            for (int64_t k = 0; k < G / 32; k++) {                                                 \
                q4g_dec32(a + 4 + 16 * k, z, d, wq);                                               \
                for (int h = 0; h < 2; h++) { /* vd4_f32's steps of 16: (wv, wu) */                \
                    int64_t i = i0 + 32 * k + 16 * h;                                              \
                    __m256 wv = wq[2 * h], wu = wq[2 * h + 1];                                     \
                    c0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b0 + i), c0);                         \
                    c1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b1 + i), c1);                         \
                    c2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b2 + i), c2);                         \
                    c3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(b3 + i), c3);                         \
                    d0 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b0 + i + 8), d0);                     \
                    d1 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b1 + i + 8), d1);                     \
                    d2 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b2 + i + 8), d2);                     \
                    d3 = _mm256_fmadd_ps(wu, _mm256_loadu_ps(b3 + i + 8), d3);                     \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        s[0] = hsum256(_mm256_add_ps(c0, d0));                                                     \
        s[1] = hsum256(_mm256_add_ps(c1, d1));                                                     \
        s[2] = hsum256(_mm256_add_ps(c2, d2));                                                     \
        s[3] = hsum256(_mm256_add_ps(c3, d3));                                                     \
    }                                                                                              \
    static void vd2x4_q4g##G(int64_t n, float *s, const void *w, size_t ws, const void *x, size_t xs) { \
        const uint8_t *a0 = w, *a1 = (const uint8_t *)w + ws;                                      \
        const float *b[4];                                                                         \
        for (int j = 0; j < 4; j++) b[j] = (const float *)((const char *)x + j * xs);              \
        __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c02 = _mm256_setzero_ps(), c03 = _mm256_setzero_ps(); \
        __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(), c12 = _mm256_setzero_ps(), c13 = _mm256_setzero_ps(); \
        for (int64_t i0 = 0; i0 < n; i0 += G, a0 += 4 + G / 2, a1 += 4 + G / 2) {                 \
            __m256 e0, e1, q0[4], q1[4];                                                           \
            __m256i z0, z1;                                                                        \
            q4g_block(a0, &e0, &z0);                                                               \
            q4g_block(a1, &e1, &z1);                                                               \
            for (int64_t k = 0; k < G / 32; k++) {                                                 \
                q4g_dec32(a0 + 4 + 16 * k, z0, e0, q0);                                            \
                q4g_dec32(a1 + 4 + 16 * k, z1, e1, q1);                                            \
                for (int u = 0; u < 4; u++) { /* vd2x4_f32's steps of 8 */                         \
                    int64_t i = i0 + 32 * k + 8 * u;                                               \
                    __m256 w0 = q0[u], w1 = q1[u], xv;                                             \
                    xv = _mm256_loadu_ps(b[0] + i); c00 = _mm256_fmadd_ps(w0, xv, c00); c10 = _mm256_fmadd_ps(w1, xv, c10); \
                    xv = _mm256_loadu_ps(b[1] + i); c01 = _mm256_fmadd_ps(w0, xv, c01); c11 = _mm256_fmadd_ps(w1, xv, c11); \
                    xv = _mm256_loadu_ps(b[2] + i); c02 = _mm256_fmadd_ps(w0, xv, c02); c12 = _mm256_fmadd_ps(w1, xv, c12); \
                    xv = _mm256_loadu_ps(b[3] + i); c03 = _mm256_fmadd_ps(w0, xv, c03); c13 = _mm256_fmadd_ps(w1, xv, c13); \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        float r[8] = {hsum256(c00), hsum256(c01), hsum256(c02), hsum256(c03),                      \
                      hsum256(c10), hsum256(c11), hsum256(c12), hsum256(c13)};                     \
        memcpy(s, r, sizeof r);                                                                    \
    }

Q4G_KERNELS(32)
Q4G_KERNELS(64)
Q4G_KERNELS(128)

KQ_DEFINE_VEC_DOT(vd_q2_K, assay_block_q2_K, kq_unpack_q2_K)
KQ_DEFINE_VEC_DOT(vd_q3_K, assay_block_q3_K, kq_unpack_q3_K)

/* Q4_K, Q5_K and Q6_K straight from the packed super-block (no unpacked copy): per 32 (Q4_K) or 16 (Q6_K) elements an
 * integer dot with maddubs, weighted by the integer sub-block scale with madd, summed in int32 over the whole
 * super-block; the mins (Q4_K) and Q6_K's offset of 32 come from the activation's 16-element sums (bsums). */
static void vd_q4_K(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q4_K *b = w;
    const assay_block_q8_K *a = x;
    const __m256i lo4 = _mm256_set1_epi8(0xf);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) kq_scale_min(j, b[i].scales, &sc[j], &mn[j]);
        int32_t msum = 0;
        for (int j = 0; j < 8; j++) msum += mn[j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * j));
            __m256i ql = _mm256_and_si256(q, lo4), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4);
            __m256i yl = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * j));
            __m256i yh = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * j + 32));
            __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(ql, yl), _mm256_set1_epi16((short)sc[2 * j]));
            __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(qh, yh), _mm256_set1_epi16((short)sc[2 * j + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(pl, ph));
        }
        float d = a[i].d * _cvtsh_ss(b[i].d), dmin = a[i].d * _cvtsh_ss(b[i].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        summ += dmin * (float)msum;
    }
    *s = hsum256(acc) - summ;
}

static void vd_q5_K(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q5_K *b = w;
    const assay_block_q8_K *a = x;
    const __m256i lo4 = _mm256_set1_epi8(0xf);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) kq_scale_min(j, b[i].scales, &sc[j], &mn[j]);
        int32_t msum = 0;
        for (int j = 0; j < 8; j++) msum += mn[j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        __m256i isum = _mm256_setzero_si256();
        const __m256i one = _mm256_set1_epi8(1), hbits = _mm256_loadu_si256((const __m256i *)b[i].qh);
        for (int j = 0; j < 4; j++) { /* 5th bits: qh bit 2j for the low nibbles, bit 2j+1 for the high ones */
            __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * j));
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4);
            __m256i ql = _mm256_or_si256(_mm256_and_si256(q, lo4), h0);
            __m256i qh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), lo4), h1);
            __m256i yl = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * j));
            __m256i yh = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * j + 32));
            __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(ql, yl), _mm256_set1_epi16((short)sc[2 * j]));
            __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(qh, yh), _mm256_set1_epi16((short)sc[2 * j + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(pl, ph));
        }
        float d = a[i].d * _cvtsh_ss(b[i].d), dmin = a[i].d * _cvtsh_ss(b[i].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        summ += dmin * (float)msum;
    }
    *s = hsum256(acc) - summ;
}

static void vd_q6_K(int64_t n, float *s, const void *w, const void *x) {
    const assay_block_q6_K *b = w;
    const assay_block_q8_K *a = x;
    const __m256i lo4 = _mm256_set1_epi8(0xf), lo2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        /* offset: sum_g scale[g] * 32 * bsums[g], as one madd of 16 int16 pairs */
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b[i].scales));
        __m256i bs = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *y = a[i].qs, *scp = b[i].scales;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, y += 128, scp += 8) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, lo4), _mm256_slli_epi16(_mm256_and_si256(h, lo2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, lo4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), lo2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), lo2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), lo2), 4));
            for (int k = 0; k < 4; k++) { /* elements 32k..32k+31 of this half: scales 2k (low 16), 2k+1 (high 16) */
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(y + 32 * k)));
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16(scp[2 * k + 1]), _mm_set1_epi16(scp[2 * k]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * _cvtsh_ss(b[i].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    *s = hsum256(acc);
}

/* ---- activation quantizers -------------------------------------------------------------------------------- */

static inline float block_amax(const float *x) {
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_andnot_ps(signbit, _mm256_loadu_ps(x));
    m = _mm256_max_ps(m, _mm256_andnot_ps(signbit, _mm256_loadu_ps(x + 8)));
    m = _mm256_max_ps(m, _mm256_andnot_ps(signbit, _mm256_loadu_ps(x + 16)));
    m = _mm256_max_ps(m, _mm256_andnot_ps(signbit, _mm256_loadu_ps(x + 24)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* 32 floats * id -> 32 int8 (round to nearest even), in element order. */
static inline __m256i quant32(const float *x, float id, int32_t *sum) {
    __m256 vid = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vid));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid));
    if (sum) {
        __m256i t = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        u = _mm_hadd_epi32(u, u);
        u = _mm_hadd_epi32(u, u);
        *sum = _mm_cvtsi128_si32(u);
    }
    /* packs interleave 128-bit lanes; the permute puts the 32 bytes back in element order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void quantize_q8_0(const float *x, void *dst, int64_t n) {
    assay_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float d = block_amax(x) / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[i].d = _cvtss_sh(d, 0);
        _mm256_storeu_si256((__m256i *)y[i].qs, quant32(x, id, NULL));
    }
}

static void quantize_q8_1(const float *x, void *dst, int64_t n) {
    assay_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float d = block_amax(x) / 127.0f, id = d ? 1.0f / d : 0.0f;
        int32_t sum;
        y[i].d = _cvtss_sh(d, 0);
        _mm256_storeu_si256((__m256i *)y[i].qs, quant32(x, id, &sum));
        y[i].s = _cvtss_sh(d * (float)sum, 0);
    }
}

static void quantize_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }

static float dot_f32(int64_t n, const float *a, const float *b) {
    float s;
    vd_f32(n, &s, a, b);
    return s;
}

static void axpy_f32(int64_t n, float *y, float a, const float *x) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_f16(x + i));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

static void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], 0);
}

static const assay_cpu_kernels kernels_avx2 = {
    .name = "avx2",
    .type =
        {
            [ASSAY_TYPE_F32] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_f32, .vec_dot4 = vd4_f32,
                                .vec_dot2x4 = vd2x4_f32},
            [ASSAY_TYPE_F16] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_f16, .vec_dot4 = vd4_f16,
                                .vec_dot2x4 = vd2x4_f16},
            [ASSAY_TYPE_BF16] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_bf16, .vec_dot4 = vd4_bf16,
                                 .vec_dot2x4 = vd2x4_bf16},
            [ASSAY_TYPE_Q4_0] = {.vec_dot_type = ASSAY_TYPE_Q8_0, .vec_dot = vd_q4_0, .vec_dot4 = vd4_q4_0},
            [ASSAY_TYPE_Q4_1] = {.vec_dot_type = ASSAY_TYPE_Q8_1, .vec_dot = vd_q4_1, .vec_dot4 = vd4_q4_1},
            [ASSAY_TYPE_Q5_0] = {.vec_dot_type = ASSAY_TYPE_Q8_0, .vec_dot = vd_q5_0},
            [ASSAY_TYPE_Q5_1] = {.vec_dot_type = ASSAY_TYPE_Q8_1, .vec_dot = vd_q5_1},
            [ASSAY_TYPE_Q8_0] = {.vec_dot_type = ASSAY_TYPE_Q8_0, .vec_dot = vd_q8_0, .vec_dot4 = vd4_q8_0},
            [ASSAY_TYPE_Q2_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q2_K},
            [ASSAY_TYPE_Q3_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q3_K},
            [ASSAY_TYPE_Q4_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q4_K},
            [ASSAY_TYPE_Q5_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q5_K},
            [ASSAY_TYPE_Q6_K] = {.vec_dot_type = ASSAY_TYPE_Q8_K, .vec_dot = vd_q6_K},
            [ASSAY_TYPE_Q4G32] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_q4g32, .vec_dot4 = vd4_q4g32,
                                  .vec_dot2x4 = vd2x4_q4g32},
            [ASSAY_TYPE_Q4G64] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_q4g64, .vec_dot4 = vd4_q4g64,
                                  .vec_dot2x4 = vd2x4_q4g64},
            [ASSAY_TYPE_Q4G128] = {.vec_dot_type = ASSAY_TYPE_F32, .vec_dot = vd_q4g128, .vec_dot4 = vd4_q4g128,
                                   .vec_dot2x4 = vd2x4_q4g128},
        },
    .from_float =
        {
            [ASSAY_TYPE_F32] = quantize_f32,
            [ASSAY_TYPE_Q8_0] = quantize_q8_0,
            [ASSAY_TYPE_Q8_1] = quantize_q8_1,
            [ASSAY_TYPE_Q8_K] = assay_quantize_row_q8_K_ref,
        },
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .f16_to_f32 = f16_to_f32,
    .f32_to_f16 = f32_to_f16,
};

const assay_cpu_kernels *assay_cpu_kernels_avx2(void) { return &kernels_avx2; }
