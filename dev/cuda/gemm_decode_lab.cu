// Kernel lab copy (dev/cuda, built only by -DASSAY_CUDA_LAB=ON and scripts/device-check.sh): every measured version of
// this family, selected by the lab variant (cuda_lab.h); variant 0 runs the product entry point of src/backend/cuda.
// Decode-shape GEMMs (M <= 16 activation rows): Y[m][n] = sum_k X[m][k] W[n][k], weights streamed once.
//
// Both kernels put the (up to) 16 activation rows in the M dimension of m16n8k16 f16 tensor-core tiles, so the
// arithmetic per weight byte stays far below what the tensor cores can do and the kernels run at the weight
// byte rate. A CTA of 8 warps owns 64 output channels (8 n8 tiles); the warps split K and are summed through
// shared memory at the end. Each lane fetches its weights with one 16-byte cp.async per n-tile and K step
// into a private ring of shared-memory slots several steps ahead. The dot product along K is order-free, so the k index of each fragment is permuted: lane t owns a
// contiguous slice of K (16 fp8 or 32 int4 values), and its activation fragments are read as contiguous
// 16-byte vectors too. Weights convert to f16 exactly (e4m3) or as (q - 8) * scale (int4; the Marlin
// magic-number trick: OR the nibble into the mantissa of 1024.0 and subtract).
#include "common.cuh"
#include "cuda_lab.h"

namespace {

constexpr int GW = 8;        // warps per CTA
constexpr int BN = 64;       // output channels per CTA

// Sums the warps' accumulators (rows g, g+8; cols 2t, 2t+1 of each n-tile) and writes bf16 outputs.
template <int BNT = BN>
__device__ __forceinline__ void reduce_store(float (*acc)[4], float *red, const float *col_scale,
                                             __nv_bfloat16 *y, int m, int n, int n0) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < BNT / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[(warp * 16 + g + (e >> 1) * 8) * BNT + nt * 8 + 2 * t + (e & 1)] = acc[nt][e];
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * BNT; i += GW * 32) {
        int row = i / BNT, c = i % BNT;
        if (row >= m) continue;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < GW; ++w) s += red[(w * 16 + row) * BNT + c];
        if (col_scale) s *= col_scale[n0 + c];
        y[(size_t)row * n + n0 + c] = __float2bfloat16(s);
    }
}

// Per-lane prefetch ring: each lane cp.asyncs its own 16-byte pieces (weights, activations) for the steps
// STG-1 ahead into its own shared-memory slots and reads back only those, so no block barrier is needed; the
// ring keeps about 3 steps x 32 KB of weights in flight per CTA.
template <int WCH, int XCH>
struct Ring {
    static constexpr int STEP = (WCH + XCH) * 32 * 16 + 128;  // per warp per stage: W, X, 64 fp16 group scales
};

