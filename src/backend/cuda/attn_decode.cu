// Paged decode attention: one query token per sequence, KV cache in pages, split-KV (Flash-Decoding) with a
// combine kernel.
//
// One CTA owns (sequence, kv head, split) and serves all G = Hq/Hkv query heads of that kv head, so each K/V
// byte is read from memory once. The G query heads are the M rows of an m16n8k16 tensor-core tile (rows >= G
// are zero), which keeps the arithmetic far below the byte rate even for 8-bit caches. Tiles of 128 tokens
// (K rows and the transposed V block) stream through a 3-stage cp.async pipeline that gathers whole pages
// through the block table; each of 8 warps takes 16 tokens of a tile and keeps its own online-softmax state;
// the warps are merged through shared memory at the end. 8-bit caches are converted to f16 in registers
// (exact for e4m3, e5m2 and int8) and use f16 mma; the per-head K scale is folded into the softmax scale and
// the V scale into the output.
//
// Which kernel runs (decode_kernel): on Hopper (head_dim 128, group sizes <= 8) paged_decode_ring further down, a
// producer warp streaming 16-token units of K and V^T into a shared-memory ring that consumer warps drain
// independently, which reads bf16 caches at torch SDPA's byte rate; elsewhere the transposed kernel paged_decode_t
// (tokens as the mma rows, heads as columns; for bf16 caches with pages of <= 64 tokens its 4-warp form with
// 64-token tiles, two or three CTAs per SM), and paged_decode for group sizes above 8. The measured versions are in
// dev/cuda (attn_decode_lab.cu, README.md).
#include "common.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <math.h>

namespace {

constexpr int TG = 8;               // token groups: 16 tokens of each tile per group
constexpr int DSPLIT = 1;           // warps per token group, each owning head_dim / DSPLIT of P V
constexpr int DNW = DSPLIT * TG;    // warps per CTA
constexpr int NT = DNW * 32;        // threads per CTA
constexpr int TILE = TG * 16;       // tokens per pipeline stage
template <int DT>
struct Stages { static constexpr int N = 3; };
// One CTA per SM for bf16 d128 (its 3 stages fill shared memory); two otherwise (registers capped at 128).
template <int D, int DT>
struct MinBlocks { static constexpr int N = (DSPLIT == 1 && !(DT == ASSAY_CUDA_BF16 && D == 128)) ? 2 : 1; };

struct DecodeParams {
    const __nv_bfloat16 *q;
    const uint8_t *kp, *vp;
    __nv_bfloat16 *o;
    const int32_t *bt, *seq_lens;
    const float *k_scale, *v_scale;
    float *opart, *lse;  // [B][Hq][splits][D], [B][Hq][splits] (log2 domain)
    int hq, hkv, ps, lps, max_pages, splits, tiles_per_split;  // lps = log2(page_size)
    int prefetch_page;  // paged_decode: 1 = block-table entry fetched one tile ahead, 0 = at the tile's issue
                        // (assay_cuda_attn_decode: 0; the lab times 1)
    float scale_log2;
};

template <int D, int DT, int TL = TILE>
struct DecodeCfg {
    static constexpr int ES = DT == ASSAY_CUDA_BF16 ? 2 : 1;
    static constexpr int KP = D * ES + 16;     // K row pitch in bytes (16-byte pad spreads banks)
    static constexpr int VP = TL * ES + 16;  // V^T row pitch in bytes
    static constexpr int STAGE = TL * KP + D * VP;
    static constexpr int STAGES = Stages<DT>::N;
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

// Loads tokens [tok0, tok0 + TILE) of one kv head: K rows into Ks[TILE][KP], V^T into Vs[D][VP]. The tile
// holds TILE/ps whole pages; 2*ps threads share a page, read its block table entry once, and copy the page's
// contiguous K block and V block in 16-byte chunks (consecutive lanes, consecutive addresses). Tokens at or past
// seq_len are zero-filled.
// Block-table entry of the page this thread copies for the tile starting at tok0 (-1 past the sequence). It is
// fetched one tile before its use, so the table lookup never sits in front of the data loads.
__device__ __forceinline__ int tile_page(const DecodeParams &p, int b, int tok0, int seq_len) {
    const int tpp = (NT / TILE) << p.lps;
    const int ptok = tok0 + ((threadIdx.x / tpp) << p.lps);
    return ptok < seq_len ? p.bt[(size_t)b * p.max_pages + (ptok >> p.lps)] : -1;
}

template <int D, int DT, int TL = TILE>
__device__ __forceinline__ void load_tile(uint8_t *Ks, uint8_t *Vs, const DecodeParams &p, int kvh, int tok0,
                                          int seq_len, int page_id) {
    using C = DecodeCfg<D, DT, TL>;  // (threads per CTA) / TL = NT / TILE = 2 for every tile size
    constexpr int KCH = D * C::ES / 16;  // 16-byte chunks per K row
    const int lps = p.lps;
    const int tpp = (NT / TILE) << lps;  // threads per page
    const int slot = threadIdx.x / tpp, u = threadIdx.x - slot * tpp;
    const int ptok = tok0 + (slot << lps);  // first token of this thread's page
    const uint8_t *kblk = p.kp, *vblk = p.vp;
    const bool page_ok = ptok < seq_len;
    if (page_ok) {
        size_t page = (size_t)page_id;
        size_t blk = (page * p.hkv + kvh) * (size_t)(D * C::ES) << lps;  // K and V blocks have the same size
        kblk += blk;
        vblk += blk;
    }
    const int vrow_sh = lps + (C::ES == 2 ? 1 : 0) - 4;  // log2 of 16-byte chunks per V^T row of a page
    const int per_thread = KCH / (NT / TILE);             // chunks per thread for each of K and V
#pragma unroll
    for (int j = 0; j < per_thread; ++j) {
        int lin = u + tpp * j;
        int rip = lin / KCH, c = lin % KCH;  // K: row inside the page, chunk inside the row
        bool ok = page_ok && ptok + rip < seq_len;
        cp_async16(Ks + ((slot << lps) + rip) * C::KP + c * 16, ok ? kblk + lin * 16 : p.kp, ok ? 16 : 0);
        int d = lin >> vrow_sh, cc = lin & ((1 << vrow_sh) - 1);  // V^T: dim row, chunk along tokens
        bool okv = page_ok && ptok + cc * (16 / C::ES) < seq_len;
        cp_async16(Vs + d * C::VP + (slot << lps) * C::ES + cc * 16, okv ? vblk + lin * 16 : p.vp, okv ? 16 : 0);
    }
}

template <int D, int DT>
__global__ void __launch_bounds__(NT, (MinBlocks<D, DT>::N)) paged_decode(DecodeParams p) {
    using C = DecodeCfg<D, DT>;
    constexpr int STAGES = C::STAGES;
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
        if (s < ntile)
            load_tile<D, DT>(smem + s * C::STAGE, smem + s * C::STAGE + TILE * C::KP, p, kvh, (it0 + s) * TILE,
                             seq_len, tile_page(p, b, (it0 + s) * TILE, seq_len));
        cp_async_commit();
    }
    int page_next = STAGES - 1 < ntile ? tile_page(p, b, (it0 + STAGES - 1) * TILE, seq_len) : -1;

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

