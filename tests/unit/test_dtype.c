/* test_dtype.c — the AVX2/F16C row converters against the scalar reference, bit for bit: every bf16 and f16 code
 * decoded, and a sweep of f32 bit patterns (stride 65537 over all 2^32, plus every pattern whose low 16 bits sit
 * at a bf16 rounding boundary, plus every f16 rounding boundary) encoded. Row lengths that are not multiples of 8
 * exercise the tails. The scalar reference itself is checked against ml_dtypes in tests/py/test_dtype_exhaustive.py. */
#include <stdint.h>

#include "assay/dtype.h"
#include "check.h"
#include "core/dtype_impl.h"

static int same_bits_f32(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

int main(void) {
    if (!assay_dtype_cpu_has_avx2()) {
        printf("dtype: no AVX2/F16C on this CPU, only the scalar path exists; checking it is used\n");
        CHECK(assay_dtype_simd_active() == 0);
        return check_finish("dtype");
    }
    /* decode every code */
    enum { NC = 65536 };
    static uint16_t codes[NC];
    static float a[NC], b[NC];
    for (int i = 0; i < NC; i++) codes[i] = (uint16_t)i;
    assay_bf16_to_f32_row_scalar(codes, a, NC);
    assay_bf16_to_f32_row_avx2(codes, b, NC);
    CHECK(same_bits_f32(a, b, NC));
    assay_f16_to_f32_row_scalar(codes, a, NC);
    assay_f16_to_f32_row_avx2(codes, b, NC);
    CHECK(same_bits_f32(a, b, NC));

    /* encode a sweep of f32 patterns, in chunks of odd length so tails are covered too */
    enum { CH = 4093 };
    static uint32_t in[CH];
    static uint16_t ra[CH], rb[CH];
    int64_t mismatch_bf16 = 0, mismatch_f16 = 0, total = 0;
    uint64_t p = 0;
    int phase = 0;
    for (;;) {
        int64_t n = 0;
        while (n < CH) {
            uint32_t u;
            if (phase == 0) { /* stride over all patterns */
                if (p >= (1ull << 32)) { phase = 1; p = 0; continue; }
                u = (uint32_t)p;
                p += 65537;
            } else if (phase == 1) { /* bf16 boundaries: high half x {0x7fff, 0x8000, 0x8001} */
                if (p >= 3ull * 65536) { phase = 2; p = 0; continue; }
                static const uint32_t lo[3] = {0x7fff, 0x8000, 0x8001};
                u = ((uint32_t)(p / 3) << 16) | lo[p % 3];
                p++;
            } else if (phase == 2) { /* f16 boundaries: every f32 in the f16 range with low 13 bits at a tie +-1 */
                if (p >= 3ull * (1u << 19)) { phase = 3; break; }
                static const uint32_t lo[3] = {0x0fff, 0x1000, 0x1001};
                uint32_t hi = (uint32_t)(p / 3); /* 19 bits: sign + exponent 0x60..0x9f region + 10 mantissa */
                uint32_t e = 0x60 + ((hi >> 10) & 0x3f), s = hi >> 16;
                u = (s << 31) | (e << 23) | ((hi & 0x3ff) << 13) | lo[p % 3];
                p++;
            } else break;
            in[n++] = u;
        }
        if (n == 0) break;
        const float *f = (const float *)in;
        assay_f32_to_bf16_row_scalar(f, ra, n);
        assay_f32_to_bf16_row_avx2(f, rb, n);
        for (int64_t i = 0; i < n; i++) mismatch_bf16 += ra[i] != rb[i];
        assay_f32_to_f16_row_scalar(f, ra, n);
        assay_f32_to_f16_row_avx2(f, rb, n);
        for (int64_t i = 0; i < n; i++) mismatch_f16 += ra[i] != rb[i];
        total += n;
        if (phase == 3) break;
    }
    if (mismatch_bf16 || mismatch_f16)
        fprintf(stderr, "bf16 mismatches %lld, f16 mismatches %lld of %lld\n", (long long)mismatch_bf16,
                (long long)mismatch_f16, (long long)total);
    CHECK(mismatch_bf16 == 0);
    CHECK(mismatch_f16 == 0);
    CHECK(total > 1000000);

    /* The public row functions dispatch to the same results. */
    float x[13] = {1.0f, -2.5f, 65520.0f, 1e-8f, 3.0e38f, -0.0f, 0.1f, 448.0f, 1e30f, -1e-40f, 0.33333334f, 7.0f, 5.9604645e-08f};
    uint16_t y[13], z[13];
    assay_f32_to_f16_row(x, y, 13);
    for (int i = 0; i < 13; i++) z[i] = assay_f32_to_f16(x[i]);
    CHECK(memcmp(y, z, sizeof y) == 0);
    CHECK(z[0] == 0x3c00 && z[2] == 0x7c00 && z[12] == 0x0001); /* IEEE: 1.0, tie 65520 -> inf, 2^-24 */
    assay_f32_to_bf16_row(x, y, 13);
    for (int i = 0; i < 13; i++) z[i] = assay_f32_to_bf16(x[i]);
    CHECK(memcmp(y, z, sizeof y) == 0);
    CHECK(z[0] == 0x3f80 && z[1] == 0xc020);
    return check_finish("dtype");
}
