/* act_quant.h — how the input of a linear layer is quantized before its matmul (W8A8 and FP8 schemes), as a value
 * the engine hands to the backend's linear op, and the reference implementation of each treatment.
 *
 *   assay_act_quant aq = {ASSAY_ACT_QUANT_FP8_TOKEN, ASSAY_FP8_E4M3, 0, 0};
 *   assay_act_quant_apply(&aq, x, n, k, out, codes, scales);   // out = the values an FP8 kernel would multiply
 *
 * Backends that run the quantized kernel natively (CUDA's W8A8 GEMM) quantize inside it; the CPU backend emulates
 * it exactly with this reference. A format codec (src/quant), below the model. */
#ifndef ASSAY_ACT_QUANT_H
#define ASSAY_ACT_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* How the input of one linear layer is quantized before the matmul reads it (emulated: the matmul reads the
 * exact dequantized values code * scale). */
typedef enum assay_act_quant_kind {
    ASSAY_ACT_QUANT_NONE = 0,
    ASSAY_ACT_QUANT_FP8_TOKEN,  /* dynamic per-token FP8 (vLLM dynamic_per_token_scaled_fp8_quant) */
    ASSAY_ACT_QUANT_FP8_GROUP,  /* dynamic 1 x group FP8 (vLLM per_token_group_quant_fp8) */
    ASSAY_ACT_QUANT_FP8_STATIC, /* static per-tensor FP8, the checkpoint's input_scale */
    ASSAY_ACT_QUANT_INT8_TOKEN, /* dynamic per-token symmetric INT8 (W8A8 kernels) */
} assay_act_quant_kind;

typedef struct assay_act_quant {
    assay_act_quant_kind kind;
    int fmt;       /* FP8 kinds: assay_fp8_format */
    int64_t group; /* FP8_GROUP: elements per group */
    float scale;   /* FP8_STATIC: dequantization multiplier */
} assay_act_quant;

/* Scales per row of x that assay_act_quant_apply needs room for (0 for NONE). */
int64_t assay_act_quant_scales_per_row(const assay_act_quant *a, int64_t k);
/* out[n][k] = dequantized fake-quant of x[n][k] (out may not alias x). Scratch: codes [n*k] bytes, scales
 * [n * assay_act_quant_scales_per_row] floats. */
void assay_act_quant_apply(const assay_act_quant *a, const float *x, int64_t n, int64_t k, float *out, uint8_t *codes,
                           float *scales);
/* "fp8 e4m3 dynamic per-token", ... for the load note. */
const char *assay_act_quant_describe(const assay_act_quant *a, char *buf, size_t cap);

#endif
