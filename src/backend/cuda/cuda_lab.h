/* Lab-only switches of the CUDA backend (dev/cuda uses them to time kernel versions side by side). */
#ifndef ASSAY_CUDA_LAB_H
#define ASSAY_CUDA_LAB_H
#ifdef __cplusplus
extern "C" {
#endif
/* Decode GEMM version: 0 = automatic (default); 1 = direct double-buffered register loads, 64 columns per CTA;
 * 2 = per-lane cp.async ring; 3 = direct loads, 32 columns per CTA, two CTAs per SM; 4 = bulk-copy pipeline,
 * 128 columns per CTA, cluster split-K; 5 / 6 = cp.async 4-stage ring, 128 columns per CTA, cluster split-K,
 * 8 / 16 warps; 7 = 6 without the arithmetic (load-time diagnostic, no output). See gemm_decode.cu. */
void assay_cuda_lab_set_gemm_variant(int v);
/* Decode attention: 0 = automatic (default: 4 for bf16, 3 for 8-bit caches); 1 = block-table entry read when a
 * tile is issued, 2 = read one tile ahead, 3 = transposed
 * kernel (tokens as mma rows, heads as columns; default for group sizes <= 8), 4 = the transposed kernel with 4
 * warps and 64-token tiles. */
void assay_cuda_lab_set_decode_variant(int v);
#ifdef __cplusplus
}
#endif
#endif
