// Decode-shape GEMMs (M <= 16 activation rows): Y[m][n] = sum_k X[m][k] W[n][k], weights streamed once: the
// entry points of cuda_kernels.h and the portable kernels (sm_80 and up) they fall back to.
//
// On compute capability 9.x the packed FP8 and the INT4 entries run the Hopper kernels of gemm_decode_tma.cu
// (assay_cuda_gemm_sm90). The direct kernels here serve row-major FP8 weights, the shapes those kernels do not
// tile and other devices: they put the (up to) 16 activation rows in the M dimension of m16n8k16 f16 tensor-core
// tiles, so the arithmetic per weight byte stays far below what the tensor cores can do and the kernels run at the
// weight byte rate. A CTA of 8 warps owns 32 output channels (4 n8 tiles), two CTAs per SM; the warps split K and
// are summed through shared memory at the end. Each lane loads its weights straight into registers, double-buffered
// (the next step's loads are in flight while the current step computes). The dot product along K is order-free, so
// the k index of each fragment is permuted: lane t owns a contiguous slice of K (16 fp8 or 32 int4 values), and its
// activation fragments are read as contiguous 16-byte vectors too. Weights convert to f16 exactly (e4m3) or as
// (q - 8) * scale (int4; the Marlin magic-number trick: OR the nibble into the mantissa of 1024.0 and subtract).
// The kernel versions measured against these are in dev/cuda (gemm_decode_lab.cu, README.md).
#include "common.cuh"

namespace {

constexpr int GW = 8;        // warps per CTA
constexpr int BN = 64;       // the entries' column multiple
constexpr int DBN = 32;      // output channels per CTA of the direct kernels

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

// Direct loads of the weights into registers (no L1 allocation: each byte is read once).
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

template <bool M16>
__global__ void __launch_bounds__(GW * 32, 2) gemm_fp8w_direct(const __nv_bfloat16 *x, const uint8_t *w,
                                                                 const float *scale, __nv_bfloat16 *y, int m, int n,
                                                                 int k) {
    __shared__ float red[GW * 16 * DBN];
    constexpr int XCH = M16 ? 4 : 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * DBN;
    const int nchunk = k / 64;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto fetch = [&](int c, uint4 *wv, uint4 *xv) {
        const int kb = c * 64 + 16 * t;
#pragma unroll
        for (int nt = 0; nt < DBN / 8; ++nt) wv[nt] = ld_stream(w + (size_t)(n0 + nt * 8 + g) * k + kb);
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) {
            int row = g + (xc >> 1) * 8;
            xv[xc] = row < m ? __ldg(reinterpret_cast<const uint4 *>(x + (size_t)row * k + kb + (xc & 1) * 8)) : zero;
        }
    };
    float acc[DBN / 8][4];
#pragma unroll
    for (int nt = 0; nt < DBN / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    uint4 wcur[DBN / 8], xcur[XCH];
    if (warp < nchunk) fetch(warp, wcur, xcur);
    for (int c = warp; c < nchunk; c += GW) {
        uint4 wnx[DBN / 8], xnx[XCH];
        if (c + GW < nchunk) fetch(c + GW, wnx, xnx);
        uint32_t xa[8], xb[8];
        cvt_x(xcur[0], xa);
        cvt_x(xcur[1], xa + 4);
        if (M16) { cvt_x(xcur[2], xb); cvt_x(xcur[3], xb + 4); }
#pragma unroll
        for (int nt = 0; nt < DBN / 8; ++nt)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                uint32_t a[4] = {xa[2 * j], M16 ? xb[2 * j] : 0u, xa[2 * j + 1], M16 ? xb[2 * j + 1] : 0u};
                uint32_t word = j == 0 ? wcur[nt].x : j == 1 ? wcur[nt].y : j == 2 ? wcur[nt].z : wcur[nt].w;
                uint32_t b0, b1;
                byte4_to_f16x4<ASSAY_CUDA_FP8_E4M3>(word, b0, b1);
                mma_f16_16816(acc[nt], a, b0, b1);
            }
#pragma unroll
        for (int nt = 0; nt < DBN / 8; ++nt) wcur[nt] = wnx[nt];
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) xcur[xc] = xnx[xc];
    }
    reduce_store<DBN>(acc, red, scale, y, m, n, n0);
}

