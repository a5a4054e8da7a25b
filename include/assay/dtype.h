/* dtype.h — exact conversions between f32 and the narrow floating-point formats assay stores:
 * bf16, f16, FP8 E4M3 (OCP "e4m3fn"), FP8 E5M2, FP4 E2M1 and the E8M0 scale exponent (OCP MX).
 *
 *   float x = assay_bf16_to_f32(0x3f80);                 // 1.0f
 *   uint8_t q = assay_f32_to_fp8_e4m3(500.0f);           // 0x7e (+448: saturated)
 *   assay_f32_to_bf16_row(src, dst, n);                  // AVX2 when the CPU has it, same bits as the scalar code
 *
 * Decoding is exact for every code (each of these formats embeds in f32). Encoding rounds to nearest, ties to
 * even, on the exact f32 value (never through an intermediate format), with these choices per format. Where
 * a choice differs from ml_dtypes' astype() (the reference the tests compare against), it says so.
 *
 *  format   layout            finite max   finite overflow      ±inf in            NaN in
 *  bf16     S E8 M7, bias 127  3.39e38      -> ±inf (IEEE)       ±inf               S|0x7fc0 (quiet, payload dropped)
 *  f16      S E5 M10, bias 15  65504        -> ±inf (IEEE)       ±inf               S|0x7e00|payload>>13 (quieted)
 *  e4m3     S E4 M3, bias 7    448          -> ±448 (saturate)   ±448 (saturate)    S|0x7f (the only NaN codes)
 *  e5m2     S E5 M2, bias 15   57344        -> ±57344 (saturate) ±inf               S|0x7e
 *  e2m1     S E2 M1, bias 1    6            -> ±6 (saturate)     ±6                 ±0 (no NaN code; sign kept)
 *  e8m0     E8, bias 127       2^127        -> 2^127 (0xfe)      +inf -> 0xfe       0xff (the NaN code)
 *
 * - bf16 / f16 are storage types: they keep IEEE semantics (overflow to inf), exactly like ml_dtypes / numpy
 *   and PyTorch's .to(torch.bfloat16), so bf16 checkpoints round-trip bit for bit.
 * - e4m3 / e5m2 / e2m1 are quantization targets: a value past the largest finite one saturates to it, the
 *   "satfinite" behaviour of NVIDIA's conversion instructions and of every FP8 quantizer that clamps before
 *   casting (torchao, vLLM). ml_dtypes differs: e4m3 values >= 464 (and ±inf) become NaN, e5m2 values >= 61440
 *   become ±inf. Below those thresholds rounding is identical (e.g. 460 -> 448 in both). e5m2 keeps ±inf since
 *   it can represent it. e2m1 has no NaN: ml_dtypes turns NaN into a zero of the opposite sign; we keep the sign.
 * - e8m0 (unsigned power of two 2^(e-127), 0xff = NaN) has no mantissa bit to make even: it rounds to the
 *   nearest power of two with ties going up (1.5 -> 2, 3 -> 4), as ml_dtypes does. Differences from ml_dtypes:
 *   values >= 1.5*2^127 and +inf saturate to 0xfe (ml_dtypes: NaN); ±0 gives 0x00 = 2^-127, the smallest scale
 *   (ml_dtypes: NaN); f32 subnormals in (2^-127, 1.5*2^-127) round down to 0x00 (ml_dtypes rounds every
 *   subnormal above 2^-127 up to 0x01). Negative non-zero values give NaN, as in ml_dtypes.
 * - Decoding: every finite or infinite code gives exactly the f32 it denotes. NaN codes of e4m3, e5m2 and e8m0
 *   decode to the canonical quiet NaN 0x7fc00000 with the code's sign (as ml_dtypes). bf16 NaNs keep their
 *   payload (a bit shift); f16 NaNs keep theirs with the quiet bit set (what the F16C instruction does, so the
 *   scalar and AVX2 paths agree bit for bit).
 * - E2M1 codes live in the low 4 bits of a uint8_t (bit 3 = sign); packing two per byte is the caller's layout.
 *
 * None of these functions depend on the floating-point environment (rounding mode, FTZ/DAZ): the scalar code
 * works on the integer bits, and the AVX2 code uses explicit rounding immediates.
 */
#ifndef ASSAY_DTYPE_H
#define ASSAY_DTYPE_H

#include <stdint.h>
#include <string.h>

/* Largest finite magnitudes. */
#define ASSAY_FP8_E4M3_MAX 448.0f
#define ASSAY_FP8_E5M2_MAX 57344.0f
#define ASSAY_FP4_E2M1_MAX 6.0f

static inline uint32_t assay_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static inline float assay_f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- scalar conversions (the reference) ---- */
static inline float assay_bf16_to_f32(uint16_t h) { return assay_f32_from_bits((uint32_t)h << 16); }
uint16_t assay_f32_to_bf16(float x);
float assay_f16_to_f32(uint16_t h);
uint16_t assay_f32_to_f16(float x);
float assay_fp8_e4m3_to_f32(uint8_t q);
uint8_t assay_f32_to_fp8_e4m3(float x);
float assay_fp8_e5m2_to_f32(uint8_t q);
uint8_t assay_f32_to_fp8_e5m2(float x);
float assay_fp4_e2m1_to_f32(uint8_t q); /* low 4 bits used */
uint8_t assay_f32_to_fp4_e2m1(float x); /* returns 0..15 */
float assay_e8m0_to_f32(uint8_t e);
uint8_t assay_f32_to_e8m0(float x);

/* ---- rows of n elements (same results as the scalar functions, bit for bit) ----
 * bf16 / f16 rows use AVX2 + F16C when the CPU has them (checked once at run time). */
void assay_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);
void assay_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void assay_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);
void assay_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void assay_f32_to_fp8_e4m3_row(const float *src, uint8_t *dst, int64_t n);
void assay_fp8_e4m3_to_f32_row(const uint8_t *src, float *dst, int64_t n);
void assay_f32_to_fp8_e5m2_row(const float *src, uint8_t *dst, int64_t n);
void assay_fp8_e5m2_to_f32_row(const uint8_t *src, float *dst, int64_t n);

/* 1 when the row converters above take the AVX2/F16C path on this CPU. */
int assay_dtype_simd_active(void);

#endif