template <bool M16>
__global__ void __launch_bounds__(GW * 32) gemm_fp8w_kernel(const __nv_bfloat16 *x, const uint8_t *w,
                                                              const float *scale, __nv_bfloat16 *y, int m, int n,
                                                              int k) {
    constexpr int STG = 4, WCH = BN / 8, XCH = M16 ? 4 : 2;
    using R = Ring<WCH, XCH>;
    extern __shared__ __align__(16) uint8_t ring[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    uint8_t *wring = ring + warp * STG * R::STEP;
    const int nchunk = k / 64;
    const int nsteps = nchunk > warp ? (nchunk - warp + GW - 1) / GW : 0;
    auto issue = [&](int i) {  // step i of this warp = k chunk warp + GW*i (64 columns)
        uint8_t *st = wring + (i % STG) * R::STEP;
        const int kb = (warp + GW * i) * 64 + 16 * t;  // this lane's 16 columns
#pragma unroll
        for (int nt = 0; nt < WCH; ++nt) cp_async16(st + (nt * 32 + lane) * 16, w + (size_t)(n0 + nt * 8 + g) * k + kb, 16);
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) {
            int row = g + (xc >> 1) * 8;
            bool ok = row < m;
            cp_async16(st + ((WCH + xc) * 32 + lane) * 16, ok ? x + (size_t)row * k + kb + (xc & 1) * 8 : x, ok ? 16 : 0);
        }
    };
    float acc[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
    for (int i = 0; i < STG - 1; ++i) {
        if (i < nsteps) issue(i);
        cp_async_commit();
    }
    for (int i = 0; i < nsteps; ++i) {
        if (i + STG - 1 < nsteps) issue(i + STG - 1);
        cp_async_commit();
        cp_async_wait<STG - 1>();
        const uint8_t *st = wring + (i % STG) * R::STEP;
        uint32_t xa[8], xb[8];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            uint4 v = *reinterpret_cast<const uint4 *>(st + ((WCH + h) * 32 + lane) * 16);
            xa[4 * h] = bf16x2_to_f16x2(v.x); xa[4 * h + 1] = bf16x2_to_f16x2(v.y);
            xa[4 * h + 2] = bf16x2_to_f16x2(v.z); xa[4 * h + 3] = bf16x2_to_f16x2(v.w);
            if (M16) {
                uint4 u = *reinterpret_cast<const uint4 *>(st + ((WCH + 2 + h) * 32 + lane) * 16);
                xb[4 * h] = bf16x2_to_f16x2(u.x); xb[4 * h + 1] = bf16x2_to_f16x2(u.y);
                xb[4 * h + 2] = bf16x2_to_f16x2(u.z); xb[4 * h + 3] = bf16x2_to_f16x2(u.w);
            }
        }
#pragma unroll
        for (int nt = 0; nt < WCH; ++nt) {
            uint4 wv = *reinterpret_cast<const uint4 *>(st + (nt * 32 + lane) * 16);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                uint32_t a[4] = {xa[2 * j], M16 ? xb[2 * j] : 0u, xa[2 * j + 1], M16 ? xb[2 * j + 1] : 0u};
                uint32_t word = j == 0 ? wv.x : j == 1 ? wv.y : j == 2 ? wv.z : wv.w;
                uint32_t b0, b1;
                byte4_to_f16x4<ASSAY_CUDA_FP8_E4M3>(word, b0, b1);
                mma_f16_16816(acc[nt], a, b0, b1);
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();  // the reduction below reuses the ring
    reduce_store(acc, reinterpret_cast<float *>(ring), scale, y, m, n, n0);
}

// Two int4 nibbles (bits 0-3 and 16-19 of v) -> f16x2 (q - 8); and the pair at bits 4-7 / 20-23.
__device__ __forceinline__ void int4_dequant(uint32_t v, uint32_t &lo, uint32_t &hi) {
    const uint32_t MAGIC = 0x64006400u;  // f16 1024.0 in both halves
    uint32_t l = (v & 0x000F000Fu) | MAGIC;
    uint32_t h = (v & 0x00F000F0u) | MAGIC;
    const uint32_t SUB = 0x64086408u;    // 1032 = 1024 + 8
    const uint32_t MUL = 0x2C002C00u;    // 1/16
    const uint32_t ADD = 0xD480D480u;    // -72 = -(1024/16 + 8)
    __half2 rl = __hsub2(*reinterpret_cast<__half2 *>(&l), *reinterpret_cast<const __half2 *>(&SUB));
    __half2 rh = __hfma2(*reinterpret_cast<__half2 *>(&h), *reinterpret_cast<const __half2 *>(&MUL),
                         *reinterpret_cast<const __half2 *>(&ADD));
    lo = *reinterpret_cast<uint32_t *>(&rl);
    hi = *reinterpret_cast<uint32_t *>(&rh);
}

__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, __half2 s) {
    __half2 r = __hmul2(*reinterpret_cast<__half2 *>(&a), s);
    return *reinterpret_cast<uint32_t *>(&r);
}

template <bool M16>
__global__ void __launch_bounds__(GW * 32) gemm_int4_kernel(const __nv_bfloat16 *x, const uint8_t *wp,
                                                              const __half *scales, __nv_bfloat16 *y, int m, int n,
                                                              int k) {
    constexpr int STG = 3, WCH = BN / 8, XCH = M16 ? 8 : 4;
    using R = Ring<WCH, XCH>;
    extern __shared__ __align__(16) uint8_t ring[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    const int ngroup = k / 128;
    uint8_t *wring = ring + warp * STG * R::STEP;
    const int nsteps = ngroup > warp ? (ngroup - warp + GW - 1) / GW : 0;
    auto issue = [&](int i) {  // step i of this warp = group warp + GW*i (128 columns)
        uint8_t *st = wring + (i % STG) * R::STEP;
        const int gr = warp + GW * i;
#pragma unroll
        for (int nt = 0; nt < WCH; ++nt)
            cp_async16(st + (nt * 32 + lane) * 16, wp + ((size_t)(n0 / 8 + nt) * ngroup + gr) * 512 + lane * 16, 16);
        const int kb = gr * 128 + 32 * t;  // this lane's 32 columns
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) {
            int row = g + (xc >> 2) * 8;
            bool ok = row < m;
            cp_async16(st + ((WCH + xc) * 32 + lane) * 16, ok ? x + (size_t)row * k + kb + (xc & 3) * 8 : x, ok ? 16 : 0);
        }
        if (lane < 8)  // the 64 group scales of this CTA's columns: 8 lanes x 16 bytes
            cp_async16(st + (WCH + XCH) * 32 * 16 + lane * 16, scales + (size_t)gr * n + n0 + lane * 8, 16);
    };
    float acc[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
    for (int i = 0; i < STG - 1; ++i) {
        if (i < nsteps) issue(i);
        cp_async_commit();
    }
    for (int i = 0; i < nsteps; ++i) {
        if (i + STG - 1 < nsteps) issue(i + STG - 1);
        cp_async_commit();
        cp_async_wait<STG - 1>();
        __syncwarp();  // the scales were fetched by lanes 0-7 and are read by all
        const uint8_t *st = wring + (i % STG) * R::STEP;
        const __half *sc = reinterpret_cast<const __half *>(st + (WCH + XCH) * 32 * 16);
        uint32_t xa[16], xb[16];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
            uint4 v = *reinterpret_cast<const uint4 *>(st + ((WCH + h) * 32 + lane) * 16);
            xa[4 * h] = bf16x2_to_f16x2(v.x); xa[4 * h + 1] = bf16x2_to_f16x2(v.y);
            xa[4 * h + 2] = bf16x2_to_f16x2(v.z); xa[4 * h + 3] = bf16x2_to_f16x2(v.w);
            if (M16) {
                uint4 u = *reinterpret_cast<const uint4 *>(st + ((WCH + 4 + h) * 32 + lane) * 16);
                xb[4 * h] = bf16x2_to_f16x2(u.x); xb[4 * h + 1] = bf16x2_to_f16x2(u.y);
                xb[4 * h + 2] = bf16x2_to_f16x2(u.z); xb[4 * h + 3] = bf16x2_to_f16x2(u.w);
            }
        }
#pragma unroll
        for (int nt = 0; nt < WCH; ++nt) {
            uint4 wv = *reinterpret_cast<const uint4 *>(st + (nt * 32 + lane) * 16);
            __half2 s2 = __half2half2(sc[nt * 8 + g]);
#pragma unroll
            for (int wd = 0; wd < 4; ++wd) {
                uint32_t word = wd == 0 ? wv.x : wd == 1 ? wv.y : wd == 2 ? wv.z : wv.w;
                uint32_t b0, b1, b2, b3;
                int4_dequant(word, b0, b1);
                int4_dequant(word >> 8, b2, b3);
                const int c0 = 2 * wd, c1 = 2 * wd + 1;  // virtual k16 steps held by this word
                uint32_t a0[4] = {xa[2 * c0], M16 ? xb[2 * c0] : 0u, xa[2 * c0 + 1], M16 ? xb[2 * c0 + 1] : 0u};
                uint32_t a1[4] = {xa[2 * c1], M16 ? xb[2 * c1] : 0u, xa[2 * c1 + 1], M16 ? xb[2 * c1 + 1] : 0u};
                mma_f16_16816(acc[nt], a0, hmul2_u32(b0, s2), hmul2_u32(b1, s2));
                mma_f16_16816(acc[nt], a1, hmul2_u32(b2, s2), hmul2_u32(b3, s2));
            }
        }
        __syncwarp();  // all lanes done with this stage's scales before lanes 0-7 refill it
    }
    cp_async_wait<0>();
    __syncthreads();
    reduce_store(acc, reinterpret_cast<float *>(ring), nullptr, y, m, n, n0);
}

template <bool M16>
constexpr size_t fp8_smem() { return (size_t)GW * 4 * Ring<BN / 8, M16 ? 4 : 2>::STEP; }
template <bool M16>
constexpr size_t int4_smem() { return (size_t)GW * 3 * Ring<BN / 8, M16 ? 8 : 4>::STEP; }

template <typename K>
int set_smem(K kernel, size_t bytes) {
    ASSAY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return 0;
}

// ---- variant 1: direct loads into registers, double-buffered (the next step's loads are in flight while the
// current step computes) -----------------------------------------------------------------------------------
__device__ __forceinline__ uint4 ld_stream(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ void cvt_x(const uint4 &v, uint32_t *d) {
    d[0] = bf16x2_to_f16x2(v.x); d[1] = bf16x2_to_f16x2(v.y); d[2] = bf16x2_to_f16x2(v.z); d[3] = bf16x2_to_f16x2(v.w);
}

template <bool M16, int BNT>
__global__ void __launch_bounds__(GW * 32, BNT == 32 ? 2 : 1) gemm_fp8w_direct(const __nv_bfloat16 *x, const uint8_t *w,
                                                                 const float *scale, __nv_bfloat16 *y, int m, int n,
                                                                 int k) {
    __shared__ float red[GW * 16 * BNT];
    constexpr int XCH = M16 ? 4 : 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BNT;
    const int nchunk = k / 64;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto fetch = [&](int c, uint4 *wv, uint4 *xv) {
        const int kb = c * 64 + 16 * t;
#pragma unroll
        for (int nt = 0; nt < BNT / 8; ++nt) wv[nt] = ld_stream(w + (size_t)(n0 + nt * 8 + g) * k + kb);
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) {
            int row = g + (xc >> 1) * 8;
            xv[xc] = row < m ? __ldg(reinterpret_cast<const uint4 *>(x + (size_t)row * k + kb + (xc & 1) * 8)) : zero;
        }
    };
    float acc[BNT / 8][4];
#pragma unroll
    for (int nt = 0; nt < BNT / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    uint4 wcur[BNT / 8], xcur[XCH];
    if (warp < nchunk) fetch(warp, wcur, xcur);
    for (int c = warp; c < nchunk; c += GW) {
        uint4 wnx[BNT / 8], xnx[XCH];
        if (c + GW < nchunk) fetch(c + GW, wnx, xnx);
        uint32_t xa[8], xb[8];
        cvt_x(xcur[0], xa);
        cvt_x(xcur[1], xa + 4);
        if (M16) { cvt_x(xcur[2], xb); cvt_x(xcur[3], xb + 4); }
#pragma unroll
        for (int nt = 0; nt < BNT / 8; ++nt)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                uint32_t a[4] = {xa[2 * j], M16 ? xb[2 * j] : 0u, xa[2 * j + 1], M16 ? xb[2 * j + 1] : 0u};
                uint32_t word = j == 0 ? wcur[nt].x : j == 1 ? wcur[nt].y : j == 2 ? wcur[nt].z : wcur[nt].w;
                uint32_t b0, b1;
                byte4_to_f16x4<ASSAY_CUDA_FP8_E4M3>(word, b0, b1);
                mma_f16_16816(acc[nt], a, b0, b1);
            }
#pragma unroll
        for (int nt = 0; nt < BNT / 8; ++nt) wcur[nt] = wnx[nt];
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) xcur[xc] = xnx[xc];
    }
    reduce_store<BNT>(acc, red, scale, y, m, n, n0);
}