// XF16: X is f16 already (assay_cuda_gemm_int4g128_xf16's shapes and devices outside its Hopper kernel), so the
// fragments go to the f16 mma as loaded; otherwise bf16 X is converted per fragment.
template <bool M16, bool XF16 = false>
__global__ void __launch_bounds__(GW * 32, 2) gemm_int4_direct(const __nv_bfloat16 *x, const uint8_t *wp,
                                                                 const __half *scales, __nv_bfloat16 *y, int m, int n,
                                                                 int k) {
    __shared__ float red[GW * 16 * DBN];
    constexpr int XCH = M16 ? 8 : 4;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * DBN;
    const int ngroup = k / 128;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto fetch = [&](int gr, uint4 *wv, uint4 *xv, __half *sv) {
#pragma unroll
        for (int nt = 0; nt < DBN / 8; ++nt) {
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
    float acc[DBN / 8][4];
#pragma unroll
    for (int nt = 0; nt < DBN / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    uint4 wcur[DBN / 8], xcur[XCH];
    __half scur[DBN / 8];
    if (warp < ngroup) fetch(warp, wcur, xcur, scur);
    for (int gr = warp; gr < ngroup; gr += GW) {
        uint4 wnx[DBN / 8], xnx[XCH];
        __half snx[DBN / 8];
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
        for (int nt = 0; nt < DBN / 8; ++nt) {
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
        for (int nt = 0; nt < DBN / 8; ++nt) { wcur[nt] = wnx[nt]; scur[nt] = snx[nt]; }
#pragma unroll
        for (int xc = 0; xc < XCH; ++xc) xcur[xc] = xnx[xc];
    }
    reduce_store<DBN>(acc, red, nullptr, y, m, n, n0);
}

// Vectorized version (k % 8 == 0): 16-byte loads of 8 bf16, 8-byte stores of 8 codes; the second pass re-reads
// the row from L1/L2 (a row of 8192 values is 16 KB).
__global__ void quant_fp8_rows_v8(const __nv_bfloat16 *x, uint8_t *out, float *scale, int k) {
    __shared__ float wmax[32];
    const uint4 *row = reinterpret_cast<const uint4 *>(x + (size_t)blockIdx.x * k);
    const int nv = k / 8;
    float mx = 0.f;
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        uint4 v = __ldg(row + i);
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float2 f = __bfloat1622float2(h[j]);
            mx = fmaxf(mx, fmaxf(fabsf(f.x), fabsf(f.y)));
        }
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? wmax[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
        if (threadIdx.x == 0) wmax[0] = v;
    }
    __syncthreads();
    const float amax = wmax[0];
    const float inv = amax > 0.f ? 448.f / amax : 0.f;
    if (threadIdx.x == 0) scale[blockIdx.x] = amax / 448.f;
    uint2 *dst = reinterpret_cast<uint2 *>(out + (size_t)blockIdx.x * k);
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        uint4 v = __ldg(row + i);
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
        uint32_t w[2] = {0, 0};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float2 f = __bfloat1622float2(h[j]);
            __nv_fp8x2_storage_t c = __nv_cvt_float2_to_fp8x2(make_float2(f.x * inv, f.y * inv), __NV_SATFINITE, __NV_E4M3);
            w[j >> 1] |= (uint32_t)c << (16 * (j & 1));
        }
        dst[i] = make_uint2(w[0], w[1]);
    }
}

__global__ void quant_fp8_rows(const __nv_bfloat16 *x, __nv_fp8_storage_t *out, float *scale, int k) {
    __shared__ float wmax[32];
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * k;
    float mx = 0.f;
    for (int i = threadIdx.x; i < k; i += blockDim.x) mx = fmaxf(mx, fabsf(__bfloat162float(row[i])));
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? wmax[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
        if (threadIdx.x == 0) wmax[0] = v;
    }
    __syncthreads();
    const float amax = wmax[0];
    const float s = amax / 448.f;
    const float inv = amax > 0.f ? 448.f / amax : 0.f;
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        out[(size_t)blockIdx.x * k + i] =
            __nv_cvt_float_to_fp8(__bfloat162float(row[i]) * inv, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace

extern "C" int assay_cuda_gemm_fp8w(const void *x, const uint8_t *w, const float *w_scale, void *y, int32_t m,
                                    int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!x || !w || !w_scale || !y) return assay_cuda_fail("gemm_fp8w: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 64 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_fp8w: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%64==0)", m, n, k);
    cudaStream_t s = (cudaStream_t)stream;
    if (m > 8)
        gemm_fp8w_direct<true><<<n / DBN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale, (__nv_bfloat16 *)y, m,
                                                           n, k);
    else
        gemm_fp8w_direct<false><<<n / DBN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale, (__nv_bfloat16 *)y, m,
                                                            n, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_gemm_fp8w_packed(const void *x, const uint8_t *wp, const float *w_scale, void *y,
                                           int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!x || !wp || !w_scale || !y) return assay_cuda_fail("gemm_fp8w_packed: null pointer argument");
    if (m < 1 || m > 16 || n % 128 || k % 256 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_fp8w_packed: shape m=%d n=%d k=%d (need 1<=m<=16, n%%128==0, k%%256==0)", m, n, k);
    int rc = assay_cuda_gemm_sm90(GEMM_SM90_FP8, x, wp, w_scale, NULL, y, m, n, k, (cudaStream_t)stream);
    if (rc < 0) return -1;
    if (rc == 0) return assay_cuda_fail("gemm_fp8w_packed: needs a compute capability 9.0 device");
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

// The direct INT4 kernel (XF16: on f16 X), for the shapes and devices the Hopper kernel declines.
template <bool XF16>
static void launch_int4_direct(const void *x, const uint8_t *wp, const uint16_t *scales, void *y, int32_t m, int32_t n,
                               int32_t k, cudaStream_t s) {
    if (m > 8)
        gemm_int4_direct<true, XF16><<<n / DBN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp, (const __half *)scales,
                                                                 (__nv_bfloat16 *)y, m, n, k);
    else
        gemm_int4_direct<false, XF16><<<n / DBN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp, (const __half *)scales,
                                                                  (__nv_bfloat16 *)y, m, n, k);
}

extern "C" int assay_cuda_gemm_int4g128(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                        int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!x || !wp || !scales || !y) return assay_cuda_fail("gemm_int4g128: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 128 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_int4g128: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%128==0)", m, n,
                               k);
    cudaStream_t s = (cudaStream_t)stream;
    int rc = assay_cuda_gemm_sm90(GEMM_SM90_INT4, x, wp, NULL, scales, y, m, n, k, s);
    if (rc < 0) return -1;
    if (rc == 0) launch_int4_direct<false>(x, wp, scales, y, m, n, k, s);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_gemm_int4g128_xf16(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                             int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!x || !wp || !scales || !y) return assay_cuda_fail("gemm_int4g128_xf16: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 128 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_int4g128_xf16: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%128==0)", m,
                               n, k);
    cudaStream_t s = (cudaStream_t)stream;
    int rc = assay_cuda_gemm_sm90(GEMM_SM90_INT4_XF16, x, wp, NULL, scales, y, m, n, k, s);
    if (rc < 0) return -1;
    if (rc == 0) launch_int4_direct<true>(x, wp, scales, y, m, n, k, s);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_quant_fp8_per_token(const void *x, uint8_t *out, float *scale, int32_t m, int32_t k,
                                              assay_cuda_stream stream) {
    if (!x || !out || !scale) return assay_cuda_fail("quant_fp8_per_token: null pointer argument");
    if (m <= 0 || k <= 0) return assay_cuda_fail("quant_fp8_per_token: shape m=%d k=%d", m, k);
    if (k % 8 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)out & 7) == 0)
        quant_fp8_rows_v8<<<m, 256, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)x, out, scale, k);
    else
        quant_fp8_rows<<<m, 256, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)x, (__nv_fp8_storage_t *)out,
                                                            scale, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
