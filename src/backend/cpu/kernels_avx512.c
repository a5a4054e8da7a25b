/* kernels_avx512.c — AVX-512 (F, BW, VL, DQ) + VNNI tiled matrix multiplies for CPUs that have them (compiled with
 * those flags, chosen at run time by cpuid; the AVX2 table stays the baseline and supplies every kernel not
 * overridden here). Checked against kernels_ref.c in tests/unit/test_cpu_kernels.c.
 *
 * One gemm per weight type computes y[t][r] = dot(weight row r, activation row t) for a slab of rows and any
 * number of tokens, in register tiles of up to 4 weight rows x 4 tokens: each weight block is decoded once per
 * tile for four tokens, each activation load serves four rows, and the 16 accumulators stay in zmm registers
 * until the end of the row. Decode (one token) runs the same code with 4 x 1 tiles, which still shares the
 * activation loads and the final reductions between four rows.
 *
 * Float weights (f32/f16/bf16) meet f32 activations (the compute stays f32, as the references require): per 16
 * elements, 4 weight conversions and 4 activation loads feed 16 FMAs.
 *
 * Legacy quants (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) meet activations quantized once per token to 8 bits (the same
 * integers and scales as ggml's q8_0/q8_1) in a packed layout: each weight block becomes 32 unsigned codes u
 * with x = d * u + m (Q4_0: m = -8d, Q5_0: m = -16d, Q8_0: u = q + 128, m = -128d; Q4_1/Q5_1: their own m), so
 * that one VPDPBUSD (u8 x s8, 4 products summed per int32 lane) handles every type; two blocks fill a zmm.
 *   dot = sum_b d_b da_b sum_j u_bj a_bj  +  sum_b m_b s_b,   s_b = da_b sum_j a_bj
 * The first sum is per block: int32 lanes -> float, times (d_b da_b), accumulated; the second is a float dot of
 * two vectors of per-block values (16 blocks per FMA) done once per row and token. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"

#define AI static inline __attribute__((always_inline))

enum { GEMM_RM = 4, GEMM_RN = 4, GEMM_TOK_BLOCK = 64 };

/* [sum a, sum b, sum c, sum d] */
AI __m128 red4(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m256 a2 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m256 b2 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    __m256 c2 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m256 d2 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a2, b2), _mm256_hadd_ps(c2, d2));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* acc[r][t] (r < RM) -> y[t * ys + r] */
AI void store_tile(const int RM, const int RN, __m512 acc[GEMM_RM][GEMM_RN], float *y, int64_t ys) {
    const __m512 z = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < RN; t++) {
        __m128 v = red4(acc[0][t], RM > 1 ? acc[1][t] : z, RM > 2 ? acc[2][t] : z, RM > 3 ? acc[3][t] : z);
        if (RM == 4) _mm_storeu_ps(y + t * ys, v);
        else _mm_mask_storeu_ps(y + t * ys, (__mmask8)((1u << RM) - 1), v);
    }
}

/* ---- float weights ------------------------------------------------------------------------------------------ */

enum { FW_F32, FW_F16, FW_BF16 };

/* Packed group int4 (Q4G32/64/128; rows are whole 32-element sub-blocks, so k is a multiple of 16): 16 weights
 * dequantized to exactly dequant.c's d * (q - z). Bytes 0..15 of a sub-block: low nibbles are elements 0..15, high
 * nibbles 16..31. */
AI __m512 q4g_load16(const int64_t G, const uint8_t *row, int64_t k) {
    const uint8_t *blk = row + (size_t)(k / G) * (size_t)(4 + G / 2);
    int64_t e = k % G;
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 4 + 16 * (e / 32))));
    if (e % 32) v = _mm512_srli_epi32(v, 4);
    v = _mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0xf)), _mm512_set1_epi32(blk[2]));
    uint16_t dh;
    memcpy(&dh, blk, 2);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(_cvtsh_ss(dh)));
}

AI __m512 fw_load(const int ty, const void *row, int64_t k, __mmask16 m) {
    if (ty == FW_F32) return _mm512_maskz_loadu_ps(m, (const float *)row + k);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)row + k);
    if (ty == FW_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AI void ftile(const int ty, const int RM, const int RN, int64_t n, const uint8_t *w, size_t ws, const float *x,
              size_t xs, float *y, int64_t ys) {
    __m512 acc[GEMM_RM][GEMM_RN];
#pragma GCC unroll 4
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    const float *xt[GEMM_RN];
#pragma GCC unroll 4
    for (int t = 0; t < RN; t++) xt[t] = (const float *)((const char *)x + t * xs);
    for (int64_t k = 0; k < n; k += 16) {
        __mmask16 m = n - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - k)) - 1);
        __m512 wv[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) wv[r] = fw_load(ty, w + r * ws, k, m);
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, xt[t] + k);
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

/* rows [0, n_rows) x tokens [0, n_tok): a group of 4 tokens (4 activation rows, in L1) meets every row group of the
 * slab in turn (the slab's weights stay in L2), so each activation byte comes from L2 once per slab and each weight
 * byte once per 4 tokens. */
AI void fgemm(const int ty, int64_t n, int64_t n_rows, int64_t n_tok, const void *wv, size_t ws, const void *xv,
              size_t xs, float *y, int64_t ys) {
    const uint8_t *w = wv;
    const char *x = xv;
    for (int64_t t = 0; t < n_tok;) {
        int64_t rn = n_tok - t < GEMM_RN ? n_tok - t : GEMM_RN;
        const float *xt = (const float *)(x + t * xs);
        for (int64_t r = 0; r < n_rows; r += GEMM_RM) {
            const uint8_t *wr = w + r * ws;
            int64_t rm = n_rows - r < GEMM_RM ? n_rows - r : GEMM_RM;
            float *yt = y + t * ys + r;
#define FT(RM_, RN_) ftile(ty, RM_, RN_, n, wr, ws, xt, xs, yt, ys)
            if (rm == 4) {
                if (rn == 4) FT(4, 4); else if (rn == 3) FT(4, 3); else if (rn == 2) FT(4, 2); else FT(4, 1);
            } else if (rm == 3) {
                if (rn == 4) FT(3, 4); else if (rn == 3) FT(3, 3); else if (rn == 2) FT(3, 2); else FT(3, 1);
            } else if (rm == 2) {
                if (rn == 4) FT(2, 4); else if (rn == 3) FT(2, 3); else if (rn == 2) FT(2, 2); else FT(2, 1);
            } else {
                if (rn == 4) FT(1, 4); else if (rn == 3) FT(1, 3); else if (rn == 2) FT(1, 2); else FT(1, 1);
            }
#undef FT
        }
        t += rn;
    }
}

static void gemm_f32(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y,
                     int64_t ys, void *scratch) {
    (void)scratch;
    fgemm(FW_F32, n, nr, nt, w, ws, x, xs, y, ys);
}
static void gemm_f16(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y,
                     int64_t ys, void *scratch) {
    (void)scratch;
    fgemm(FW_F16, n, nr, nt, w, ws, x, xs, y, ys);
}
static void gemm_bf16(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y,
                      int64_t ys, void *scratch) {
    (void)scratch;
    fgemm(FW_BF16, n, nr, nt, w, ws, x, xs, y, ys);
}

/* Packed group int4 x f32 activations. Decode (a few tokens): q4tile decodes each row's nibbles in registers once per
 * 4 tokens, a block's scale and zero broadcast once per block, and runs ftile's FMAs in ftile's order (k in steps of
 * 16, tokens, rows), so the result is ftile's on the dequantized weights bit for bit. Prefill: each chunk of
 * Q4G_CHUNK rows is dequantized once into the thread's scratch and the f32 tiles run over it for every token, so
 * the decode cost is paid once per weight rather than once per 4 tokens (same values, same tiles). */
enum { Q4G_CHUNK = 64, Q4G_FUSED_MAX_TOK = 4 };

AI void q4tile(const int64_t G, const int RM, const int RN, int64_t n, const uint8_t *w, size_t ws, const float *x,
               size_t xs, float *y, int64_t ys) {
    __m512 acc[GEMM_RM][GEMM_RN];
#pragma GCC unroll 4
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    const float *xt[GEMM_RN];
#pragma GCC unroll 4
    for (int t = 0; t < RN; t++) xt[t] = (const float *)((const char *)x + t * xs);
    const __m512i m = _mm512_set1_epi32(0xf);
    const size_t bb = (size_t)(4 + G / 2);
    for (int64_t k0 = 0; k0 < n; k0 += G) {
        const uint8_t *blk[GEMM_RM];
        __m512 d[GEMM_RM];
        __m512i z[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) {
            blk[r] = w + r * ws + (size_t)(k0 / G) * bb;
            uint16_t dh;
            memcpy(&dh, blk[r], 2);
            d[r] = _mm512_set1_ps(_cvtsh_ss(dh));
            z[r] = _mm512_set1_epi32(blk[r][2]);
        }
        for (int64_t sb = 0; sb < G / 32; sb++) {
            __m512i v[GEMM_RM];
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) v[r] = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk[r] + 4 + 16 * sb)));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) { /* elements 0..15 (low nibbles), then 16..31 (high) */
                int64_t k = k0 + 32 * sb + 16 * h;
                __m512 wv[GEMM_RM];
#pragma GCC unroll 4
                for (int r = 0; r < RM; r++) {
                    __m512i q = h ? _mm512_srli_epi32(v[r], 4) : _mm512_and_si512(v[r], m);
                    wv[r] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, z[r])), d[r]);
                }
