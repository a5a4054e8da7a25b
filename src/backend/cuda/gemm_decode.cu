// Decode-shape GEMMs (M <= 16 activation rows): Y[m][n] = sum_k X[m][k] W[n][k], weights streamed once.
//
// Both kernels put the (up to) 16 activation rows in the M dimension of m16n8k16 f16 tensor-core tiles, so the
// arithmetic per weight byte stays far below what the tensor cores can do and the kernels run at the weight
// byte rate. A CTA of 8 warps owns 64 output channels (8 n8 tiles); the warps split K and are summed through
// shared memory at the end. Each lane fetches its weights with one 16-byte streaming load per n-tile and
// K step. The dot product along K is order-free, so the k index of each fragment is permuted: lane t owns a
// contiguous slice of K (16 fp8 or 32 int4 values), and its activation fragments are read as contiguous
// 16-byte vectors too. Weights convert to f16 exactly (e4m3) or as (q - 8) * scale (int4; the Marlin
// magic-number trick: OR the nibble into the mantissa of 1024.0 and subtract).
#include "common.cuh"

namespace {

constexpr int GW = 8;        // warps per CTA
constexpr int BN = 64;       // output channels per CTA

__device__ __forceinline__ uint4 ld_stream(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

// Loads NW words (2*NW bf16) of activation row `row` starting at column k, converted to f16x2; zeros past M.
template <int NW>
__device__ __forceinline__ void load_x(uint32_t *dst, const __nv_bfloat16 *x, int row, int m, int kdim, int k) {
    if (row < m) {
        const uint4 *src = reinterpret_cast<const uint4 *>(x + (size_t)row * kdim + k);
#pragma unroll
        for (int i = 0; i < NW / 4; ++i) {
            uint4 v = __ldg(src + i);
            dst[4 * i + 0] = bf16x2_to_f16x2(v.x);
            dst[4 * i + 1] = bf16x2_to_f16x2(v.y);
            dst[4 * i + 2] = bf16x2_to_f16x2(v.z);
            dst[4 * i + 3] = bf16x2_to_f16x2(v.w);
        }
    } else {
#pragma unroll
        for (int i = 0; i < NW; ++i) dst[i] = 0u;
    }
}

// Sums the warps' accumulators (rows g, g+8; cols 2t, 2t+1 of each n-tile) and writes bf16 outputs.
__device__ __forceinline__ void reduce_store(float (*acc)[4], float *red, const float *col_scale,
                                             __nv_bfloat16 *y, int m, int n, int n0) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[(warp * 16 + g + (e >> 1) * 8) * BN + nt * 8 + 2 * t + (e & 1)] = acc[nt][e];
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * BN; i += GW * 32) {
        int row = i / BN, c = i % BN;
        if (row >= m) continue;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < GW; ++w) s += red[(w * 16 + row) * BN + c];
        if (col_scale) s *= col_scale[n0 + c];
        y[(size_t)row * n + n0 + c] = __float2bfloat16(s);
    }
}