// XF16: X is f16 already (assay_cuda_gemm_int4g128_xf16's shapes and devices outside its Hopper kernel), so the
// fragments go to the f16 mma as loaded; otherwise bf16 X is converted per fragment.
template <bool M16, int BNT, bool XF16 = false>
__global__ void __launch_bounds__(GW * 32, BNT == 32 ? 2 : 1) gemm_int4_direct(const __nv_bfloat16 *x, const uint8_t *wp,
                                                                 const __half *scales, __nv_bfloat16 *y, int m, int n,
                                                                 int k) {
    __shared__ float red[GW * 16 * BNT];
    constexpr int XCH = M16 ? 8 : 4;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BNT;
    const int ngroup = k / 128;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto fetch = [&](int gr, uint4 *wv, uint4 *xv, __half *sv) {
#pragma unroll
        for (int nt = 0; nt < BNT / 8; ++nt) {
            wv[nt] = ld_stream(wp + ((size_t)(n0 / 8 + nt) * ngroup + gr) * 512 + lane * 16);
            sv[nt] = scales[(size_t)gr * n + n0 + nt * 8 + g];
        }
        const int kb = gr * 128 + 32 * t;
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) {
            int row = g + (xc >> 2) * 8;
            xv[xc] = row < m ? __ldg(reinterpret_cast<const uint4 *>(x + (size_t)row * k + kb + (xc & 3) * 8)) : zero;
        }
    };
    float acc[BNT / 8][4];