#pragma GCC unroll 4
                for (int t = 0; t < RN; t++) {
                    __m512 xv = _mm512_loadu_ps(xt[t] + k);
#pragma GCC unroll 4
                    for (int r = 0; r < RM; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
                }
            }
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

static size_t q4g_scratch(int64_t n) { return (size_t)(Q4G_CHUNK * n) * sizeof(float); }

AI void q4g_gemm(const int64_t G, int64_t n, int64_t n_rows, int64_t n_tok, const void *wv, size_t ws, const void *x,
                 size_t xs, float *y, int64_t ys, void *scratch) {
    const uint8_t *w = wv;
    if (n_tok <= Q4G_FUSED_MAX_TOK) { /* fgemm's loops with q4tile */
        int64_t rn = n_tok;
        const float *xt = x;
        for (int64_t r = 0; r < n_rows; r += GEMM_RM) {
            const uint8_t *wr = w + r * ws;
            int64_t rm = n_rows - r < GEMM_RM ? n_rows - r : GEMM_RM;
            float *yt = y + r;
#define QT4(RM_, RN_) q4tile(G, RM_, RN_, n, wr, ws, xt, xs, yt, ys)
            if (rm == 4) {
                if (rn == 4) QT4(4, 4); else if (rn == 3) QT4(4, 3); else if (rn == 2) QT4(4, 2); else QT4(4, 1);
            } else if (rm == 3) {
                if (rn == 4) QT4(3, 4); else if (rn == 3) QT4(3, 3); else if (rn == 2) QT4(3, 2); else QT4(3, 1);
            } else if (rm == 2) {
                if (rn == 4) QT4(2, 4); else if (rn == 3) QT4(2, 3); else if (rn == 2) QT4(2, 2); else QT4(2, 1);
            } else {
                if (rn == 4) QT4(1, 4); else if (rn == 3) QT4(1, 3); else if (rn == 2) QT4(1, 2); else QT4(1, 1);
            }
#undef QT4
        }
        return;
    }
    float *f = scratch;
    for (int64_t r0 = 0; r0 < n_rows; r0 += Q4G_CHUNK) {
        int64_t nr = n_rows - r0 < Q4G_CHUNK ? n_rows - r0 : Q4G_CHUNK;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t k = 0; k < n; k += 16) _mm512_storeu_ps(f + r * n + k, q4g_load16(G, w + (r0 + r) * ws, k));
        fgemm(FW_F32, n, nr, n_tok, f, (size_t)n * sizeof(float), x, xs, y + r0, ys);
    }
}

static void gemm_q4g32(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y,
                       int64_t ys, void *scratch) {
    q4g_gemm(32, n, nr, nt, w, ws, x, xs, y, ys, scratch);
}
static void gemm_q4g64(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y,
                       int64_t ys, void *scratch) {
    q4g_gemm(64, n, nr, nt, w, ws, x, xs, y, ys, scratch);
}
static void gemm_q4g128(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y,
                        int64_t ys, void *scratch) {
    q4g_gemm(128, n, nr, nt, w, ws, x, xs, y, ys, scratch);
}

/* ---- legacy quants x packed 8-bit activations ---------------------------------------------------------------- */

/* Packed activation row of n elements, nb = n / 32 blocks, nbp = nb rounded up to 16 (zero padding, so that the
 * two-block and sixteen-block loads past the last block read zeros):
 *   int8 qs[nbp * 32] | float da[nbp] | float s[nbp]
 * da = the block scale rounded to fp16 (as q8_0/q8_1 store it); s = da * sum(qs) for q8_0-style weights, or the
 * fp16-rounded d * sum(qs) of q8_1 for Q4_1/Q5_1, so the results match the reference kernels' arithmetic. */
static int64_t pad16(int64_t nb) { return (nb + 15) & ~(int64_t)15; }

static size_t q8p_bytes(int64_t n) { return (size_t)pad16(n / 32) * 40; }

AI void q8p_pack(const int q81, const float *x, void *dst, int64_t n) {
    int64_t nb = n / 32, nbp = pad16(nb);
    int8_t *qs = dst;
    float *da = (float *)(qs + nbp * 32), *s = da + nbp;
    const __m512 signbit = _mm512_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++, x += 32) {
        __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(signbit, x0), _mm512_andnot_ps(signbit, x1)));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        /* round to nearest even, like lrintf in the reference quantizer */
        __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid)), i1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
        _mm_storeu_si128((__m128i *)(qs + 32 * b), _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(qs + 32 * b + 16), _mm512_cvtsepi32_epi8(i1));
        int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
        float dh = _cvtsh_ss(_cvtss_sh(d, 0));
        da[b] = dh;
        s[b] = q81 ? _cvtsh_ss(_cvtss_sh(d * (float)sum, 0)) : dh * (float)sum;
    }
    memset(qs + nb * 32, 0, (size_t)(nbp - nb) * 32);
    for (int64_t b = nb; b < nbp; b++) da[b] = s[b] = 0;
}

static void pack_q8p_0(const float *x, void *dst, int64_t n) { q8p_pack(0, x, dst, n); }
static void pack_q8p_1(const float *x, void *dst, int64_t n) { q8p_pack(1, x, dst, n); }

enum { QW_Q4_0, QW_Q4_1, QW_Q5_0, QW_Q5_1, QW_Q8_0 };

AI size_t qw_block_bytes(const int ty) {
    return ty == QW_Q4_0 ? sizeof(assay_block_q4_0) : ty == QW_Q4_1 ? sizeof(assay_block_q4_1)
         : ty == QW_Q5_0 ? sizeof(assay_block_q5_0) : ty == QW_Q5_1 ? sizeof(assay_block_q5_1) : sizeof(assay_block_q8_0);
}

/* Per-block d and m of one weight row as floats (zero-padded to nbp): the tiles read them with broadcasts. */
AI void qw_scales(const int ty, const uint8_t *row, int64_t nb, int64_t nbp, float *d, float *m) {
    const size_t bb = qw_block_bytes(ty);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)bb));
    for (int64_t b = 0; b < nbp; b += 16) {
        int64_t left = nb - b;
        __mmask16 k = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        /* the first 4 bytes of each block: d (fp16), then m (fp16) for Q4_1/Q5_1 */
        __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, row + b * bb, 1);
        __m512 dv = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)), mv;
        if (ty == QW_Q4_1 || ty == QW_Q5_1) mv = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
        else mv = _mm512_mul_ps(dv, _mm512_set1_ps(ty == QW_Q4_0 ? -8.0f : ty == QW_Q5_0 ? -16.0f : -128.0f));
        _mm512_storeu_ps(d + b, dv);
        _mm512_storeu_ps(m + b, mv);
    }
}

/* 16 packed nibbles -> 32 codes in element order (low nibbles are elements 0..15, high ones 16..31) */
AI __m512i nib2(__m512i t) {
    return _mm512_and_si512(_mm512_srlv_epi64(t, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0f));
}

/* The fifth bits of one or two Q5 blocks as a 64-bit lane mask (element j of block 0 -> bit j, block 1 -> bit 32+j) */
AI __m512i add_bit5(__m512i u, uint64_t qh) {
    return _mm512_mask_add_epi8(u, (__mmask64)qh, u, _mm512_set1_epi8(0x10));
}

/* codes u of blocks b and b+1 of a row (two = 0: block b only, the upper half zero) */
AI __m512i qw_decode(const int ty, const uint8_t *row, int64_t b, int two) {
    const size_t bb = qw_block_bytes(ty);
    const uint8_t *p0 = row + b * bb, *p1 = p0 + bb;
    if (ty == QW_Q8_0) { /* signed -> unsigned codes: q + 128 */
        const __m256i flip = _mm256_set1_epi8((char)0x80);
        __m512i v = _mm512_zextsi256_si512(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p0 + 2)), flip));
        if (two) v = _mm512_inserti64x4(v, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p1 + 2)), flip), 1);
        return v;
    }
    const size_t qo = ty == QW_Q4_0 ? 2 : ty == QW_Q4_1 ? 4 : ty == QW_Q5_0 ? 6 : 8; /* offset of qs */
    __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(p0 + qo)));
    if (two) t = _mm512_mask_broadcast_i32x4(t, 0xff00, _mm_loadu_si128((const __m128i *)(p1 + qo)));
    __m512i u = nib2(t);
    if (!two) u = _mm512_maskz_mov_epi8(0xffffffffull, u);
    if (ty == QW_Q5_0 || ty == QW_Q5_1) {
        const size_t ho = ty == QW_Q5_0 ? 2 : 4; /* offset of qh */
        uint32_t h0, h1 = 0;
        memcpy(&h0, p0 + ho, 4);
        if (two) memcpy(&h1, p1 + ho, 4);
        u = add_bit5(u, (uint64_t)h0 | ((uint64_t)h1 << 32));
    }
    return u;
}

