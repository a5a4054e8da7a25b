/* kv_type.h — the one table of KV-cache element types, used by every backend and the engine.
 *
 *   const assay_kv_type_info *ki = assay_kv_type_get(ASSAY_KV_FP8_E4M3);  // "fp8_e4m3", 1 byte, scaled, max 448
 *   assay_kv_dtype t; assay_kv_dtype_from_name("fp8", &t);               // vLLM's alias for fp8_e4m3
 *
 * F16 is the default (llama.cpp's default too). The scaled (8-bit) types carry one float scale per (token, KV head)
 * slot: by default a dynamic one (the slot's own absmax maps to `max`), or a static per-layer scale (a checkpoint's
 * k_scale/v_scale, or --calculate-kv-scales) that every token of the layer is written with, saturating past it,
 * which is what vLLM's fp8 KV cache does. How the codes are laid out in memory is the backend's business. */
#ifndef ASSAY_KV_TYPE_H
#define ASSAY_KV_TYPE_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"

typedef enum assay_kv_dtype {
    ASSAY_KV_F16 = 0,
    ASSAY_KV_BF16,
    ASSAY_KV_F32,
    ASSAY_KV_FP8_E4M3,
    ASSAY_KV_FP8_E5M2,
    ASSAY_KV_INT8,
    ASSAY_KV_DTYPE_COUNT,
} assay_kv_dtype;

typedef struct assay_kv_type_info {
    const char *name; /* as --kv-cache-dtype spells it */
    size_t bytes;     /* per element */
    int scaled;       /* carries a scale per slot (or a static one per layer) */
    float max;        /* scaled types: the largest code magnitude (448, 57344, 127) */
} assay_kv_type_info;

const assay_kv_type_info *assay_kv_type_get(assay_kv_dtype t); /* asserts a valid type */
const char *assay_kv_dtype_name(assay_kv_dtype t);              /* "unknown" for an invalid value */
size_t assay_kv_dtype_size(assay_kv_dtype t);
int assay_kv_dtype_scaled(assay_kv_dtype t);
float assay_kv_dtype_qmax(assay_kv_dtype t); /* scaled types only */
/* Bytes one token's keys and values take in one layer: 2 x n_head_kv x head_dim elements, plus, when
 * `slot_scales` and the type is scaled, one f32 scale per (token, KV head) for K and for V: the layout of assay's
 * engine. vLLM's fp8 cache keeps one scale per layer instead (slot_scales = 0). The engine's KV pool and
 * `assay plan` both size tokens with this. */
size_t assay_kv_token_bytes(assay_kv_dtype t, int64_t n_head_kv, int64_t head_dim, int slot_scales);
/* "f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2", "int8", and "fp8" (= fp8_e4m3, vLLM's name); case-insensitive. */
assay_status assay_kv_dtype_from_name(const char *name, assay_kv_dtype *out);

#endif
