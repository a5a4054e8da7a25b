// FP8 prefill attention (portable mma.sync version) and its input preparation: randomized Hadamard rotation
// ("incoherent processing") and per-row E4M3 quantization.
//
// Q, K and V are stored as e4m3 codes with one fp32 scale per (token, head) row. Q and K may be rotated by the
// same orthogonal matrix M = diag(signs) H / sqrt(d) first: (Q M)(K M)^T = Q K^T exactly, while an outlier
// channel is spread over all d coordinates, so the per-row scale no longer has to cover one huge value and
// the other channels keep their precision. In the kernel the codes become f16 exactly; S = codes_q . codes_k
// is rescaled per element by q_scale[row] * k_scale[col], and the V scales are folded into P (P[:, j] *=
// v_scale[j]) so the P V product needs no per-row fix-up. Same tiling as the bf16 kernel with 64-row Q tiles.
// This is the numerics reference for an FP8 path; the fast Hopper version (wgmma on e4m3) is not written yet.
#include "common.cuh"
#include <math.h>

namespace {

constexpr int FBR = 64, FBC = 64, FNW = 4;

// One warp per (row, head): optional sign flip + fast Walsh-Hadamard transform in registers
// (hadamard_rotate_lane: lane holds E = d/32 consecutive values), then amax -> scale -> e4m3.
template <int D>
__global__ void quant_rows_fp8(const __nv_bfloat16 *x, long rows, const int8_t *signs, uint8_t *out, float *scale) {
    constexpr int E = D / 32;
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    float v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = __bfloat162float(x[row * D + lane * E + e]);
    if (signs) hadamard_rotate_lane<E>(v, signs, lane);
    float mx = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) mx = fmaxf(mx, fabsf(v[e]));
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float inv = mx > 0.f ? 448.f / mx : 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) out[row * D + lane * E + e] = __nv_cvt_float_to_fp8(v[e] * inv, __NV_SATFINITE, __NV_E4M3);
    if (lane == 0) scale[row] = mx / 448.f;
}

struct Fp8Params {
    const uint8_t *q, *k, *v;
    const float *qs, *ks, *vs;  // per (token, head) scales: [total][heads]
    __nv_bfloat16 *o;
    const int32_t *cu_q, *cu_k;
    int hq, hkv;
    float scale_log2;
    int causal;
};

__device__ __forceinline__ uint32_t e4m3x2_f16x2(uint32_t w) {
    __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xFFFF), __NV_E4M3);
    return (uint32_t)r.x | ((uint32_t)r.y << 16);
}

template <int D>
__device__ __forceinline__ void load_rows8(uint8_t *dst, const uint8_t *base, int row0, int nvalid, int stride) {
    constexpr int CH = D / 16, LD = D + 16;
    for (int i = threadIdx.x; i < 64 * CH; i += FNW * 32) {
        int r = i / CH, c = i % CH;
        bool ok = r < nvalid;
        cp_async16(dst + r * LD + c * 16, ok ? base + (size_t)(row0 + r) * stride + c * 16 : base, ok ? 16 : 0);
    }
}