/* [v[b] x 8, v[b+1] x 8] */
AI __m512 pair_bcast(const float *v, int64_t b) {
    return _mm512_mask_broadcastss_ps(_mm512_set1_ps(v[b]), 0xff00, _mm_load_ss(v + b + 1));
}

typedef struct q8p_view {
    const int8_t *qs;
    const float *da, *s;
} q8p_view;

AI q8p_view q8p_at(const void *x, int64_t nbp) {
    q8p_view v = {x, NULL, NULL};
    v.da = (const float *)(v.qs + nbp * 32);
    v.s = v.da + nbp;
    return v;
}

AI void qtile(const int ty, size_t pf, const int RM, const int RN, int64_t nb, int64_t nbp, const uint8_t *w, size_t ws,
              const float *wd, const float *wm, const void *x, size_t xs, float *y, int64_t ys) {
    __m512 acc[GEMM_RM][GEMM_RN];
    q8p_view a[GEMM_RN];
#pragma GCC unroll 4
    for (int t = 0; t < RN; t++) a[t] = q8p_at((const char *)x + t * xs, nbp);
#pragma GCC unroll 4
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        int two = b + 2 <= nb;
        __m512i u[GEMM_RM];
        __m512 dw[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) {
            u[r] = qw_decode(ty, w + r * ws, b, two);
            dw[r] = pair_bcast(wd + r * nbp, b);
            if (pf) _mm_prefetch((const char *)w + r * ws + pf + b * qw_block_bytes(ty), _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512i q = _mm512_loadu_si512(a[t].qs + 32 * b);
            __m512 da = pair_bcast(a[t].da, b);
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) {
                __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[r], q));
                acc[r][t] = _mm512_fmadd_ps(p, _mm512_mul_ps(dw[r], da), acc[r][t]);
            }
        }
    }
    /* sum_b m_b s_b */
    for (int64_t b = 0; b < nbp; b += 16) {
        __m512 mv[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) mv[r] = _mm512_loadu_ps(wm + r * nbp + b);
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512 sv = _mm512_loadu_ps(a[t].s + b);
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) acc[r][t] = _mm512_fmadd_ps(mv[r], sv, acc[r][t]);
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

/* Prefill: QW_CHUNK rows at a time unpacked once into the thread's scratch (each pair of blocks as 64 codes and its
 * two scales broadcast, plus the per-block m), and every 4-token group of the call runs its tiles over that copy.
 * The same products, scales and order as qtile. */
enum { QW_CHUNK = 16, QW_FUSED_MAX_TOK = 4 };

static size_t qw_unp_bytes(int64_t n) {
    int64_t nbp = pad16(n / 32), np = (n / 32 + 1) / 2;
    return (size_t)QW_CHUNK * ((size_t)np * 128 + (size_t)nbp * 4) + (size_t)nbp * 4 + 64;
}

AI void qtile_unp(const int RM, const int RN, int64_t np, int64_t nbp, const uint8_t *codes, const __m512 *dwv,
                  const float *wm, const void *x, size_t xs, float *y, int64_t ys) {
    __m512 acc[GEMM_RM][GEMM_RN];
    q8p_view a[GEMM_RN];
#pragma GCC unroll 4
    for (int t = 0; t < RN; t++) a[t] = q8p_at((const char *)x + t * xs, nbp);
#pragma GCC unroll 4
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; p++) {
        __m512i u[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) u[r] = _mm512_load_si512(codes + (r * np + p) * 64);
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512i q = _mm512_loadu_si512(a[t].qs + 64 * p);
            __m512 da = pair_bcast(a[t].da, 2 * p);
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) {
                __m512 pr = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[r], q));
                acc[r][t] = _mm512_fmadd_ps(pr, _mm512_mul_ps(dwv[r * np + p], da), acc[r][t]);
            }
        }
    }
    for (int64_t b = 0; b < nbp; b += 16) {
        __m512 mv[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) mv[r] = _mm512_loadu_ps(wm + r * nbp + b);
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            __m512 sv = _mm512_loadu_ps(a[t].s + b);
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) acc[r][t] = _mm512_fmadd_ps(mv[r], sv, acc[r][t]);
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

AI void qgemm_unp(const int ty, int64_t n, int64_t n_rows, int64_t n_tok, const uint8_t *w, size_t ws, const void *x,
                  size_t xs, float *y, int64_t ys, void *scratch) {
    int64_t nb = n / 32, nbp = pad16(nb), np = (nb + 1) / 2;
    uint8_t *codes = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    __m512 *dwv = (__m512 *)(codes + (size_t)QW_CHUNK * (size_t)np * 64);
    float *wm = (float *)(dwv + QW_CHUNK * np), *wd = wm + QW_CHUNK * nbp;
    for (int64_t c = 0; c < n_rows; c += QW_CHUNK) {
        int64_t nr = n_rows - c < QW_CHUNK ? n_rows - c : QW_CHUNK;
        for (int64_t r = 0; r < nr; r++) {
            const uint8_t *row = w + (c + r) * ws;
            qw_scales(ty, row, nb, nbp, wd, wm + r * nbp);
            for (int64_t p = 0; p < np; p++) {
                _mm512_store_si512(codes + (r * np + p) * 64, qw_decode(ty, row, 2 * p, 2 * p + 2 <= nb));
                dwv[r * np + p] = pair_bcast(wd, 2 * p);
            }
        }
        for (int64_t t = 0; t < n_tok;) {
            int64_t rn = n_tok - t < GEMM_RN ? n_tok - t : GEMM_RN;
            const char *xt = (const char *)x + t * xs;
            for (int64_t r = 0; r < nr; r += GEMM_RM) {
                int64_t rm = nr - r < GEMM_RM ? nr - r : GEMM_RM;
                float *yt = y + t * ys + c + r;
                const uint8_t *cr = codes + r * np * 64;
                const __m512 *dr = dwv + r * np;
                const float *mr = wm + r * nbp;
#define QU(RM_, RN_) qtile_unp(RM_, RN_, np, nbp, cr, dr, mr, xt, xs, yt, ys)
                if (rm == 4) {
                    if (rn == 4) QU(4, 4); else if (rn == 3) QU(4, 3); else if (rn == 2) QU(4, 2); else QU(4, 1);
                } else if (rm == 3) {
                    if (rn == 4) QU(3, 4); else if (rn == 3) QU(3, 3); else if (rn == 2) QU(3, 2); else QU(3, 1);
                } else if (rm == 2) {
                    if (rn == 4) QU(2, 4); else if (rn == 3) QU(2, 3); else if (rn == 2) QU(2, 2); else QU(2, 1);
                } else {
                    if (rn == 4) QU(1, 4); else if (rn == 3) QU(1, 3); else if (rn == 2) QU(1, 2); else QU(1, 1);
                }
#undef QU
            }
            t += rn;
        }
    }
}

/* scratch: d and m of GEMM_RM rows (decode), or the prefill's unpacked chunk */
static size_t qgemm_scratch(int64_t n) {
    size_t dec = (size_t)(2 * GEMM_RM * pad16(n / 32)) * sizeof(float), unp = qw_unp_bytes(n);
    return dec > unp ? dec : unp;
}

