/* quant_blocks.h — the byte layouts of ggml's block-quantized types, as structs the kernels index directly.
 *
 * The layouts are fixed by the GGUF file format (ggml's ggml-common.h describes the same bytes); the
 * static_asserts pin every struct to the block size the file format uses, so a padding surprise cannot
 * silently shift weights. Scales are IEEE half stored as uint16_t (assay_half_to_float below).
 */
#ifndef ASSAY_QUANT_BLOCKS_H
#define ASSAY_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "assay/dtype.h"

#define ASSAY_QK 32   /* elements per legacy block (Q4_0 ... Q8_1) */
#define ASSAY_QK_K 256 /* elements per k-quant super-block */

typedef struct { uint16_t d; uint8_t qs[16]; } assay_block_q4_0;              /* x = d * (q - 8) */
typedef struct { uint16_t d, m; uint8_t qs[16]; } assay_block_q4_1;           /* x = d * q + m */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } assay_block_q5_0; /* x = d * (q - 16), 5th bit in qh */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } assay_block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } assay_block_q8_0;               /* x = d * q */
typedef struct { uint16_t d, s; int8_t qs[32]; } assay_block_q8_1;            /* s = d * sum(q): activation side */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } assay_block_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } assay_block_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } assay_block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } assay_block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } assay_block_q6_K;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } assay_block_q8_K; /* activation side; bsums: sums of 16 */

/* Packed group int4 (ASSAY_TYPE_Q4G32/64/128): one block per quantization group of a GPTQ / AWQ weight row,
 * x = d * (q - z). d is the checkpoint's fp16 scale (kept bit for bit, so the block dequantizes to exactly what the
 * checkpoint's f32 dequantization gives); z the integer zero point (0..16: a GPTQ v1 file that stored zero-1 = -1
 * wraps to 15, read back as 16, as every v1 reader does). The nibbles run in 32-element sub-blocks in ggml's Q4
 * order: byte 16k+j holds element 32k+j in its low nibble and element 32k+16+j in its high nibble, so each
 * sub-block unpacks with one load, one mask and one shift, as Q4_0/Q4_1 do. */
typedef struct { uint16_t d; uint8_t z, pad; uint8_t qs[16]; } assay_block_q4g32;
typedef struct { uint16_t d; uint8_t z, pad; uint8_t qs[32]; } assay_block_q4g64;
typedef struct { uint16_t d; uint8_t z, pad; uint8_t qs[64]; } assay_block_q4g128;

static_assert(sizeof(assay_block_q4g32) == 20, "q4g32 block");
static_assert(sizeof(assay_block_q4g64) == 36, "q4g64 block");
static_assert(sizeof(assay_block_q4g128) == 68, "q4g128 block");
static_assert(sizeof(assay_block_q4_0) == 18, "q4_0 block");
static_assert(sizeof(assay_block_q4_1) == 20, "q4_1 block");
static_assert(sizeof(assay_block_q5_0) == 22, "q5_0 block");
static_assert(sizeof(assay_block_q5_1) == 24, "q5_1 block");
static_assert(sizeof(assay_block_q8_0) == 34, "q8_0 block");
static_assert(sizeof(assay_block_q8_1) == 36, "q8_1 block");
static_assert(sizeof(assay_block_q2_K) == 84, "q2_K block");
static_assert(sizeof(assay_block_q3_K) == 110, "q3_K block");
static_assert(sizeof(assay_block_q4_K) == 144, "q4_K block");
static_assert(sizeof(assay_block_q5_K) == 176, "q5_K block");
static_assert(sizeof(assay_block_q6_K) == 210, "q6_K block");
static_assert(sizeof(assay_block_q8_K) == 292, "q8_K block");

/* Scalar conversions for the kernels: thin names over the shared exact conversions in dtype.h. */
static inline float assay_half_to_float(uint16_t h) { return assay_f16_to_f32(h); }
static inline uint16_t assay_float_to_half(float f) { return assay_f32_to_f16(f); }
static inline float assay_bf16_to_float(uint16_t h) { return assay_bf16_to_f32(h); }
static inline uint16_t assay_float_to_bf16(float f) { return assay_f32_to_bf16(f); }

#endif