    const int dh = warp / TG;  // which half of head_dim this warp accumulates
    constexpr int DW = D / DSPLIT;  // head_dim columns of P V per warp
    float o[DW / 8][4];
#pragma unroll
    for (int nt = 0; nt < DW / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    for (int it = 0; it < ntile; ++it) {
        {
            int nx = it + STAGES - 1;
            if (nx < ntile) {
                uint8_t *base = smem + (nx % STAGES) * C::STAGE;
                int pg = p.prefetch_page ? page_next : tile_page(p, b, (it0 + nx) * TILE, seq_len);
                load_tile<D, DT>(base, base + TILE * C::KP, p, kvh, (it0 + nx) * TILE, seq_len, pg);
            }
            cp_async_commit();
            if (p.prefetch_page && nx + 1 < ntile) page_next = tile_page(p, b, (it0 + nx + 1) * TILE, seq_len);
        }
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        const uint8_t *Ks = smem + (it % STAGES) * C::STAGE;
        uint8_t *Vs = smem + (it % STAGES) * C::STAGE + TILE * C::KP;
        const int tok0 = (it0 + it) * TILE;
        if (tok0 + TILE > seq_len) {
            // The last V chunk may hold cache bytes past the sequence end (maybe NaN): P = 0 there, so zero them.
            int valid = seq_len - tok0, n = TILE - valid;
            for (int i = threadIdx.x; i < D * n; i += NT) {
                int d = i / n, tk = valid + i % n;
                for (int e = 0; e < C::ES; ++e) Vs[d * C::VP + tk * C::ES + e] = 0;
            }
            __syncthreads();
        }

        // Each warp: 16 tokens of the tile (two n8 tiles of S, one k16 step of P V) and half of head_dim in P V.
        // The two warps of a token group compute the same S and softmax state (cheap) and split the P V work.
        const int wt = (warp % TG) * 16;
        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                const uint8_t *kr = Ks + (wt + nt * 8 + g) * C::KP + (kk * 16 + 2 * t) * C::ES;
                mma_16816<F16>(s[nt], qa[kk], frag2<DT>(kr), frag2<DT>(kr + 8 * C::ES));
            }
        if (tok0 + wt + 16 > seq_len) {
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (tok0 + wt + nt * 8 + 2 * t + (e & 1) >= seq_len) s[nt][e] = -INFINITY;
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
            mx = warp_max_quad(mx);
            float m_new = fmaxf(m[r], mx);
            float m_sc = m_new == -INFINITY ? 0.f : m_new * sl2;
            float alpha = exp2f(m[r] * sl2 - m_sc);
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                float p0 = exp2f(fmaf(s[nt][2 * r], sl2, -m_sc));
                float p1 = exp2f(fmaf(s[nt][2 * r + 1], sl2, -m_sc));
                s[nt][2 * r] = p0;
                s[nt][2 * r + 1] = p1;
                sum += p0 + p1;
            }
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
            if (__any_sync(0xffffffffu, alpha != 1.f)) {  // the running max rarely moves after the first tiles
#pragma unroll
                for (int nt = 0; nt < DW / 8; ++nt) {
                    o[nt][2 * r] *= alpha;
                    o[nt][2 * r + 1] *= alpha;
                }
            }
        }
        {
            uint32_t a[4] = {pack2<F16>(s[0][0], s[0][1]), pack2<F16>(s[0][2], s[0][3]), pack2<F16>(s[1][0], s[1][1]),
                             pack2<F16>(s[1][2], s[1][3])};
#pragma unroll
            for (int nt = 0; nt < DW / 8; ++nt) {
                const uint8_t *vr = Vs + (dh * DW + nt * 8 + g) * C::VP + (wt + 2 * t) * C::ES;
                mma_16816<F16>(o[nt], a, frag2<DT>(vr), frag2<DT>(vr + 8 * C::ES));
            }
        }
        __syncthreads();
    }
    cp_async_wait<0>();
    __syncthreads();

