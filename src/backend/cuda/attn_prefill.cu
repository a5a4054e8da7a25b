// Prefill attention, FlashAttention-2 style, bf16 in/out, fp32 accumulation on mma.sync tensor cores: the portable
// kernel (sm_80 and up) and the entry point, which runs the Hopper kernel of attn_prefill_sm90.cu on compute
// capability 9.0.
//
// One CTA owns BR = 16*MT*NW query rows of one (sequence, head); each warp owns 16*MT rows ("split-Q", so
// softmax statistics never leave the warp). K/V tiles of BC = 64 keys stream through a two-stage cp.async
// double buffer; S = Q K^T and O += P V use m16n8k16 with fragments loaded by ldmatrix (V transposed by
// ldmatrix.trans). Online softmax in base 2 with the scale folded into one FFMA; O is normalised once at the
// end. Rows are padded by 8 bf16 (16 bytes) so that the 8 row addresses of each ldmatrix phase fall in
// distinct bank groups. MT = 2 (128-row tiles of 4 warps x 32 rows): K/V fragments reused for two m16 tiles, half
// the shared-memory traffic per FLOP of 64-row tiles (+28% measured).
#include "common.cuh"
#include <math.h>

namespace {

constexpr int BC = 64;

struct PrefillParams {
    const __nv_bfloat16 *q, *k, *v;
    __nv_bfloat16 *o;
    float *lse;
    const int32_t *cu_q, *cu_k;
    int batch, hq, hkv;
    float scale_log2;  // softmax scale * log2(e)
    float scale;
    int causal;
};

// Copies rows [row0, row0 + ROWS) of a [rows][stride] bf16 matrix (rows >= nvalid are zero-filled) into a
// padded shared tile [ROWS][D + 8].
template <int D, int ROWS, int NT>
__device__ __forceinline__ void load_rows(__nv_bfloat16 *dst, const __nv_bfloat16 *base, int row0, int nvalid,
                                          int stride) {
    constexpr int CH = D / 8;  // 16-byte chunks per row
    for (int i = threadIdx.x; i < ROWS * CH; i += NT) {
        int r = i / CH, c = i % CH;
        bool ok = r < nvalid;
        const __nv_bfloat16 *src = ok ? base + (size_t)(row0 + r) * stride + c * 8 : base;
        cp_async16(dst + r * (D + 8) + c * 8, src, ok ? 16 : 0);
    }
}

template <int D, int MT, int NW>
__global__ void __launch_bounds__(NW * 32, (MT == 2 ? 1 : 2)) fa2_prefill(PrefillParams p) {
    constexpr int NT = NW * 32;
    constexpr int BR = 16 * MT * NW;
    constexpr int LD = D + 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16 *Qs = reinterpret_cast<__nv_bfloat16 *>(smem_raw);
    __nv_bfloat16 *Ks = Qs + BR * LD;      // [2][BC][LD]
    __nv_bfloat16 *Vs = Ks + 2 * BC * LD;  // [2][BC][LD]

    const int b = blockIdx.z, h = blockIdx.y;
    const int mblk = gridDim.x - 1 - blockIdx.x;  // heaviest causal blocks first
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * BR >= Lq) return;
    const int hk = h / (p.hq / p.hkv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;

    const __nv_bfloat16 *qbase = p.q + ((size_t)q0 * p.hq + h) * D;
    const __nv_bfloat16 *kbase = p.k + ((size_t)k0 * p.hkv + hk) * D;
    const __nv_bfloat16 *vbase = p.v + ((size_t)k0 * p.hkv + hk) * D;
    load_rows<D, BR, NT>(Qs, qbase, mblk * BR, Lq - mblk * BR, p.hq * D);
    cp_async_commit();

    int n_total = (Lk + BC - 1) / BC;
    int n_max = n_total;
    if (p.causal) {
        int x = (mblk + 1) * BR + Lk - Lq;
        n_max = x <= 0 ? 0 : min(n_total, (x + BC - 1) / BC);
    }

    float o[MT][D / 8][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][nt][e] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }

    if (n_max > 0) {
        load_rows<D, BC, NT>(Ks, kbase, 0, Lk, p.hkv * D);
        load_rows<D, BC, NT>(Vs, vbase, 0, Lk, p.hkv * D);
        cp_async_commit();
    }
    const int wrow0 = warp * 16 * MT;          // first row of this warp inside the tile
    const int diag = Lk - Lq;                   // causal offset (bottom-right alignment)

    for (int j = 0; j < n_max; ++j) {
        const int st = j & 1;
        if (j + 1 < n_max) {
            load_rows<D, BC, NT>(Ks + (st ^ 1) * BC * LD, kbase, (j + 1) * BC, Lk - (j + 1) * BC, p.hkv * D);
            load_rows<D, BC, NT>(Vs + (st ^ 1) * BC * LD, vbase, (j + 1) * BC, Lk - (j + 1) * BC, p.hkv * D);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const __nv_bfloat16 *Kt = Ks + st * BC * LD;
        const __nv_bfloat16 *Vt = Vs + st * BC * LD;

        float s[MT][BC / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                ldmatrix_x4(a[mt], Qs + (wrow0 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + kk * 16 +
                                       (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < BC / 16; ++np) {
                uint32_t bb[4];
                ldmatrix_x4(bb, Kt + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_bf16_16816(s[mt][2 * np], a[mt], bb[0], bb[1]);
                    mma_bf16_16816(s[mt][2 * np + 1], a[mt], bb[2], bb[3]);
                }
            }
        }

        // Masks: ragged end of K, and the causal diagonal. Only blocks that touch them pay for the test.
        const bool need_mask = (j + 1) * BC > Lk || (p.causal && (j + 1) * BC - 1 > mblk * BR + diag);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        int col = j * BC + nt * 8 + 2 * t + (e & 1);
                        int row = mblk * BR + wrow0 + mt * 16 + g + (e >> 1) * 8;
                        if (col >= Lk || (p.causal && col > row + diag)) s[mt][nt][e] = -INFINITY;
                    }
        }

        // Online softmax (base 2). Each row lives in one quad of lanes.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < BC / 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                mx = warp_max_quad(mx);
                float m_new = fmaxf(m[mt][r], mx);
                float m_sc = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
                float alpha = exp2f(m[mt][r] * p.scale_log2 - m_sc);
                float sum = 0.f;
#pragma unroll
                for (int nt = 0; nt < BC / 8; ++nt) {
                    float p0 = exp2f(fmaf(s[mt][nt][2 * r], p.scale_log2, -m_sc));
                    float p1 = exp2f(fmaf(s[mt][nt][2 * r + 1], p.scale_log2, -m_sc));
                    s[mt][nt][2 * r] = p0;
                    s[mt][nt][2 * r + 1] = p1;
                    sum += p0 + p1;
                }
                l[mt][r] = l[mt][r] * alpha + sum;
                m[mt][r] = m_new;
#pragma unroll
                for (int nt = 0; nt < D / 8; ++nt) {
                    o[mt][nt][2 * r] *= alpha;
                    o[mt][nt][2 * r + 1] *= alpha;
                }
            }

        // O += P V; the S accumulator layout of two n8 tiles is exactly the A fragment of one k16 step.
#pragma unroll
        for (int kc = 0; kc < BC / 16; ++kc) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                a[mt][0] = pack_bf16(s[mt][2 * kc][0], s[mt][2 * kc][1]);
                a[mt][1] = pack_bf16(s[mt][2 * kc][2], s[mt][2 * kc][3]);
                a[mt][2] = pack_bf16(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1]);
                a[mt][3] = pack_bf16(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t bb[4];
                ldmatrix_x4_trans(bb, Vt + (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_bf16_16816(o[mt][2 * dp], a[mt], bb[0], bb[1]);
                    mma_bf16_16816(o[mt][2 * dp + 1], a[mt], bb[2], bb[3]);
                }
            }
        }
        __syncthreads();  // the next iteration's prefetch overwrites this stage
    }
    cp_async_wait<0>();

    const int total_q = p.cu_q[p.batch];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float lsum = warp_sum_quad(l[mt][r]);
            float inv = lsum > 0.f ? 1.f / lsum : 0.f;
            int row = mblk * BR + wrow0 + mt * 16 + g + r * 8;
            if (row >= Lq) continue;
            __nv_bfloat16 *dst = p.o + ((size_t)(q0 + row) * p.hq + h) * D;