template <int D>
__global__ void __launch_bounds__(FNW * 32) fa_fp8_prefill(Fp8Params p) {
    constexpr int LD = D + 16;
    __shared__ __align__(16) uint8_t Qs[FBR * LD];
    __shared__ __align__(16) uint8_t Ks[2][FBC * LD];
    __shared__ __align__(16) uint8_t Vs[2][FBC * LD];
    __shared__ float kss[2][FBC], vss[2][FBC];
    const int b = blockIdx.z, h = blockIdx.y, mblk = gridDim.x - 1 - blockIdx.x;
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * FBR >= Lq) return;
    const int hk = h / (p.hq / p.hkv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const uint8_t *kbase = p.k + ((size_t)k0 * p.hkv + hk) * D;
    const uint8_t *vbase = p.v + ((size_t)k0 * p.hkv + hk) * D;
    load_rows8<D>(Qs, p.q + ((size_t)q0 * p.hq + h) * D, mblk * FBR, Lq - mblk * FBR, p.hq * D);
    cp_async_commit();
    int n_total = (Lk + FBC - 1) / FBC, n_max = n_total;
    if (p.causal) {
        int x = (mblk + 1) * FBR + Lk - Lq;
        n_max = x <= 0 ? 0 : min(n_total, (x + FBC - 1) / FBC);
    }
    auto load_kv = [&](int j, int st) {
        load_rows8<D>(Ks[st], kbase, j * FBC, Lk - j * FBC, p.hkv * D);
        load_rows8<D>(Vs[st], vbase, j * FBC, Lk - j * FBC, p.hkv * D);
        if (threadIdx.x < FBC) {
            int key = j * FBC + threadIdx.x;
            bool ok = key < Lk;
            kss[st][threadIdx.x] = ok ? p.ks[(size_t)(k0 + key) * p.hkv + hk] : 0.f;
            vss[st][threadIdx.x] = ok ? p.vs[(size_t)(k0 + key) * p.hkv + hk] : 0.f;
        }
    };
    if (n_max > 0) load_kv(0, 0);
    cp_async_commit();

    const int rbase = mblk * FBR + warp * 16;  // first row of this warp (sequence-relative)
    float qsc[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        int row = rbase + g + 8 * r;
        qsc[r] = row < Lq ? p.qs[(size_t)(q0 + row) * p.hq + h] : 0.f;
    }
    float o[D / 8][4];
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    uint32_t qa[D / 16][4];
    const int diag = Lk - Lq;

    for (int j = 0; j < n_max; ++j) {
        const int st = j & 1;
        if (j + 1 < n_max) {
            __syncthreads();  // stage st^1 (and its scales) is free: iteration j-1 finished reading it
            load_kv(j + 1, st ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    int row = warp * 16 + g + (e & 1) * 8, col = kk * 16 + 2 * t + (e >> 1) * 8;
                    qa[kk][e] = e4m3x2_f16x2(*reinterpret_cast<const uint16_t *>(Qs + row * LD + col));
                }
        }
        float s[FBC / 8][4];
#pragma unroll
        for (int nt = 0; nt < FBC / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int nt = 0; nt < FBC / 8; ++nt) {
                const uint8_t *kr = Ks[st] + (nt * 8 + g) * LD + kk * 16 + 2 * t;
                mma_f16_16816(s[nt], qa[kk], e4m3x2_f16x2(*reinterpret_cast<const uint16_t *>(kr)),
                              e4m3x2_f16x2(*reinterpret_cast<const uint16_t *>(kr + 8)));
            }
        const bool need_mask = (j + 1) * FBC > Lk || (p.causal && (j + 1) * FBC - 1 > mblk * FBR + diag);
#pragma unroll
        for (int nt = 0; nt < FBC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                int c = nt * 8 + 2 * t + (e & 1);
                s[nt][e] *= qsc[e >> 1] * kss[st][c];
                if (need_mask) {
                    int col = j * FBC + c, row = rbase + g + (e >> 1) * 8;
                    if (col >= Lk || (p.causal && col > row + diag)) s[nt][e] = -INFINITY;
                }
            }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < FBC / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            mx = warp_max_quad(mx);
            float m_new = fmaxf(m[r], mx);
            float m_sc = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
            float alpha = exp2f(m[r] * p.scale_log2 - m_sc);
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < FBC / 8; ++nt)
#pragma unroll
                for (int e = 2 * r; e < 2 * r + 2; ++e) {
                    float pr = exp2f(fmaf(s[nt][e], p.scale_log2, -m_sc));
                    sum += pr;
                    s[nt][e] = pr * vss[st][nt * 8 + 2 * t + (e & 1)];  // fold the V row scale into P
                }
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
#pragma unroll
            for (int nt = 0; nt < D / 8; ++nt) {
                o[nt][2 * r] *= alpha;
                o[nt][2 * r + 1] *= alpha;
            }
        }
