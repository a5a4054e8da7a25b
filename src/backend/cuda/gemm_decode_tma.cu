// Decode-shape GEMMs on Hopper (sm_90a): Y[m][n] = sum_k X[m][k] W[n][k] for m <= 16, weights streamed once.
// The kernels that assay_cuda_gemm_fp8w_packed, assay_cuda_gemm_int4g128 and assay_cuda_gemm_int4g128_xf16 run on
// compute capability 9.x (entry assay_cuda_gemm_sm90 at the end; gemm_decode.cu falls back to its direct kernels
// where this one declines).
//
// A CTA owns 128 output channels; all its threads fill a ring of shared-memory stages (weights of 128 channels x KC
// columns, the matching X slice, int4 group scales) with 16-byte cp.async, one block barrier per stage. With
// programmatic dependent launch the weights of the first stages are requested before griddepcontrol.wait (only X
// and Y depend on the previous kernel), and the next GEMM is released once every load is issued. To keep the SMs
// busy K is split over a thread-block cluster whose partial sums meet in distributed shared memory (no workspace,
// no second launch).
//   FP8 (weights packed by assay_cuda_fp8w_pack: one stage of a CTA is one contiguous run in lane order): X as the
//   mma's A operand (m16n8k16 f16, e4m3 converted exactly), weights as B; 16 warps and 4 stages of 256 columns when
//   the 128-channel tiles fit one wave, else 8 warps and 5 stages of 128 columns, two CTAs per SM.
//   INT4 (assay_cuda_int4_pack): the weights are the mma's A operand (16 rows: two n8 tiles), the tokens n8 B tiles,
//   so m <= 8 issues half the mma; bf16 X with the byte-permute dequantization (1 shift + 2 LOP3 + 4 PRMT per 8
//   weights) or f16 X with the f16 magic-number one (9 instructions per 8 weights); 8 warps, 4 stages of 256 columns,
//   two CTAs per SM, each thread's copy addresses fixed at entry, the X slice swizzled in shared memory, K split 2
//   ways above one wave, the pair reduced by pushing each CTA's partials into the peer's shared memory by st.async.
// The measured versions behind these choices are in dev/cuda (gemm_decode_tma_lab.cu, README.md).
#include <cooperative_groups.h>

#include "common.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int V4_BN = 128;          // output channels per CTA
constexpr int V4_CW = 8;            // consumer warps (the default of v4_reduce_store)

__device__ __forceinline__ void cvt_x8(const uint4 &v, uint32_t *d) {
    d[0] = bf16x2_to_f16x2(v.x); d[1] = bf16x2_to_f16x2(v.y); d[2] = bf16x2_to_f16x2(v.z); d[3] = bf16x2_to_f16x2(v.w);
}

struct V4Params {
    const __nv_bfloat16 *x;
    const uint8_t *w;
    const float *col_scale;   // fp8: per output channel
    const __half *gscale;     // int4: [k/128][n]
    __nv_bfloat16 *y;
    int m, n, k, kper, splits;  // kper = K columns per CTA (k / splits)
};

// Launches a split-K decode kernel: (n / bn) x splits CTAs, each cluster of splits CTAs reducing one output tile;
// the dynamic shared-memory limit is raised once per kernel (KERN is a template argument, so each kernel has its
// own flag).
template <auto KERN>
int launch_split_k(const V4Params &p0, int splits, int bn, int threads, size_t smem, bool pdl, cudaStream_t stream) {
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(KERN, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        configured = true;
    }
    V4Params p = p0;
    p.splits = splits;
    p.kper = p.k / splits;
    SplitKLaunch launch(dim3(p.n / bn, splits, 1), threads, smem, stream, pdl);
    ASSAY_CUDA_TRY(cudaLaunchKernelEx(&launch.cfg, KERN, p));
    return 0;
}

template <bool INT4, int NTH, int BN>
__device__ __forceinline__ void v4_store_tot(float *tot, const V4Params &p, int n0, int split);