    // Merge the warps' states through shared memory (reusing the pipeline buffers).
    float *Mw = reinterpret_cast<float *>(smem);  // [TG][16]
    float *Lw = Mw + TG * 16;                      // [TG][16]
    float *Ow = Lw + TG * 16;                      // [TG][16][D]
    const int tg = warp % TG;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float lsum = warp_sum_quad(l[r]);
        int row = g + r * 8;
        if (t == 0 && dh == 0) {
            Mw[tg * 16 + row] = m[r] == -INFINITY ? -INFINITY : m[r] * sl2;
            Lw[tg * 16 + row] = lsum;
        }
#pragma unroll
        for (int nt = 0; nt < DW / 8; ++nt) {
            Ow[(tg * 16 + row) * D + dh * DW + nt * 8 + 2 * t] = o[nt][2 * r];
            Ow[(tg * 16 + row) * D + dh * DW + nt * 8 + 2 * t + 1] = o[nt][2 * r + 1];
        }
    }
    __syncthreads();
    const float vs = p.v_scale ? p.v_scale[kvh] : 1.f;
    for (int i = threadIdx.x; i < G * D; i += NT) {
        int row = i / D, d = i % D;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < TG; ++w) mx = fmaxf(mx, Mw[w * 16 + row]);
        float L = 0.f, O = 0.f;
        if (mx != -INFINITY) {
#pragma unroll
            for (int w = 0; w < TG; ++w) {
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


// ---- paged_decode_t (transposed): S^T = K Q^T and O^T = V^T P^T -----------------------------------------------------
// The tokens are the M rows of m16n8k16 and the (<= 8) query heads the N columns, so the padding of G query
// heads to the tile is 8 columns instead of 16 rows: half the mma instructions of the kernel above, half the
// output accumulators (32 instead of 64 registers at d128), and K and V^T are A operands read with ldmatrix
// (bf16) or one 32-bit load per pair of registers (8-bit). P^T goes from the S^T accumulators to the B operand
// of P V by an 8x8 transpose in registers (movmatrix). For 8-bit caches the k order of both products is
// permuted so that each lane's four values are four consecutive bytes: in Q K^T lane t's k = 2t, 2t+1, 2t+8,
// 2t+9 hold head dims 4t..4t+3 (Q uses the same order), and in P V they hold tokens 4t..4t+3, which requires the
// S^T row r to be token perm(r) = 4 (r/2) + (r&1) for r < 8 and 4 ((r-8)/2) + 2 + (r&1) for r >= 8.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
    return d;
}
__device__ __forceinline__ int perm_tok(int r) { return r < 8 ? 4 * (r >> 1) + (r & 1) : 4 * ((r - 8) >> 1) + 2 + (r & 1); }

template <int DT>
__device__ __forceinline__ void byte4_pair(const uint8_t *p, uint32_t &lo, uint32_t &hi) {
    byte4_to_f16x4<DT>(*reinterpret_cast<const uint32_t *>(p), lo, hi);
}

// TGV warps of 16 tokens per tile (8: one CTA per SM for bf16 d128; 4: half the tile, two or three CTAs per SM).
template <int TGV, int D, int DT>
struct MinBlocksT { static constexpr int N = TGV == 8 ? MinBlocks<D, DT>::N : (DT == ASSAY_CUDA_BF16 && D == 128) ? 2 : 3; };

template <int D, int DT, int TGV>
__global__ void __launch_bounds__(TGV * 32, (MinBlocksT<TGV, D, DT>::N)) paged_decode_t(DecodeParams p) {
    constexpr int NT = TGV * 32, TILE = TGV * 16, TG = TGV;  // shadow the file-wide tile constants
    using C = DecodeCfg<D, DT, TILE>;
    constexpr int STAGES = C::STAGES;
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
        if (s < ntile)
            load_tile<D, DT, TILE>(smem + s * C::STAGE, smem + s * C::STAGE + TILE * C::KP, p, kvh, (it0 + s) * TILE,
                             seq_len, tile_page(p, b, (it0 + s) * TILE, seq_len));
        cp_async_commit();
    }
    // Q^T as the B operand: b0 = (k 2t..2t+1, head g), b1 = (k 2t+8.., head g); 8-bit: dims 4t..4t+3.
    uint32_t qb[D / 16][2];
    {
        const __nv_bfloat16 *q = p.q + ((size_t)b * p.hq + kvh * G) * D;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int col = F16 ? kk * 16 + 4 * t + 2 * e : kk * 16 + 2 * t + 8 * e;
                uint32_t v = g < G ? *reinterpret_cast<const uint32_t *>(q + (size_t)g * D + col) : 0u;
                qb[kk][e] = F16 ? bf16x2_to_f16x2(v) : v;
            }
    }
    const float ks = p.k_scale ? p.k_scale[kvh] : 1.f;
    const float sl2 = p.scale_log2 * ks;
    float o[D / 16][4];
