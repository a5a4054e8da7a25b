/* act_quant.c — see act_quant.h. */
#include "assay/act_quant.h"

#include <stdio.h>
#include <string.h>

#include "assay/dtype.h"
#include "assay/int_quant.h"
#include "assay/quant_fp8.h"

int64_t assay_act_quant_scales_per_row(const assay_act_quant *a, int64_t k) {
    switch (a->kind) {
    case ASSAY_ACT_QUANT_NONE: return 0;
    case ASSAY_ACT_QUANT_FP8_GROUP: return (k + a->group - 1) / a->group;
    default: return 1;
    }
}

void assay_act_quant_apply(const assay_act_quant *a, const float *x, int64_t n, int64_t k, float *out, uint8_t *codes,
                           float *scales) {
    float lut[256]; /* FP8 decode table: codes are decoded n*k times per call, the table costs 256 */
    if (a->kind != ASSAY_ACT_QUANT_INT8_TOKEN && a->kind != ASSAY_ACT_QUANT_NONE)
        for (int c = 0; c < 256; c++) lut[c] = assay_fp8_decode((assay_fp8_format)a->fmt, (uint8_t)c);
    switch (a->kind) {
    case ASSAY_ACT_QUANT_NONE: memcpy(out, x, (size_t)(n * k) * sizeof(float)); return;
    case ASSAY_ACT_QUANT_FP8_TOKEN:
        assay_fp8_quantize_act_token((assay_fp8_format)a->fmt, x, n, k, codes, scales);
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < k; i++) out[t * k + i] = lut[codes[t * k + i]] * scales[t];
        return;
    case ASSAY_ACT_QUANT_FP8_GROUP: {
        int64_t ng = (k + a->group - 1) / a->group;
        assay_fp8_quantize_act_group((assay_fp8_format)a->fmt, x, n, k, a->group, codes, scales);
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < k; i++) out[t * k + i] = lut[codes[t * k + i]] * scales[t * ng + i / a->group];
        return;
    }
    case ASSAY_ACT_QUANT_FP8_STATIC:
        assay_fp8_quantize_act_static((assay_fp8_format)a->fmt, x, n, k, a->scale, codes);
        for (int64_t i = 0; i < n * k; i++) out[i] = lut[codes[i]] * a->scale;
        return;
    case ASSAY_ACT_QUANT_INT8_TOKEN:
        for (int64_t t = 0; t < n; t++) {
            int8_t *q = (int8_t *)codes + t * k;
            assay_int8_quantize_token(x + t * k, k, q, &scales[t]);
            for (int64_t i = 0; i < k; i++) out[t * k + i] = (float)q[i] * scales[t];
        }
        return;
    }
    ASSAY_ASSERT(!"unknown activation quantization");
}

const char *assay_act_quant_describe(const assay_act_quant *a, char *buf, size_t cap) {
    const char *f = a->fmt == ASSAY_FP8_E5M2 ? "fp8 e5m2" : "fp8 e4m3";
    switch (a->kind) {
    case ASSAY_ACT_QUANT_NONE: snprintf(buf, cap, "not quantized"); break;
    case ASSAY_ACT_QUANT_FP8_TOKEN: snprintf(buf, cap, "%s dynamic per token", f); break;
    case ASSAY_ACT_QUANT_FP8_GROUP: snprintf(buf, cap, "%s dynamic per 1x%lld group", f, (long long)a->group); break;
    case ASSAY_ACT_QUANT_FP8_STATIC: snprintf(buf, cap, "%s static per tensor (input_scale)", f); break;
    case ASSAY_ACT_QUANT_INT8_TOKEN: snprintf(buf, cap, "int8 dynamic per token"); break;
    }
    return buf;
}

