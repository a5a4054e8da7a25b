/* kv_convert.c — see kv_convert.h. fp8 decoding is a 256-entry table; encoding rounds to the nearest
 * representable value (ties to the even code) by binary search over the sorted positive codes, saturating at the
 * format's largest finite value (values are pre-scaled so |x| <= max, so saturation only absorbs rounding). */
#include "backend/cpu/kv_convert.h"

#include <math.h>
#include <pthread.h>

static float fp8_e4m3_table[256], fp8_e5m2_table[256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;

static float fp8_decode_bits(uint8_t b, int exp_bits, int man_bits, int bias, int e4m3) {
    int sign = b >> 7, e = (b >> man_bits) & ((1 << exp_bits) - 1), m = b & ((1 << man_bits) - 1);
    float v;
    if (e4m3 && e == 15 && m == 7) v = NAN;
    else if (!e4m3 && e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexpf((float)m / (float)(1 << man_bits), 1 - bias);
    else v = ldexpf(1.0f + (float)m / (float)(1 << man_bits), e - bias);
    return sign ? -v : v;
}

static void build_tables(void) {
    for (int i = 0; i < 256; i++) {
        fp8_e4m3_table[i] = fp8_decode_bits((uint8_t)i, 4, 3, 7, 1);
        fp8_e5m2_table[i] = fp8_decode_bits((uint8_t)i, 5, 2, 15, 0);
    }
}

void assay_kv_convert_init(void) { pthread_once(&fp8_once, build_tables); }

float assay_kv_fp8_max(assay_kv_dtype t) { return t == ASSAY_KV_FP8_E4M3 ? 448.0f : 57344.0f; }

/* codes 0..max_code are the non-negative finite values in increasing order */
static uint8_t fp8_encode(const float *table, int max_code, float x) {
    float a = fabsf(x);
    uint8_t sign = (x < 0) ? 0x80 : 0;
    if (!(a == a)) return 0; /* nan -> 0: the cache must stay finite */
    if (a >= table[max_code]) return (uint8_t)(sign | max_code);
    int lo = 0, hi = max_code; /* table[lo] <= a < table[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (table[mid] <= a) lo = mid;
        else hi = mid;
    }
    float dl = a - table[lo], dh = table[hi] - a;
    int c = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    return (uint8_t)(sign | c);
}

void assay_kv_encode(const assay_cpu_kernels *k, assay_kv_dtype t, const float *x, void *dst, int64_t n, float inv_scale) {
    switch (t) {
    case ASSAY_KV_F32: memcpy(dst, x, (size_t)n * 4); break;
    case ASSAY_KV_F16: k->f32_to_f16(x, dst, n); break;
    case ASSAY_KV_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = assay_float_to_bf16(x[i]);
        break;
    case ASSAY_KV_FP8_E4M3:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = fp8_encode(fp8_e4m3_table, 0x7e, x[i] * inv_scale);
        break;
    case ASSAY_KV_FP8_E5M2:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = fp8_encode(fp8_e5m2_table, 0x7b, x[i] * inv_scale);
        break;
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
