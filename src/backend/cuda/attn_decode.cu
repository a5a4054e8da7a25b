// Paged decode attention: one query token per sequence, KV cache in pages, split-KV (Flash-Decoding) with a
// combine kernel.
//
// One CTA owns (sequence, kv head, split) and serves all G = Hq/Hkv query heads of that kv head, so each K/V
// byte is read from memory once. The G query heads are the M rows of an m16n8k16 tensor-core tile (rows >= G
// are zero), which keeps the arithmetic far below the byte rate even for 8-bit caches. Tiles of 128 tokens
// (K rows and the transposed V block) stream through a 3-stage cp.async pipeline that gathers pages through
// the block table; each of the 4 warps takes 32 tokens of a tile and keeps its own online-softmax state, and
// the warps are merged through shared memory at the end. 8-bit caches are converted to f16 in registers
// (exact for e4m3, e5m2 and int8) and use f16 mma; the per-head K scale is folded into the softmax scale and
// the V scale into the output.
#include "common.cuh"
#include <math.h>

namespace {

constexpr int DNW = 4;              // warps per CTA
constexpr int TILE = DNW * 32;      // tokens per pipeline stage
constexpr int STAGES = 3;

struct DecodeParams {
    const __nv_bfloat16 *q;
    const uint8_t *kp, *vp;
    __nv_bfloat16 *o;
    const int32_t *bt, *seq_lens;
    const float *k_scale, *v_scale;
    float *opart, *lse;  // [B][Hq][splits][D], [B][Hq][splits] (log2 domain)
    int hq, hkv, ps, max_pages, splits, tiles_per_split;
    float scale_log2;
};

template <int D, int DT>
struct DecodeCfg {
    static constexpr int ES = DT == ASSAY_CUDA_BF16 ? 2 : 1;
    static constexpr int KP = D * ES + 16;     // K row pitch in bytes (16-byte pad spreads banks)
    static constexpr int VP = TILE * ES + 16;  // V^T row pitch in bytes
    static constexpr int STAGE = TILE * KP + D * VP;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE;
};

// Two consecutive stored elements -> one packed register in the mma input type (bf16x2 or f16x2).
template <int DT>
__device__ __forceinline__ uint32_t frag2(const uint8_t *p) {
    if (DT == ASSAY_CUDA_BF16) return *reinterpret_cast<const uint32_t *>(p);
    uint32_t w = *reinterpret_cast<const uint16_t *>(p);
    if (DT == ASSAY_CUDA_FP8_E4M3) {
        __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)w, __NV_E4M3);
        return (uint32_t)r.x | ((uint32_t)r.y << 16);
    }
    if (DT == ASSAY_CUDA_FP8_E5M2) return __byte_perm(w, 0, 0x1404);
    return pack_f16((float)(int8_t)(w & 0xFF), (float)(int8_t)(w >> 8));
}

template <int D, int DT>
__device__ __forceinline__ void load_tile(uint8_t *Ks, uint8_t *Vs, const DecodeParams &p, int b, int kvh, int tok0,
                                          int seq_len) {
    using C = DecodeCfg<D, DT>;
    constexpr int KCH = D * C::ES / 16;    // 16-byte chunks per K row
    constexpr int VCH = TILE * C::ES / 16; // 16-byte chunks per V^T row of the tile
    constexpr int VTOK = 16 / C::ES;       // tokens per V chunk (stays inside one page: page_size >= 16)
    const int32_t *bt = p.bt + (size_t)b * p.max_pages;
    for (int i = threadIdx.x; i < TILE * KCH; i += TILE) {
        int r = i / KCH, c = i % KCH;
        int tok = tok0 + r;
        bool ok = tok < seq_len;
        const uint8_t *src = p.kp;
        if (ok) {
            int page = bt[tok / p.ps];
            src = p.kp + ((((size_t)page * p.hkv + kvh) * p.ps + tok % p.ps) * D) * C::ES + c * 16;
        }
        cp_async16(Ks + r * C::KP + c * 16, src, ok ? 16 : 0);
    }
    for (int i = threadIdx.x; i < D * VCH; i += TILE) {
        int d = i / VCH, c = i % VCH;
        int tok = tok0 + c * VTOK;
        bool ok = tok < seq_len;
        const uint8_t *src = p.vp;
        if (ok) {
            int page = bt[tok / p.ps];
            src = p.vp + ((((size_t)page * p.hkv + kvh) * D + d) * p.ps + tok % p.ps) * C::ES;
        }
        cp_async16(Vs + d * C::VP + c * 16, src, ok ? 16 : 0);
    }
}