AI void qgemm(const int ty, int64_t n, int64_t n_rows, int64_t n_tok, const void *wv, size_t ws, const void *x,
              size_t xs, float *y, int64_t ys, void *scratch) {
    const uint8_t *w = wv;
    if (n_tok > QW_FUSED_MAX_TOK) {
        qgemm_unp(ty, n, n_rows, n_tok, w, ws, x, xs, y, ys, scratch);
        return;
    }
    int64_t nb = n / 32, nbp = pad16(nb);
    float *wd = scratch, *wm = wd + GEMM_RM * nbp;
    size_t pf = n_tok == 1 ? assay_cpu_prefetch_ahead(GEMM_RM, ws) : 0; /* decode */
    for (int64_t t0 = 0; t0 < n_tok; t0 += GEMM_TOK_BLOCK) {
        int64_t t1 = t0 + GEMM_TOK_BLOCK < n_tok ? t0 + GEMM_TOK_BLOCK : n_tok;
        for (int64_t r = 0; r < n_rows; r += GEMM_RM) {
            const uint8_t *wr = w + r * ws;
            int64_t rm = n_rows - r < GEMM_RM ? n_rows - r : GEMM_RM;
            for (int64_t i = 0; i < rm; i++) qw_scales(ty, wr + i * ws, nb, nbp, wd + i * nbp, wm + i * nbp);
            for (int64_t t = t0; t < t1;) {
                const char *xt = (const char *)x + t * xs;
                float *yt = y + t * ys + r;
                int64_t rn = t1 - t < GEMM_RN ? t1 - t : GEMM_RN;
#define QT(RM_, RN_) qtile(ty, pf, RM_, RN_, nb, nbp, wr, ws, wd, wm, xt, xs, yt, ys)
                if (rm == 4) {
                    if (rn == 4) QT(4, 4); else if (rn == 3) QT(4, 3); else if (rn == 2) QT(4, 2); else QT(4, 1);
                } else if (rm == 3) {
                    if (rn == 4) QT(3, 4); else QT(3, 1), rn = 1;
                } else if (rm == 2) {
                    if (rn == 4) QT(2, 4); else QT(2, 1), rn = 1;
                } else {
                    if (rn == 4) QT(1, 4); else QT(1, 1), rn = 1;
                }
#undef QT
                t += rn;
            }
        }
    }
}

#define QGEMM_FN(name, TY)                                                                                          \
    static void name(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y, \
                     int64_t ys, void *scratch) {                                                                   \
        qgemm(TY, n, nr, nt, w, ws, x, xs, y, ys, scratch);                                                         \
    }
QGEMM_FN(gemm_q4_0, QW_Q4_0)
QGEMM_FN(gemm_q4_1, QW_Q4_1)
QGEMM_FN(gemm_q5_0, QW_Q5_0)
QGEMM_FN(gemm_q5_1, QW_Q5_1)
QGEMM_FN(gemm_q8_0, QW_Q8_0)

/* ---- AMX int8 tiles: prefill of the legacy quants ------------------------------------------------------------ */

/* Where the CPU has AMX (the amx table), a batch of >= 16 tokens multiplies the same unsigned codes and 8-bit
 * activations as qtile with TDPBUSD: per 32-element block, a 16-row x 32-code tile of weights (A) times a tile of
 * 16 tokens' codes in the VNNI layout (B: 8 rows of 16 tokens x 4 codes) gives the 16 x 16 exact int32 block dots
 * (C); each is scaled by d_w d_a and the block's m s term is added in f32, block after block (two roundings per
 * block and output, as qtile). The B tiles, with the 16 tokens' da and s per block, are laid out once per matmul
 * (gemm_act_finish) after the packed rows; the weights are unpacked per 16-row chunk into the thread's scratch. */
#define AMXFN __attribute__((target("amx-tile,amx-int8")))

enum { AMX_MIN_TOK = 16, AMX_BLK = 640 /* one block of one 16-token group: B tile 512, da 64, s 64 */ };

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) amx_cfg;

/* tile 0: C (16 x 16 int32), tile 2: A (16 x 32 codes), tile 3: B (8 x 64 codes); a compile-time constant, so no
 * stores build it (GCC 12 drops such stores ahead of LDTILECFG) */
static const amx_cfg amx_config = {1, 0, {0}, {64, 0, 32, 64}, {16, 0, 16, 8}};

static size_t amx_act_extra(int64_t n, int64_t n_tok) { return (size_t)((n_tok + 15) / 16) * (size_t)(n / 32) * AMX_BLK; }

AI uint8_t *amx_b_base(const void *x, size_t xs, int64_t n_tok) {
    return (uint8_t *)(((uintptr_t)x + (size_t)n_tok * xs + 63) & ~(uintptr_t)63);
}

static void amx_act_finish(void *xa, size_t xs, int64_t n, int64_t n_tok) {
    int64_t nb = n / 32, nbp = pad16(nb);
    uint8_t *B = amx_b_base(xa, xs, n_tok);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)(xs / 4)));
    for (int64_t t0 = 0; t0 < n_tok; t0 += 16) {
        int64_t valid = n_tok - t0 < 16 ? n_tok - t0 : 16;
        __mmask16 m = (__mmask16)((1u << valid) - 1);
        const int32_t *base = (const int32_t *)((const uint8_t *)xa + (size_t)t0 * xs);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = B + ((size_t)(t0 / 16) * (size_t)nb + (size_t)b) * AMX_BLK;
            for (int k4 = 0; k4 < 8; k4++)
                _mm512_store_si512(blk + 64 * k4, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base + b * 8 + k4, 4));
            const float *da = (const float *)base + nbp * 8 + b, *sv = da + nbp;
            _mm512_store_ps(blk + 512, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, da, 4));
            _mm512_store_ps(blk + 576, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, sv, 4));
        }
    }
}

/* scratch: A tiles nb x 512, d and m per block and row (nb x 16 each), C 1 KiB, one row's d and m (2 nbp) */
static size_t amx_scratch(int64_t n) {
    int64_t nb = n / 32, nbp = pad16(nb);
    size_t amx = (size_t)nb * (512 + 128) + 1024 + (size_t)(2 * nbp) * 4 + 64, q = qgemm_scratch(n);
    return amx > q ? amx : q;
}

AMXFN static void amx_qgemm(const int ty, int64_t n, int64_t n_rows, int64_t n_tok, const uint8_t *w, size_t ws,
                            const void *x, size_t xs, float *y, int64_t ys, void *scratch) {
    int64_t nb = n / 32, nbp = pad16(nb);
    uint8_t *A = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *dwt = (float *)(A + (size_t)nb * 512), *wmt = dwt + nb * 16;
    int32_t *cbuf = (int32_t *)(wmt + nb * 16);
    float *rd = (float *)(cbuf + 256), *rm = rd + nbp;
    const uint8_t *B = amx_b_base(x, xs, n_tok);
    const __m512i yidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)ys));
    _tile_loadconfig(&amx_config);
    for (int64_t c = 0; c < n_rows; c += 16) {
        int64_t nr = n_rows - c < 16 ? n_rows - c : 16;
        for (int64_t r = 0; r < 16; r++) {
            if (r >= nr) { /* rows past the matrix: zero codes and scales */
                for (int64_t b = 0; b < nb; b++) {
                    memset(A + b * 512 + r * 32, 0, 32);
                    dwt[b * 16 + r] = wmt[b * 16 + r] = 0;
                }
                continue;
            }
            const uint8_t *row = w + (c + r) * ws;
            qw_scales(ty, row, nb, nbp, rd, rm);
            for (int64_t b = 0; b < nb; b += 2) {
                __m512i u = qw_decode(ty, row, b, b + 2 <= nb);
                _mm256_storeu_si256((__m256i *)(A + b * 512 + r * 32), _mm512_castsi512_si256(u));
                if (b + 1 < nb) _mm256_storeu_si256((__m256i *)(A + (b + 1) * 512 + r * 32), _mm512_extracti64x4_epi64(u, 1));
                dwt[b * 16 + r] = rd[b];
                wmt[b * 16 + r] = rm[b];
                if (b + 1 < nb) dwt[(b + 1) * 16 + r] = rd[b + 1], wmt[(b + 1) * 16 + r] = rm[b + 1];
            }
        }
        for (int64_t t0 = 0; t0 < n_tok; t0 += 16) {
            const uint8_t *Bg = B + (size_t)(t0 / 16) * (size_t)nb * AMX_BLK;
            __m512 acc[16];
            for (int m = 0; m < 16; m++) acc[m] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                _tile_loadd(2, A + b * 512, 32);
                _tile_loadd(3, Bg + b * AMX_BLK, 64);
                _tile_zero(0);
                _tile_dpbusd(0, 2, 3);
                _tile_stored(0, cbuf, 64);
                __m512 da = _mm512_load_ps(Bg + b * AMX_BLK + 512), sv = _mm512_load_ps(Bg + b * AMX_BLK + 576);
#pragma GCC unroll 16
                for (int m = 0; m < 16; m++) {
                    __m512 p = _mm512_cvtepi32_ps(_mm512_load_si512(cbuf + 16 * m));
                    acc[m] = _mm512_fmadd_ps(p, _mm512_mul_ps(_mm512_set1_ps(dwt[b * 16 + m]), da), acc[m]);
                    acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(wmt[b * 16 + m]), sv, acc[m]);
                }
            }
            int64_t valid = n_tok - t0 < 16 ? n_tok - t0 : 16;
            __mmask16 vm = (__mmask16)((1u << valid) - 1);
            for (int64_t m = 0; m < nr; m++) _mm512_mask_i32scatter_ps(y + t0 * ys + c + m, vm, yidx, acc[m], 4);
        }
    }
    _tile_release();
}

