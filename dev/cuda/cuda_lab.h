/* The kernel lab's entry points (dev/cuda/<family>_lab.cu, built with -DASSAY_CUDA_LAB=ON or by
 * scripts/device-check.sh): the numbered versions of each kernel family, timed and validated side by side by
 * kernel_check. The product entry points (include/assay/cuda_kernels.h, src/backend/cuda) run the current version of
 * each family; the lab wrappers below take the same arguments plus a lab variant, and variant 0 calls the product
 * entry point. */
#ifndef ASSAY_CUDA_LAB_H
#define ASSAY_CUDA_LAB_H
#include <stdint.h>

#include "assay/cuda_kernels.h"
#ifdef __cplusplus
extern "C" {
#endif
/* Prefill attention (attn_prefill_lab.cu, attn_prefill_sm90_lab.cu): variant 0 = the product entry; 1 = 64-row tiles,
 * 2 = 128-row tiles (the portable kernel), 3 = Hopper (wgmma), 4 = 3 with ping-pong consumer warpgroups (the d64
 * kernel), 5 / 6 = version 5 (P double-buffered, no P V wait in the common path) without / with ping-pong, 7 / 8 = 3
 * / 4 with the in-flight P registers kept live, 9 = 4 with O stored through shared memory in 16-byte rows (the d128
 * kernel). */
int assay_lab_attn_prefill(const assay_cuda_attn_prefill_args *a, int variant, assay_cuda_stream stream);
/* FP8 prefill attention on Hopper (attn_prefill_sm90_lab.cu): variant 0 = the product entry (67 with per-block K
 * scales, 4 with per-token ones); 1 = version 1 with ping-pong consumer warpgroups, 2 = version 1 without, 3 =
 * version 2 (P V overlapped with the softmax, O rescaled only when a row maximum grows by > 0.8 in log2 units), 4 =
 * 3 with ping-pong, 5 = 3 with the row sums on the tensor core, 6 = 5 with ping-pong. With per-block K scales: 3-6
 * and 7-18 (4 or 6 with part of the exponentials on the FMA pipe, a later warpgroup vote, exponentials started with
 * the previous tile's maxima, a rescale threshold of 2.8), the timing probes 20-22 (wrong results on purpose) and
 * 23-24 (4 / 3 with f16x2 exponentials), 25-50 (version 3: 192-key tiles; 29 = 192-key tiles, P single-buffered and
 * kept live through the exponentials, ping-pong; 31 = 29 on 128-key tiles, 32 = 29 with the P V wait after the
 * softmax; 49 / 50 timing probes), 52 / 53 (32 / 31 with O stored through shared memory: 52 is the exponential form
 * of the product kernel), 56, 59, 60, 63, 65-67 (round 11; 67 = the product kernel). See attn_prefill_sm90_lab.cu. */
int assay_lab_attn_prefill_fp8_sm90(const assay_cuda_attn_prefill_fp8_sm90_args *a, int variant,
                                    assay_cuda_stream stream);
/* Decode attention (attn_decode_lab.cu) under the variant of assay_cuda_lab_set_decode_variant (0: the product). */
size_t assay_lab_attn_decode_workspace(assay_cuda_attn_decode_args *a);
int assay_lab_attn_decode(const assay_cuda_attn_decode_args *a, assay_cuda_stream stream);
/* Decode GEMMs (gemm_decode_lab.cu, gemm_decode_tma_lab.cu, gemm_w8a8_lab.cu) under the variants of
 * assay_cuda_lab_set_gemm_variant / assay_cuda_lab_set_w8a8_variant (0: the product entry; the xf16 entry also runs
 * the product for 104, its kernel). */
int assay_lab_gemm_fp8w(const void *x_bf16, const uint8_t *w_e4m3, const float *w_scale, void *y_bf16, int32_t m,
                        int32_t n, int32_t k, assay_cuda_stream stream);
int assay_lab_gemm_fp8w_packed(const void *x_bf16, const uint8_t *w_packed, const float *w_scale, void *y_bf16,
                               int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
int assay_lab_gemm_int4g128(const void *x_bf16, const uint8_t *w_packed, const uint16_t *scales_f16, void *y_bf16,
                            int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
int assay_lab_gemm_int4g128_xf16(const void *x_f16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                 void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
int assay_lab_gemm_fp8_w8a8(const uint8_t *x_e4m3, const float *x_scale, const uint8_t *w_packed,
                            const float *w_scale, void *y_bf16, int32_t m, int32_t n, int32_t k,
                            assay_cuda_stream stream);
/* Decode GEMM version: 0 = automatic (default); 1 = direct double-buffered register loads, 64 columns per CTA;
 * 2 = per-lane cp.async ring; 3 = direct loads, 32 columns per CTA, two CTAs per SM; 4 = bulk-copy pipeline,
 * 128 columns per CTA, cluster split-K; 5 / 6 = cp.async 4-stage ring, 128 columns per CTA, cluster split-K,
 * 8 / 16 warps; 7 = 6 without the arithmetic (load-time diagnostic, no output); 8 / 9 = 6 / 5 with programmatic
 * dependent launch (weights of the first stages requested before waiting for the previous kernel; the next
 * GEMM released once every load is issued); 10 = 8 warps, stages of half the K columns and ~100 KB of shared
 * memory so two CTAs fit on an SM, with PDL; 11 = 10 launched without PDL; 12 = 10 without the arithmetic
 * (diagnostic); 13 = 9 with int4 dequantized to bf16 (X used as stored); 14 = 8 releasing the next GEMM at
 * entry; 15 = 8 without the arithmetic (diagnostic); 16 = removed (10 with 16 warps, slower: the lab journal);
 * 17 / 19 = 256 output channels per CTA in 4-CTA clusters, 8 / 16 warps, 18 = 17 without the arithmetic;
 * 20 = 8 with a fifth fp8 stage, 21 = 20 without the arithmetic; int4 only: 22 = wgmma with the dequantized
 * weights as the register A operand (X permuted into the fragment order with 4-byte cp.async), 24 = 22 without
 * the arithmetic, 25 = 22 with 4 accumulator chains per group, 26 / 27 = 25 / its load-only form on weights
 * packed by assay_cuda_int4_pack_wg (X copied as stored; entry assay_cuda_gemm_int4g128_wg below), 28 / 29 =
 * mma.sync with the weights as the A operand (16 rows) and the tokens as n8 B tiles, 8 / 16 warps (28 was the
 * int4 default from run h200-gpu6-int4w3 to round 9); 23 = removed (22 with 16 warps: equal to 22, spilled);
 * 30 = 28 on weights packed by assay_cuda_int4_pack_wa with the f16 magic-number dequantization (entry
 * assay_cuda_gemm_int4g128_wa), 31 / 32 = 28 / 30 with stages of 256 K columns and two CTAs per SM, 33 = 30 with
 * 16 warps (31 was the int4 default when the 128-column tiles need more than one wave, until round 9); 36 = 31
 * with the K split chosen for two CTAs per SM; fp8 only: 34 / 35 = 8 / 10 with the weights as the A operand and
 * the tokens as n8 B tiles, 37 = 35 with the K split chosen for two CTAs per SM; round 8, a producer warp
 * streaming each stage as a few large cp.async.bulk copies onto full / empty mbarriers (no block barrier in the
 * loop), 4 stages, PDL: fp8 38 (16 consumer warps), 40 = 38 without the arithmetic, 41 = 40 without PDL, 42 = 38
 * with an L2 evict-first hint on the weight copies, 64 = 42 with X copied by 16-byte cp.async from the producer
 * lanes (tracked by the stage barrier), 67 = 64 with 8 consumer warps; int4 43 (v28's arithmetic, 8 consumer warps),
 * 46 = 43 without the arithmetic, 65 = 43 with the cp.async X; with a staggered K order (column block b starts
 * at stage b % stages): 50 = 15 (both types), 52 = 40, 56 = 64, 59 = 52 with the cp.async X, 60 = 65, 63 = 60
 * without the arithmetic; 45 (both types) = a read probe (plain 16-byte loads of the weights, no X, no output).
 * Removed after round 8 (slower or broken, the lab journal): 39, 44, 47-49, 51, 53-55, 57, 58, 61, 62, 66. Round 9
 * (int4, fewer instructions per stage): 70 = 28 with a lean loader (per-thread copy addresses fixed at entry),
 * 68 = 70 with the dequantization by byte permutes (1 shift + 2 LOP3 + 4 PRMT per word), 69 = 68 with the offset
 * 136 removed once per group by a correction mma instead of a subtraction per weight, 71 = 69 with 16 warps,
 * 72 = 31 (two CTAs per SM) with 69's changes, 73 = 31 with 68's changes (the int4 default at every shape with
 * n % 128 == 0 and k % 256 == 0 from run h200-gpu7-int4-2 to h200-gpu8-int4-2), 74 = 68 on 8 stages of 256 K
 * columns. Round 12
 * (int4, 73's kernel): 75 = 73 without the arithmetic, 76 = 73 without loads after its first 4 stages (timing
 * probe), 77 = 73 with per-stage mbarriers (bulk weight copies, cp.async X tracked by the barrier), 78 = 77 with an
 * L2 prefetch of the next 4 stages' weights before griddepcontrol.wait, 79 = 73 with that prefetch, 80 = 73 with
 * the X slice swizzled in shared memory (conflict-free fragment loads; the int4 default in run
 * h200-gpu8-int4-3), 81 / 82 = 80 as 76 / 75, 83 / 84 = 80 with K split 4 / 2 ways when the 128-column tiles
 * need more than one CTA per SM (84: the int4 default from run h200-gpu8-int4-4 to h200-gpu9-int4-1). Round 13: 85 = 84's ring and
 * splits with the tensor work on wgmma m64nNk16 (the dequantized weights as the register A operand, X from shared
 * memory in the fragments' K order, 4-byte copies), 86 = 85 without the arithmetic, 87 = 85 with the offset 136
 * taken off once per group by 8 more wgmma per stage (A = 136) instead of a subtraction per weight, 88 = 85 with
 * both tiles waited for at the next stage's barrier (no wait inside the stage). Round 14: 89 = 84 with the split-K
 * reduction of a cluster of 2 by pushing each CTA's sums for the peer's columns into its shared memory (one cluster
 * barrier instead of two, no remote loads; the int4 default in run h200-gpu9-int4-2), 90 = 89 with the partials
 * sent by st.async on the peer's receive mbarrier (no cluster barrier at the end; the int4 default since run
 * h200-gpu9-int4-3). Round 15 (int4, weights packed by assay_cuda_int4_pack_st, entry assay_cuda_gemm_int4g128_st
 * below): a producer warp filling a ring of bulk copies on per-stage mbarriers for v90's arithmetic, X by one bulk
 * copy per row (95) or by the producer's 16-byte cp.async (98); 97 = 95 with X copied for its first 4 stages only
 * (timing probe). Round 16: 104 = 90 with X given in f16 (not bf16) and the weights dequantized to f16 (the
 * 1024 magic: 9 instead of 11 instructions per 8 weights), same packing; assay_cuda_gemm_int4g128_xf16 runs it;
 * 105 / 106 = 95 / 98 with the same change (X in f16; entry assay_cuda_gemm_int4g128_st); 107 = 104 with f16
 * accumulators per K group (through assay_cuda_gemm_int4g128_xf16). Round 18 (entry assay_cuda_gemm_int4g128_i8
 * below): 115 = 90 on the integer tensor cores (X as 16-bit integers in two byte limbs, m16n8k32 s8 mma); 116 = 115's
 * GEMM alone (assay_cuda_gemm_int4g128_xi16 on X converted once); 117 = 115 with the
 * limbs in different bank groups; 118 = 117 with one token tile at m <= 4; 119 = 117 with the X scales through the
 * stage ring (the default of assay_cuda_gemm_int4g128_xi16); 120 = 119's GEMM alone (assay_cuda_gemm_int4g128_xi16 on X
 * converted once, validated and timed without the conversion). Round 19 (W4A8, entries below): 121 = 119 on X as one
 * signed byte per element (one limb: m tokens are m mma columns), 123 = 121 with the X-scale slots of tokens >= m
 * zeroed at entry (unguarded scale loads; the weights' 1/16 once after the loop), the default of
 * assay_cuda_gemm_int4g128_xi8; 122 / 124 = 121 / 123 through assay_cuda_gemm_int4g128_w4a8 (kernel_check's numbering);
 * 125 = 119 with 123's change (through assay_cuda_gemm_int4g128_xi16). Round 20: 134 = wgmma on the dequantized
 * weights with uniform descriptors and a lean loader (entry assay_cuda_gemm_int4g128_wn, X in f16).
 * See gemm_decode.cu and the lab journal. */
void assay_cuda_lab_set_gemm_variant(int v);

/* Lab-only INT4 layout for the wgmma versions 26-27 (slower than the default in run h200-gpu6-int4w3, kept to
 * measure its load floor): weights q[n][k] (values 0..15, one per byte) packed per 16-row tile and 128-column
 * group into 1024 bytes in which lane (g, t) finds, per k16 step, one word holding its wgmma A fragment (layout
 * in cuda_pack.c); out has n*k/2 bytes. The GEMM takes the scales and shapes of assay_cuda_gemm_int4g128 with
 * K % 512 == 0, N % 128 == 0, m <= 16, compute capability 9.x. */
void assay_cuda_int4_pack_wg(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);
int assay_cuda_gemm_int4g128_wg(const void *x_bf16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
/* Lab-only INT4 layout for versions 30 / 32 / 33 (v28's kernel with the f16 magic-number dequantization): the
 * blocks of assay_cuda_int4_pack with the nibbles of each 16-row pair of 8-row tiles regrouped so that one word
 * is one k16 step's mma A fragment (layout in cuda_pack.c); same shapes and scales as the _wg entry, sm_90. */
void assay_cuda_int4_pack_wa(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);
int assay_cuda_gemm_int4g128_wa(const void *x_bf16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
/* Lab-only INT4 layout for versions 95, 97, 98, 105, 106 (v90's arithmetic on a warp-specialized ring of bulk copies): the
 * blocks of assay_cuda_int4_pack stored stage by stage (one 16 KB run per 128-row tile and 256 columns) with the
 * columns of each lane permuted (layout in cuda_pack.c); K % 256 == 0, N % 128 == 0, m <= 16, sm_90. X is bf16,
 * f16 for 105 / 106. */
void assay_cuda_int4_pack_st(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);
int assay_cuda_gemm_int4g128_st(const void *x_bf16_or_f16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
/* Lab-only INT4 layout for the wgmma version 134 (round 20; 113 in round 17: dequantized weights as the register A
 * operand, f16 X read by the tensor cores in its natural column order): the stage order of assay_cuda_int4_pack_st
 * with each block's nibbles in the A fragments' natural column order (layout in cuda_pack.c); K % 256 == 0,
 * N % 128 == 0, m <= 16, compute capability 9.x. X is f16. */
void assay_cuda_int4_pack_wn(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);
int assay_cuda_gemm_int4g128_wn(const void *x_f16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream);
/* Lab INT4 GEMM on the integer wgmma (version 160, round 23): X as 16-bit integers in two signed byte limbs with
 * per-(token, group) scales, converted beforehand by assay_cuda_quant_x_i16 (xq, xs as there), times the weights
 * packed by assay_cuda_int4_pack_wi8 (16 (q - 8) as signed bytes, wgmma m64nNk32 s8 with the limbs as the two halves
 * of N); exact int32 group sums scaled once per group. N % 128 == 0, K % 256 == 0, m <= 16, compute capability 9.x;
 * xq 16-byte and xs 8-byte aligned (as in assay_cuda_gemm_int4g128_i8's workspace). m16 n8192 k8192 in 11.4-11.6 us
 * = 3.11-3.39x the same-run cuBLAS bf16 (runs h200-gpu19-int4-2 / -3, h200-gpu19-final),
 * m1 to m8 10.2-10.5 us; with assay_cuda_quant_x_i16 launched in front of each call the chain runs 2.5-2.8x, so the
 * conversion belongs in the kernel that produces X. */
void assay_cuda_int4_pack_wi8(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);
/* Version 161 (the lab variant): the same GEMM on X quantized with one scale per token (xs = max |x| over the token /
 * 32639, written into each of the token's k / 128 slots of xs), converted by assay_cuda_quant_x_i16_token. */
int assay_cuda_quant_x_i16_token(const void *x, int x_f16, int8_t *xq, float *xs, int32_t m, int32_t k,
                                 assay_cuda_stream stream);
int assay_cuda_gemm_int4g128_wi8(const int8_t *xq, const float *xs, const uint8_t *w_packed,
                                 const uint16_t *scales_f16, void *y_bf16, int32_t m, int32_t n, int32_t k,
                                 assay_cuda_stream stream);
/* Lab INT4 GEMM on the integer tensor cores (versions 115-120, round 18; 119 unless the lab variant picks another):
 * X (bf16, or f16 with x_f16) is first turned
 * into 16-bit integers per token and 128-column group (scale = max |x| / 32639, two signed byte limbs hi * 256 + lo),
 * then m16n8k32 s8 mma multiply the weights, stored by assay_cuda_int4_pack_i8 as 16 (q - 8) in signed bytes, with
 * both limbs (a token's two limbs are two columns of the mma's N); the group sums are exact in int32 and scaled once
 * per group. Same scales, shapes and output as assay_cuda_gemm_int4g128 with N % 128 == 0, K % 256 == 0, m <= 16,
 * compute capability 9.x. workspace: assay_cuda_gemm_int4g128_i8_workspace(m, k) bytes of device memory. */
void assay_cuda_int4_pack_i8(const uint8_t *q, int32_t n, int32_t k, uint8_t *out);
size_t assay_cuda_gemm_int4g128_i8_workspace(int32_t m, int32_t k);
int assay_cuda_gemm_int4g128_i8(const void *x, int x_f16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                void *y_bf16, int32_t m, int32_t n, int32_t k, void *workspace,
                                assay_cuda_stream stream);
/* The two halves of assay_cuda_gemm_int4g128_i8, for a caller that converts X once (or, later, in the kernel that
 * produces X): xq has m*k*2 bytes (per token K / 256 runs of [hi 256][lo 256]), xs m*(k/128) floats ([m][k/128]).
 * As a separate launch in front of every GEMM the conversion costs 5.6-7.6 us of chain time (run h200-gpu13-int4-3). */
int assay_cuda_quant_x_i16(const void *x, int x_f16, int8_t *xq, float *xs, int32_t m, int32_t k,
                           assay_cuda_stream stream);
int assay_cuda_gemm_int4g128_xi16(const int8_t *xq, const float *xs, const uint8_t *w_packed,
                                  const uint16_t *scales_f16, void *y_bf16, int32_t m, int32_t n, int32_t k,
                                  assay_cuda_stream stream);
/* W4A8 (round 19, versions 121 / 123): the INT4 g128 weights of assay_cuda_int4_pack_i8 times X quantized to one signed byte
 * per element, per token and 128-column group (xs = max |x| / 127, q = rint(x / xs)): the integer-mma GEMM of
 * assay_cuda_gemm_int4g128_xi16 with one limb instead of two, so m tokens take m columns of the mma's N. Unlike
 * every other INT4 entry this one changes the arithmetic: the activations lose precision (an error of up to xs / 2
 * per element; kernel_check prints the output's error against the unquantized X). xq: m*k bytes ([m][k]), xs:
 * m*(k/128) floats; N % 128 == 0, K % 256 == 0, m <= 16, compute capability 9.x. workspace:
 * assay_cuda_gemm_int4g128_w4a8_workspace(m, k) bytes of device memory. The GEMM on converted X runs m16 n8192 k8192
 * at 3.12-3.27x the same-run cuBLAS bf16 (runs h200-gpu14-w4a8-2 / -4, h200-gpu14); with the conversion as a separate
 * launch in front, 2.21-2.31x. */
size_t assay_cuda_gemm_int4g128_w4a8_workspace(int32_t m, int32_t k);
int assay_cuda_quant_x_i8(const void *x, int x_f16, int8_t *xq, float *xs, int32_t m, int32_t k,
                          assay_cuda_stream stream);
int assay_cuda_gemm_int4g128_xi8(const int8_t *xq, const float *xs, const uint8_t *w_packed,
                                 const uint16_t *scales_f16, void *y_bf16, int32_t m, int32_t n, int32_t k,
                                 assay_cuda_stream stream);
int assay_cuda_gemm_int4g128_w4a8(const void *x, int x_f16, const uint8_t *w_packed, const uint16_t *scales_f16,
                                  void *y_bf16, int32_t m, int32_t n, int32_t k, void *workspace,
                                  assay_cuda_stream stream);
/* FP8 W8A8 decode GEMM (gemm_decode_w8a8.cu): 0 = automatic (17 at one wave of 128-channel tiles, 10 above); 1 =
 * producer warp with bulk weight copies and cp.async X, 16 consumer warps, 4 stages, evict-first weights; 2 = 8
 * consumer warps; 3 = 6 stages; 4 = 1 without the arithmetic (load-only, no output); 5 = 1 without the evict-first
 * hint; 6 = 1 with one mma chain over all stages (precision probe, m <= 8 only); 7 = 1 with the e4m3 -> f16
 * conversion done once per fragment and f16 mma; 8 = wgmma m64nNk32 e4m3 (two warpgroups, X stored permuted and
 * swizzled); two CTAs per SM (~100 KB each): 9 = 8 consumer warps, 3 stages of 256 K columns; 10 = 8 consumer
 * warps, 5 stages of 128; 11 = 9 without the arithmetic (load-only); wgmma m64nNk32 e4m3 with both operands in
 * shared memory (128-byte swizzle, no conversion, no K permutation): 12 = two consumer warpgroups (a 64-row half
 * each), 13 = four (half x K half), 15 = one (both halves), weights packed by assay_cuda_fp8w_pack_sw128; 14 = 12
 * with the weights as stored (w[n][k]) through a 2-D TMA map with the 128-byte swizzle; 16 = 12 with the
 * cluster pair's split-K reduction pushed into the peer's shared memory (round 14), 17 = 16 with the partials
 * sent by st.async on the peer's receive mbarrier. The versions that take
 * another weight layout than assay_cuda_fp8w_pack are named by assay_cuda_lab_w8a8_layout. */
void assay_cuda_lab_set_w8a8_variant(int v);
/* Weight layout lab version v of the W8A8 GEMM reads at n output channels: 0 = assay_cuda_fp8w_pack, 1 =
 * assay_cuda_fp8w_pack_sw128, 2 = unpacked w[n][k] (v = 0: assay_cuda_gemm_fp8_w8a8_layout(n)). */
int assay_cuda_lab_w8a8_layout(int v, int32_t n);
/* Decode attention: 0 = automatic (on Hopper with head_dim 128 and group sizes <= 8: 8 for bf16 caches, 15 for
 * 8-bit caches; elsewhere 4 for bf16, 3 for 8-bit); 1 = block-table entry read when a tile is issued, 2 = read
 * one tile ahead, 3 = transposed kernel (tokens as mma rows, heads as columns), 4 = the transposed kernel with 4
 * warps and 64-token tiles, 5..21 = the producer-warp ring kernel's versions. See attn_decode.cu. */
void assay_cuda_lab_set_decode_variant(int v);
#ifdef __cplusplus
}
#endif
#endif