template <bool M16>
__global__ void __launch_bounds__(GW * 32) gemm_fp8w_kernel(const __nv_bfloat16 *x, const uint8_t *w,
                                                              const float *scale, __nv_bfloat16 *y, int m, int n,
                                                              int k) {
    __shared__ float red[GW * 16 * BN];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    float acc[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    const int nchunk = k / 64;
    for (int c = warp; c < nchunk; c += GW) {
        const int kb = c * 64 + 16 * t;  // this lane's 16 columns
        uint4 wv[BN / 8];
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) wv[nt] = ld_stream(w + (size_t)(n0 + nt * 8 + g) * k + kb);
        uint32_t xa[8], xb[8];
        load_x<8>(xa, x, g, m, k, kb);
        if (M16) load_x<8>(xb, x, g + 8, m, k, kb);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint32_t a[4] = {xa[2 * j], M16 ? xb[2 * j] : 0u, xa[2 * j + 1], M16 ? xb[2 * j + 1] : 0u};
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt) {
                uint32_t word = j == 0 ? wv[nt].x : j == 1 ? wv[nt].y : j == 2 ? wv[nt].z : wv[nt].w;
                uint32_t b0, b1;
                byte4_to_f16x4<ASSAY_CUDA_FP8_E4M3>(word, b0, b1);
                mma_f16_16816(acc[nt], a, b0, b1);
            }
        }
    }
    reduce_store(acc, red, scale, y, m, n, n0);
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
    __shared__ float red[GW * 16 * BN];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN;
    const int ngroup = k / 128;
    float acc[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    for (int gr = warp; gr < ngroup; gr += GW) {
        uint4 wv[BN / 8];
        __half2 sc[BN / 8];
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
            size_t tile = (size_t)(n0 / 8 + nt) * ngroup + gr;
            wv[nt] = ld_stream(wp + tile * 512 + lane * 16);
            sc[nt] = __half2half2(scales[(size_t)gr * n + n0 + nt * 8 + g]);
        }
        const int kb = gr * 128 + 32 * t;  // this lane's 32 columns
        uint32_t xa[16], xb[16];
        load_x<16>(xa, x, g, m, k, kb);
        if (M16) load_x<16>(xb, x, g + 8, m, k, kb);
#pragma unroll
        for (int wd = 0; wd < 4; ++wd) {
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt) {
                uint32_t word = wd == 0 ? wv[nt].x : wd == 1 ? wv[nt].y : wd == 2 ? wv[nt].z : wv[nt].w;
                uint32_t b0, b1, b2, b3;
                int4_dequant(word, b0, b1);
                int4_dequant(word >> 8, b2, b3);
                const int c0 = 2 * wd, c1 = 2 * wd + 1;  // virtual k16 steps held by this word
                uint32_t a0[4] = {xa[2 * c0], M16 ? xb[2 * c0] : 0u, xa[2 * c0 + 1], M16 ? xb[2 * c0 + 1] : 0u};
                uint32_t a1[4] = {xa[2 * c1], M16 ? xb[2 * c1] : 0u, xa[2 * c1 + 1], M16 ? xb[2 * c1 + 1] : 0u};
                mma_f16_16816(acc[nt], a0, hmul2_u32(b0, sc[nt]), hmul2_u32(b1, sc[nt]));
                mma_f16_16816(acc[nt], a1, hmul2_u32(b2, sc[nt]), hmul2_u32(b3, sc[nt]));
            }
        }
    }
    reduce_store(acc, red, nullptr, y, m, n, n0);
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
        gemm_fp8w_kernel<true><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale, (__nv_bfloat16 *)y,
                                                         m, n, k);
    else
        gemm_fp8w_kernel<false><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, w, w_scale,
                                                          (__nv_bfloat16 *)y, m, n, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_gemm_int4g128(const void *x, const uint8_t *wp, const uint16_t *scales, void *y,
                                        int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (!x || !wp || !scales || !y) return assay_cuda_fail("gemm_int4g128: null pointer argument");
    if (m < 1 || m > 16 || n % BN || k % 128 || n <= 0 || k <= 0)
        return assay_cuda_fail("gemm_int4g128: shape m=%d n=%d k=%d (need 1<=m<=16, n%%64==0, k%%128==0)", m, n,
                               k);
    cudaStream_t s = (cudaStream_t)stream;
    if (m > 8)
        gemm_int4_kernel<true><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp, (const __half *)scales,
                                                         (__nv_bfloat16 *)y, m, n, k);
    else
        gemm_int4_kernel<false><<<n / BN, GW * 32, 0, s>>>((const __nv_bfloat16 *)x, wp, (const __half *)scales,
                                                          (__nv_bfloat16 *)y, m, n, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_quant_fp8_per_token(const void *x, uint8_t *out, float *scale, int32_t m, int32_t k,
                                              assay_cuda_stream stream) {
    if (!x || !out || !scale) return assay_cuda_fail("quant_fp8_per_token: null pointer argument");
    if (m <= 0 || k <= 0) return assay_cuda_fail("quant_fp8_per_token: shape m=%d k=%d", m, k);
    quant_fp8_rows<<<m, 256, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)x, (__nv_fp8_storage_t *)out, scale,
                                                        k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
