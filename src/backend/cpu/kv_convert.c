/* kv_convert.c — see kv_convert.h. fp8 decoding is a 256-entry table built from dtype.h's exact conversions;
 * encoding uses dtype.h's rows on values pre-scaled so |x| <= the format's max. */
#include "backend/cpu/kv_convert.h"

#include <math.h>
#include <pthread.h>

#include "assay/dtype.h"

static float fp8_e4m3_table[256], fp8_e5m2_table[256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (int i = 0; i < 256; i++) {
        fp8_e4m3_table[i] = assay_fp8_e4m3_to_f32((uint8_t)i);
        fp8_e5m2_table[i] = assay_fp8_e5m2_to_f32((uint8_t)i);
    }
}

void assay_kv_convert_init(void) { pthread_once(&fp8_once, build_tables); }

/* x * inv_scale -> fp8 in chunks through a stack buffer (values are pre-scaled into the finite range). */
static void fp8_encode_row(assay_kv_dtype t, const float *x, uint8_t *dst, int64_t n, float inv_scale) {
    float buf[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        int64_t m = n - i0 < 256 ? n - i0 : 256;
        for (int64_t i = 0; i < m; i++) buf[i] = x[i0 + i] * inv_scale;
        if (t == ASSAY_KV_FP8_E4M3) assay_f32_to_fp8_e4m3_row(buf, dst + i0, m);
        else assay_f32_to_fp8_e5m2_row(buf, dst + i0, m);
    }
}

void assay_kv_encode(const assay_cpu_kernels *k, assay_kv_dtype t, const float *x, void *dst, int64_t n, float inv_scale) {
    switch (t) {
    case ASSAY_KV_F32: memcpy(dst, x, (size_t)n * 4); break;
    case ASSAY_KV_F16: k->f32_to_f16(x, dst, n); break;
    case ASSAY_KV_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = assay_float_to_bf16(x[i]);
        break;
    case ASSAY_KV_FP8_E4M3:
    case ASSAY_KV_FP8_E5M2: fp8_encode_row(t, x, dst, n, inv_scale); break;
    case ASSAY_KV_INT8:
        for (int64_t i = 0; i < n; i++) {
            long v = lrintf(x[i] * inv_scale);
            ((int8_t *)dst)[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        break;
    default: ASSAY_ASSERT(0);
    }
}

void assay_kv_decode(const assay_cpu_kernels *k, assay_kv_dtype t, const void *src, float *dst, int64_t n, float scale) {
    switch (t) {
    case ASSAY_KV_F32: memcpy(dst, src, (size_t)n * 4); break;
    case ASSAY_KV_F16: k->f16_to_f32(src, dst, n); break;
    case ASSAY_KV_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = assay_bf16_to_float(((const uint16_t *)src)[i]);
        break;
    case ASSAY_KV_FP8_E4M3:
        for (int64_t i = 0; i < n; i++) dst[i] = fp8_e4m3_table[((const uint8_t *)src)[i]] * scale;
        break;
    case ASSAY_KV_FP8_E5M2:
        for (int64_t i = 0; i < n; i++) dst[i] = fp8_e5m2_table[((const uint8_t *)src)[i]] * scale;
        break;
    case ASSAY_KV_INT8:
        for (int64_t i = 0; i < n; i++) dst[i] = ((const int8_t *)src)[i] * scale;
        break;
    default: ASSAY_ASSERT(0);
    }
}