#pragma unroll
    for (int mt = 0; mt < D / 16; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // heads 2t, 2t+1; l is this lane's partial sum
    const int wt = warp * 16;
    // token of S^T rows g and g + 8 inside the warp's 16
    const int r0 = F16 ? perm_tok(g) : g, r1 = F16 ? perm_tok(g + 8) : g + 8;

    for (int it = 0; it < ntile; ++it) {
        {
            int nx = it + STAGES - 1;
            if (nx < ntile) {
                uint8_t *base = smem + (nx % STAGES) * C::STAGE;
                load_tile<D, DT, TILE>(base, base + TILE * C::KP, p, kvh, (it0 + nx) * TILE, seq_len,
                                 tile_page(p, b, (it0 + nx) * TILE, seq_len));
            }
            cp_async_commit();
        }
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        const uint8_t *Ks = smem + (it % STAGES) * C::STAGE;
        uint8_t *Vs = smem + (it % STAGES) * C::STAGE + TILE * C::KP;
        const int tok0 = (it0 + it) * TILE;
        if (tok0 + TILE > seq_len) {
            int valid = seq_len - tok0, n = TILE - valid;
            for (int i = threadIdx.x; i < D * n; i += NT) {
                int d = i / n, tk = valid + i % n;
                for (int e = 0; e < C::ES; ++e) Vs[d * C::VP + tk * C::ES + e] = 0;
            }
            __syncthreads();
        }
        // S^T (16 tokens x 8 heads), two accumulator chains over head_dim
        float sa[4] = {0.f, 0.f, 0.f, 0.f}, sb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t a[4];
            if (!F16) {
                const uint8_t *pa = Ks + (wt + (lane & 7) + ((lane >> 3) & 1) * 8) * C::KP + (kk * 16 + (lane >> 4) * 8) * 2;
                ldmatrix_x4(a, pa);
            } else {
                byte4_pair<DT>(Ks + (wt + r0) * C::KP + kk * 16 + 4 * t, a[0], a[2]);
                byte4_pair<DT>(Ks + (wt + r1) * C::KP + kk * 16 + 4 * t, a[1], a[3]);
            }
            mma_16816<F16>((kk & 1) ? sb : sa, a, qb[kk][0], qb[kk][1]);
        }
        float sv[4] = {sa[0] + sb[0], sa[1] + sb[1], sa[2] + sb[2], sa[3] + sb[3]};
        if (tok0 + wt + 16 > seq_len) {
            if (tok0 + wt + r0 >= seq_len) sv[0] = sv[1] = -INFINITY;
            if (tok0 + wt + r1 >= seq_len) sv[2] = sv[3] = -INFINITY;
        }
        bool moved = false;
        float alpha[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {  // head 2t + j: values sv[j] (row g) and sv[j + 2] (row g + 8)
            float mx = fmaxf(sv[j], sv[j + 2]);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
            const float m_new = fmaxf(m[j], mx);
            const float m_sc = m_new == -INFINITY ? 0.f : m_new * sl2;
            alpha[j] = exp2f(m[j] * sl2 - m_sc);
            sv[j] = exp2f(fmaf(sv[j], sl2, -m_sc));
            sv[j + 2] = exp2f(fmaf(sv[j + 2], sl2, -m_sc));
            l[j] = l[j] * alpha[j] + sv[j] + sv[j + 2];
            m[j] = m_new;
            moved |= alpha[j] != 1.f;
        }
        if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
            for (int mt = 0; mt < D / 16; ++mt) {
                o[mt][0] *= alpha[0]; o[mt][1] *= alpha[1];
                o[mt][2] *= alpha[0]; o[mt][3] *= alpha[1];
            }
        }
        // P^T as the B operand of O^T += V^T P^T
        const uint32_t pb0 = movmatrix_trans(pack2<F16>(sv[0], sv[1]));
        const uint32_t pb1 = movmatrix_trans(pack2<F16>(sv[2], sv[3]));
#pragma unroll
        for (int mt = 0; mt < D / 16; ++mt) {
            uint32_t a[4];
            if (!F16) {
                const uint8_t *pa = Vs + (mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * C::VP + (wt + (lane >> 4) * 8) * 2;
                ldmatrix_x4(a, pa);
            } else {
                byte4_pair<DT>(Vs + (mt * 16 + g) * C::VP + wt + 4 * t, a[0], a[2]);
                byte4_pair<DT>(Vs + (mt * 16 + g + 8) * C::VP + wt + 4 * t, a[1], a[3]);
            }
            mma_16816<F16>(o[mt], a, pb0, pb1);
        }
        __syncthreads();
    }
    cp_async_wait<0>();
    __syncthreads();

    // Merge the warps' states (same buffers and combine as paged_decode; heads < 8 only).
    float *Mw = reinterpret_cast<float *>(smem);  // [TG][16]
    float *Lw = Mw + TG * 16;                      // [TG][16]
    float *Ow = Lw + TG * 16;                      // [TG][16][D]
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        float lsum = l[j];
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 4);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 8);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 16);
        const int h = 2 * t + j;
        if (g == 0) {
            Mw[warp * 16 + h] = m[j] == -INFINITY ? -INFINITY : m[j] * sl2;
            Lw[warp * 16 + h] = lsum;
        }