#define AMXGEMM_FN(name, TY)                                                                                        \
    static void name(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y, \
                     int64_t ys, void *scratch) {                                                                   \
        if (nt < AMX_MIN_TOK) qgemm(TY, n, nr, nt, w, ws, x, xs, y, ys, scratch);                                   \
        else amx_qgemm(TY, n, nr, nt, w, ws, x, xs, y, ys, scratch);                                                \
    }
AMXGEMM_FN(amx_gemm_q4_0, QW_Q4_0)
AMXGEMM_FN(amx_gemm_q4_1, QW_Q4_1)
AMXGEMM_FN(amx_gemm_q5_0, QW_Q5_0)
AMXGEMM_FN(amx_gemm_q5_1, QW_Q5_1)
AMXGEMM_FN(amx_gemm_q8_0, QW_Q8_0)

/* ---- k-quants x Q8_K activations ------------------------------------------------------------------------------ */

/* A super-block of 256 weights meets a Q8_K activation block (float d, int8 qs[256], int16 sums of 16). Its codes
 * become four zmm of 64 unsigned bytes u in element order (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63, Q3_K and Q2_K 0..7 and
 * 0..3) with x = scale_g * (u - o) - min_g per group g of 16 or 32 elements (o: Q6_K 32, Q3_K 4, else 0). Then per
 * zmm z: p = VPDPBUSD(0, u_z, a_z) holds sums of 4 products (|p| <= 4 * 63 * 127 < 2^15, so p fits the low 16 bits
 * of its lane) and VPDPWSSD(isum, p, SC_z), SC_z = each lane's integer group scale in its low 16 bits, adds
 * p * scale to int32 lanes: the super-block's integer sum in two instructions per 64 elements. The offset o and the
 * mins meet the activation's group sums: m = sum_g M_g bsums_g (one VPMADDWD) with M_g = o scale_g (scaled by d,
 * taken from isum) or the integer min (scaled by dmin). Per super-block and token:
 *     y += da * (d * float(isum) - dmin * float(m)).
 * The same integers and scales as kq_inline.h's unpacking; only the float summation order differs. */

enum { KQ_Q2, KQ_Q3, KQ_Q4, KQ_Q5, KQ_Q6 };

AI size_t kq_block_bytes(const int ty) {
    return ty == KQ_Q2 ? sizeof(assay_block_q2_K) : ty == KQ_Q3 ? sizeof(assay_block_q3_K)
         : ty == KQ_Q4 ? sizeof(assay_block_q4_K) : ty == KQ_Q5 ? sizeof(assay_block_q5_K) : sizeof(assay_block_q6_K);
}

/* the offset term shares d with the codes (Q3_K, Q6_K) rather than a dmin of its own */
AI int kq_offset_in_isum(const int ty) { return ty == KQ_Q3 || ty == KQ_Q6; }

typedef struct kq_prep {
    __m512i sc[4]; /* per zmm z: each lane's group scale (low 16 bits) */
    __m256i m16;   /* 16 int16 multipliers of the activation's 16 group sums */
    float d, dmin;
} kq_prep;

/* lane i of zmm z in groups of 16 (4 lanes each) or 32 (8 lanes each) */
AI __m512i kq_spread(const int g32, __m512i per_group, int z) {
    const __m512i i = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i idx = g32 ? _mm512_add_epi32(_mm512_set1_epi32(2 * z), _mm512_srli_epi32(i, 3))
                      : _mm512_add_epi32(_mm512_set1_epi32(4 * z), _mm512_srli_epi32(i, 2));
    /* the scale in the low 16 bits only: the high half multiplies p's sign extension */
    return _mm512_and_si512(_mm512_permutexvar_epi32(idx, per_group), _mm512_set1_epi32(0xffff));
}

AI void kq_prepare(const int ty, const uint8_t *blk, kq_prep *p) {
    if (ty == KQ_Q4 || ty == KQ_Q5) { /* d, dmin, 12 bytes of 6-bit scales and mins (kq_scale_min's packing) */
        const assay_block_q4_K *b = (const assay_block_q4_K *)blk;
        uint32_t A, B, C;
        memcpy(&A, b->scales, 4);
        memcpy(&B, b->scales + 4, 4);
        memcpy(&C, b->scales + 8, 4);
        uint32_t sc_lo = A & 0x3f3f3f3fu, mn_lo = B & 0x3f3f3f3fu;
        uint32_t sc_hi = (C & 0x0f0f0f0fu) | (((A >> 6) & 0x03030303u) << 4);
        uint32_t mn_hi = ((C >> 4) & 0x0f0f0f0fu) | (((B >> 6) & 0x03030303u) << 4);
        __m128i sc8 = _mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo), mn8 = _mm_set_epi32(0, 0, (int)mn_hi, (int)mn_lo);
        __m512i scv = _mm512_cvtepu8_epi32(sc8);
        for (int z = 0; z < 4; z++) p->sc[z] = kq_spread(1, scv, z);
        p->m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8)); /* each min for its two groups of 16 */
        p->d = _cvtsh_ss(b->d);
        p->dmin = _cvtsh_ss(b->dmin);
    } else if (ty == KQ_Q6) {
        const assay_block_q6_K *b = (const assay_block_q6_K *)blk;
        __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
        __m512i scv = _mm512_cvtepi8_epi32(s8);
        for (int z = 0; z < 4; z++) p->sc[z] = kq_spread(0, scv, z);
        p->m16 = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 5); /* 32 scale_g */
        p->d = _cvtsh_ss(b->d);
        p->dmin = 0;
    } else if (ty == KQ_Q3) { /* 16 6-bit scales: low nibbles in bytes 0..7, 2-bit highs in bytes 8..11; minus 32 */
        const assay_block_q3_K *b = (const assay_block_q3_K *)blk;
        uint32_t A, B, C;
        memcpy(&A, b->scales, 4);
        memcpy(&B, b->scales + 4, 4);
        memcpy(&C, b->scales + 8, 4);
        const uint32_t k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
        uint32_t w0 = (A & k4) | ((C & k2) << 4), w1 = (B & k4) | (((C >> 2) & k2) << 4);
        uint32_t w2 = ((A >> 4) & k4) | (((C >> 4) & k2) << 4), w3 = ((B >> 4) & k4) | (((C >> 6) & k2) << 4);
        __m512i scv = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_set_epi32((int)w3, (int)w2, (int)w1, (int)w0)),
                                       _mm512_set1_epi32(32));
        for (int z = 0; z < 4; z++) p->sc[z] = kq_spread(0, scv, z);
        p->m16 = _mm256_slli_epi16(_mm512_cvtepi32_epi16(scv), 2); /* 4 scale_g */
        p->d = _cvtsh_ss(b->d);
        p->dmin = 0;
    } else { /* Q2_K: 16 bytes, scale in the low nibble, min in the high one */
        const assay_block_q2_K *b = (const assay_block_q2_K *)blk;
        __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
        const __m128i lo4 = _mm_set1_epi8(0x0f);
        __m512i scv = _mm512_cvtepu8_epi32(_mm_and_si128(s8, lo4));
        for (int z = 0; z < 4; z++) p->sc[z] = kq_spread(0, scv, z);
        p->m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), lo4));
        p->d = _cvtsh_ss(b->d);
        p->dmin = _cvtsh_ss(b->dmin);
    }
}

/* 32 bytes in both halves of a zmm */
AI __m512i bcast32(const uint8_t *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }

/* bits (s0 in the low half, s1 in the high half) of each byte of v, masked */
AI __m512i bits2(__m512i v, int s0, int s1, int mask) {
    __m512i sh = _mm512_mask_blend_epi64(0xf0, _mm512_set1_epi64(s0), _mm512_set1_epi64(s1));
    return _mm512_and_si512(_mm512_srlv_epi64(v, sh), _mm512_set1_epi8((char)mask));
}

