/* fp4.c — MXFP4 (OCP MX and ggml's block layout) and NVFP4 encode/decode; the rules are in quant_fp4.h. */
#include "assay/quant_fp4.h"

#include <math.h>
#include <string.h>

#include "assay/dtype.h"
#include "assay/status.h"

/* floor(log2(a)) for a finite a > 0, exactly, from the bits (subnormals included). */
static int floor_log2(float a) {
    uint32_t u = assay_f32_bits(a);
    int e = (int)(u >> 23);
    if (e) return e - 127;
    uint32_t m = u & 0x7fffff; /* subnormal: value m * 2^-149 */
    int b = 31 - __builtin_clz(m);
    return b - 149;
}

uint8_t assay_mxfp4_scale(float amax, assay_mx_scale_mode mode) {
    if (!isfinite(amax)) return 0xff;
    if (amax == 0.0f) return 0;
    int e = floor_log2(fabsf(amax)) - 2; /* emax of E2M1 is 2 */
    if (mode == ASSAY_MX_SCALE_RCEIL && ldexpf(6.0f, e) < fabsf(amax)) e++; /* exact: 6 * 2^e is representable */
    /* significand >= 1.75 <=> the top two mantissa bits are set (for a normal amax; like compressed-tensors' bit
     * trick, the test reads the raw bits, so a subnormal amax follows the same bit pattern rule) */
    if (mode == ASSAY_MX_SCALE_CT && (assay_f32_bits(fabsf(amax)) & 0x600000u) == 0x600000u) e++;
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    return (uint8_t)(e + 127);
}

static float absmax(const float *x, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= m)) m = a; /* NaN propagates, so the block gets the NaN scale */
    }
    return m;
}

/* The E2M1 codes of one MX block, one per byte. */
static uint8_t mx_block(const float *x, assay_mx_scale_mode mode, uint8_t *c) {
    uint8_t e = assay_mxfp4_scale(absmax(x, ASSAY_MXFP4_BLOCK), mode);
    int ex = e == 0xff ? 0 : (int)e - 127;
    for (int i = 0; i < ASSAY_MXFP4_BLOCK; i++) c[i] = assay_f32_to_fp4_e2m1(ldexpf(x[i], -ex)); /* exact scaling */
    return e;
}

void assay_mxfp4_quantize(const float *x, int64_t n, assay_mx_scale_mode mode, uint8_t *scales, uint8_t *codes) {
    ASSAY_ASSERT(n % ASSAY_MXFP4_BLOCK == 0);
    uint8_t c[ASSAY_MXFP4_BLOCK];
    for (int64_t b = 0; b < n / ASSAY_MXFP4_BLOCK; b++) {
        scales[b] = mx_block(x + b * ASSAY_MXFP4_BLOCK, mode, c);
        for (int i = 0; i < ASSAY_MXFP4_BLOCK / 2; i++)
            codes[b * 16 + i] = (uint8_t)(c[2 * i] | (c[2 * i + 1] << 4));
    }
}

void assay_mxfp4_dequantize(const uint8_t *scales, const uint8_t *codes, int64_t n, float *y) {
    ASSAY_ASSERT(n % ASSAY_MXFP4_BLOCK == 0);
    for (int64_t i = 0; i < n; i++) {
        uint8_t q = codes[i / 2] >> (4 * (i & 1)) & 0xf;
        y[i] = assay_fp4_e2m1_to_f32(q) * assay_e8m0_to_f32(scales[i / ASSAY_MXFP4_BLOCK]);
    }
}

void assay_mxfp4_quantize_ggml(const float *x, int64_t n, assay_mx_scale_mode mode, assay_block_mxfp4 *blocks) {
    ASSAY_ASSERT(n % ASSAY_MXFP4_BLOCK == 0);
    uint8_t c[ASSAY_MXFP4_BLOCK];
    for (int64_t b = 0; b < n / ASSAY_MXFP4_BLOCK; b++) {
        blocks[b].e = mx_block(x + b * ASSAY_MXFP4_BLOCK, mode, c);
        for (int j = 0; j < 16; j++) blocks[b].qs[j] = (uint8_t)(c[j] | (c[j + 16] << 4));
    }
}

