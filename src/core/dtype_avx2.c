/* dtype_avx2.c — AVX2/F16C row converters for bf16 and f16 (compiled with -mavx2 -mfma -mf16c, chosen at run
 * time by dtype.c). Bit-identical to the scalar reference in dtype.c; tests/unit/test_dtype.c checks that on
 * every bf16/f16 code and on a sweep of f32 bit patterns. F16C rounds with an explicit RNE immediate, so the
 * MXCSR rounding mode does not matter (assay never sets DAZ/FTZ, which would flush f32 subnormal inputs). */
#include <immintrin.h>

#include "assay/dtype.h"
#include "core/dtype_impl.h"

void assay_f32_to_bf16_row_avx2(const float *src, uint16_t *dst, int64_t n) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i signbit = _mm256_set1_epi32(0x8000), qnan = _mm256_set1_epi32(0x7fc0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
        /* RNE on the low 16 bits; the carry can run into the exponent (and up to inf) but never into the sign. */
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
        __m256i isnan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
        __m256i nanv = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), signbit), qnan);
        r = _mm256_blendv_epi8(r, nanv, isnan);
        /* 8 x u32 (each <= 0xffff) -> 8 x u16: pack within lanes, then bring the two halves together. */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(p));
    }
    assay_f32_to_bf16_row_scalar(src + i, dst + i, n - i);
}

void assay_bf16_to_f32_row_avx2(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
    assay_bf16_to_f32_row_scalar(src + i, dst + i, n - i);
}

void assay_f32_to_f16_row_avx2(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    assay_f32_to_f16_row_scalar(src + i, dst + i, n - i);
}

void assay_f16_to_f32_row_avx2(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    assay_f16_to_f32_row_scalar(src + i, dst + i, n - i);
}