// Split-K reduction of a cluster of two CTAs by pushing (gemm_int4_ring). acc[2j + tt][e]
// holds row nh * NTW * 8 + 16 j + g + 8 (e >> 1), token 8 tt + 2 t + (e & 1) of K slice ks. The K slices are
// summed through wred [KSL][16][BN + 4] in the free ring (the pad of 4 floats puts the 4 lanes t of a store on
// different banks), the pair through cluster_pair_push_store. Called by all threads once the ring is free.
template <int NTW, int KSL, int BN, int MODE>
__device__ __forceinline__ void push_reduce_store(const float (*acc)[4], const V4Params &p, uint8_t *sm, PairRecv recv,
                                                  int n0, int split, int ks, int nh) {
    constexpr int BNP = BN + 4, NTH = (BN / 8 / NTW) * KSL * 32;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float *wred = reinterpret_cast<float *>(sm);
#pragma unroll
    for (int j = 0; j < NTW / 2; ++j)
#pragma unroll
        for (int tt = 0; tt < 2; ++tt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                wred[(ks * 16 + 8 * tt + 2 * t + (e & 1)) * BNP + nh * NTW * 8 + 16 * j + g + 8 * (e >> 1)] =
                    acc[2 * j + tt][e];
    __syncthreads();
    cluster_pair_push_store<BN, NTH, MODE>(
        [&](int row, int c) {
            float v = 0.f;
#pragma unroll
            for (int k = 0; k < KSL; ++k) v += wred[(k * 16 + row) * BNP + c];
            return v;
        },
        [&](int row, int c, float v) { p.y[(size_t)row * p.n + n0 + c] = __float2bfloat16(v); }, p.m, split, recv);
}

// Sums the KSL K-slice warps of each output column group inside the CTA (warp w = group * KSL + slice), then
// the S CTAs of the cluster through distributed shared memory; CTA rank r writes columns [r * 128 / S,
// (r + 1) * 128 / S). Called by all threads after the stages are free.
template <bool INT4, int NTH, int NW = V4_CW, int KSL = 4, int BN = V4_BN>
__device__ __forceinline__ void v4_reduce_store(float (*acc)[4], const V4Params &p, uint8_t *sm, int n0, int split) {
    constexpr int NTW = BN / 8 / (NW / KSL), CW = NTW * 8;  // n8 tiles and columns per warp
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float *wred = reinterpret_cast<float *>(sm);                  // [NW warps][16][CW]
    float *tot = reinterpret_cast<float *>(sm) + NW * 16 * CW;     // [16][BN]
    if (warp < NW) {
#pragma unroll
        for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                wred[(warp * 16 + g + (e >> 1) * 8) * CW + nt * 8 + 2 * t + (e & 1)] = acc[nt][e];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * BN; i += NTH) {
        const int row = i / BN, c = i % BN, h = c / CW;
        float s = 0.f;
#pragma unroll
        for (int q = 0; q < KSL; ++q) s += wred[((h * KSL + q) * 16 + row) * CW + (c % CW)];
        tot[i] = s;
    }
    v4_store_tot<INT4, NTH, BN>(tot, p, n0, split);
}

// Writes the CTA's column sums tot[16][BN] (complete in shared memory up to the barrier this starts with): directly
// when K is not split, else added over the S CTAs of the cluster through distributed shared memory, CTA rank r
// writing columns [r * BN / S, (r + 1) * BN / S). Called by all threads.
template <bool INT4, int NTH, int BN>
__device__ __forceinline__ void v4_store_tot(float *tot, const V4Params &p, int n0, int split) {
    if (p.splits == 1) {
        __syncthreads();
        for (int i = threadIdx.x; i < p.m * BN; i += NTH) {
            const int row = i / BN, c = i % BN;
            float v = tot[i];
            if (!INT4) v *= p.col_scale[n0 + c];
            p.y[(size_t)row * p.n + n0 + c] = __float2bfloat16(v);
        }
        return;
    }
#ifdef ASSAY_SM90_ASYNC
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();  // every CTA's tot is complete and visible to the cluster
    const int cols = BN / p.splits, c0 = split * cols;
    for (int i = threadIdx.x; i < p.m * cols; i += NTH) {
        const int row = i / cols, c = c0 + i % cols;
        float v = 0.f;
        for (int r = 0; r < p.splits; ++r) v += cl.map_shared_rank(tot, r)[row * BN + c];
        if (!INT4) v *= p.col_scale[n0 + c];
        p.y[(size_t)row * p.n + n0 + c] = __float2bfloat16(v);
    }
    cl.sync();  // no CTA leaves while another still reads its shared memory
#else
    __trap();
#endif
}

// The stage layout: 128 x KC weights (lane-order 512-byte blocks), the X slice [m][KC] (bf16 or f16, padded rows) and,
// for int4, the group scales.
template <bool INT4, int KC = (INT4 ? 512 : 256), int BN = V4_BN>
struct V5Cfg {
    static constexpr int KSL = INT4 ? KC / 128 : KC / 64;      // K slices (one per warp) per stage
    static constexpr int WBYTES = BN * KC / (INT4 ? 2 : 1);     // lane-order blocks of 512 bytes
    static constexpr int XP = INT4 ? 2 * KC + 32 : 2 * KC + 16;
    static constexpr int XOFF = WBYTES;
    static constexpr int SOFF = XOFF + 16 * XP;
    static constexpr int STAGE = SOFF + (INT4 ? (KC / 128) * BN * 2 : 0);
    static_assert(STAGE % 16 == 0 && XOFF % 16 == 0 && SOFF % 16 == 0, "cp.async destinations need 16-byte alignment");
};

// The cp.async copies of one FP8 stage. PART: 0 = the whole stage; 1 = the weights (which do not depend on the
// previous kernel); 2 = the activation slice only.
template <int NTH, int KC, int PART = 0, int BN = V4_BN>
__device__ __forceinline__ void fp8_load_stage(uint8_t *stg, const V4Params &p, int n0, int k0) {
    using C = V5Cfg<false, KC, BN>;
    const int tid = threadIdx.x;
    if (PART != 2) {
        // packed [n / 128][k / 64][16 n8 tiles][512]: the stage is BN / 128 contiguous runs of KC * 128 bytes
        constexpr int RUNC = KC * 128 / 16;  // 16-byte chunks per 128-row block
#pragma unroll
        for (int j = 0; j < C::WBYTES / 16 / NTH; ++j) {
            const int c = tid + j * NTH, b = c / RUNC, off = c % RUNC;
            const uint8_t *src = p.w + ((size_t)(n0 / 128 + b) * (p.k / 64) + k0 / 64) * (16 * 512);
            cp_async16(stg + c * 16, src + off * 16, 16);
        }
    }
    if (PART != 1) {
        constexpr int XCH = KC * 2 / 16;  // 16-byte chunks per X row
        for (int c = tid; c < p.m * XCH; c += NTH) {
            const int row = c / XCH, off = c % XCH;
            cp_async16(stg + C::XOFF + row * C::XP + off * 16, p.x + (size_t)row * p.k + k0 + off * 8, 16);
        }
    }
}

// 16 bytes global -> shared by cp.async (L2 only), to a shared-window address: the loaders' copy.
__device__ __forceinline__ void cp16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// The INT4 stage loads with the per-thread addresses fixed at entry: each thread keeps one pointer per operand and
// every copy of a stage is that pointer plus a compile-time offset, plus one add per stage (the general loop spends
// about a third of the stage's instructions on 64-bit address arithmetic). Layout in shared memory as V5Cfg, with
// the X slice swizzled. Weights: BN / 8 runs (n8 tiles) of (KC / 128) * 512 bytes per stage, TPR threads per run,
// each copying WCH 16-byte chunks TPR * 16 bytes apart (a warp covers 32 * 16 contiguous bytes per copy
// instruction). X: rows xrow + i * XRP (i < 16 / XRP, row < m), chunk xoff of each row. Scales: SCH threads, one
// chunk each.
template <int NTH, int KC, int BN>
struct LeanLoader {
    static constexpr int RUN = (KC / 128) * 512, NRUN = BN / 8, TPR = NTH / NRUN, WCH = RUN / 16 / TPR;
    static constexpr int XCH = KC * 2 / 16, XRP = NTH / XCH, XPASS = 16 / XRP;
    static constexpr int SROW = BN * 2 / 16, SCH = (KC / 128) * SROW;
    static_assert(NTH % NRUN == 0 && WCH * TPR * 16 == RUN && NTH % XCH == 0 && 16 % XRP == 0 && SCH <= NTH,
                  "lean loader: threads must tile the stage");
    const uint8_t *w;       // this thread's first weight chunk of stage 0
    const __half *sc;       // its scale chunk of stage 0 (tid < SCH)
    const __nv_bfloat16 *x; // its X chunk of stage 0, row xrow
    size_t xstride;         // XRP rows of X, in elements
    uint32_t wdst, sdst, xdst;  // offsets inside a stage
    int xrows;                  // rows of X this thread copies (row xrow + i * XRP < m)
    __device__ __forceinline__ LeanLoader(const V4Params &p, int n0, int kbase) {
        using C = V5Cfg<true, KC, BN>;
        const int tid = threadIdx.x, ngroup = p.k / 128;
        const int run = tid / TPR, sub = tid % TPR;
        w = p.w + ((size_t)(n0 / 8 + run) * ngroup + kbase / 128) * 512 + sub * 16;
        wdst = run * RUN + sub * 16;
        const int gi = tid / SROW, so = tid % SROW;
        sc = p.gscale + (size_t)(kbase / 128 + gi) * p.n + n0 + so * 8;
        sdst = C::SOFF + gi * BN * 2 + so * 16;
        const int xrow = tid / XCH, xoff = tid % XCH;
        x = p.x + (size_t)xrow * p.k + kbase + xoff * 8;
        xstride = (size_t)XRP * p.k;
        // the swizzle: chunk xoff at xoff ^ ((xoff >> 3) & 1) (the readers' 16-byte X loads then hit 8 different bank
        // groups per quarter warp; in the plain layout lanes t and t + 2 of a row are 128 bytes apart)
        xdst = C::XOFF + xrow * C::XP + (xoff ^ ((xoff >> 3) & 1)) * 16;
        xrows = xrow < p.m ? (p.m - xrow + XRP - 1) / XRP : 0;
    }
    // PART as in fp8_load_stage: 0 = all, 1 = weights and scales, 2 = X. s = stage index within the CTA's K range.
    template <int PART>
    __device__ __forceinline__ void load(uint8_t *stg, const V4Params &p, int s) const {
        const uint32_t base = smem_u32(stg);
        if (PART != 2) {
            const uint8_t *src = w + (size_t)s * RUN;
#pragma unroll
            for (int i = 0; i < WCH; ++i) cp16(base + wdst + i * TPR * 16, src + i * TPR * 16);
            if (threadIdx.x < SCH) cp16(base + sdst, sc + (size_t)s * (KC / 128) * p.n);
        }
        if (PART != 1) {
            const __nv_bfloat16 *src = x + (size_t)s * KC;
#pragma unroll
            for (int i = 0; i < XPASS; ++i)
                if (i < xrows) cp16(base + xdst + i * XRP * V5Cfg<true, KC, BN>::XP, src + i * xstride);
        }
    }
};

// The weights-as-A accumulators of K slice ks into wred[KSL][16 tokens][BN] for the unsplit reduction of
// gemm_int4_ring: acc[2j + tt][e] is row nh * NTW * 8 + 16j + g + 8 (e >> 1), token 8tt + 2t + (e & 1).
template <int NTW, int BN>
__device__ __forceinline__ void wa_acc_to_slices(const float (*acc)[4], float *wred, int ks, int nh, int g, int t) {
#pragma unroll
    for (int j = 0; j < NTW / 2; ++j)
#pragma unroll
        for (int tt = 0; tt < 2; ++tt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                wred[(ks * 16 + 8 * tt + 2 * t + (e & 1)) * BN + nh * NTW * 8 + 16 * j + g + 8 * (e >> 1)] = acc[2 * j + tt][e];
}
// One K group (128 columns) of the INT4 weights-as-A arithmetic: lane (g, t)'s A fragments of row tiles j (words
// wu[j] / wv2[j] of n8 tiles 2j and 2j + 1) against its X registers xa (tokens 0-7) and xb (8-15), summed per k16
// step into tmp[j][token tile]. The fragment order: lane (g, t) owns physical K columns [32t, 32t + 32) of the group,
// step (w, s) takes the nibble pairs at shifts 8s and 8s + 4 of word w, and the lane's B registers for that step are
// its X pairs 4w + 2s and 4w + 2s + 1. M43 comes from the caller, which derives it from an opaque zero (as literals
// ptxas kept the PRMT immediate and rematerialized the selectors with one IMAD per PRMT).
// bf16 X: u & 0x0F0F0F0F holds the nibbles 0, 2, 4, 6 of the word as bytes 0-3, (u >> 4) & 0x0F0F0F0F the nibbles
// 1, 3, 5, 7; a byte permute with 0x43 puts two of them into the mantissas of a bf16 pair 128 + q (the pair at
// shift 0 is bytes (0, 2) of the first, shift 8 bytes (1, 3), shift 4 / 12 the same of the second), and 136 comes
// off: 1 shift + 2 LOP3 + 4 PRMT + 4 HSUB2 per word.
// F16X: X is f16 and the weights dequantize to f16 by the 1024 magic: the nibble pairs at bits 0-3 and 4-7 of each
// 16-bit half fit an f16 mantissa (10 bits) without a shift, so a word takes 1 shift + 4 LOP3 + 2 HADD2 (1024 + q -
// 1032) + 2 HFMA2 ((1024 + 16 q) / 16 - 72), all exact (a bf16 mantissa holds one nibble only); M43 then carries
// the f16 magic pair 0x64006400.
template <int RT, bool M16, bool F16X>
__device__ __forceinline__ void int4_wa_group(const uint4 *wu, const uint4 *wv2, const uint32_t *xa, const uint32_t *xb,
                                              uint32_t M43, float (*tmp)[2][4]) {
    if constexpr (F16X) {
        const __half2 SUB = __halves2half2(__ushort_as_half(0x6408u), __ushort_as_half(0x6408u));   // 1032
        const __half2 S16 = __halves2half2(__ushort_as_half(0x2C00u), __ushort_as_half(0x2C00u));   // 1/16
        const __half2 O72 = __halves2half2(__ushort_as_half(0xD480u), __ushort_as_half(0xD480u));   // -72
#pragma unroll
        for (int w = 0; w < 4; ++w) {
#pragma unroll
            for (int s2 = 0; s2 < 2; ++s2) {
                const uint32_t b0 = xa[4 * w + 2 * s2], b1 = xa[4 * w + 2 * s2 + 1];
                const uint32_t c0 = xb[4 * w + 2 * s2], c1 = xb[4 * w + 2 * s2 + 1];
#pragma unroll
                for (int j = 0; j < RT; ++j) {
                    const uint32_t u = (w == 0 ? wu[j].x : w == 1 ? wu[j].y : w == 2 ? wu[j].z : wu[j].w) >> (8 * s2);
                    const uint32_t v = (w == 0 ? wv2[j].x : w == 1 ? wv2[j].y : w == 2 ? wv2[j].z : wv2[j].w) >> (8 * s2);
                    // nibbles (0, 4) of the shifted word are k columns (0, 1) of the step, (1, 5) columns (8, 9);
                    // M43 holds the magic 0x64006400 in a register, so each (w & mask) | magic is one LOP3 (with
                    // both as literals ptxas emits an AND and an OR: one immediate per LOP3)
                    uint32_t r[4] = {(u & 0x000F000Fu) | M43, (v & 0x000F000Fu) | M43, (u & 0x00F000F0u) | M43,
                                     (v & 0x00F000F0u) | M43};
                    uint32_t a[4];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        __half2 lo = __hsub2(*reinterpret_cast<__half2 *>(&r[e]), SUB);
                        __half2 hi = __hfma2(*reinterpret_cast<__half2 *>(&r[e + 2]), S16, O72);
                        a[e] = *reinterpret_cast<uint32_t *>(&lo);
                        a[e + 2] = *reinterpret_cast<uint32_t *>(&hi);
                    }
                    mma_f16_16816(tmp[j][0], a, b0, b1);
                    if (M16) mma_f16_16816(tmp[j][1], a, c0, c1);
                }
            }
        }
    } else {
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            uint32_t ul[RT], uh[RT], vl[RT], vh[RT];
#pragma unroll
            for (int j = 0; j < RT; ++j) {
                const uint32_t u = w == 0 ? wu[j].x : w == 1 ? wu[j].y : w == 2 ? wu[j].z : wu[j].w;
                const uint32_t v = w == 0 ? wv2[j].x : w == 1 ? wv2[j].y : w == 2 ? wv2[j].z : wv2[j].w;
                ul[j] = u & 0x0F0F0F0Fu; uh[j] = (u >> 4) & 0x0F0F0F0Fu;
                vl[j] = v & 0x0F0F0F0Fu; vh[j] = (v >> 4) & 0x0F0F0F0Fu;
            }
#pragma unroll
            for (int s2 = 0; s2 < 2; ++s2) {
                const uint32_t b0 = xa[4 * w + 2 * s2], b1 = xa[4 * w + 2 * s2 + 1];
                const uint32_t c0 = xb[4 * w + 2 * s2], c1 = xb[4 * w + 2 * s2 + 1];
#pragma unroll
                for (int j = 0; j < RT; ++j) {
                    uint32_t a[4];
                    const uint32_t sel = s2 ? 0x4341u : 0x4240u;
                    a[0] = __byte_perm(ul[j], M43, sel); a[1] = __byte_perm(vl[j], M43, sel);
                    a[2] = __byte_perm(uh[j], M43, sel); a[3] = __byte_perm(vh[j], M43, sel);
                    const uint32_t SUB = 0x43084308u;  // 136.0
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        __nv_bfloat162 d = __hsub2(*reinterpret_cast<__nv_bfloat162 *>(&a[r]),
                                                   *reinterpret_cast<const __nv_bfloat162 *>(&SUB));
                        a[r] = *reinterpret_cast<uint32_t *>(&d);
                    }
                    mma_bf16_16816(tmp[j][0], a, b0, b1);
                    if (M16) mma_bf16_16816(tmp[j][1], a, c0, c1);
                }
            }
        }
    }
}

