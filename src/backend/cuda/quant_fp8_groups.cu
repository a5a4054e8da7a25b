// Dynamic FP8 E4M3 quantization of activations in 1x128 groups (per token, per 128 channels): the activation side
// of the DeepSeek-style block recipe that assay_cuda_blas_gemm_fp8(..., ASSAY_CUDA_FP8_BLOCK_128, ...) consumes.
//
// A warp quantizes 4 consecutive groups, one at a time: 32 lanes x 4 values = 128, so a group's maximum is five
// shuffles and every load and store is a full 8-byte / 4-byte lane access. The same arithmetic as the per-token
// quantizer (gemm_decode.cu): scale = amax / 448, code = e4m3_rn_satfinite(x * (448 / amax)), scale 0 and codes 0 for an all-zero group.
#include "common.cuh"

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kGroupsPerWarp = 4;  // loads of 4 groups issued before the first reduction: more bytes in flight

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
quant_fp8_groups128(const __nv_bfloat16 *x, uint8_t *out, float *scale, int m, int k) {
    const int groups_per_row = k / 128;
    const long n_groups = (long)m * groups_per_row;
    const long first = ((long)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5)) * kGroupsPerWarp;
    const int lane = threadIdx.x & 31;
    uint2 raw[kGroupsPerWarp];
#pragma unroll
    for (int i = 0; i < kGroupsPerWarp; ++i)
        if (first + i < n_groups)  // groups are consecutive in memory: group g starts at element 128 g
            raw[i] = __ldg(reinterpret_cast<const uint2 *>(x + (size_t)(first + i) * 128 + lane * 4));
#pragma unroll
    for (int i = 0; i < kGroupsPerWarp; ++i) {
        const long group = first + i;
        if (group >= n_groups) break;
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw[i]);
        const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
        float mx = fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y)));
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
        const float inv = mx > 0.f ? 448.f / mx : 0.f;
        const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a.x * inv, a.y * inv), __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(b.x * inv, b.y * inv), __NV_SATFINITE, __NV_E4M3);
        *reinterpret_cast<uint32_t *>(out + (size_t)group * 128 + lane * 4) = lo | hi << 16;
        // Token index fastest: the layout cuBLASLt's VEC128_32F mode reads for the activation operand.
        const int row = (int)(group / groups_per_row), g = (int)(group % groups_per_row);
        if (lane == 0) scale[(size_t)g * m + row] = mx / 448.f;
    }
}

}  // namespace

extern "C" int assay_cuda_quant_fp8_groups128(const void *x_bf16, uint8_t *out_e4m3, float *scale, int32_t m,
                                              int32_t k, assay_cuda_stream stream) {
    if (!x_bf16 || !out_e4m3 || !scale) return assay_cuda_fail("quant_fp8_groups128: null pointer argument");
    if (m <= 0 || k <= 0 || k % 128)
        return assay_cuda_fail("quant_fp8_groups128: shape m=%d k=%d (k must be a positive multiple of 128)", m, k);
    const long groups = (long)m * (k / 128);
    const long per_block = (long)kWarpsPerBlock * kGroupsPerWarp;
    const unsigned blocks = (unsigned)((groups + per_block - 1) / per_block);
    quant_fp8_groups128<<<blocks, kWarpsPerBlock * 32, 0, (cudaStream_t)stream>>>(
        (const __nv_bfloat16 *)x_bf16, out_e4m3, scale, m, k);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