void assay_mxfp4_dequantize_ggml(const assay_block_mxfp4 *blocks, int64_t n, float *y) {
    ASSAY_ASSERT(n % ASSAY_MXFP4_BLOCK == 0);
    for (int64_t b = 0; b < n / ASSAY_MXFP4_BLOCK; b++) {
        float d = assay_e8m0_to_f32(blocks[b].e);
        for (int j = 0; j < 16; j++) {
            y[b * 32 + j] = assay_fp4_e2m1_to_f32(blocks[b].qs[j] & 0xf) * d;
            y[b * 32 + j + 16] = assay_fp4_e2m1_to_f32(blocks[b].qs[j] >> 4) * d;
        }
    }
}

float assay_nvfp4_global_scale(float amax_tensor) {
    float g = amax_tensor / (6.0f * 448.0f);
    return g > 0.0f && isfinite(g) ? g : 1.0f;
}

void assay_nvfp4_quantize(const float *x, int64_t n, float g, uint8_t *block_scales, uint8_t *codes) {
    ASSAY_ASSERT(n % ASSAY_NVFP4_BLOCK == 0);
    for (int64_t b = 0; b < n / ASSAY_NVFP4_BLOCK; b++) {
        const float *xb = x + b * ASSAY_NVFP4_BLOCK;
        uint8_t sb = assay_f32_to_fp8_e4m3(absmax(xb, ASSAY_NVFP4_BLOCK) / (6.0f * g));
        block_scales[b] = sb;
        float s = assay_fp8_e4m3_to_f32(sb) * g;
        uint8_t c[ASSAY_NVFP4_BLOCK];
        for (int i = 0; i < ASSAY_NVFP4_BLOCK; i++) c[i] = s != 0.0f ? assay_f32_to_fp4_e2m1(xb[i] / s) : 0;
        for (int i = 0; i < ASSAY_NVFP4_BLOCK / 2; i++) codes[b * 8 + i] = (uint8_t)(c[2 * i] | (c[2 * i + 1] << 4));
    }
}

void assay_nvfp4_dequantize(const uint8_t *block_scales, const uint8_t *codes, int64_t n, float g, float *y) {
    ASSAY_ASSERT(n % ASSAY_NVFP4_BLOCK == 0);
    for (int64_t i = 0; i < n; i++) {
        uint8_t q = codes[i / 2] >> (4 * (i & 1)) & 0xf;
        y[i] = assay_fp4_e2m1_to_f32(q) * (assay_fp8_e4m3_to_f32(block_scales[i / ASSAY_NVFP4_BLOCK]) * g);
    }
}

float assay_nvfp4_ct_global_scale(float amax_tensor) {
    float a = fabsf(amax_tensor);
    if (!(a > 0.0f) || !isfinite(a)) return 1.0f;
    float gs = (448.0f * 6.0f) / a;
    return isfinite(gs) ? gs : 1.0f; /* an amax below ~1e-35 would overflow the f32 inverse */
}

void assay_nvfp4_quantize_ct(const float *x, int64_t n, float gs, uint8_t *block_scales, uint8_t *codes) {
    ASSAY_ASSERT(n % ASSAY_NVFP4_BLOCK == 0);
    const uint8_t eps_code = assay_f32_to_fp8_e4m3(0.125f);
    for (int64_t b = 0; b < n / ASSAY_NVFP4_BLOCK; b++) {
        const float *xb = x + b * ASSAY_NVFP4_BLOCK;
        uint8_t sb = assay_f32_to_fp8_e4m3(gs * (absmax(xb, ASSAY_NVFP4_BLOCK) / 6.0f));
        if (assay_fp8_e4m3_to_f32(sb) == 0.0f) sb = eps_code;
        block_scales[b] = sb;
        float s = assay_fp8_e4m3_to_f32(sb) / gs;
        uint8_t c[ASSAY_NVFP4_BLOCK];
        for (int i = 0; i < ASSAY_NVFP4_BLOCK; i++) c[i] = assay_f32_to_fp4_e2m1(xb[i] / s);
        for (int i = 0; i < ASSAY_NVFP4_BLOCK / 2; i++) codes[b * 8 + i] = (uint8_t)(c[2 * i] | (c[2 * i + 1] << 4));
    }
}

void assay_nvfp4_dequantize_ct(const uint8_t *block_scales, const uint8_t *codes, int64_t n, float gs, float *y) {
    ASSAY_ASSERT(n % ASSAY_NVFP4_BLOCK == 0);
    for (int64_t i = 0; i < n; i++) {
        uint8_t q = codes[i / 2] >> (4 * (i & 1)) & 0xf;
        y[i] = assay_fp4_e2m1_to_f32(q) * (assay_fp8_e4m3_to_f32(block_scales[i / ASSAY_NVFP4_BLOCK]) / gs);
    }
}
