/* Lab-only switches of the CUDA backend (dev/cuda uses them to time kernel versions side by side). */
#ifndef ASSAY_CUDA_LAB_H
#define ASSAY_CUDA_LAB_H
#ifdef __cplusplus
extern "C" {
#endif
/* Decode GEMM version: 0 = automatic (default); 1 = direct double-buffered register loads, 64 columns per CTA;
 * 2 = per-lane cp.async ring; 3 = direct loads, 32 columns per CTA, two CTAs per SM; 4 = bulk-copy pipeline,
 * 128 columns per CTA, cluster split-K; 5 / 6 = cp.async 4-stage ring, 128 columns per CTA, cluster split-K,
 * 8 / 16 warps; 7 = 6 without the arithmetic (load-time diagnostic, no output); 8 / 9 = 6 / 5 with programmatic
 * dependent launch (weights of the first stages requested before waiting for the previous kernel; the next
 * GEMM released once every load is issued); 10 = 8 warps, stages of half the K columns and ~100 KB of shared
 * memory so two CTAs fit on an SM, with PDL; 11 = 10 launched without PDL; 12 = 10 without the arithmetic
 * (diagnostic); 13 = 9 with int4 dequantized to bf16 (X used as stored); 14 = 8 releasing the next GEMM at
 * entry; 15 = 8 without the arithmetic (diagnostic); 16 = removed (10 with 16 warps, slower: NOTES.md);
 * 17 / 19 = 256 output channels per CTA in 4-CTA clusters, 8 / 16 warps, 18 = 17 without the arithmetic;
 * 20 = 8 with a fifth fp8 stage, 21 = 20 without the arithmetic. See gemm_decode.cu. */
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
