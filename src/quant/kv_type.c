/* kv_type.c — see kv_type.h. */
#include "assay/kv_type.h"

#include <strings.h>

static const assay_kv_type_info kv_types[ASSAY_KV_DTYPE_COUNT] = {
    [ASSAY_KV_F16] = {"f16", 2, 0, 0},
    [ASSAY_KV_BF16] = {"bf16", 2, 0, 0},
    [ASSAY_KV_F32] = {"f32", 4, 0, 0},
    [ASSAY_KV_FP8_E4M3] = {"fp8_e4m3", 1, 1, 448.0f},
    [ASSAY_KV_FP8_E5M2] = {"fp8_e5m2", 1, 1, 57344.0f},
    [ASSAY_KV_INT8] = {"int8", 1, 1, 127.0f},
};

const assay_kv_type_info *assay_kv_type_get(assay_kv_dtype t) {
    ASSAY_ASSERT((int)t >= 0 && t < ASSAY_KV_DTYPE_COUNT);
    return &kv_types[t];
}

const char *assay_kv_dtype_name(assay_kv_dtype t) {
    return (int)t >= 0 && t < ASSAY_KV_DTYPE_COUNT ? kv_types[t].name : "unknown";
}

size_t assay_kv_dtype_size(assay_kv_dtype t) { return assay_kv_type_get(t)->bytes; }
int assay_kv_dtype_scaled(assay_kv_dtype t) { return assay_kv_type_get(t)->scaled; }

size_t assay_kv_token_bytes(assay_kv_dtype t, int64_t n_head_kv, int64_t head_dim, int slot_scales) {
    ASSAY_ASSERT(n_head_kv > 0 && head_dim > 0);
    const assay_kv_type_info *ki = assay_kv_type_get(t);
    size_t heads = (size_t)n_head_kv;
    size_t bytes = 2 * heads * (size_t)head_dim * ki->bytes;  /* K and V */
    if (slot_scales && ki->scaled) bytes += 2 * heads * sizeof(float);
    return bytes;
}

float assay_kv_dtype_qmax(assay_kv_dtype t) {
    ASSAY_ASSERT(assay_kv_dtype_scaled(t));
    return kv_types[t].max;
}

assay_status assay_kv_dtype_from_name(const char *name, assay_kv_dtype *out) {
    for (int i = 0; i < ASSAY_KV_DTYPE_COUNT; i++)
        if (strcasecmp(name, kv_types[i].name) == 0) {
            *out = (assay_kv_dtype)i;
            return ASSAY_OK;
        }
    if (strcasecmp(name, "fp8") == 0) {
        *out = ASSAY_KV_FP8_E4M3;
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_ARG, "unknown KV cache dtype '%s' (f16, bf16, f32, fp8 = fp8_e4m3, fp8_e5m2, int8)", name);
}