#pragma unroll
    for (int nt = 0; nt < BNT / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    uint4 wcur[BNT / 8], xcur[XCH];
    __half scur[BNT / 8];
    if (warp < ngroup) fetch(warp, wcur, xcur, scur);
    for (int gr = warp; gr < ngroup; gr += GW) {
        uint4 wnx[BNT / 8], xnx[XCH];
        __half snx[BNT / 8];
        if (gr + GW < ngroup) fetch(gr + GW, wnx, xnx, snx);
        uint32_t xa[16], xb[16];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
            if (XF16) {
                xa[4 * h] = xcur[h].x; xa[4 * h + 1] = xcur[h].y; xa[4 * h + 2] = xcur[h].z; xa[4 * h + 3] = xcur[h].w;
                if (M16) {
                    const uint4 &u = xcur[4 + h];
                    xb[4 * h] = u.x; xb[4 * h + 1] = u.y; xb[4 * h + 2] = u.z; xb[4 * h + 3] = u.w;
                }
            } else {
                cvt_x(xcur[h], xa + 4 * h);
                if (M16) cvt_x(xcur[4 + h], xb + 4 * h);
            }
        }
#pragma unroll
        for (int nt = 0; nt < BNT / 8; ++nt) {
            __half2 s2 = __half2half2(scur[nt]);
#pragma unroll
            for (int wd = 0; wd < 4; ++wd) {
                uint32_t word = wd == 0 ? wcur[nt].x : wd == 1 ? wcur[nt].y : wd == 2 ? wcur[nt].z : wcur[nt].w;
                uint32_t b0, b1, b2, b3;
                int4_dequant(word, b0, b1);
                int4_dequant(word >> 8, b2, b3);
                const int c0 = 2 * wd, c1 = 2 * wd + 1;
                uint32_t a0[4] = {xa[2 * c0], M16 ? xb[2 * c0] : 0u, xa[2 * c0 + 1], M16 ? xb[2 * c0 + 1] : 0u};
                uint32_t a1[4] = {xa[2 * c1], M16 ? xb[2 * c1] : 0u, xa[2 * c1 + 1], M16 ? xb[2 * c1 + 1] : 0u};
                mma_f16_16816(acc[nt], a0, hmul2_u32(b0, s2), hmul2_u32(b1, s2));
                mma_f16_16816(acc[nt], a1, hmul2_u32(b2, s2), hmul2_u32(b3, s2));
            }
        }
#pragma unroll
        for (int nt = 0; nt < BNT / 8; ++nt) { wcur[nt] = wnx[nt]; scur[nt] = snx[nt]; }
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) xcur[xc] = xnx[xc];
    }
    reduce_store<BNT>(acc, red, nullptr, y, m, n, n0);
}

}  // namespace