// FP8 weights packed by assay_cuda_fp8w_pack. NW warps = KSL K slices x (NW / KSL) groups of output rows, NTW n8 tiles
// per warp; X is the mma's A operand (converted to f16 per stage), the weights B (e4m3 -> f16 exactly).
template <bool M16, int NW, int KC, int STAGES, int MINB>
__global__ void __launch_bounds__(NW * 32, MINB) gemm_fp8_ring(V4Params p) {
    constexpr int BN = V4_BN;
    using C = V5Cfg<false, KC, BN>;
    constexpr int KSL = C::KSL, NTH = NW * 32, NTW = BN / 8 / (NW / KSL);
    static_assert(NW % KSL == 0 && (BN / 8) % (NW / KSL) == 0, "warps must tile the stage");
    static_assert(NW * 16 * NTW * 8 * 4 + 16 * BN * 4 <= STAGES * C::STAGE, "reduction buffers reuse the stages");
    extern __shared__ __align__(128) uint8_t sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    const int split = blockIdx.y;
    const int kbase = split * p.kper;
    const int nst = p.kper / KC;
    const int ks = warp % KSL, nh = warp / KSL;
    auto load = [&](int s, int slot, auto part) {
        constexpr int PT = decltype(part)::value;
        fp8_load_stage<NTH, KC, PT, BN>(sm + slot * C::STAGE, p, n0, kbase + s * KC);
    };
    float acc[NTW][4];
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    // groups: W_0 .. W_{S-2}, then X_0 .. X_{S-2} one group each, so stage 0 waits for W_0 and X_0 only
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nst) load(s, s, std::integral_constant<int, 1>());
        cp_async_commit();
    }
    pdl_wait();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nst) load(s, s, std::integral_constant<int, 2>());
        cp_async_commit();
    }
    // The next GEMM may launch once every CTA of this one has issued its last loads. Earlier would park its CTAs
    // on SMs (waiting in griddepcontrol.wait) while this grid still computes or still has CTAs to place.
    if (nst <= STAGES - 1) pdl_launch_dependents();
    for (int st = 0; st < nst; ++st) {
        // Groups committed so far: 2 (STAGES - 1) + st. The last group stage st needs (its own, or its X group for
        // st < STAGES - 1) is the one STAGES - 2 back from the newest.
        cp_async_wait<STAGES - 2>();
        if (st == nst - STAGES + 1) pdl_launch_dependents();  // every load has been issued
        __syncthreads();  // stage st landed for everyone; everyone finished stage st - 1, whose slot is refilled now
        {
            const int nx = st + STAGES - 1;
            if (nx < nst) load(nx, nx % STAGES, std::integral_constant<int, 0>());
            cp_async_commit();
        }
        const uint8_t *stg = sm + (st % STAGES) * C::STAGE;
        uint32_t xa[8], xb[8];
        const uint8_t *xr = stg + C::XOFF + g * C::XP + (ks * 64 + 16 * t) * 2;
        cvt_x8(*reinterpret_cast<const uint4 *>(xr), xa);
        cvt_x8(*reinterpret_cast<const uint4 *>(xr + 16), xa + 4);
        if (M16) {
            cvt_x8(*reinterpret_cast<const uint4 *>(xr + 8 * C::XP), xb);
            cvt_x8(*reinterpret_cast<const uint4 *>(xr + 8 * C::XP + 16), xb + 4);
        }
        uint4 wv[NTW];
#pragma unroll
        for (int nt = 0; nt < NTW; ++nt) {
            const int tile = nh * NTW + nt;  // stage = BN / 128 blocks of [KSL][16 tiles][512]
            wv[nt] = *reinterpret_cast<const uint4 *>(stg + (tile >> 4) * (KSL * 8192) + (ks * 16 + (tile & 15)) * 512 + lane * 16);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint32_t a[4] = {xa[2 * j], M16 ? xb[2 * j] : 0u, xa[2 * j + 1], M16 ? xb[2 * j + 1] : 0u};
#pragma unroll
            for (int nt = 0; nt < NTW; ++nt) {
                const uint32_t word = j == 0 ? wv[nt].x : j == 1 ? wv[nt].y : j == 2 ? wv[nt].z : wv[nt].w;
                uint32_t b0, b1;
                byte4_to_f16x4<ASSAY_CUDA_FP8_E4M3>(word, b0, b1);
                mma_f16_16816(acc[nt], a, b0, b1);
            }
        }    }
    cp_async_wait<0>();
    __syncthreads();
    v4_reduce_store<false, NTH, NW, KSL, BN>(acc, p, sm, n0, split);
}

