/* dequant.h — reference dequantization: any weight type's row of elements -> float32.
 *
 *   assay_dequant_row_fn f = assay_dequant_row_get(ASSAY_TYPE_Q4_K);   // NULL: type has no dequantizer
 *   f(row_bytes_ptr, out_f32, 4096);                                    // n: a multiple of the block size
 *   assay_status st = assay_dequantize(t->type, t->data, out, n);       // checked form for callers with user data
 *
 * This is the spec the SIMD matmul kernels are tested against: plain C, one function per type, taking the
 * stored blocks exactly as GGUF lays them out. Covered: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, and assay's packed group int4 Q4G32/Q4G64/Q4G128.
 */
#ifndef ASSAY_DEQUANT_H
#define ASSAY_DEQUANT_H

#include <stdint.h>

#include "assay/status.h"
#include "assay/weight_type.h"

typedef void (*assay_dequant_row_fn)(const void *src, float *dst, int64_t n);

/* NULL when the type has no dequantizer here. */
assay_dequant_row_fn assay_dequant_row_get(assay_type type);
/* ASSAY_ERR_UNSUPPORTED for types without a dequantizer, ASSAY_ERR_ARG when n is not a whole number of blocks. */
assay_status assay_dequantize(assay_type type, const void *src, float *dst, int64_t n);

#endif
