/* dtype.c — scalar reference conversions between f32 and bf16 / f16 / FP8 / FP4 / E8M0 (see dtype.h for the
 * rounding, saturation and NaN rules), and the run-time dispatch of the row converters to dtype_avx2.c.
 *
 * Everything works on the integer bits of the f32 so that the result does not depend on the FP environment. */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include "assay/dtype.h"

#include "core/dtype_impl.h"

/* Rounds a finite, non-negative f32 (bits `a`, sign cleared) to nearest-even in a format with `mbits` mantissa
 * bits and exponent bias `bias` (subnormals included, min normal exponent 1 - bias). Returns the magnitude code
 * (biased exponent << mbits | mantissa); codes past the format's largest finite one are the caller's to
 * saturate. The exponent range above the format's is not checked here: the result simply grows. */
static uint32_t round_magnitude(uint32_t a, int mbits, int bias) {
    const int e32 = (int)(a >> 23);
    const int emin = 1 - bias;
    if (e32 != 0 && e32 - 127 >= emin) {
        /* Normal in the target: drop 23 - mbits mantissa bits with RNE; a carry out of the mantissa bumps the
         * exponent, which is exactly the right next code. */
        const int shift = 23 - mbits;
        uint32_t r = a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1);
        return (r >> shift) - ((uint32_t)(127 - bias) << mbits);
    }
    /* Subnormal in the target: count units of 2^(emin - mbits). The value is m * 2^E. */
    uint32_t m;
    int E;
    if (e32 == 0) {
        m = a & 0x7fffff;
        E = -149;
    } else {
        m = (a & 0x7fffff) | 0x800000;
        E = e32 - 150;
    }
    const int s = (emin - mbits) - E; /* > 0 here */
    if (s >= 25) return 0;            /* m < 2^24 <= half a unit: rounds to zero */
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1))) q++; /* q == 2^mbits is the smallest normal: still right */
    return q;
}

uint16_t assay_f32_to_bf16(float x) {
    uint32_t u = assay_f32_bits(x), sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7fc0);
    if (a == 0x7f800000) return (uint16_t)(sign | 0x7f80);
    uint32_t c = round_magnitude(a, 7, 127);
    if (c > 0x7f80) c = 0x7f80; /* cannot happen for finite f32 (the carry lands exactly on inf), kept for clarity */
    return (uint16_t)(sign | c);
}

uint16_t assay_f32_to_f16(float x) {
    uint32_t u = assay_f32_bits(x), sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* quiet NaN, top payload */
    if (a == 0x7f800000) return (uint16_t)(sign | 0x7c00);
    if (a >= 0x47800000) return (uint16_t)(sign | 0x7c00); /* >= 65536: overflow (also keeps the code small) */
    uint32_t c = round_magnitude(a, 10, 15);
    if (c > 0x7c00) c = 0x7c00; /* IEEE: overflow to inf */
    return (uint16_t)(sign | c);
}

float assay_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return assay_f32_from_bits(sign | 0x7f800000 | (m ? 0x400000 | (m << 13) : 0));
    if (e == 0) { /* subnormal or zero: m * 2^-24, exact in f32 */
        float v = (float)m * 0x1p-24f;
        return assay_f32_from_bits(sign | assay_f32_bits(v));
    }
    return assay_f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

uint8_t assay_f32_to_fp8_e4m3(float x) {
    uint32_t u = assay_f32_bits(x), sign = (u >> 24) & 0x80, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint8_t)(sign | 0x7f);
    if (a >= 0x43e00000) return (uint8_t)(sign | 0x7e); /* >= 448 (and inf): saturate */
    uint32_t c = round_magnitude(a, 3, 7);
    if (c > 0x7e) c = 0x7e; /* unreachable below 448, kept as the saturation rule */
    return (uint8_t)(sign | c);
}

float assay_fp8_e4m3_to_f32(uint8_t q) {
    uint32_t sign = (uint32_t)(q & 0x80) << 24, e = (q >> 3) & 0xf, m = q & 7;
    if ((q & 0x7f) == 0x7f) return assay_f32_from_bits(sign | 0x7fc00000);
    if (e == 0) return assay_f32_from_bits(sign | assay_f32_bits((float)m * 0x1p-9f));
    return assay_f32_from_bits(sign | ((e + 120) << 23) | (m << 20));
}

uint8_t assay_f32_to_fp8_e5m2(float x) {
    uint32_t u = assay_f32_bits(x), sign = (u >> 24) & 0x80, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint8_t)(sign | 0x7e);
    if (a == 0x7f800000) return (uint8_t)(sign | 0x7c);
    if (a >= 0x47600000) return (uint8_t)(sign | 0x7b); /* >= 57344: saturate finite values */
    uint32_t c = round_magnitude(a, 2, 15);
    if (c > 0x7b) c = 0x7b;
    return (uint8_t)(sign | c);
}