// INT4 g128 weights packed by assay_cuda_int4_pack (bf16 X, or f16 X with F16X): 8 warps = 2 K slices of 128
// columns x 4 groups of 32 output rows, 4 stages of 256 columns, two CTAs per SM.
template <bool M16, bool F16X>
__global__ void __launch_bounds__(8 * 32, 2) gemm_int4_ring(V4Params p) {
    constexpr int NW = 8, KC = 256, STAGES = 4, BN = V4_BN;
    using C = V5Cfg<true, KC, BN>;
    constexpr int KSL = C::KSL, NTH = NW * 32, NTW = BN / 8 / (NW / KSL);
    static_assert(NW % KSL == 0 && (BN / 8) % (NW / KSL) == 0, "warps must tile the stage");
    static_assert(NW * 16 * NTW * 8 * 4 + 16 * BN * 4 <= STAGES * C::STAGE, "reduction buffers reuse the stages");
    extern __shared__ __align__(128) uint8_t sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    const int split = blockIdx.y;
    const int kbase = split * p.kper;
    const int nst = p.kper / KC;
    const int ks = warp % KSL, nh = warp / KSL;
    // K split 2 ways: the pair's reduction by pushing. Each CTA sums its K slices for both column halves, sends the
    // peer's half into the peer's receive buffer (past the ring) by st.async, which completes on the peer's receive
    // mbarrier (common.cuh's cluster_pair_push_store, mode 2: no cluster barrier and no release fence at the end)
    // and, once the peer's half of its own columns has arrived, adds it and writes y. The peer writes into this
    // CTA's buffer at the end of its own loop, so both CTAs must have started before any remote store:
    // cluster_pair_push_begin's arrival is waited for then.
    const bool push2 = p.splits == 2;
    const PairRecv recv = {sm + STAGES * C::STAGE, reinterpret_cast<uint64_t *>(sm + STAGES * C::STAGE + 16 * (BN / 2) * 4)};
    if (push2) cluster_pair_push_begin<2, BN>(recv, p.m);
    const LeanLoader<NTH, KC, BN> ld(p, n0, kbase);
    auto load = [&](int s, int slot, auto part) {
        constexpr int PT = decltype(part)::value;
        ld.template load<PT>(sm + slot * C::STAGE, p, s);
    };
    float acc[NTW][4];
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nst) load(s, s, std::integral_constant<int, 1>());
        cp_async_commit();
    }
    pdl_wait();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nst) load(s, s, std::integral_constant<int, 2>());
        cp_async_commit();
    }
    if (nst <= STAGES - 1) pdl_launch_dependents();
    for (int st = 0; st < nst; ++st) {
        cp_async_wait<STAGES - 2>();
        if (st == nst - STAGES + 1) pdl_launch_dependents();  // every load has been issued
        __syncthreads();
        {
            const int nx = st + STAGES - 1;
            if (nx < nst) load(nx, nx % STAGES, std::integral_constant<int, 0>());
            cp_async_commit();
        }
        const uint8_t *stg = sm + (st % STAGES) * C::STAGE;
        // the weights as the A operand (16 rows: the warp's n8 tiles 2j and 2j + 1), the tokens as the B operand (n8
        // tiles of tokens 0-7 and, when m > 8, 8-15), as stored (bf16 or f16)
        constexpr int RT = NTW / 2;
        uint32_t xa[16], xb[16];
        const uint8_t *xr = stg + C::XOFF + g * C::XP + (ks * 128 + 32 * t) * 2;
        // chunk c of an X row is stored at c ^ ((c >> 3) & 1), so chunk h of lane t sits at h ^ (t >> 1): even h at
        // xr + 16 (t >> 1) + 16 h, odd h at xr - 16 (t >> 1) + 16 h
        const int tb = (t >> 1) * 16;
        const uint8_t *xre = xr + tb, *xro = xr - tb;
#pragma unroll
        for (int h = 0; h < 4; ++h) {
            const uint8_t *xh = (h & 1) ? xro : xre;
            const uint4 v = *reinterpret_cast<const uint4 *>(xh + 16 * h);
            xa[4 * h] = v.x; xa[4 * h + 1] = v.y; xa[4 * h + 2] = v.z; xa[4 * h + 3] = v.w;
            if (M16) {
                const uint4 u = *reinterpret_cast<const uint4 *>(xh + 8 * C::XP + 16 * h);
                xb[4 * h] = u.x; xb[4 * h + 1] = u.y; xb[4 * h + 2] = u.z; xb[4 * h + 3] = u.w;
            }
        }
        uint4 wu[RT], wv2[RT];
#pragma unroll
        for (int j = 0; j < RT; ++j) {
            wu[j] = *reinterpret_cast<const uint4 *>(stg + ((nh * NTW + 2 * j) * (KC / 128) + ks) * 512 + lane * 16);
            wv2[j] = *reinterpret_cast<const uint4 *>(stg + ((nh * NTW + 2 * j + 1) * (KC / 128) + ks) * 512 + lane * 16);
        }
        float tmp[RT][2][4];
#pragma unroll
        for (int j = 0; j < RT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) tmp[j][0][e] = tmp[j][1][e] = 0.f;
        // The magic goes through z = m >> 5 (0: m <= 16 here), which ptxas cannot fold.
        const uint32_t z = (uint32_t)p.m >> 5, M43 = (F16X ? 0x64006400u : 0x43434343u) | z;
        int4_wa_group<RT, M16, F16X>(wu, wv2, xa, xb, M43, tmp);
        const __half *sc = reinterpret_cast<const __half *>(stg + C::SOFF) + ks * BN + nh * NTW * 8 + g;
#pragma unroll
        for (int j = 0; j < RT; ++j) {
            const float sa = __half2float(sc[16 * j]), sb = __half2float(sc[16 * j + 8]);
#pragma unroll
            for (int tt = 0; tt < (M16 ? 2 : 1); ++tt) {  // acc[2j + tt]: rows (g, g + 8) x tokens 8tt + 2t + e
                acc[2 * j + tt][0] = fmaf(tmp[j][tt][0], sa, acc[2 * j + tt][0]);
                acc[2 * j + tt][1] = fmaf(tmp[j][tt][1], sa, acc[2 * j + tt][1]);
                acc[2 * j + tt][2] = fmaf(tmp[j][tt][2], sb, acc[2 * j + tt][2]);
                acc[2 * j + tt][3] = fmaf(tmp[j][tt][3], sb, acc[2 * j + tt][3]);
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();
    if (push2) {
        push_reduce_store<NTW, KSL, BN, 2>(acc, p, sm, recv, n0, split, ks, nh);
        return;
    }
    float *wred = reinterpret_cast<float *>(sm);  // [KSL][16 tokens][BN]
    float *tot = wred + KSL * 16 * BN;            // [16][BN]
    wa_acc_to_slices<NTW, BN>(acc, wred, ks, nh, g, t);
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * BN; i += NTH) {
        float s = 0.f;
#pragma unroll
        for (int q = 0; q < KSL; ++q) s += wred[q * 16 * BN + i];
        tot[i] = s;
    }
    v4_store_tot<true, NTH, BN>(tot, p, n0, split);
}

template <bool M16, int NW, int KC, int STAGES, int MINB>
int launch_fp8(const V4Params &p, int splits, cudaStream_t stream) {
    constexpr size_t smem = (size_t)STAGES * V5Cfg<false, KC, V4_BN>::STAGE;
    return launch_split_k<gemm_fp8_ring<M16, NW, KC, STAGES, MINB>>(p, splits, V4_BN, NW * 32, smem, true, stream);
}

template <bool M16, bool F16X>
int launch_int4(const V4Params &p, int splits, cudaStream_t stream) {
    // the ring, then the push reduction's receive buffer and its mbarrier
    constexpr size_t smem = (size_t)4 * V5Cfg<true, 256, V4_BN>::STAGE + 16 * (V4_BN / 2) * 4 + 16;
    return launch_split_k<gemm_int4_ring<M16, F16X>>(p, splits, V4_BN, 8 * 32, smem, true, stream);
}

int g_sm90_ok = -1;  // the device runs these kernels (compute capability >= 9.0)

}  // namespace