template <int D, int DT>
__global__ void __launch_bounds__(TILE) paged_decode(DecodeParams p) {
    using C = DecodeCfg<D, DT>;
    constexpr bool F16 = DT != ASSAY_CUDA_BF16;
    extern __shared__ __align__(16) uint8_t smem[];
    const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int G = p.hq / p.hkv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int seq_len = p.seq_lens[b];
    const int n_tiles = (seq_len + TILE - 1) / TILE;
    const int it0 = split * p.tiles_per_split;
    const int it1 = min(n_tiles, it0 + p.tiles_per_split);
    const int ntile = max(0, it1 - it0);

    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ntile) load_tile<D, DT>(smem + s * C::STAGE, smem + s * C::STAGE + TILE * C::KP, p, b, kvh,
                                        (it0 + s) * TILE, seq_len);
        cp_async_commit();
    }

    // Query fragments for all k16 steps (rows = the G query heads of this kv head).
    uint32_t qa[D / 16][4];
    {
        const __nv_bfloat16 *q = p.q + ((size_t)b * p.hq + kvh * G) * D;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                int row = g + (e & 1) * 8, col = kk * 16 + 2 * t + (e >> 1) * 8;
                uint32_t v = row < G ? *reinterpret_cast<const uint32_t *>(q + (size_t)row * D + col) : 0u;
                qa[kk][e] = F16 ? bf16x2_to_f16x2(v) : v;
            }
    }
    const float ks = p.k_scale ? p.k_scale[kvh] : 1.f;
    const float sl2 = p.scale_log2 * ks;

    float o[D / 8][4];
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    for (int it = 0; it < ntile; ++it) {
        {
            int nx = it + STAGES - 1;
            if (nx < ntile) {
                uint8_t *base = smem + (nx % STAGES) * C::STAGE;
                load_tile<D, DT>(base, base + TILE * C::KP, p, b, kvh, (it0 + nx) * TILE, seq_len);
            }
            cp_async_commit();
        }
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        const uint8_t *Ks = smem + (it % STAGES) * C::STAGE;
        uint8_t *Vs = smem + (it % STAGES) * C::STAGE + TILE * C::KP;
        const int tok0 = (it0 + it) * TILE;
        if (tok0 + TILE > seq_len) {
            // The last V chunk may hold cache bytes past the sequence end (maybe NaN): P = 0 there, so zero them.
            int valid = seq_len - tok0, n = TILE - valid;
            for (int i = threadIdx.x; i < D * n; i += TILE) {
                int d = i / n, tk = valid + i % n;
                for (int e = 0; e < C::ES; ++e) Vs[d * C::VP + tk * C::ES + e] = 0;
            }
            __syncthreads();
        }

        float s[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const uint8_t *kr = Ks + (warp * 32 + nt * 8 + g) * C::KP + (kk * 16 + 2 * t) * C::ES;
                mma_16816<F16>(s[nt], qa[kk], frag2<DT>(kr), frag2<DT>(kr + 8 * C::ES));
            }
        if (tok0 + warp * 32 + 32 > seq_len) {
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (tok0 + warp * 32 + nt * 8 + 2 * t + (e & 1) >= seq_len) s[nt][e] = -INFINITY;
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            mx = warp_max_quad(mx);
            float m_new = fmaxf(m[r], mx);
            float m_sc = m_new == -INFINITY ? 0.f : m_new * sl2;
            float alpha = exp2f(m[r] * sl2 - m_sc);
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                float p0 = exp2f(fmaf(s[nt][2 * r], sl2, -m_sc));
                float p1 = exp2f(fmaf(s[nt][2 * r + 1], sl2, -m_sc));
                s[nt][2 * r] = p0;
                s[nt][2 * r + 1] = p1;
                sum += p0 + p1;
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
        for (int kc = 0; kc < 2; ++kc) {
            uint32_t a[4] = {pack2<F16>(s[2 * kc][0], s[2 * kc][1]), pack2<F16>(s[2 * kc][2], s[2 * kc][3]),
                             pack2<F16>(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                             pack2<F16>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
            for (int nt = 0; nt < D / 8; ++nt) {
                const uint8_t *vr = Vs + (nt * 8 + g) * C::VP + (warp * 32 + kc * 16 + 2 * t) * C::ES;
                mma_16816<F16>(o[nt], a, frag2<DT>(vr), frag2<DT>(vr + 8 * C::ES));
            }
        }
        __syncthreads();
    }
    cp_async_wait<0>();
    __syncthreads();

    // Merge the warps' states through shared memory (reusing the pipeline buffers).
    float *Mw = reinterpret_cast<float *>(smem);  // [DNW][16]
    float *Lw = Mw + DNW * 16;                     // [DNW][16]
    float *Ow = Lw + DNW * 16;                     // [DNW][16][D]
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float lsum = warp_sum_quad(l[r]);
        int row = g + r * 8;
        if (t == 0) {
            Mw[warp * 16 + row] = m[r] == -INFINITY ? -INFINITY : m[r] * sl2;
            Lw[warp * 16 + row] = lsum;
        }
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt) {
            Ow[(warp * 16 + row) * D + nt * 8 + 2 * t] = o[nt][2 * r];
            Ow[(warp * 16 + row) * D + nt * 8 + 2 * t + 1] = o[nt][2 * r + 1];
        }
    }
    __syncthreads();
    const float vs = p.v_scale ? p.v_scale[kvh] : 1.f;
    for (int i = threadIdx.x; i < G * D; i += TILE) {
        int row = i / D, d = i % D;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < DNW; ++w) mx = fmaxf(mx, Mw[w * 16 + row]);
        float L = 0.f, O = 0.f;
        if (mx != -INFINITY) {
#pragma unroll
            for (int w = 0; w < DNW; ++w) {
                float f = exp2f(Mw[w * 16 + row] - mx);
                L += f * Lw[w * 16 + row];
                O += f * Ow[(w * 16 + row) * D + d];
            }
        }
        float out = L > 0.f ? O / L * vs : 0.f;
        int hq = kvh * G + row;
        if (p.splits == 1) {
            p.o[((size_t)b * p.hq + hq) * D + d] = __float2bfloat16(out);
        } else {
            size_t idx = ((size_t)b * p.hq + hq) * p.splits + split;
            p.opart[idx * D + d] = out;
            if (d == 0) p.lse[idx] = L > 0.f ? mx + log2f(L) : -INFINITY;
        }
    }
}