/* the unsigned codes of elements 64 z .. 64 z + 63 */
AI __m512i kq_codes(const int ty, const uint8_t *blk, int z) {
    if (ty == KQ_Q4 || ty == KQ_Q5) { /* bytes 32z..32z+31: low nibbles are elements 64z.., high nibbles 64z+32.. */
        const uint8_t *qs = ty == KQ_Q4 ? ((const assay_block_q4_K *)blk)->qs : ((const assay_block_q5_K *)blk)->qs;
        __m512i u = bits2(bcast32(qs + 32 * z), 0, 4, 0x0f);
        if (ty == KQ_Q5) /* fifth bits: qh bit 2z (low half), 2z + 1 (high half) */
            u = _mm512_or_si512(u, _mm512_slli_epi16(bits2(bcast32(((const assay_block_q5_K *)blk)->qh), 2 * z, 2 * z + 1, 1), 4));
        return u;
    }
    if (ty == KQ_Q6) { /* half h = z/2: ql 64 bytes (low nibbles m = 0, high m = 1), qh 32 bytes: 2 bits per run */
        const assay_block_q6_K *b = (const assay_block_q6_K *)blk;
        int h = z / 2, m = z % 2;
        __m512i l = _mm512_loadu_si512(b->ql + 64 * h);
        l = m ? _mm512_and_si512(_mm512_srli_epi16(l, 4), _mm512_set1_epi8(0x0f)) : _mm512_and_si512(l, _mm512_set1_epi8(0x0f));
        __m512i hi = bits2(bcast32(b->qh + 32 * h), 4 * m, 4 * m + 2, 3);
        return _mm512_or_si512(l, _mm512_slli_epi16(hi, 4));
    }
    /* Q3_K, Q2_K: half h = z/2 of qs (32 bytes), runs of 32 at bit shifts 4(z%2) and 4(z%2) + 2 */
    const uint8_t *qs = ty == KQ_Q3 ? ((const assay_block_q3_K *)blk)->qs : ((const assay_block_q2_K *)blk)->qs;
    int h = z / 2, s = 4 * (z % 2);
    __m512i u = bits2(bcast32(qs + 32 * h), s, s + 2, 3);
    if (ty == KQ_Q3) { /* hmask bit 4h + run: set adds 4 (value = u - 4) */
        int b0 = 4 * h + 2 * (z % 2);
        u = _mm512_or_si512(u, _mm512_slli_epi16(bits2(bcast32(((const assay_block_q3_K *)blk)->hmask), b0, b0 + 1, 1), 2));
    }
    return u;
}

/* RM weight rows x RN Q8_K activation rows over nsb super-blocks; pf: decode prefetch (assay_cpu_prefetch_ahead) */
AI void kqtile(const int ty, size_t pf, const int RM, const int RN, int64_t nsb, const uint8_t *w, size_t ws,
               const uint8_t *x, size_t xs, float *y, int64_t ys) {
    const size_t bb = kq_block_bytes(ty);
    __m512 acc[GEMM_RM][GEMM_RN];
#pragma GCC unroll 4
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        kq_prep pr[GEMM_RM];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++) {
            const uint8_t *blk = w + r * ws + b * bb;
            if (pf)
                for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)blk + pf + o, _MM_HINT_T0);
            kq_prepare(ty, blk, &pr[r]);
        }
        __m512i is[GEMM_RM][GEMM_RN];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
            for (int t = 0; t < RN; t++) is[r][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int z = 0; z < 4; z++) {
            __m512i u[GEMM_RM];
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) u[r] = kq_codes(ty, w + r * ws + b * bb, z);
#pragma GCC unroll 4
            for (int t = 0; t < RN; t++) {
                const assay_block_q8_K *a = (const assay_block_q8_K *)(x + t * xs) + b;
                __m512i av = _mm512_loadu_si512(a->qs + 64 * z);
#pragma GCC unroll 4
                for (int r = 0; r < RM; r++)
                    is[r][t] = _mm512_dpwssd_epi32(is[r][t], _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[r], av), pr[r].sc[z]);
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            const assay_block_q8_K *a = (const assay_block_q8_K *)(x + t * xs) + b;
            __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            float da = a->d;
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) {
                __m512i m = _mm512_zextsi256_si512(_mm256_madd_epi16(pr[r].m16, bs));
                if (kq_offset_in_isum(ty)) {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(is[r][t], m)), _mm512_set1_ps(pr[r].d * da),
                                                acc[r][t]);
                } else {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r][t]), _mm512_set1_ps(pr[r].d * da), acc[r][t]);
                    acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(pr[r].dmin * da), acc[r][t]);
                }
            }
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

/* Prefill: KQ_CHUNK rows at a time are unpacked once into the thread's scratch (codes, scale vectors, offsets), and
 * every 4-token group of the call runs its tiles over that copy: the unpacking is paid once per weight instead of
 * once per 4 tokens. Same integers, same order of operations as kqtile. */
enum { KQ_CHUNK = 16, KQ_FUSED_MAX_TOK = 4 };

typedef struct kq_unp {
    uint8_t u[256];
    kq_prep p;
} __attribute__((aligned(64))) kq_unp;

static size_t kq_scratch(int64_t n) { return (size_t)KQ_CHUNK * (size_t)(n / 256) * sizeof(kq_unp) + 64; }

AI void kq_unpack_rows(const int ty, const uint8_t *w, size_t ws, int64_t nr, int64_t nsb, kq_unp *dst) {
    const size_t bb = kq_block_bytes(ty);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t b = 0; b < nsb; b++) {
            const uint8_t *blk = w + r * ws + b * bb;
            kq_unp *d = &dst[r * nsb + b];
            kq_prepare(ty, blk, &d->p);
            for (int z = 0; z < 4; z++) _mm512_store_si512(d->u + 64 * z, kq_codes(ty, blk, z));
        }
}

AI void kqtile_unp(const int ty, const int RM, const int RN, int64_t nsb, const kq_unp *wu, const uint8_t *x, size_t xs,
                   float *y, int64_t ys) {
    __m512 acc[GEMM_RM][GEMM_RN];
#pragma GCC unroll 4
    for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        __m512i is[GEMM_RM][GEMM_RN];
#pragma GCC unroll 4
        for (int r = 0; r < RM; r++)
#pragma GCC unroll 4
            for (int t = 0; t < RN; t++) is[r][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int z = 0; z < 4; z++) {
            __m512i u[GEMM_RM];
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) u[r] = _mm512_load_si512(wu[r * nsb + b].u + 64 * z);
#pragma GCC unroll 4
            for (int t = 0; t < RN; t++) {
                __m512i av = _mm512_loadu_si512(((const assay_block_q8_K *)(x + t * xs) + b)->qs + 64 * z);
#pragma GCC unroll 4
                for (int r = 0; r < RM; r++)
                    is[r][t] = _mm512_dpwssd_epi32(is[r][t], _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[r], av),
                                                   wu[r * nsb + b].p.sc[z]);
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < RN; t++) {
            const assay_block_q8_K *a = (const assay_block_q8_K *)(x + t * xs) + b;
            __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            float da = a->d;
#pragma GCC unroll 4
            for (int r = 0; r < RM; r++) {
                const kq_prep *pr = &wu[r * nsb + b].p;
                __m512i m = _mm512_zextsi256_si512(_mm256_madd_epi16(pr->m16, bs));
                if (kq_offset_in_isum(ty)) {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(is[r][t], m)), _mm512_set1_ps(pr->d * da),
                                                acc[r][t]);
                } else {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r][t]), _mm512_set1_ps(pr->d * da), acc[r][t]);
                    acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(pr->dmin * da), acc[r][t]);
                }
            }
        }
    }
    store_tile(RM, RN, acc, y, ys);
}

/* Q8_K activations, vectorized: the same integers, sums and scale as assay_quantize_row_q8_K_ref (round to nearest
 * even of x * (127 / amax), d = 1 / that; an all-zero block is all zeros). */
static void pack_q8_K(const float *x, void *dst, int64_t n) {
    assay_block_q8_K *y = dst;
    const __m512 signbit = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < 256; j += 16) m = _mm512_max_ps(m, _mm512_andnot_ps(signbit, _mm512_loadu_ps(x + j)));
        float amax = _mm512_reduce_max_ps(m);
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = 127.0f / amax;
        __m512 vs = _mm512_set1_ps(iscale);
        for (int g = 0; g < 16; g++) {
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vs));
            v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * g), _mm512_cvtepi32_epi8(v));
            y[i].bsums[g] = (int16_t)_mm512_reduce_add_epi32(v);
        }
        y[i].d = 1.0f / iscale;
    }
}

static size_t q8K_bytes(int64_t n) { return (size_t)(n / 256) * sizeof(assay_block_q8_K); }