// Returns 1 when the kernel ran, 0 when the device or the shape needs the direct kernels of gemm_decode.cu, -1 on
// error. w: packed by assay_cuda_fp8w_pack (GEMM_SM90_FP8, col_scale per output channel) or assay_cuda_int4_pack
// (group scales gscale); X is f16 for GEMM_SM90_INT4_XF16, else bf16.
int assay_cuda_gemm_sm90(GemmSm90 kind, const void *x, const uint8_t *w, const float *col_scale,
                         const uint16_t *gscale, void *y, int m, int n, int k, cudaStream_t stream) {
    if (g_sm90_ok < 0) {
        int dev = 0, major = 0;
        g_sm90_ok = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
    }
    const bool int4 = kind != GEMM_SM90_FP8;
    int sms = assay_cuda_sm_count();
    if (sms <= 0) sms = 132;
    // FP8: 16 warps on stages of 256 columns when the 128-column tiles fit one wave, else 8 warps on stages of 128
    // columns, two CTAs per SM (runs h200-gpu5-gemm*); INT4: stages of 256 columns
    const bool one_wave = n / V4_BN <= sms;
    const int kc = int4 || one_wave ? 256 : 128;
    if (!g_sm90_ok || n % V4_BN || k % kc) return 0;
    // K splits (cluster size): the one whose CTA count best fills the SMs; ties to fewer.
    const int tiles = n / V4_BN;
    int splits = 1;
    double best = 0;
    for (int s = 1; s <= 8; s *= 2) {
        if (k % (kc * s)) break;
        double waves = (double)tiles * s / sms;
        double eff = waves / ceil(waves);
        if (eff > best + 0.02) { best = eff; splits = s; }
    }
    // INT4 above one CTA per SM: K split 2 ways (n28672: 448 CTAs of 16 stages instead of 224 of 32, two per SM at
    // a time), so that the per-SM work evens out (with 224 CTAs, 92 SMs run two and 40 run one)
    if (int4 && tiles > sms && k % (kc * 2) == 0) splits = 2;
    V4Params p;
    p.x = (const __nv_bfloat16 *)x;
    p.w = w;
    p.col_scale = col_scale;
    p.gscale = (const __half *)gscale;
    p.y = (__nv_bfloat16 *)y;
    p.m = m; p.n = n; p.k = k;
    const bool m16 = m > 8;
    int rc;
    if (kind == GEMM_SM90_FP8)
        rc = one_wave ? (m16 ? launch_fp8<true, 16, 256, 4, 1>(p, splits, stream) : launch_fp8<false, 16, 256, 4, 1>(p, splits, stream))
                      : (m16 ? launch_fp8<true, 8, 128, 5, 2>(p, splits, stream) : launch_fp8<false, 8, 128, 5, 2>(p, splits, stream));
    else if (kind == GEMM_SM90_INT4)
        rc = m16 ? launch_int4<true, false>(p, splits, stream) : launch_int4<false, false>(p, splits, stream);
    else
        rc = m16 ? launch_int4<true, true>(p, splits, stream) : launch_int4<false, true>(p, splits, stream);
    return rc < 0 ? -1 : 1;
}