float assay_fp8_e5m2_to_f32(uint8_t q) {
    /* e5m2 is the top byte of an f16; its three NaN codes decode to the one canonical quiet NaN (sign kept). */
    if ((q & 0x7f) > 0x7c) return assay_f32_from_bits(((uint32_t)(q & 0x80) << 24) | 0x7fc00000);
    return assay_f16_to_f32((uint16_t)(q << 8));
}

uint8_t assay_f32_to_fp4_e2m1(float x) {
    uint32_t u = assay_f32_bits(x), sign = (u >> 28) & 0x8, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint8_t)sign;         /* no NaN code: signed zero */
    if (a >= 0x40c00000) return (uint8_t)(sign | 0x7); /* >= 6 (and inf): saturate */
    uint32_t c = round_magnitude(a, 1, 1);
    if (c > 0x7) c = 0x7;
    return (uint8_t)(sign | c);
}

float assay_fp4_e2m1_to_f32(uint8_t q) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[q & 7];
    return (q & 8) ? -v : v;
}

uint8_t assay_f32_to_e8m0(float x) {
    uint32_t u = assay_f32_bits(x), a = u & 0x7fffffff;
    if (a > 0x7f800000) return 0xff;       /* NaN */
    if (a == 0) return 0x00;               /* ±0: the smallest scale */
    if (u >> 31) return 0xff;              /* negative: not representable */
    if (a == 0x7f800000) return 0xfe;      /* +inf: saturate */
    uint32_t e = a >> 23, m = a & 0x7fffff;
    if (e == 0) return m >= 0x600000 ? 0x01 : 0x00; /* subnormal: 2^-127 or 2^-126, ties (1.5*2^-127) up */
    e += m >= 0x400000;                    /* mantissa >= 1.5: nearest power of two is the next one */
    return (uint8_t)(e > 0xfe ? 0xfe : e);
}

float assay_e8m0_to_f32(uint8_t e) {
    if (e == 0xff) return assay_f32_from_bits(0x7fc00000);
    if (e == 0) return assay_f32_from_bits(0x00400000); /* 2^-127 is an f32 subnormal */
    return assay_f32_from_bits((uint32_t)e << 23);
}

/* ---- rows ---- */
void assay_f32_to_bf16_row_scalar(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_f32_to_bf16(src[i]);
}
void assay_bf16_to_f32_row_scalar(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_bf16_to_f32(src[i]);
}
void assay_f32_to_f16_row_scalar(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_f32_to_f16(src[i]);
}
void assay_f16_to_f32_row_scalar(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_f16_to_f32(src[i]);
}

int assay_dtype_cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    static int cached = -1; /* benign race: every thread computes the same value */
    if (cached < 0) {
        __builtin_cpu_init();
        /* clang before 15 does not know "f16c" in __builtin_cpu_supports: read CPUID leaf 1 ECX bit 29 */
        unsigned a = 0, b = 0, c = 0, d = 0;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    }
    return cached;
#else
    return 0;
#endif
}

int assay_dtype_simd_active(void) { return assay_dtype_cpu_has_avx2(); }

void assay_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n) {
    if (assay_dtype_cpu_has_avx2()) assay_f32_to_bf16_row_avx2(src, dst, n);
    else assay_f32_to_bf16_row_scalar(src, dst, n);
}
void assay_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    if (assay_dtype_cpu_has_avx2()) assay_bf16_to_f32_row_avx2(src, dst, n);
    else assay_bf16_to_f32_row_scalar(src, dst, n);
}
void assay_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) {
    if (assay_dtype_cpu_has_avx2()) assay_f32_to_f16_row_avx2(src, dst, n);
    else assay_f32_to_f16_row_scalar(src, dst, n);
}
void assay_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    if (assay_dtype_cpu_has_avx2()) assay_f16_to_f32_row_avx2(src, dst, n);
    else assay_f16_to_f32_row_scalar(src, dst, n);
}

void assay_f32_to_fp8_e4m3_row(const float *src, uint8_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_f32_to_fp8_e4m3(src[i]);
}
void assay_fp8_e4m3_to_f32_row(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_fp8_e4m3_to_f32(src[i]);
}
void assay_f32_to_fp8_e5m2_row(const float *src, uint8_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_f32_to_fp8_e5m2(src[i]);
}
void assay_fp8_e5m2_to_f32_row(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = assay_fp8_e5m2_to_f32(src[i]);
}