#pragma unroll
        for (int mt = 0; mt < D / 16; ++mt) {
            Ow[(warp * 16 + h) * D + mt * 16 + g] = o[mt][j];
            Ow[(warp * 16 + h) * D + mt * 16 + g + 8] = o[mt][j + 2];
        }
    }
    __syncthreads();
    const float vs = p.v_scale ? p.v_scale[kvh] : 1.f;
    for (int i = threadIdx.x; i < G * D; i += NT) {
        int row = i / D, d = i % D;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < TG; ++w) mx = fmaxf(mx, Mw[w * 16 + row]);
        float L = 0.f, O = 0.f;
        if (mx != -INFINITY) {
#pragma unroll
            for (int w = 0; w < TG; ++w) {
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

// ---- Hopper (head_dim 128, group sizes <= 8): a producer warp feeds a ring of 16-token slots -------------------
// The loaders of paged_decode / paged_decode_t are all threads issuing 16-byte cp.async and waiting for whole tiles
// together, which measured 3.5 TB/s at best (bf16) however deep the ring. Here one producer warp copies, per 16
// tokens of one kv head, the K rows (16 x 128 elements) and the V^T block (128 x 16) into a slot of a ring of NSLOT
// slots with 16-byte cp.async from its lanes, which signal the slot's "full" mbarrier with
// cp.async.mbarrier.arrive.noinc; the consumer warp arrives on its "empty" one. Consumer warp w takes the slots w,
// w + NC, ...: the arithmetic of the transposed kernel above (S^T = K Q^T, O^T = V^T P^T) for the slot's units, with
// its own online-softmax state; the warps never wait for each other before the final merge. The copies land
// swizzled: K rows of 128 bytes with 16-byte chunk c of row r at c ^ (r & 7), bf16 V^T rows of 32 bytes with chunk c
// of row d at c ^ ((d >> 2) & 1), so the ldmatrix reads of 8 rows hit 8 different bank groups (unswizzled 256-byte
// K rows would be 8-way conflicts). 4 consumer warps, a ring of 12 slots (~96 KB), two CTAs per SM.
// bf16 caches: one 16-token unit per slot, exp2f. 8-bit caches (F16): two units per slot (8 KB slots, the bytes of a
// bf16 unit: half the producer's barrier / block-table / address work per byte and one softmax step per 32 tokens),
// K and V^T read with ldmatrix (an 8x8 b16 matrix of 8-bit data gives each lane 4 consecutive bytes of a row: 4
// words per instruction instead of 1), converted to f16, and ex2.approx.
// Compute capability 9.0.
template <int DT>
struct TmaSlot {
    static constexpr int ES = DT == ASSAY_CUDA_BF16 ? 2 : 1;
    static constexpr int KB = 16 * 128 * ES;  // K rows of one unit (and as many bytes of V^T)
    static constexpr int SLOT = 2 * KB;
    static constexpr int SU = ES == 2 ? 1 : 2;  // 16-token units per ring slot
    static constexpr int NC = 4, NSLOT = 12;    // consumer warps, ring slots
};

// 2^x in one MUFU.EX2 (exp2f adds a range test and two multiplies to keep denormal results; softmax weights
// below 2^-126 may flush to zero). ex2(-inf) = +0, as masked tokens need.
__device__ __forceinline__ float exp2_fast(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Zeroes the packed halves of an f16/bf16 pair whose token index (k0, k0 + 1) is >= valid.
__device__ __forceinline__ uint32_t mask_pair(uint32_t v, int k0, int valid) {
    return k0 >= valid ? 0u : k0 + 1 >= valid ? (v & 0xFFFFu) : v;
}

template <int DT>
__global__ void __launch_bounds__((TmaSlot<DT>::NC + 1) * 32, 2) paged_decode_ring(DecodeParams p) {
    using S = TmaSlot<DT>;
    constexpr int D = 128, NC = S::NC, NSLOT = S::NSLOT, SU = S::SU, NT = (NC + 1) * 32;
    constexpr bool F16 = DT != ASSAY_CUDA_BF16;
    constexpr int SLOTB = SU * S::SLOT;  // bytes of one ring slot: SU units, each K rows then V^T
    static_assert((size_t)NSLOT * SLOTB >= (size_t)NC * 16 * (D + 2) * 4, "merge buffers must fit in the ring");
    extern __shared__ uint8_t smem_raw[];
    // The swizzled rows assume 1024-byte alignment (the pattern is a function of address bits 4-9).
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + NSLOT * SLOTB);
    uint64_t *empty = full + NSLOT;
    const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int G = p.hq / p.hkv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int seq_len = p.seq_lens[b];
    const int n_units = (seq_len + 15) >> 4;
    const int u0 = split * p.tiles_per_split;  // tiles_per_split counts 16-token units here
    const int u1 = min(n_units, u0 + p.tiles_per_split);
    const int n = max(0, u1 - u0);
    const int nslot_use = (n + SU - 1) / SU;  // slot fills (the last one may hold fewer than SU units)
    if (threadIdx.x == 0) {
        for (int s = 0; s < NSLOT; ++s) {
            mbar_init(&full[s], 32);  // one cp.async arrival per producer lane
            mbar_init(&empty[s], 1);
        }
        mbar_fence_init();
    }
    __syncthreads();

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    float o[D / 16][4];
#pragma unroll
    for (int mt = 0; mt < D / 16; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    const float ks = p.k_scale ? p.k_scale[kvh] : 1.f;
    const float sl2 = p.scale_log2 * ks;

    if (warp == NC) {
        // Producer: block-table entries read 32 at a time (one per lane).
        const int32_t *bt = p.bt + (size_t)b * p.max_pages;
        const int pmask = p.ps - 1;
        static_assert(32 % SU == 0, "a slot's units come from one block-table read");
        for (int i0 = 0; i0 < n; i0 += 32) {
            const int cnt = min(32, n - i0);
            const int pg = lane < cnt ? bt[((u0 + i0 + lane) << 4) >> p.lps] : 0;
            for (int k0 = 0; k0 < cnt; k0 += SU) {
                const int f = (i0 + k0) / SU, s = f % NSLOT;  // slot fill f
                const int nsub = min(SU, cnt - k0);
                uint8_t *dst0 = smem + s * SLOTB;
                if (f >= NSLOT) mbar_wait(&empty[s], ((f / NSLOT) - 1) & 1);
#pragma unroll
                for (int j = 0; j < SU; ++j) {
                    if (j >= nsub) break;
                    const int k = k0 + j;
                    const int page = __shfl_sync(0xffffffffu, pg, k);
                    const int i = i0 + k;
                    const int tip = ((u0 + i) << 4) & pmask;  // token inside the page
                    const int blk = page * p.hkv + kvh;       // (page, kv head) block
                    uint8_t *dst = dst0 + j * S::SLOT;
                    {  // K: 16 rows of 128 * ES bytes, contiguous in the page
                        const uint8_t *src = p.kp + ((size_t)blk * p.ps + tip) * (128 * S::ES);
#pragma unroll
                        for (int jj = 0; jj < S::KB / 512; ++jj) {
                            const int q = lane + 32 * jj;
                            int off;
                            if (F16) {
                                const int row = q >> 3, cc = q & 7;
                                off = row * 128 + ((cc ^ (row & 7)) << 4);
                            } else {  // two 16 x 64 halves (2 KB each)
                                const int row = q >> 4, cc = q & 15;
                                off = (cc >> 3) * 2048 + row * 128 + (((cc & 7) ^ (row & 7)) << 4);
                            }
                            cp_async16(dst + off, src + q * 16, 16);
                        }
                    }
                    {  // V^T: 128 rows of 16 * ES bytes, one per head dim, page_size * ES apart
                        const uint8_t *src = p.vp + ((size_t)blk * D * p.ps + tip) * S::ES;
#pragma unroll
                        for (int jj = 0; jj < S::KB / 512; ++jj) {
                            const int q = lane + 32 * jj;
                            if (F16) {
                                cp_async16(dst + S::KB + q * 16, src + (size_t)q * p.ps, 16);
                            } else {
                                const int d = q >> 1, c = q & 1;
                                cp_async16(dst + S::KB + d * 32 + ((c ^ ((d >> 2) & 1)) << 4),
                                           src + (size_t)d * p.ps * 2 + c * 16, 16);
                            }
                        }
                    }
                }
                cp_async_mbar_arrive(&full[s]);
            }
        }
    } else {
        // Q^T as the B operand (same fragments as paged_decode_t).
        uint32_t qb[D / 16][2];
        {
            const __nv_bfloat16 *q = p.q + ((size_t)b * p.hq + kvh * G) * D;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int col = F16 ? kk * 16 + 4 * t + 2 * e : kk * 16 + 2 * t + 8 * e;
                    uint32_t v = g < G ? *reinterpret_cast<const uint32_t *>(q + (size_t)g * D + col) : 0u;
                    qb[kk][e] = F16 ? bf16x2_to_f16x2(v) : v;
                }
        }
        const int r0 = F16 ? perm_tok(g) : g, r1 = F16 ? perm_tok(g + 8) : g + 8;
        for (int i = warp; i < nslot_use; i += NC) {
            const int s = i % NSLOT;
            mbar_wait(&full[s], (i / NSLOT) & 1);
            const uint8_t *Ks0 = smem + s * SLOTB;
            // S^T for the SU 16-token units of the slot (a unit past this split's range was not loaded: its scores
            // are -inf and its P V is skipped; the test is uniform across the warp)
            float sv[SU][4];
#pragma unroll
            for (int j = 0; j < SU; ++j) {
                const uint8_t *Ks = Ks0 + j * S::SLOT;
                const int valid = seq_len - ((u0 + i * SU + j) << 4);  // tokens of this unit in the sequence
                if (j > 0 && i * SU + j >= n) {
                    sv[j][0] = sv[j][1] = sv[j][2] = sv[j][3] = -INFINITY;
                    continue;
                }
                uint32_t kw[4];
                float sa[4] = {0.f, 0.f, 0.f, 0.f}, sb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk) {
                    uint32_t a[4];
                    if (F16) {
                        // matrices: rows r0 / r1 (tokens of S^T rows g / g + 8) x chunks kk, kk + 1 (ldmatrix every
                        // other step; the odd step converts the words loaded with the even one)
                        static_assert(D / 16 % 2 == 0, "pairs of k16 steps");
                        uint32_t w[4];
                        if ((kk & 1) == 0) {
                            const int mi = lane >> 3;
                            const int rr = mi & 1 ? perm_tok(8 + (lane & 7)) : perm_tok(lane & 7);
                            ldmatrix_x4(kw, Ks + rr * 128 + (((kk + (mi >> 1)) ^ (rr & 7)) << 4));
                        }
                        w[0] = kw[(kk & 1) * 2];
                        w[1] = kw[(kk & 1) * 2 + 1];
                        byte4_to_f16x4<DT>(w[0], a[0], a[2]);
                        byte4_to_f16x4<DT>(w[1], a[1], a[3]);
                    } else {
                        // K: two 16 x 64 halves (2 KB each), rows of 128 bytes, 16-byte chunk c of row r at c ^ (r & 7)
                        const int row = (lane & 7) + ((lane >> 3) & 1) * 8, c = (kk & 3) * 2 + (lane >> 4);
                        ldmatrix_x4(a, Ks + (kk >> 2) * 2048 + row * 128 + ((c ^ (lane & 7)) << 4));
                    }
                    mma_16816<F16>((kk & 1) ? sb : sa, a, qb[kk][0], qb[kk][1]);
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) sv[j][e] = sa[e] + sb[e];
                if (valid < 16) {  // rows past the sequence: garbage K, masked by a select
                    if (r0 >= valid) sv[j][0] = sv[j][1] = -INFINITY;
                    if (r1 >= valid) sv[j][2] = sv[j][3] = -INFINITY;
                }
            }
            // one online-softmax step for all SU units: one max reduction and one rescale of O per slot
            bool moved = false;
            float alpha[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = fmaxf(sv[0][h], sv[0][h + 2]);
#pragma unroll
                for (int j = 1; j < SU; ++j) mx = fmaxf(mx, fmaxf(sv[j][h], sv[j][h + 2]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
                const float m_new = fmaxf(m[h], mx);
                const float m_sc = m_new == -INFINITY ? 0.f : m_new * sl2;
                float sum = 0.f;
                if (F16) {
                    alpha[h] = exp2_fast(m[h] * sl2 - m_sc);
#pragma unroll
                    for (int j = 0; j < SU; ++j) {
                        sv[j][h] = exp2_fast(fmaf(sv[j][h], sl2, -m_sc));
                        sv[j][h + 2] = exp2_fast(fmaf(sv[j][h + 2], sl2, -m_sc));
                        sum += sv[j][h] + sv[j][h + 2];
                    }
                } else {
                    alpha[h] = exp2f(m[h] * sl2 - m_sc);
#pragma unroll
                    for (int j = 0; j < SU; ++j) {
                        sv[j][h] = exp2f(fmaf(sv[j][h], sl2, -m_sc));
                        sv[j][h + 2] = exp2f(fmaf(sv[j][h + 2], sl2, -m_sc));
                        sum += sv[j][h] + sv[j][h + 2];
                    }
                }
                l[h] = l[h] * alpha[h] + sum;
                m[h] = m_new;
                moved |= alpha[h] != 1.f;
            }
            if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
                for (int mt = 0; mt < D / 16; ++mt) {
                    o[mt][0] *= alpha[0]; o[mt][1] *= alpha[1];
                    o[mt][2] *= alpha[0]; o[mt][3] *= alpha[1];
                }
            }
#pragma unroll
            for (int j = 0; j < SU; ++j) {
                if (j > 0 && i * SU + j >= n) break;
                const uint8_t *Vs = Ks0 + j * S::SLOT + S::KB;
                const int valid = seq_len - ((u0 + i * SU + j) << 4);
                const uint32_t pb0 = movmatrix_trans(pack2<F16>(sv[j][0], sv[j][1]));
                const uint32_t pb1 = movmatrix_trans(pack2<F16>(sv[j][2], sv[j][3]));
                uint32_t vw[4];
#pragma unroll
                for (int mt = 0; mt < D / 16; ++mt) {
                    uint32_t a[4];
                    if (F16) {
                        // matrices: head dims mt*16 + 0..7, + 8..15, (mt+1)*16 + 0..7, + 8..15 (rows of 16 bytes)
                        if ((mt & 1) == 0) ldmatrix_x4(vw, Vs + (mt * 16 + lane) * 16);
                        byte4_to_f16x4<DT>(vw[(mt & 1) * 2], a[0], a[2]);
                        byte4_to_f16x4<DT>(vw[(mt & 1) * 2 + 1], a[1], a[3]);
                        if (valid < 16) {
                            a[0] = mask_pair(a[0], 4 * t, valid); a[1] = mask_pair(a[1], 4 * t, valid);
                            a[2] = mask_pair(a[2], 4 * t + 2, valid); a[3] = mask_pair(a[3], 4 * t + 2, valid);
                        }
                    } else {
                        // V^T: 128 rows of 32 bytes, chunk c of row d at c ^ ((d >> 2) & 1) (32-byte swizzle)
                        const int d = mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, c = lane >> 4;
                        ldmatrix_x4(a, Vs + d * 32 + ((c ^ ((lane >> 2) & 1)) << 4));
                        if (valid < 16) {  // V columns past the sequence may hold NaN: P = 0 does not cancel it
                            a[0] = mask_pair(a[0], 2 * t, valid); a[1] = mask_pair(a[1], 2 * t, valid);
                            a[2] = mask_pair(a[2], 2 * t + 8, valid); a[3] = mask_pair(a[3], 2 * t + 8, valid);
                        }
                    }
                    mma_16816<F16>(o[mt], a, pb0, pb1);
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);
        }
    }

    __syncthreads();  // every slot consumed, no copy in flight: the ring becomes the merge buffer

    float *Mw = reinterpret_cast<float *>(smem);  // [NC][16]
    float *Lw = Mw + NC * 16;                     // [NC][16]
    float *Ow = Lw + NC * 16;                     // [NC][16][D]
    if (warp < NC) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            float lsum = l[j];
            lsum += __shfl_xor_sync(0xffffffffu, lsum, 4);
            lsum += __shfl_xor_sync(0xffffffffu, lsum, 8);
            lsum += __shfl_xor_sync(0xffffffffu, lsum, 16);
            const int h = 2 * t + j;
            if (g == 0) {
                Mw[warp * 16 + h] = m[j] == -INFINITY ? -INFINITY : m[j] * sl2;
                Lw[warp * 16 + h] = lsum;
            }
#pragma unroll
            for (int mt = 0; mt < D / 16; ++mt) {
                Ow[(warp * 16 + h) * D + mt * 16 + g] = o[mt][j];
                Ow[(warp * 16 + h) * D + mt * 16 + g + 8] = o[mt][j + 2];
            }
        }
    }
    __syncthreads();
    const float vs = p.v_scale ? p.v_scale[kvh] : 1.f;
    for (int i = threadIdx.x; i < G * D; i += NT) {
        int row = i / D, d = i % D;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < NC; ++w) mx = fmaxf(mx, Mw[w * 16 + row]);
        float L = 0.f, O = 0.f;
        if (mx != -INFINITY) {
#pragma unroll
            for (int w = 0; w < NC; ++w) {
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

template <int DT>
int launch_ring(const assay_cuda_attn_decode_args *a, DecodeParams p, dim3 grid, cudaStream_t stream) {
    using S = TmaSlot<DT>;
    constexpr size_t smem = (size_t)S::NSLOT * S::SU * S::SLOT + 2 * S::NSLOT * sizeof(uint64_t) + 1024;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(paged_decode_ring<DT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        configured = true;
    }
    int units = (a->max_seq_len + 15) / 16;
    p.tiles_per_split = (units + a->num_splits - 1) / a->num_splits;
    p.tiles_per_split = (p.tiles_per_split + S::SU - 1) / S::SU * S::SU;  // whole slots per split (a split may be empty)
    if (p.tiles_per_split < 1) p.tiles_per_split = 1;
    paged_decode_ring<DT><<<grid, (S::NC + 1) * 32, smem, stream>>>(p);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

bool decode_sm90_ok() {
    static int ok = -1;
    if (ok < 0) {
        int dev = 0, major = 0;
        ok = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9;
    }
    return ok == 1;
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


// The kernel a call runs: RING (paged_decode_ring) on Hopper with head_dim 128 and group sizes <= 8 (runs
// h200-gpu5-attn4, h200-gpu6-dec8-1/2: bf16 248-249 us against 303 for paged_decode_t, e4m3 130 us), else
// paged_decode_t with 4 warps (T4: bf16 caches, pages of <= 64 tokens) or 8, paged_decode above group size 8.
enum DecodeKernel { DECODE_RING, DECODE_T4, DECODE_T8, DECODE_PLAIN };
DecodeKernel decode_kernel(const assay_cuda_attn_decode_args *a) {
    const int G = a->n_heads_q / a->n_heads_kv;
    if (a->head_dim == 128 && G <= 8 && decode_sm90_ok()) return DECODE_RING;
    if (G > 8) return DECODE_PLAIN;
    return a->kv_dtype == ASSAY_CUDA_BF16 && a->page_size <= 64 ? DECODE_T4 : DECODE_T8;
}

template <int D, int DT>
int launch_decode(const assay_cuda_attn_decode_args *a, cudaStream_t stream) {
    using C = DecodeCfg<D, DT>;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(paged_decode<D, DT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)C::SMEM));
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(paged_decode_t<D, DT, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)C::SMEM));
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(paged_decode_t<D, DT, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)DecodeCfg<D, DT, 64>::SMEM));
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
    p.prefetch_page = 0;
    p.lps = 0;
    while ((1 << p.lps) < a->page_size) ++p.lps;
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
    switch (decode_kernel(a)) {
    case DECODE_RING:
        if constexpr (D == 128) {
            if (launch_ring<DT>(a, p, grid, stream)) return -1;
        }
        break;
    case DECODE_T4: {
        int tiles64 = (a->max_seq_len + 63) / 64;  // same split count, 64-token tiles
        p.tiles_per_split = (tiles64 + a->num_splits - 1) / a->num_splits;
        if (p.tiles_per_split < 1) p.tiles_per_split = 1;
        paged_decode_t<D, DT, 4><<<grid, 128, DecodeCfg<D, DT, 64>::SMEM, stream>>>(p);
        break;
    }
    case DECODE_T8: paged_decode_t<D, DT, 8><<<grid, NT, C::SMEM, stream>>>(p); break;
    case DECODE_PLAIN: paged_decode<D, DT><<<grid, NT, C::SMEM, stream>>>(p); break;
    }
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

}  // namespace

extern "C" size_t assay_cuda_attn_decode_workspace(assay_cuda_attn_decode_args *a) {
    if (a->num_splits <= 0) {
        // Pick the split count whose CTA count best fills whole waves; among near-equal ones the smallest
        // (fewer partial outputs to combine). Short contexts stay unsplit.
        int sms = assay_cuda_sm_count();
        if (sms <= 0) sms = 132;
        int per_sm = (DSPLIT == 1 && !(a->kv_dtype == ASSAY_CUDA_BF16 && a->head_dim == 128)) ? 2 : 1;
        if (decode_kernel(a) == DECODE_RING) per_sm = 2;
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