#pragma unroll
            for (int nt = 0; nt < D / 8; ++nt)
                *reinterpret_cast<uint32_t *>(dst + nt * 8 + 2 * t) =
                    pack_bf16(o[mt][nt][2 * r] * inv, o[mt][nt][2 * r + 1] * inv);
            if (p.lse && t == 0)
                p.lse[(size_t)h * total_q + q0 + row] = lsum > 0.f ? m[mt][r] * p.scale + logf(lsum) : -INFINITY;
        }
}

template <int D, int MT, int NW>
int launch_prefill(const assay_cuda_attn_prefill_args *a, cudaStream_t stream) {
    constexpr int BR = 16 * MT * NW;
    constexpr size_t smem = (size_t)(BR + 4 * BC) * (D + 8) * sizeof(__nv_bfloat16);
    static bool configured = false;  // the attribute is per function; setting it twice is harmless
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa2_prefill<D, MT, NW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
        configured = true;
    }
    PrefillParams p;
    p.q = (const __nv_bfloat16 *)a->q;
    p.k = (const __nv_bfloat16 *)a->k;
    p.v = (const __nv_bfloat16 *)a->v;
    p.o = (__nv_bfloat16 *)a->o;
    p.lse = a->lse;
    p.cu_q = a->cu_seqlens_q;
    p.cu_k = a->cu_seqlens_k;
    p.batch = a->batch;
    p.hq = a->n_heads_q;
    p.hkv = a->n_heads_kv;
    p.scale = a->scale;
    p.scale_log2 = a->scale * 1.4426950408889634f;
    p.causal = a->causal;
    dim3 grid((a->max_seqlen_q + BR - 1) / BR, a->n_heads_q, a->batch);
    fa2_prefill<D, MT, NW><<<grid, NW * 32, smem, stream>>>(p);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

}  // namespace

// attn_prefill_sm90.cu: the Hopper kernel (wgmma, TMA, warp specialization), sm_90a only.
int assay_cuda_attn_prefill_sm90(const assay_cuda_attn_prefill_args *a, int total_q, int total_k, cudaStream_t stream);

// True when the current device is compute capability 9.0 (the sm_90a code in this library runs there only).
static bool prefill_sm90_ok() {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
    return major == 9 && minor == 0;
}

extern "C" int assay_cuda_attn_prefill(const assay_cuda_attn_prefill_args *a, assay_cuda_stream stream) {
    if (!a || !a->q || !a->k || !a->v || !a->o || !a->cu_seqlens_q || !a->cu_seqlens_k)
        return assay_cuda_fail("attn_prefill: null pointer argument");
    if (a->batch <= 0 || a->max_seqlen_q < 0 || a->n_heads_q <= 0 || a->n_heads_kv <= 0 ||
        a->n_heads_q % a->n_heads_kv != 0)
        return assay_cuda_fail("attn_prefill: bad shape (batch %d, heads %d/%d)", a->batch, a->n_heads_q,
                               a->n_heads_kv);
    if (a->max_seqlen_q == 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (prefill_sm90_ok() && (a->head_dim == 128 || a->head_dim == 64)) {
        int32_t tq = a->total_q, tk = a->total_k;
        if (tq <= 0 || tk <= 0) {
            ASSAY_CUDA_TRY(cudaMemcpyAsync(&tq, a->cu_seqlens_q + a->batch, 4, cudaMemcpyDeviceToHost, s));
            ASSAY_CUDA_TRY(cudaMemcpyAsync(&tk, a->cu_seqlens_k + a->batch, 4, cudaMemcpyDeviceToHost, s));
            ASSAY_CUDA_TRY(cudaStreamSynchronize(s));
        }
        return assay_cuda_attn_prefill_sm90(a, tq, tk, s);
    }
    if (a->head_dim == 128) return launch_prefill<128, 2, 4>(a, s);
    if (a->head_dim == 64) return launch_prefill<64, 2, 4>(a, s);
    return assay_cuda_fail("attn_prefill: head_dim %d not supported (64, 128)", a->head_dim);
}