// Kernel variant for the lab (cuda_lab.h): 1 = direct double-buffered loads, 64 columns per CTA; 2 = per-lane
// cp.async ring; 3 = direct loads, 32 columns per CTA and two CTAs per SM; 4 = bulk-copy pipeline with cluster
// split-K; 5 / 6 = cp.async ring, 128 columns per CTA, cluster split-K, 8 / 16 warps; 7 = 6 without
// arithmetic (lab diagnostic, writes no output); 8-13: programmatic dependent launch and smaller stages
// (cuda_lab.h, gemm_decode_tma.cu). 0 = automatic (default), from the measurements in
// the lab journal (runs h200-gpu5-gemm*): row-major fp8 -> 3; packed fp8 -> 8 (programmatic dependent launch)
// when n / 128 <= the SM count (one wave of 128-column tiles), else 10 (two CTAs per SM); int4 -> 90 (31, i.e.
// 28's arithmetic with stages of 256 K columns and two CTAs per SM, plus the lean loader and the byte-permute
// dequantization of round 9 (= 73), with the X slice swizzled in shared memory (= 80, round 12, run
// h200-gpu8-int4-2), K split 2 ways when n / 128 > the SM count (= 84, run h200-gpu8-int4-4) and the cluster's
// split-K reduction pushed into the peer's shared memory (= 89, round 14, run h200-gpu9-int4-1), by st.async on
// the peer's mbarrier (= 90, run h200-gpu9-int4-3)) on sm_90 when n % 128 == 0 and k % 256 == 0 (before: 89, 84,
// 73; 28 at one wave, 31 above before round 9), else 3. Row-major fp8 weights can use
// 1-4 only (5 and up -> 3); packed fp8 weights use 5 and up (assay_cuda_gemm_fp8w_packed).
static int g_gemm_variant = 0;
int lab_gemm_v45(int ver, bool int4, const void *x, const uint8_t *w, const float *col_scale,
                        const uint16_t *gscale, void *y, int m, int n, int k, cudaStream_t stream,
                        int pack = 0, const float *xs = nullptr);
extern "C" void assay_cuda_lab_set_gemm_variant(int v) { g_gemm_variant = v; }