AI void kqgemm(const int ty, int64_t n, int64_t n_rows, int64_t n_tok, const void *wv, size_t ws, const void *xv,
               size_t xs, float *y, int64_t ys, void *scratch) {
    const uint8_t *w = wv, *x = xv;
    int64_t nsb = n / 256;
    if (n_tok > KQ_FUSED_MAX_TOK) {
        kq_unp *wu = (kq_unp *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
        for (int64_t c = 0; c < n_rows; c += KQ_CHUNK) {
            int64_t nr = n_rows - c < KQ_CHUNK ? n_rows - c : KQ_CHUNK;
            kq_unpack_rows(ty, w + c * ws, ws, nr, nsb, wu);
            for (int64_t t = 0; t < n_tok;) {
                int64_t rn = n_tok - t < GEMM_RN ? n_tok - t : GEMM_RN;
                const uint8_t *xt = x + t * xs;
                for (int64_t r = 0; r < nr; r += GEMM_RM) {
                    int64_t rm = nr - r < GEMM_RM ? nr - r : GEMM_RM;
                    float *yt = y + t * ys + c + r;
                    const kq_unp *wr = wu + r * nsb;
#define KU(RM_, RN_) kqtile_unp(ty, RM_, RN_, nsb, wr, xt, xs, yt, ys)
                    if (rm == 4) {
                        if (rn == 4) KU(4, 4); else if (rn == 3) KU(4, 3); else if (rn == 2) KU(4, 2); else KU(4, 1);
                    } else if (rm == 3) {
                        if (rn == 4) KU(3, 4); else if (rn == 3) KU(3, 3); else if (rn == 2) KU(3, 2); else KU(3, 1);
                    } else if (rm == 2) {
                        if (rn == 4) KU(2, 4); else if (rn == 3) KU(2, 3); else if (rn == 2) KU(2, 2); else KU(2, 1);
                    } else {
                        if (rn == 4) KU(1, 4); else if (rn == 3) KU(1, 3); else if (rn == 2) KU(1, 2); else KU(1, 1);
                    }
#undef KU
                }
                t += rn;
            }
        }
        return;
    }
    if (n_tok == 1) {
        int64_t r = 0;
        size_t pf = assay_cpu_prefetch_ahead(4, ws);
        for (; r + 4 <= n_rows; r += 4) kqtile(ty, pf, 4, 1, nsb, w + r * ws, ws, x, xs, y + r, ys);
        int64_t rm = n_rows - r;
        if (rm == 3) kqtile(ty, 0, 3, 1, nsb, w + r * ws, ws, x, xs, y + r, ys);
        else if (rm == 2) kqtile(ty, 0, 2, 1, nsb, w + r * ws, ws, x, xs, y + r, ys);
        else if (rm == 1) kqtile(ty, 0, 1, 1, nsb, w + r * ws, ws, x, xs, y + r, ys);
        return;
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += GEMM_TOK_BLOCK) {
        int64_t t1 = t0 + GEMM_TOK_BLOCK < n_tok ? t0 + GEMM_TOK_BLOCK : n_tok;
        for (int64_t r = 0; r < n_rows; r += GEMM_RM) {
            const uint8_t *wr = w + r * ws;
            int64_t rm = n_rows - r < GEMM_RM ? n_rows - r : GEMM_RM;
            for (int64_t t = t0; t < t1;) {
                const uint8_t *xt = x + t * xs;
                float *yt = y + t * ys + r;
                int64_t rn = t1 - t < GEMM_RN ? t1 - t : GEMM_RN;
#define KT(RM_, RN_) kqtile(ty, 0, RM_, RN_, nsb, wr, ws, xt, xs, yt, ys)
                if (rm == 4) {
                    if (rn == 4) KT(4, 4); else if (rn == 3) KT(4, 3); else if (rn == 2) KT(4, 2); else KT(4, 1);
                } else if (rm == 3) {
                    if (rn == 4) KT(3, 4); else KT(3, 1), rn = 1;
                } else if (rm == 2) {
                    if (rn == 4) KT(2, 4); else KT(2, 1), rn = 1;
                } else {
                    if (rn == 4) KT(1, 4); else KT(1, 1), rn = 1;
                }
#undef KT
                t += rn;
            }
        }
    }
}

#define KQGEMM_FN(name, TY)                                                                                         \
    static void name(int64_t n, int64_t nr, int64_t nt, const void *w, size_t ws, const void *x, size_t xs, float *y, \
                     int64_t ys, void *scratch) {                                                                   \
        kqgemm(TY, n, nr, nt, w, ws, x, xs, y, ys, scratch);                                                        \
    }
KQGEMM_FN(gemm_q2_K, KQ_Q2)
KQGEMM_FN(gemm_q3_K, KQ_Q3)
KQGEMM_FN(gemm_q4_K, KQ_Q4)
KQGEMM_FN(gemm_q5_K, KQ_Q5)
KQGEMM_FN(gemm_q6_K, KQ_Q6)

/* ---- attention ------------------------------------------------------------------------------------------------- */

/* exp(x), relative error about 1e-7 (Cody-Waite reduction by ln 2, the degree-6 polynomial of Cephes' expf); lanes
 * below -104 give 0, like expf. */
AI __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static void attn_block16(int64_t hd, int64_t n_rows, const float *q, const float *kT, const float *v, int a, int b,
                         float scale, float softcap, float *m, float *l, float *acc) {
    const __mmask16 valid = (__mmask16)(((1u << b) - 1) & ~((1u << a) - 1));
    for (int64_t r = 0; r < n_rows; r++, q += hd, acc += hd) {
        /* 16 scores at once: key j in lane j; four partial sums hide the FMA latency */
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int64_t d = 0; d < hd; d += 4) {
            s0 = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_loadu_ps(kT + d * 16), s0);
            s1 = _mm512_fmadd_ps(_mm512_set1_ps(q[d + 1]), _mm512_loadu_ps(kT + (d + 1) * 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_set1_ps(q[d + 2]), _mm512_loadu_ps(kT + (d + 2) * 16), s2);
            s3 = _mm512_fmadd_ps(_mm512_set1_ps(q[d + 3]), _mm512_loadu_ps(kT + (d + 3) * 16), s3);
        }
        __m512 s = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)), _mm512_set1_ps(scale));
        if (softcap > 0) {
            float t[16];
            _mm512_storeu_ps(t, s);
            for (int j = 0; j < 16; j++) t[j] = softcap * tanhf(t[j] / softcap);
            s = _mm512_loadu_ps(t);
        }
        s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, s);
        float mt = _mm512_reduce_max_ps(s);
        if (mt > m[r]) { /* the running max grows: rescale what was summed so far (exp(-inf) = 0 the first time) */
            float corr = expf(m[r] - mt);
            l[r] *= corr;
            __m512 c = _mm512_set1_ps(corr);
            for (int64_t d = 0; d < hd; d += 16) _mm512_storeu_ps(acc + d, _mm512_mul_ps(c, _mm512_loadu_ps(acc + d)));
            m[r] = mt;
        }
        __m512 p = _mm512_maskz_mov_ps(valid, exp512(_mm512_sub_ps(s, _mm512_set1_ps(m[r]))));
        l[r] += _mm512_reduce_add_ps(p);
        float pj[16];
        _mm512_storeu_ps(pj, p);
        /* acc += sum_j p_j v_j, 64 columns at a time, even and odd keys in separate sums */
        for (int64_t c = 0; c < hd; c += 16) {
            __m512 e = _mm512_setzero_ps(), o = e;
            int j = a;
            for (; j + 2 <= b; j += 2) {
                e = _mm512_fmadd_ps(_mm512_set1_ps(pj[j]), _mm512_loadu_ps(v + j * hd + c), e);
                o = _mm512_fmadd_ps(_mm512_set1_ps(pj[j + 1]), _mm512_loadu_ps(v + (j + 1) * hd + c), o);
            }
            if (j < b) e = _mm512_fmadd_ps(_mm512_set1_ps(pj[j]), _mm512_loadu_ps(v + j * hd + c), e);
            _mm512_storeu_ps(acc + c, _mm512_add_ps(_mm512_loadu_ps(acc + c), _mm512_add_ps(e, o)));
        }
    }
}

/* ---- element-wise ---------------------------------------------------------------------------------------------- */

/* The same operations in the same order as cpu_backend.c's loops, 16 lanes at a time (tails masked): rmsnorm's sum of
 * squares in double, y = (x * inv) * gamma; swiglu (g / (1 + exp(-g))) * up and softmax with exp512 instead of expf
 * (about 1.7u against expf's 1 ulp: test_backend_ops.c's bounds say which); softmax's sum in double; add exact. */

AI __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

static void ew_rmsnorm(float *y, const float *x, const float *gamma, int64_t n, int64_t n_rows, float eps) {
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        __m512d s0 = _mm512_setzero_pd(), s1 = s0;
        for (int64_t i = 0; i < n; i += 16) {
            __m512 v = _mm512_maskz_loadu_ps(tail16(n - i), xr + i);
            __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v)), hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
            s0 = _mm512_fmadd_pd(lo, lo, s0);
            s1 = _mm512_fmadd_pd(hi, hi, s1);
        }
        double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
        __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(ss / (double)n + eps)));
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 m = tail16(n - i);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv);
            _mm512_mask_storeu_ps(yr + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, gamma + i)));
        }
    }
}

static void ew_swiglu(float *out, const float *gate, const float *up, int64_t n, int64_t n_rows, int64_t stride) {
    const __m512 one = _mm512_set1_ps(1.0f), neg = _mm512_set1_ps(-0.0f);
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 m = tail16(n - i);
            __m512 g = _mm512_maskz_loadu_ps(m, gate + r * stride + i);
            __m512 e = exp512(_mm512_xor_ps(g, neg));
            __m512 v = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + r * stride + i));
            _mm512_mask_storeu_ps(out + r * n + i, m, v);
        }
}