template <int D>
__global__ void decode_combine(const float *opart, const float *lse, __nv_bfloat16 *o, int splits) {
    const size_t bh = blockIdx.x;
    const float *ls = lse + bh * splits;
    float mx = -INFINITY;
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, ls[s]);
    float W = 0.f, O = 0.f;
    if (mx != -INFINITY)
        for (int s = 0; s < splits; ++s) {
            float w = exp2f(ls[s] - mx);
            W += w;
            O += w * opart[(bh * splits + s) * D + threadIdx.x];
        }
    o[bh * D + threadIdx.x] = __float2bfloat16(W > 0.f ? O / W : 0.f);
}

template <int D, int DT>
int launch_decode(const assay_cuda_attn_decode_args *a, cudaStream_t stream) {
    using C = DecodeCfg<D, DT>;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(paged_decode<D, DT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)C::SMEM));
        configured = true;
    }
    DecodeParams p;
    p.q = (const __nv_bfloat16 *)a->q;
    p.kp = (const uint8_t *)a->k_pages;
    p.vp = (const uint8_t *)a->v_pages;
    p.o = (__nv_bfloat16 *)a->o;
    p.bt = a->block_table;
    p.seq_lens = a->seq_lens;
    p.k_scale = a->k_scale;
    p.v_scale = a->v_scale;
    p.hq = a->n_heads_q;
    p.hkv = a->n_heads_kv;
    p.ps = a->page_size;
    p.max_pages = a->max_pages_per_seq;
    p.splits = a->num_splits;
    int tiles = (a->max_seq_len + TILE - 1) / TILE;
    p.tiles_per_split = (tiles + a->num_splits - 1) / a->num_splits;
    if (p.tiles_per_split < 1) p.tiles_per_split = 1;
    p.scale_log2 = a->scale * 1.4426950408889634f;
    size_t nbh = (size_t)a->batch * a->n_heads_q;
    p.opart = (float *)a->workspace;
    p.lse = p.opart + nbh * a->num_splits * D;
    dim3 grid(a->num_splits, a->n_heads_kv, a->batch);
    paged_decode<D, DT><<<grid, TILE, C::SMEM, stream>>>(p);
    ASSAY_CUDA_LAUNCHED();
    if (a->num_splits > 1) {
        decode_combine<D><<<(unsigned)nbh, D, 0, stream>>>(p.opart, p.lse, p.o, a->num_splits);
        ASSAY_CUDA_LAUNCHED();
    }
    return 0;
}

