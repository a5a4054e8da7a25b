/* quant_fp4.h — 4-bit floating-point weight formats built on FP4 E2M1 elements (dtype.h):
 *
 *   MXFP4 (OCP Microscaling v1.0): blocks of 32 elements sharing one E8M0 scale 2^(e-127); 4.25 bits/element.
 *     uint8_t sc[n / 32], codes[n / 2];
 *     assay_mxfp4_quantize(x, n, ASSAY_MX_SCALE_FLOOR, sc, codes);   // codes: element 2i low nibble, 2i+1 high
 *   ggml's MXFP4 (GGUF type 39, block_mxfp4): the same numbers in 17-byte blocks {e, qs[16]}, where byte j holds
 *     element j in the low nibble and element j+16 in the high nibble.
 *   NVFP4: blocks of 16 elements with an FP8 E4M3 block scale and one f32 per-tensor scale; 4.5 bits/element.
 *     float g = assay_nvfp4_global_scale(amax_of_tensor);
 *     assay_nvfp4_quantize(x, n, g, block_scales, codes);           // x ~= e2m1(code) * e4m3(block_scale) * g
 *
 * Rules (elements always round to nearest, ties to even, and saturate at ±6, see dtype.h):
 *   - MX scale, FLOOR (the spec's rule, also ggml's): e = floor(log2(amax)) - 2, clamped to [-127, 127], so the
 *     block maximum lands in [4, 8) x 2^e and values above 6 x 2^e saturate. RCEIL (NVIDIA's): the smallest e with
 *     6 x 2^e >= amax, so nothing saturates. An all-zero block gets e = -127 (code 0); a non-finite amax gives the
 *     NaN scale 0xff. floor(log2) is taken exactly from the f32 bits (ggml uses floorf(log2f()), which can round
 *     up for an amax just below a power of two at large exponents; and ggml breaks element ties toward the smaller
 *     magnitude, not to even, so llama.cpp's own MXFP4 bytes can differ from ours on exact ties).
 *   - NVFP4: g = amax_tensor / (6 * 448) (the dequantization multiplier; compressed-tensors stores its inverse as
 *     weight_global_scale, ModelOpt stores g as weight_scale_2); g = 1 for an all-zero tensor. Block scale code
 *     sb = e4m3_sat(amax_block / (6 * g)) computed in f32; elements code = e2m1_sat(x / (e4m3(sb) * g)), and 0
 *     when that product is 0.
 */
#ifndef ASSAY_QUANT_FP4_H
#define ASSAY_QUANT_FP4_H

#include <assert.h>
#include <stdint.h>

#define ASSAY_MXFP4_BLOCK 32
#define ASSAY_NVFP4_BLOCK 16

typedef enum assay_mx_scale_mode {
    ASSAY_MX_SCALE_FLOOR = 0, /* OCP MX v1.0 §6.3 (and ggml) */
    ASSAY_MX_SCALE_RCEIL = 1, /* NVIDIA: never saturates */
    ASSAY_MX_SCALE_CT = 2,    /* compressed-tensors / llm-compressor (mxfp4-pack-quantized): amax is first rounded
                               * to a power of two, upward when its significand is >= 1.75, then FLOOR; a block
                               * maximum in [1.75, 2) x 2^k then lands on 3.5..4 instead of saturating at 6 */
} assay_mx_scale_mode;

/* E8M0 code of the shared scale of a block with absolute maximum `amax`. */
uint8_t assay_mxfp4_scale(float amax, assay_mx_scale_mode mode);

/* n must be a multiple of 32. scales[n/32] (E8M0), codes[n/2] (two E2M1 per byte, first element low nibble). */
void assay_mxfp4_quantize(const float *x, int64_t n, assay_mx_scale_mode mode, uint8_t *scales, uint8_t *codes);
void assay_mxfp4_dequantize(const uint8_t *scales, const uint8_t *codes, int64_t n, float *y);

typedef struct assay_block_mxfp4 {
    uint8_t e;      /* E8M0 scale */
    uint8_t qs[16]; /* byte j: element j (low nibble), element j + 16 (high nibble) */
} assay_block_mxfp4;
static_assert(sizeof(assay_block_mxfp4) == 17, "ggml block_mxfp4 is 17 bytes");

void assay_mxfp4_quantize_ggml(const float *x, int64_t n, assay_mx_scale_mode mode, assay_block_mxfp4 *blocks);
void assay_mxfp4_dequantize_ggml(const assay_block_mxfp4 *blocks, int64_t n, float *y);

float assay_nvfp4_global_scale(float amax_tensor);
/* n must be a multiple of 16. block_scales[n/16] (E4M3 codes), codes[n/2] (packed like MXFP4's). */
void assay_nvfp4_quantize(const float *x, int64_t n, float global_scale, uint8_t *block_scales, uint8_t *codes);
void assay_nvfp4_dequantize(const uint8_t *block_scales, const uint8_t *codes, int64_t n, float global_scale, float *y);

/* NVFP4 with compressed-tensors' arithmetic (its nvfp4-pack-quantized checkpoints, read by vLLM): the stored
 * global scale is the inverse gs = (448 * 6) / amax_tensor in f32 (1 for an all-zero tensor), a block scale is
 * sb = e4m3_sat(gs * (amax_block / 6)) with 0 replaced by 0.125 (compressed-tensors' smallest FP8 scale), an
 * element is e2m1_sat(x / (e4m3(sb) / gs)), and dequantization is code * e4m3(sb) / gs. The library functions
 * above compute the same numbers in a different order (x / (sb * g)), which can differ on rounding ties. */
float assay_nvfp4_ct_global_scale(float amax_tensor);
void assay_nvfp4_quantize_ct(const float *x, int64_t n, float gs, uint8_t *block_scales, uint8_t *codes);
void assay_nvfp4_dequantize_ct(const uint8_t *block_scales, const uint8_t *codes, int64_t n, float gs, float *y);

#endif
