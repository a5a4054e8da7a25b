/* weight_type.h — the one table of tensor element types: ggml's numbered types plus assay's own.
 *
 *   const assay_type_info *ti = assay_type_get(ASSAY_TYPE_Q4_K);   // ti->name "q4_K", 256 elements in 144 bytes
 *   size_t row = assay_type_row_bytes(ASSAY_TYPE_Q4_K, 4096);      // 2304
 *   assay_type t; assay_type_from_name("bf16", &t);
 *
 * Ids below ASSAY_TYPE_GGML_COUNT are ggml's own numbers (they appear in GGUF files); removed ggml types are
 * absent from the table (assay_type_get returns NULL). Ids from 100 up are assay types that GGUF has no number
 * for (safetensors dtypes such as F8_E4M3), never written into a GGUF file.
 * Element-wise conversion and quantized kernels are not here: they are registered by src/quant and the
 * backends in their own tables indexed by assay_type.
 */
#ifndef ASSAY_WEIGHT_TYPE_H
#define ASSAY_WEIGHT_TYPE_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"

typedef enum assay_type {
    ASSAY_TYPE_F32 = 0,
    ASSAY_TYPE_F16 = 1,
    ASSAY_TYPE_Q4_0 = 2,
    ASSAY_TYPE_Q4_1 = 3,
    ASSAY_TYPE_Q5_0 = 6,
    ASSAY_TYPE_Q5_1 = 7,
    ASSAY_TYPE_Q8_0 = 8,
    ASSAY_TYPE_Q8_1 = 9,
    ASSAY_TYPE_Q2_K = 10,
    ASSAY_TYPE_Q3_K = 11,
    ASSAY_TYPE_Q4_K = 12,
    ASSAY_TYPE_Q5_K = 13,
    ASSAY_TYPE_Q6_K = 14,
    ASSAY_TYPE_Q8_K = 15,
    ASSAY_TYPE_IQ2_XXS = 16,
    ASSAY_TYPE_IQ2_XS = 17,
    ASSAY_TYPE_IQ3_XXS = 18,
    ASSAY_TYPE_IQ1_S = 19,
    ASSAY_TYPE_IQ4_NL = 20,
    ASSAY_TYPE_IQ3_S = 21,
    ASSAY_TYPE_IQ2_S = 22,
    ASSAY_TYPE_IQ4_XS = 23,
    ASSAY_TYPE_I8 = 24,
    ASSAY_TYPE_I16 = 25,
    ASSAY_TYPE_I32 = 26,
    ASSAY_TYPE_I64 = 27,
    ASSAY_TYPE_F64 = 28,
    ASSAY_TYPE_IQ1_M = 29,
    ASSAY_TYPE_BF16 = 30,
    ASSAY_TYPE_TQ1_0 = 34,
    ASSAY_TYPE_TQ2_0 = 35,
    ASSAY_TYPE_MXFP4 = 39,
    ASSAY_TYPE_NVFP4 = 40,
    ASSAY_TYPE_Q1_0 = 41,
    ASSAY_TYPE_GGML_COUNT = 42, /* ggml ids are < this */

    ASSAY_TYPE_F8_E4M3 = 100, /* safetensors F8_E4M3 (OCP e4m3fn) */
    ASSAY_TYPE_F8_E5M2 = 101, /* safetensors F8_E5M2 */
    ASSAY_TYPE_U8 = 102,      /* safetensors U8 (packed int4, scales) */
    /* group-quantized asymmetric int4 of GPTQ / AWQ checkpoints, kept packed in memory (never in a file): one
     * block per group of 32 / 64 / 128 inputs, x = d * (q - z) with an fp16 scale d and an integer zero z */
    ASSAY_TYPE_Q4G32 = 103,
    ASSAY_TYPE_Q4G64 = 104,
    ASSAY_TYPE_Q4G128 = 105,
    ASSAY_TYPE_COUNT = 106,
} assay_type;

typedef struct assay_type_info {
    const char *name;     /* ggml's spelling ("q4_K", "bf16", "f32"); assay types: safetensors' ("F8_E4M3") */
    int64_t block_elems;  /* elements per block (1 for plain types) */
    size_t block_bytes;   /* bytes per block */
    int is_quantized;     /* blocks carry their own scales */
} assay_type_info;

/* NULL for ids that are not (or no longer) a type. */
const assay_type_info *assay_type_get(assay_type type);
const char *assay_type_name(assay_type type); /* "unknown" for invalid ids */
/* Bytes of `n` elements; n must be a multiple of the block size (asserted: check with assay_type_row_ok first). */
size_t assay_type_row_bytes(assay_type type, int64_t n);
int assay_type_row_ok(assay_type type, int64_t n);
/* Case-insensitive: "q4_k", "Q4_K", "bf16", "F8_E4M3". */
assay_status assay_type_from_name(const char *name, assay_type *out);

#endif
