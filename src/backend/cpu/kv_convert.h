/* kv_convert.h — KV cache element conversions (float <-> f16/bf16/fp8/int8) for the CPU backend.
 * fp8 follows the OCP formats: E4M3 "fn" (max 448, no inf) and E5M2 (max 57344). */
#ifndef ASSAY_KV_CONVERT_H
#define ASSAY_KV_CONVERT_H

#include <stdint.h>

#include "assay/backend.h"
#include "backend/cpu/cpu_kernels.h"

void assay_kv_convert_init(void); /* builds the fp8 tables once; thread-safe */
/* n values: x (float) -> dst of dtype, using 1/scale for the 8-bit types; returns nothing. */
void assay_kv_encode(const assay_cpu_kernels *k, assay_kv_dtype t, const float *x, void *dst, int64_t n, float inv_scale);
/* dst[i] = decode(src[i]) * scale */
void assay_kv_decode(const assay_cpu_kernels *k, assay_kv_dtype t, const void *src, float *dst, int64_t n, float scale);

#endif