extern "C" int assay_lab_gemm_fp8w(const void *x, const uint8_t *w, const float *w_scale, void *y, int32_t m,
                                    int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!g_gemm_variant) return assay_cuda_gemm_fp8w(x, w, w_scale, y, m, n, k, stream);
    if (!x || !w || !w_scale || !y) return assay_cuda_fail("gemm_fp8w: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 64 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_fp8w: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%64==0)", m, n, k);
    cudaStream_t s = (cudaStream_t)stream;
    if (g_gemm_variant == 4) {
        int rc = lab_gemm_v45(4, false, x, w, w_scale, NULL, y, m, n, k, s);
        if (rc < 0) return -1;
        if (rc == 1) { ASSAY_CUDA_LAUNCHED(); return 0; }
    }
    if (g_gemm_variant >= 3 || g_gemm_variant == 0) {
        if (m > 8)
            gemm_fp8w_direct<true, 32><<<n / 32, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                                 (__nv_bfloat16 *)y, m, n, k);
        else
            gemm_fp8w_direct<false, 32><<<n / 32, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                                  (__nv_bfloat16 *)y, m, n, k);
        ASSAY_CUDA_LAUNCHED();
        return 0;
    }
    if (g_gemm_variant == 1) {
        if (m > 8)
            gemm_fp8w_direct<true, 64><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                                 (__nv_bfloat16 *)y, m, n, k);
        else
            gemm_fp8w_direct<false, 64><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                                  (__nv_bfloat16 *)y, m, n, k);
        ASSAY_CUDA_LAUNCHED();
        return 0;
    }
    static bool configured = false;
    if (!configured) {
        if (set_smem(gemm_fp8w_kernel<true>, fp8_smem<true>()) || set_smem(gemm_fp8w_kernel<false>, fp8_smem<false>()))
            return -1;
        configured = true;
    }
    if (m > 8)
        gemm_fp8w_kernel<true><<<n / BN, GW * 32, fp8_smem<true>(), s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                                        (__nv_bfloat16 *)y, m, n, k);
    else
        gemm_fp8w_kernel<false><<<n / BN, GW * 32, fp8_smem<false>(), s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                                          (__nv_bfloat16 *)y, m, n, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_lab_gemm_fp8w_packed(const void *x, const uint8_t *wp, const float *w_scale, void *y,
                                           int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!g_gemm_variant) return assay_cuda_gemm_fp8w_packed(x, wp, w_scale, y, m, n, k, stream);
    if (!x || !wp || !w_scale || !y) return assay_cuda_fail("gemm_fp8w_packed: null pointer argument");
    if (m < 1 || m > 16 || n % 128 || k % 256 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_fp8w_packed: shape m=%d n=%d k=%d (need 1<=m<=16, n%%128==0, k%%256==0)", m, n, k);
    int ver = g_gemm_variant;
    if (ver < 5) {  // automatic: 8 when the 128-column tiles fit in one wave, else 10 (two CTAs per SM)
        int sms = assay_cuda_sm_count();
        ver = n / 128 <= (sms > 0 ? sms : 132) ? 8 : 10;
    }
    int rc = lab_gemm_v45(ver, false, x, wp, w_scale, NULL, y, m, n, k, (cudaStream_t)stream);
    if (rc == 0 && ver != 6)  /* a version whose tile does not divide this shape */
        rc = lab_gemm_v45(6, false, x, wp, w_scale, NULL, y, m, n, k, (cudaStream_t)stream);
    if (rc < 0) return -1;
    if (rc == 0) return assay_cuda_fail("gemm_fp8w_packed: needs a compute capability 9.0 device");
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_lab_gemm_int4g128(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                        int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!g_gemm_variant) return assay_cuda_gemm_int4g128(x, wp, scales, y, m, n, k, stream);
    if (!x || !wp || !scales || !y) return assay_cuda_fail("gemm_int4g128: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 128 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_int4g128: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%128==0)", m, n,
                               k);
    cudaStream_t s = (cudaStream_t)stream;
    int ver = g_gemm_variant;
    if (ver == 0)  // 90 since run h200-gpu9-int4-3 (89 with the pushed partials sent by st.async on the peer's
                   // mbarrier; 89, from h200-gpu9-int4-1, = 84 with the split-K reduction pushed into the peer's shared
                   // memory; 84 = 80 with K split 2 ways when the 128-column tiles need more than one CTA per SM,
                   // the default since h200-gpu8-int4-4; 80 = 73 with the X slice swizzled in shared memory; 73
                   // since h200-gpu7-int4-2, 28 / 31 before that); 3 when k % 256 != 0 (below)
        ver = 90;
    if (ver >= 4) {
        int rc = lab_gemm_v45(ver, true, x, wp, NULL, scales, y, m, n, k, s);
        if (rc < 0) return -1;
        if (rc == 1) { ASSAY_CUDA_LAUNCHED(); return 0; }
    }
    if (ver >= 3) {
        if (m > 8)
            gemm_int4_direct<true, 32><<<n / 32, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp,
                                                                 (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
        else
            gemm_int4_direct<false, 32><<<n / 32, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp,
                                                                  (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
        ASSAY_CUDA_LAUNCHED();
        return 0;
    }
    if (g_gemm_variant == 1) {
        if (m > 8)
            gemm_int4_direct<true, 64><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp,
                                                                 (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
        else
            gemm_int4_direct<false, 64><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp,
                                                                  (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
        ASSAY_CUDA_LAUNCHED();
        return 0;
    }
    static bool configured = false;
    if (!configured) {
        if (set_smem(gemm_int4_kernel<true>, int4_smem<true>()) || set_smem(gemm_int4_kernel<false>, int4_smem<false>()))
            return -1;
        configured = true;
    }
    if (m > 8)
        gemm_int4_kernel<true><<<n / BN, GW * 32, int4_smem<true>(), s>>>((const __nv_bfloat16 *)x, wp,
                                                                         (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
    else
        gemm_int4_kernel<false><<<n / BN, GW * 32, int4_smem<false>(), s>>>((const __nv_bfloat16 *)x, wp,
                                                                           (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_lab_gemm_int4g128_xf16(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                             int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    // (104 is the product kernel)
    if (!g_gemm_variant || g_gemm_variant == 104) return assay_cuda_gemm_int4g128_xf16(x, wp, scales, y, m, n, k, stream);
    if (!x || !wp || !scales || !y) return assay_cuda_fail("gemm_int4g128_xf16: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 128 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_int4g128_xf16: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%128==0)", m,
                               n, k);
    cudaStream_t s = (cudaStream_t)stream;
    // 104 (round 16): version 90 on f16 X with the f16 dequantization (N % 128, K % 256, compute capability 9.x);
    // 107: the lab's f16-accumulator version; else (and for lab version 3) the direct kernel (sm_80 and up) on the
    // f16 X as loaded
    const int ver = g_gemm_variant == 107 ? 107 : 104;
    int rc = g_gemm_variant == 3 ? 0 : lab_gemm_v45(ver, true, x, wp, NULL, scales, y, m, n, k, s);
    if (rc < 0) return -1;
    if (rc == 0) {
        if (m > 8)
            gemm_int4_direct<true, 32, true><<<n / 32, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp,
                                                                       (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
        else
            gemm_int4_direct<false, 32, true><<<n / 32, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp,
                                                                        (const __half *)scales, (__nv_bfloat16 *)y, m, n, k);
    }
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

// The lab entries on other int4 packings (cuda_lab.h): the shape checks of assay_cuda_gemm_int4g128 with K % kmul,
// then lab version ver of lab_gemm_v45 on packing pack; need says which device the version requires.
static int int4_lab_entry(const char *name, int ver, int pack, int kmul, const char *need, const void *x,
                          const uint8_t *wp, const uint16_t *scales, void *y, int32_t m, int32_t n, int32_t k,
                          assay_cuda_stream stream) {
    if (!x || !wp || !scales || !y) return assay_cuda_fail("%s: null pointer argument", name);
    if (m < 1 || m > 16 || n % 128 || k % kmul || n <= 0 || k <= 0)
        return assay_cuda_fail("%s: shape m=%d n=%d k=%d (need 1<=m<=16, n%%128==0, k%%%d==0)", name, m, n, k, kmul);
    int rc = lab_gemm_v45(ver, true, x, wp, NULL, scales, y, m, n, k, (cudaStream_t)stream, pack);
    if (rc < 0) return -1;
    if (rc == 0) return assay_cuda_fail("%s: needs a compute capability %s device", name, need);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_gemm_int4g128_wg(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                           int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    const int ver = g_gemm_variant == 27 ? 27 : 26;  // 27: the lab's load-only diagnostic
    return int4_lab_entry("gemm_int4g128_wg", ver, 1, 512, "9.x (wgmma)", x, wp, scales, y, m, n, k, stream);
}

extern "C" int assay_cuda_gemm_int4g128_wa(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                           int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    const int ver = g_gemm_variant == 32 || g_gemm_variant == 33 ? g_gemm_variant : 30;
    return int4_lab_entry("gemm_int4g128_wa", ver, 2, 512, "9.0", x, wp, scales, y, m, n, k, stream);
}

extern "C" int assay_cuda_gemm_int4g128_st(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                           int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    const int ver = g_gemm_variant == 97 || g_gemm_variant == 98 || g_gemm_variant == 105 || g_gemm_variant == 106
                        ? g_gemm_variant : 95;  // 105 / 106: 95 / 98 on f16 X
    return int4_lab_entry("gemm_int4g128_st", ver, 3, 256, "9.0", x, wp, scales, y, m, n, k, stream);
}

extern "C" int assay_cuda_gemm_int4g128_wn(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                           int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    const int ver = g_gemm_variant == 156 ? 156 : 134;  // 156: 134 with 64-bit descriptor adds (round 22)
    return int4_lab_entry("gemm_int4g128_wn", ver, 5, 256, "9.x (wgmma)", x, wp, scales, y, m, n, k, stream);
}

// The integer-mma GEMMs' X conversion (quant_x_groups in gemm_decode_tma.cu): bytes = 2 per element (16-bit
// integers as two byte limbs, versions 115-120 / 125) or 1 (W4A8, versions 121 / 123).
int launch_quant_x(const void *x, bool f16, int bytes, int8_t *xq, float *xs, int m, int k, cudaStream_t stream);

// The shared checks and launches of the integer-mma entries below, which differ only in name, bytes and version.
static size_t int8_mma_workspace(int bytes, int32_t m, int32_t k) {
    return m > 0 && k > 0 ? (size_t)m * k * bytes + (size_t)m * (k / 128) * sizeof(float) : 0;
}

static int quant_x_entry(const char *name, int bytes, const void *x, int x_f16, int8_t *xq, float *xs, int32_t m,
                         int32_t k, assay_cuda_stream stream) {
    if (!x || !xq || !xs) return assay_cuda_fail("%s: null pointer argument", name);
    if (m < 1 || k <= 0 || k % 256) return assay_cuda_fail("%s: shape m=%d k=%d (need m>=1, k%%256==0)", name, m, k);
    if ((uintptr_t)x % 8 || (uintptr_t)xq % 4 || (uintptr_t)xs % 4)
        return assay_cuda_fail("%s: x needs 8-byte, xq and xs 4-byte alignment", name);
    if (launch_quant_x(x, x_f16 != 0, bytes, xq, xs, m, k, (cudaStream_t)stream) < 0) return -1;
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

static int int8_mma_gemm_entry(const char *name, int ver, const int8_t *xq, const float *xs, const uint8_t *wp,
                               const uint16_t *scales, void *y, int32_t m, int32_t n, int32_t k,
                               assay_cuda_stream stream, int pack = 4) {
    if (!xq || !xs || !wp || !scales || !y) return assay_cuda_fail("%s: null pointer argument", name);
    if (m < 1 || m > 16 || n % 128 || k % 256 || n <= 0 || k <= 0)
        return assay_cuda_fail("%s: shape m=%d n=%d k=%d (need 1<=m<=16, n%%128==0, k%%256==0)", name, m, n, k);
    const int xs_align = pack == 6 ? 8 : 4;  // (the integer wgmma kernel copies a token's two group scales at once)
    if ((uintptr_t)xq % 16 || (uintptr_t)xs % xs_align)
        return assay_cuda_fail("%s: xq needs 16-byte and xs %d-byte alignment", name, xs_align);
    int rc = lab_gemm_v45(ver, true, xq, wp, NULL, scales, y, m, n, k, (cudaStream_t)stream, pack, xs);
    if (rc < 0) return -1;
    if (rc == 0) return assay_cuda_fail("%s: needs a compute capability %s device", name, pack == 4 ? "9.0" : "9.x (wgmma)");
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

// Both in one call: the conversion into the caller's workspace (X, then the scales), then the GEMM.
static int convert_then_gemm(const char *name, int bytes, const void *x, int x_f16, const uint8_t *wp,
                             const uint16_t *scales, void *y, int32_t m, int32_t n, int32_t k, void *workspace,
                             assay_cuda_stream stream) {
    if (!workspace) return assay_cuda_fail("%s: null workspace", name);
    if ((uintptr_t)workspace % 16) return assay_cuda_fail("%s: the workspace needs 16-byte alignment", name);
    if (m < 1 || m > 16 || k <= 0 || k % 256)
        return assay_cuda_fail("%s: shape m=%d n=%d k=%d (need 1<=m<=16, n%%128==0, k%%256==0)", name, m, n, k);
    int8_t *xq = (int8_t *)workspace;
    float *xs = (float *)(xq + (size_t)m * k * bytes);
    if (bytes == 2) {
        if (assay_cuda_quant_x_i16(x, x_f16, xq, xs, m, k, stream) < 0) return -1;
        return assay_cuda_gemm_int4g128_xi16(xq, xs, wp, scales, y, m, n, k, stream);
    }
    if (assay_cuda_quant_x_i8(x, x_f16, xq, xs, m, k, stream) < 0) return -1;
    return assay_cuda_gemm_int4g128_xi8(xq, xs, wp, scales, y, m, n, k, stream);
}

extern "C" size_t assay_cuda_gemm_int4g128_i8_workspace(int32_t m, int32_t k) { return int8_mma_workspace(2, m, k); }

// X to 16-bit integers for the integer-mma GEMM.
extern "C" int assay_cuda_quant_x_i16(const void *x, int x_f16, int8_t *xq, float *xs, int32_t m, int32_t k,
                                      assay_cuda_stream stream) {
    return quant_x_entry("quant_x_i16", 2, x, x_f16, xq, xs, m, k, stream);
}

// The integer-mma GEMM on X already converted (versions 115 / 117 / 118 / 119 / 125 by the lab variant; 119 otherwise).
extern "C" int assay_cuda_gemm_int4g128_xi16(const int8_t *xq, const float *xs, const uint8_t *wp,
                                             const uint16_t *scales, void *y, int32_t m, int32_t n, int32_t k,
                                             assay_cuda_stream stream) {
    const int v = g_gemm_variant;
    const int ver = v == 115 || v == 116 ? 115 : v == 117 || v == 118 || v == 125 ? v : 119;  // (116 / 120: 115's / 119's GEMM)
    return int8_mma_gemm_entry("gemm_int4g128_xi16", ver, xq, xs, wp, scales, y, m, n, k, stream);
}

// The integer wgmma GEMM on X converted by assay_cuda_quant_x_i16 (lab version 160) or assay_cuda_quant_x_i16_token
// (161, by the lab variant), weights by assay_cuda_int4_pack_wi8.
extern "C" int assay_cuda_gemm_int4g128_wi8(const int8_t *xq, const float *xs, const uint8_t *wp,
                                            const uint16_t *scales, void *y, int32_t m, int32_t n, int32_t k,
                                            assay_cuda_stream stream) {
    // the lab's 163 / 164 time 160 / 161 with X's conversion launched in front
    const int v = g_gemm_variant;
    const int ver = v == 161 || v == 164 ? 161 : 160;
    return int8_mma_gemm_entry("gemm_int4g128_wi8", ver, xq, xs, wp, scales, y, m, n, k, stream, 6);
}

int launch_quant_x_tokens(const void *x, bool f16, int8_t *xq, float *xs, int m, int k, cudaStream_t stream);

// X to 16-bit integers with one scale per token (lab version 161).
extern "C" int assay_cuda_quant_x_i16_token(const void *x, int x_f16, int8_t *xq, float *xs, int32_t m, int32_t k,
                                            assay_cuda_stream stream) {
    if (!x || !xq || !xs) return assay_cuda_fail("quant_x_i16_token: null pointer argument");
    if (m < 1 || k <= 0 || k % 256) return assay_cuda_fail("quant_x_i16_token: shape m=%d k=%d (need m>=1, k%%256==0)", m, k);
    if ((uintptr_t)x % 8 || (uintptr_t)xq % 4 || (uintptr_t)xs % 4)
        return assay_cuda_fail("quant_x_i16_token: x needs 8-byte, xq and xs 4-byte alignment");
    if (launch_quant_x_tokens(x, x_f16 != 0, xq, xs, m, k, (cudaStream_t)stream) < 0) return -1;
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_gemm_int4g128_i8(const void *x, int x_f16, const uint8_t *wp, const uint16_t *scales,
                                           void *y, int32_t m, int32_t n, int32_t k, void *workspace,
                                           assay_cuda_stream stream) {
    return convert_then_gemm("gemm_int4g128_i8", 2, x, x_f16, wp, scales, y, m, n, k, workspace, stream);
}

extern "C" size_t assay_cuda_gemm_int4g128_w4a8_workspace(int32_t m, int32_t k) { return int8_mma_workspace(1, m, k); }

// X to one signed byte per element for the W4A8 GEMM.
extern "C" int assay_cuda_quant_x_i8(const void *x, int x_f16, int8_t *xq, float *xs, int32_t m, int32_t k,
                                     assay_cuda_stream stream) {
    return quant_x_entry("quant_x_i8", 1, x, x_f16, xq, xs, m, k, stream);
}

// The W4A8 GEMM on X already converted by assay_cuda_quant_x_i8 (version 123, or 121 by the lab variant).
extern "C" int assay_cuda_gemm_int4g128_xi8(const int8_t *xq, const float *xs, const uint8_t *wp,
                                            const uint16_t *scales, void *y, int32_t m, int32_t n, int32_t k,
                                            assay_cuda_stream stream) {
    const int ver = g_gemm_variant == 121 || g_gemm_variant == 122 ? 121 : 123;  // (lab: 122 = 121 through _w4a8)
    return int8_mma_gemm_entry("gemm_int4g128_xi8", ver, xq, xs, wp, scales, y, m, n, k, stream);
}

extern "C" int assay_cuda_gemm_int4g128_w4a8(const void *x, int x_f16, const uint8_t *wp, const uint16_t *scales,
                                             void *y, int32_t m, int32_t n, int32_t k, void *workspace,
                                             assay_cuda_stream stream) {
    return convert_then_gemm("gemm_int4g128_w4a8", 1, x, x_f16, wp, scales, y, m, n, k, workspace, stream);
}