static void ew_softmax(float *x, int64_t n, int64_t n_rows, float softcap) {
    for (int64_t r = 0; r < n_rows; r++) {
        float *v = x + r * n;
        if (softcap > 0)
            for (int64_t i = 0; i < n; i++) v[i] = softcap * tanhf(v[i] / softcap);
        __m512 mv = _mm512_set1_ps(-INFINITY);
        for (int64_t i = 0; i < n; i += 16) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail16(n - i), v + i));
        __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
        __m512d s0 = _mm512_setzero_pd(), s1 = s0;
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 m = tail16(n - i);
            __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + i), mx)));
            _mm512_mask_storeu_ps(v + i, m, e);
            s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
        }
        __m512 inv = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1))));
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 m = tail16(n - i);
            _mm512_mask_storeu_ps(v + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, v + i), inv));
        }
    }
}

static void ew_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

/* cos and sin of each pair's angle once per row (the scalar loop's float angle, cosf and sinf), then every head
 * rotated 16 lanes at a time: norm pairs are adjacent lanes (the partner by a lane swap, the sine signed -, +), neox
 * pairs are two runs of half. x0 c - x1 s and x0 s + x1 c with one FMA each: fewer roundings than the loop's. */
static void ew_rope(float *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride, const int32_t *pos,
                    int neox, int64_t n_rot, const float *inv_freq) {
    enum { MAXR = 512 };
    float cs[MAXR], sn[MAXR]; /* norm: per lane (each pair's value twice, sine signed); neox: per pair */
    int64_t half = n_rot / 2;
    if (n_rot > MAXR) { /* not a real head size; the plain loop */
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t i = 0; i < half; i++) {
                float ang = (float)pos[t] * inv_freq[i], c = cosf(ang), s = sinf(ang);
                for (int64_t h = 0; h < n_head; h++) {
                    float *v = x + t * row_stride + h * head_dim;
                    int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
                    float x0 = v[a], x1 = v[b];
                    v[a] = x0 * c - x1 * s;
                    v[b] = x0 * s + x1 * c;
                }
            }
        return;
    }
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < half; i++) {
            float ang = (float)pos[t] * inv_freq[i], c = cosf(ang), s = sinf(ang);
            if (neox) cs[i] = c, sn[i] = s;
            else cs[2 * i] = cs[2 * i + 1] = c, sn[2 * i] = -s, sn[2 * i + 1] = s;
        }
        for (int64_t h = 0; h < n_head; h++) {
            float *v = x + t * row_stride + h * head_dim;
            if (neox)
                for (int64_t i = 0; i < half; i += 16) {
                    __mmask16 m = tail16(half - i);
                    __m512 x0 = _mm512_maskz_loadu_ps(m, v + i), x1 = _mm512_maskz_loadu_ps(m, v + half + i);
                    __m512 c = _mm512_maskz_loadu_ps(m, cs + i), s = _mm512_maskz_loadu_ps(m, sn + i);
                    _mm512_mask_storeu_ps(v + i, m, _mm512_fnmadd_ps(x1, s, _mm512_mul_ps(x0, c)));
                    _mm512_mask_storeu_ps(v + half + i, m, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
                }
            else
                for (int64_t i = 0; i < n_rot; i += 16) {
                    __mmask16 m = tail16(n_rot - i);
                    __m512 xv = _mm512_maskz_loadu_ps(m, v + i), sw = _mm512_permute_ps(xv, 0xb1);
                    __m512 c = _mm512_maskz_loadu_ps(m, cs + i), s = _mm512_maskz_loadu_ps(m, sn + i);
                    _mm512_mask_storeu_ps(v + i, m, _mm512_fmadd_ps(sw, s, _mm512_mul_ps(xv, c)));
                }
        }
    }
}

/* ---- table ------------------------------------------------------------------------------------------------------ */

static assay_cpu_kernels kernels_avx512;

static void set_gemm(assay_type t, assay_cpu_gemm_fn g, assay_cpu_from_float_fn pack, size_t (*act_bytes)(int64_t),
                     size_t (*scratch)(int64_t)) {
    kernels_avx512.type[t].gemm = g;
    kernels_avx512.type[t].gemm_pack = pack;
    kernels_avx512.type[t].gemm_act_bytes = act_bytes;
    kernels_avx512.type[t].gemm_scratch_bytes = scratch;
}

static void init_table(void) {
    kernels_avx512 = *assay_cpu_kernels_avx2();
    kernels_avx512.name = "avx512";
    kernels_avx512.attn_block16 = attn_block16;
    kernels_avx512.rmsnorm = ew_rmsnorm;
    kernels_avx512.swiglu = ew_swiglu;
    kernels_avx512.softmax = ew_softmax;
    kernels_avx512.add = ew_add;
    kernels_avx512.rope = ew_rope;
    set_gemm(ASSAY_TYPE_F32, gemm_f32, NULL, NULL, NULL);
    set_gemm(ASSAY_TYPE_F16, gemm_f16, NULL, NULL, NULL);
    set_gemm(ASSAY_TYPE_BF16, gemm_bf16, NULL, NULL, NULL);
    set_gemm(ASSAY_TYPE_Q4_0, gemm_q4_0, pack_q8p_0, q8p_bytes, qgemm_scratch);
    set_gemm(ASSAY_TYPE_Q4_1, gemm_q4_1, pack_q8p_1, q8p_bytes, qgemm_scratch);
    set_gemm(ASSAY_TYPE_Q5_0, gemm_q5_0, pack_q8p_0, q8p_bytes, qgemm_scratch);
    set_gemm(ASSAY_TYPE_Q5_1, gemm_q5_1, pack_q8p_1, q8p_bytes, qgemm_scratch);
    set_gemm(ASSAY_TYPE_Q8_0, gemm_q8_0, pack_q8p_0, q8p_bytes, qgemm_scratch);
    set_gemm(ASSAY_TYPE_Q2_K, gemm_q2_K, pack_q8_K, q8K_bytes, kq_scratch);
    set_gemm(ASSAY_TYPE_Q3_K, gemm_q3_K, pack_q8_K, q8K_bytes, kq_scratch);
    set_gemm(ASSAY_TYPE_Q4_K, gemm_q4_K, pack_q8_K, q8K_bytes, kq_scratch);
    set_gemm(ASSAY_TYPE_Q5_K, gemm_q5_K, pack_q8_K, q8K_bytes, kq_scratch);
    set_gemm(ASSAY_TYPE_Q6_K, gemm_q6_K, pack_q8_K, q8K_bytes, kq_scratch);
    kernels_avx512.from_float[ASSAY_TYPE_Q8_K] = pack_q8_K;
    set_gemm(ASSAY_TYPE_Q4G32, gemm_q4g32, NULL, NULL, q4g_scratch);
    set_gemm(ASSAY_TYPE_Q4G64, gemm_q4g64, NULL, NULL, q4g_scratch);
    set_gemm(ASSAY_TYPE_Q4G128, gemm_q4g128, NULL, NULL, q4g_scratch);
}

static assay_cpu_kernels kernels_amx;

static void init_amx_table(void) {
    kernels_amx = *assay_cpu_kernels_avx512bf16();
    kernels_amx.name = "amx";
    static const struct { assay_type t; assay_cpu_gemm_fn g; assay_cpu_from_float_fn pack; } amx[] = {
        {ASSAY_TYPE_Q4_0, amx_gemm_q4_0, pack_q8p_0}, {ASSAY_TYPE_Q4_1, amx_gemm_q4_1, pack_q8p_1},
        {ASSAY_TYPE_Q5_0, amx_gemm_q5_0, pack_q8p_0}, {ASSAY_TYPE_Q5_1, amx_gemm_q5_1, pack_q8p_1},
        {ASSAY_TYPE_Q8_0, amx_gemm_q8_0, pack_q8p_0}};
    for (size_t i = 0; i < sizeof amx / sizeof amx[0]; i++) {
        assay_cpu_type_kernels *t = &kernels_amx.type[amx[i].t];
        t->gemm = amx[i].g;
        t->gemm_pack = amx[i].pack;
        t->gemm_act_bytes = q8p_bytes;
        t->gemm_scratch_bytes = amx_scratch;
        t->gemm_act_extra = amx_act_extra;
        t->gemm_act_finish = amx_act_finish;
    }
}

const assay_cpu_kernels *assay_cpu_kernels_amx(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_amx_table);
    return &kernels_amx;
}

const assay_cpu_kernels *assay_cpu_kernels_avx512(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_table);
    return &kernels_avx512;
}