template <int D>
int dispatch_dtype(const assay_cuda_attn_decode_args *a, cudaStream_t s) {
    switch (a->kv_dtype) {
    case ASSAY_CUDA_BF16: return launch_decode<D, ASSAY_CUDA_BF16>(a, s);
    case ASSAY_CUDA_FP8_E4M3: return launch_decode<D, ASSAY_CUDA_FP8_E4M3>(a, s);
    case ASSAY_CUDA_FP8_E5M2: return launch_decode<D, ASSAY_CUDA_FP8_E5M2>(a, s);
    case ASSAY_CUDA_INT8: return launch_decode<D, ASSAY_CUDA_INT8>(a, s);
    }
    return assay_cuda_fail("attn_decode: unknown kv dtype %d", (int)a->kv_dtype);
}

size_t smem_bytes(int d, assay_cuda_dtype dt) {
    int es = dt == ASSAY_CUDA_BF16 ? 2 : 1;
    return (size_t)STAGES * (TILE * (d * es + 16) + d * (TILE * es + 16));
}

}  // namespace

extern "C" size_t assay_cuda_attn_decode_workspace(assay_cuda_attn_decode_args *a) {
    if (a->num_splits <= 0) {
        // Pick the split count whose CTA count best fills whole waves; among near-equal ones the smallest
        // (fewer partial outputs to combine). Short contexts stay unsplit.
        int sms = assay_cuda_sm_count();
        if (sms <= 0) sms = 132;
        int per_sm = smem_bytes(a->head_dim, a->kv_dtype) <= 113 * 1024 ? 2 : 1;
        int slots = sms * per_sm;
        int tiles = (a->max_seq_len + TILE - 1) / TILE;
        long base = (long)a->batch * a->n_heads_kv;
        int max_s = tiles < 64 ? tiles : 64;
        if (max_s < 1) max_s = 1;
        double eff[65] = {0};
        double best = 0;
        for (int s = 1; s <= max_s; ++s) {
            double waves = (double)(base * s) / slots;
            eff[s] = waves / ceil(waves);
            if (eff[s] > best) best = eff[s];
        }
        int pick = 1;
        for (int s = 1; s <= max_s; ++s)
            if (eff[s] >= 0.93 * best) { pick = s; break; }
        int tps = (tiles + pick - 1) / pick;
        if (tps < 1) tps = 1;
        a->num_splits = tiles > 0 ? (tiles + tps - 1) / tps : 1;
    }
    if (a->num_splits == 1) return 0;
    size_t nbh = (size_t)a->batch * a->n_heads_q * a->num_splits;
    return nbh * a->head_dim * sizeof(float) + nbh * sizeof(float);
}

extern "C" int assay_cuda_attn_decode(const assay_cuda_attn_decode_args *a, assay_cuda_stream stream) {
    if (!a || !a->q || !a->k_pages || !a->v_pages || !a->o || !a->block_table || !a->seq_lens)
        return assay_cuda_fail("attn_decode: null pointer argument");
    if (a->batch <= 0 || a->n_heads_kv <= 0 || a->n_heads_q % a->n_heads_kv != 0 ||
        a->n_heads_q / a->n_heads_kv > 16)
        return assay_cuda_fail("attn_decode: bad heads %d/%d (group size must be 1..16)", a->n_heads_q,
                               a->n_heads_kv);
    if (a->page_size != 16 && a->page_size != 32 && a->page_size != 64 && a->page_size != 128)
        return assay_cuda_fail("attn_decode: page_size %d not supported (16, 32, 64, 128)", a->page_size);
    if (a->num_splits <= 0) return assay_cuda_fail("attn_decode: call assay_cuda_attn_decode_workspace first");
    assay_cuda_attn_decode_args tmp = *a;
    size_t need = assay_cuda_attn_decode_workspace(&tmp);
    if (need > a->workspace_bytes || (need && !a->workspace))
        return assay_cuda_fail("attn_decode: workspace of %zu bytes needed, %zu given", need, a->workspace_bytes);
    cudaStream_t s = (cudaStream_t)stream;
    if (a->head_dim == 128) return dispatch_dtype<128>(a, s);
    if (a->head_dim == 64) return dispatch_dtype<64>(a, s);
    return assay_cuda_fail("attn_decode: head_dim %d not supported (64, 128)", a->head_dim);
}
