/* dtype_impl.h — the two implementations behind the dtype.h row converters, visible to the unit tests so they
 * can compare the AVX2 path with the scalar reference directly. Not a public header. */
#ifndef ASSAY_DTYPE_IMPL_H
#define ASSAY_DTYPE_IMPL_H

#include <stdint.h>

void assay_f32_to_bf16_row_scalar(const float *src, uint16_t *dst, int64_t n);
void assay_bf16_to_f32_row_scalar(const uint16_t *src, float *dst, int64_t n);
void assay_f32_to_f16_row_scalar(const float *src, uint16_t *dst, int64_t n);
void assay_f16_to_f32_row_scalar(const uint16_t *src, float *dst, int64_t n);

/* AVX2 + F16C (dtype_avx2.c). Call only when assay_dtype_cpu_has_avx2() is true. */
void assay_f32_to_bf16_row_avx2(const float *src, uint16_t *dst, int64_t n);
void assay_bf16_to_f32_row_avx2(const uint16_t *src, float *dst, int64_t n);
void assay_f32_to_f16_row_avx2(const float *src, uint16_t *dst, int64_t n);
void assay_f16_to_f32_row_avx2(const uint16_t *src, float *dst, int64_t n);

/* 1 when the CPU supports AVX2, FMA and F16C. */
int assay_dtype_cpu_has_avx2(void);

#endif