#pragma unroll
        for (int kc = 0; kc < FBC / 16; ++kc) {
            uint32_t a[4] = {pack_f16(s[2 * kc][0], s[2 * kc][1]), pack_f16(s[2 * kc][2], s[2 * kc][3]),
                             pack_f16(s[2 * kc + 1][0], s[2 * kc + 1][1]), pack_f16(s[2 * kc + 1][2], s[2 * kc + 1][3])};
            const uint8_t *v0 = Vs[st] + (kc * 16 + 2 * t) * LD;
#pragma unroll
            for (int nt = 0; nt < D / 8; ++nt) {
                const int d = nt * 8 + g;
                uint32_t w0 = (uint32_t)v0[d] | ((uint32_t)v0[LD + d] << 8);
                uint32_t w1 = (uint32_t)v0[8 * LD + d] | ((uint32_t)v0[9 * LD + d] << 8);
                mma_f16_16816(o[nt], a, e4m3x2_f16x2(w0), e4m3x2_f16x2(w1));
            }
        }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float lsum = warp_sum_quad(l[r]);
        float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        int row = rbase + g + r * 8;
        if (row >= Lq) continue;
        __nv_bfloat16 *dst = p.o + ((size_t)(q0 + row) * p.hq + h) * D;
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt)
            *reinterpret_cast<uint32_t *>(dst + nt * 8 + 2 * t) = pack_bf16(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
    }
}

}  // namespace

extern "C" int assay_cuda_fp8_quant_rows(const void *x, int64_t rows, int32_t d, const int8_t *signs, uint8_t *out,
                                         float *scale, assay_cuda_stream stream) {
    if (!x || !out || !scale) return assay_cuda_fail("fp8_quant_rows: null pointer argument");
    if (rows <= 0) return 0;
    unsigned blocks = (unsigned)((rows + 7) / 8);
    cudaStream_t s = (cudaStream_t)stream;
    if (d == 128) quant_rows_fp8<128><<<blocks, 256, 0, s>>>((const __nv_bfloat16 *)x, rows, signs, out, scale);
    else if (d == 64) quant_rows_fp8<64><<<blocks, 256, 0, s>>>((const __nv_bfloat16 *)x, rows, signs, out, scale);
    else return assay_cuda_fail("fp8_quant_rows: d %d not supported (64, 128)", d);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_attn_prefill_fp8(const assay_cuda_attn_prefill_fp8_args *a, assay_cuda_stream stream) {
    if (!a || !a->q || !a->k || !a->v || !a->q_scale || !a->k_scale || !a->v_scale || !a->o || !a->cu_seqlens_q ||
        !a->cu_seqlens_k)
        return assay_cuda_fail("attn_prefill_fp8: null pointer argument");
    if (a->batch <= 0 || a->n_heads_q <= 0 || a->n_heads_kv <= 0 || a->n_heads_q % a->n_heads_kv)
        return assay_cuda_fail("attn_prefill_fp8: bad shape");
    if (a->max_seqlen_q == 0) return 0;
    Fp8Params p;
    p.q = a->q; p.k = a->k; p.v = a->v;
    p.qs = a->q_scale; p.ks = a->k_scale; p.vs = a->v_scale;
    p.o = (__nv_bfloat16 *)a->o;
    p.cu_q = a->cu_seqlens_q; p.cu_k = a->cu_seqlens_k;
    p.hq = a->n_heads_q; p.hkv = a->n_heads_kv;
    p.scale_log2 = a->scale * 1.4426950408889634f;
    p.causal = a->causal;
    dim3 grid((a->max_seqlen_q + FBR - 1) / FBR, a->n_heads_q, a->batch);
    cudaStream_t s = (cudaStream_t)stream;
    if (a->head_dim == 128) fa_fp8_prefill<128><<<grid, FNW * 32, 0, s>>>(p);
    else if (a->head_dim == 64) fa_fp8_prefill<64><<<grid, FNW * 32, 0, s>>>(p);
    else return assay_cuda_fail("attn_prefill_fp8: head_dim %d not supported (64, 128)", a->head_dim);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
