// FP8 W8A8 decode GEMM (M <= 16): Y[m][n] = x_scale[m] * w_scale[n] * sum_k X[m][k] W[n][k], X and W as e4m3
// codes fed to the tensor cores as stored (compute capability 9.x).
//
// Why: the W8A16 kernel (assay_cuda_gemm_fp8w_packed) converts every e4m3 weight and every bf16 activation to f16
// in each consumer warp; those conversions run on the quarter-rate conversion unit and set its m16 time. The peer,
// cuBLASLt FP8 (torch._scaled_mm with per-token x per-channel scales), takes FP8 activations; with them the codes
// go into the tensor cores as stored and the consumers only load shared memory and issue mma.
//
// Loader: one producer warp streams each stage into a shared-memory ring: the stage's weights are one contiguous
// run of the packed layout (one cp.async.bulk with an L2 evict-first policy onto the stage's "full" mbarrier), the
// X slice (m rows) goes in as 16-byte cp.async from the producer's lanes, each lane making the barrier track its
// copies (cp.async.mbarrier.arrive.noinc). Consumer warps wait on "full", compute, arrive on "empty"; no block
// barrier in the loop. PDL: the weights of the first stages are requested before griddepcontrol.wait, their X after
// it. 128 output channels per CTA; K split over a cluster of CTAs; the scales are applied once in the epilogue.
//
// Two forms, chosen by assay_cuda_gemm_fp8_w8a8 (each reads its own weight packing, which
// assay_cuda_gemm_fp8_w8a8_layout names):
//  - wgmma, while the 128-channel tiles fit one wave of one CTA per SM: the native FP8 wgmma m64nNk32 with both
//    operands in shared memory in the canonical 128-byte swizzle, the weights re-packed on the host into that image
//    (assay_cuda_fp8w_pack_sw128), so the consumers neither convert nor permute; two consumer warpgroups (a 64-row
//    half each), 4 stages of 256 K columns; a 2-way K split reduces by pushing each CTA's partials into the peer's
//    shared memory by st.async on the peer's mbarrier (no cluster barrier).
//  - mma.sync m16n8k32 e4m3 (ptxas lowers it to f16 mma with conversions on Hopper) on weights packed by
//    assay_cuda_fp8w_pack, with two CTAs per SM (8 consumer warps, 5 stages of 128 K columns, ~95 KB): the whole
//    grid of the larger shapes resident at once.
// Fragments of the mma.sync form. Packed layout: per 128-row block and 64-column chunk, 16 n8 tiles of 512 bytes in
// which lane (g, t) holds row g, K bytes 16t .. 16t + 15 of the chunk. The weights are the mma A operand (16 rows =
// n8 tiles 2j and 2j + 1), the tokens the B operand (n8 tiles of tokens 0-7 and 8-15; m <= 8 issues half). In
// m16n8k32 lane (g, t) holds A rows g / g + 8 at k 4t..4t+3 (a0 / a1) and 16+4t.. (a2 / a3), B column g at the same
// k. Any permutation of K applied to both operands leaves the sum unchanged, so logical k 4t + i of step s is taken
// as physical byte 16t + 8s + i of the chunk and 16 + 4t + i as 16t + 8s + 4 + i: the lane's 16-byte run of W and of
// X feed the fragments of the chunk's two k32 steps as they are (no PRMT, no conversion). Each stage's mma go into a
// fresh fp32 tile that is added to the running sums.
// The measured versions behind these choices are in dev/cuda (gemm_w8a8_lab.cu, README.md).
#include <cooperative_groups.h>

#include "common.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int W8_BN = 128;                  // output channels per CTA
constexpr int W8_KC = 256;                  // K columns per stage of the wgmma form (the mma.sync form: 128); k % 256 == 0
// a stage of KC columns: the weights (one contiguous packed run of 128 x KC bytes), then 16 X rows of pitch KC + 64
// (rows g and g + 1 land in different bank halves)
__host__ __device__ constexpr int w8_stage_bytes(int kc) { return W8_BN * kc + 16 * (kc + 64); }
static_assert(w8_stage_bytes(256) % 128 == 0 && w8_stage_bytes(128) % 128 == 0, "stages stay 128-byte aligned");

struct W8Params {
    const uint8_t *x;     // e4m3 [m][k]
    const float *xs;      // [m]
    const uint8_t *w;     // packed e4m3
    const float *ws;      // [n]
    __nv_bfloat16 *y;     // [m][n]
    int m, n, k, kper, splits;
};

// D (+)= A[16 x 32] * B[32 x 8], e4m3 codes, fp32 accumulators (sm_89+; the sm_80 build traps, callers
// dispatch here only on compute capability 9.x).
__device__ __forceinline__ void mma_e4m3_16832(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// The same with A from shared memory too (descriptor da): both operands K-major in the 128-byte swizzle.
template <int N>
__device__ __forceinline__ void w8_wgmma_ss(float *d, uint64_t da, uint64_t db, int acc) {
#ifdef ASSAY_SM90A
    if (N == 16)
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
            : "l"(da), "l"(db), "r"(acc));
    else
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "l"(da), "l"(db), "r"(acc));
#else
    __trap();
#endif
}

// 8 consumer warps + 1 producer warp (the last). WG: the wgmma form, two warpgroups of 64 rows each (warp w of
// warpgroup wg: rows 64 wg + 16 w); else the mma.sync form, warp w: K slice w % KSL, row group w / KSL of RT 16-row
// tiles. KC: K columns per stage; MAXR: register cap per thread (112 lets two CTAs of 288 threads share an SM).
// PUSH 2: with a 2-way K split the cluster pair sums through cluster_pair_push_store (common.cuh, mode 2: st.async
// on the peer's mbarrier, no cluster barrier); the receive buffer (+ mbarrier) follows the barriers.
template <bool M16, bool WG, int STAGES, int KC, int MAXR, int PUSH>
__global__ void __launch_bounds__((8 + 1) * 32, 1) __maxnreg__(MAXR) gemm_w8a8(W8Params p) {
    // WG: the stage's X rows are K-major in the 128-byte swizzle, rows m..15 zero (written once at entry: the
    // producer never touches them)
    constexpr int NW = 8;
    static_assert(!WG || KC == 256, "the wgmma form: 256 K columns");
    constexpr int WB = W8_BN * KC, XP = KC + 64, W8_STAGE = w8_stage_bytes(KC);
    constexpr int KSL = WG ? 1 : KC / 64, BN = W8_BN, NTH = (NW + 1) * 32;
    constexpr int RT = WG ? 1 : BN / 16 / (NW / KSL);
    static_assert(NW % KSL == 0 && RT >= 1, "warps must tile the stage");
    static_assert(KSL * 16 * (BN + 4) * 4 + 16 * BN * 4 <= STAGES * W8_STAGE, "reduction buffers reuse the stages");
    extern __shared__ __align__(128) uint8_t sm_raw[];
    // the 128-byte swizzle of the wgmma tiles is a function of the address bits: align the ring to 1024 bytes
    uint8_t *sm = WG ? sm_raw + ((1024u - (smem_u32(sm_raw) & 1023u)) & 1023u) : sm_raw;
    uint64_t *full = reinterpret_cast<uint64_t *>(sm + STAGES * W8_STAGE);
    uint64_t *empty = full + STAGES;
    // PUSH: [16][BN / 2] floats from the peer, then their mbarrier
    const PairRecv recv = {reinterpret_cast<uint8_t *>(empty + STAGES),
                           reinterpret_cast<uint64_t *>(reinterpret_cast<uint8_t *>(empty + STAGES) + 16 * (W8_BN / 2) * 4)};
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BN, split = blockIdx.y, kbase = split * p.kper, nst = p.kper / KC;
    const bool push2 = PUSH && p.splits == 2;
    if (push2) cluster_pair_push_begin<PUSH == 2 ? 2 : 1, W8_BN>(recv, p.m);  // waited for before the peer is written to
    constexpr int WRS = PUSH ? BN + 4 : BN;  // row stride of wred (PUSH: padded, so the 4 lanes t of a store
                                             // fall on different banks)
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1 + 32);  // the producer's expect_tx arrival + one cp.async arrival per lane
            mbar_init(&empty[s], NW);
        }
        mbar_fence_init();
    }
    if (WG) {  // the X tiles of every stage: 2 x 16 rows x 128 bytes, zero where no token is loaded
        for (int i = threadIdx.x; i < STAGES * 256; i += NTH)
            reinterpret_cast<uint4 *>(sm + (i >> 8) * W8_STAGE + WB)[i & 255] = make_uint4(0u, 0u, 0u, 0u);
        fence_proxy_async();  // generic-proxy zeros, read by wgmma (async proxy)
    }
    __syncthreads();
    float acc[RT][2][4];
#pragma unroll
    for (int j = 0; j < RT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][0][e] = acc[j][1][e] = 0.f;

    if (warp == NW) {
        // ---- producer ----
        const uint64_t pol = l2_policy_evict_first();
        auto issue_w = [&](int st) {  // independent of the previous kernel
            if (lane == 0) {
                uint64_t *bar = &full[st % STAGES];
                mbar_arrive_expect_tx(bar, WB);
                const int k0 = kbase + st * KC;
                const uint8_t *src = p.w + ((size_t)(n0 / 128) * (p.k / 64) + k0 / 64) * (16 * 512);
                uint8_t *dst = sm + (st % STAGES) * W8_STAGE;
                bulk_g2s_hint(dst, src, WB, bar, pol);
            }
        };
        auto issue_x = [&](int st) {  // m rows x KC bytes, KC / 16 chunks per row
            uint8_t *xd = sm + (st % STAGES) * W8_STAGE + WB;
            const int k0 = kbase + st * KC;
            if (WG) {
                // 16-byte piece c (of 16) of row r: half kb = c / 8 of the stage, position (c % 8) ^ (r & 7)
                for (int c = lane; c < p.m * 16; c += 32) {
                    const int row = c >> 4, kb = (c >> 3) & 1, pc = c & 7;
                    cp_async16(xd + kb * 2048 + row * 128 + ((pc ^ (row & 7)) << 4), p.x + (size_t)row * p.k + k0 + (c & 15) * 16, 16);
                }
            } else {
                constexpr int CPR = KC / 16;  // 16-byte chunks per X row
                for (int c = lane; c < p.m * CPR; c += 32) {
                    const int row = c / CPR, off = c % CPR;
                    cp_async16(xd + row * XP + off * 16, p.x + (size_t)row * p.k + k0 + off * 16, 16);
                }
            }
            cp_async_mbar_arrive(&full[st % STAGES]);
        };
        const int pro = nst < STAGES ? nst : STAGES;
        for (int st = 0; st < pro; ++st) issue_w(st);
        pdl_wait();  // X is written by the previous kernel
        for (int st = 0; st < pro; ++st) issue_x(st);
        for (int st = pro; st < nst; ++st) {
            mbar_wait(&empty[st % STAGES], ((st / STAGES) - 1) & 1);
            issue_w(st);
            issue_x(st);
        }
        pdl_launch_dependents();  // every load of this CTA is issued
    } else {
        // ---- consumers ----
        pdl_wait();  // orders this thread's Y stores after the previous kernel
        const int ks = warp % KSL, rg = warp / KSL;
        for (int st = 0; st < nst; ++st) {
            const int s = st % STAGES;
            mbar_wait(&full[s], (st / STAGES) & 1);
            const uint8_t *stg = sm + s * W8_STAGE;
            if (WG) {
                // warpgroup wg, warp w of it: rows 64 wg + 16 w
                const int wg = warp >> 2;
                fence_proxy_async();  // X landed through cp.async (generic proxy); wgmma reads it (async proxy)
                const uint32_t ws = smem_u32(stg), xs = smem_u32(stg + WB);
                float d[RT][8];
#pragma unroll
                for (int j = 0; j < RT; ++j)
#pragma unroll
                    for (int e = 0; e < 8; ++e) d[j][e] = 0.f;
                wgmma_fence();
#pragma unroll
                for (int j = 0; j < RT; ++j) {
                    const int h = wg;
#pragma unroll
                    for (int q = 0; q < 8; ++q) {
                        // k32 step q: 128-column half q / 4 (16 KB of W, 2 KB of X), byte 32 (q % 4) of its rows
                        w8_wgmma_ss<M16 ? 16 : 8>(d[j], wg_desc_sw128(ws + (q >> 2) * 16384 + h * 8192 + (q & 3) * 32),
                                                  wg_desc_sw128(xs + (q >> 2) * 2048 + (q & 3) * 32), q > 0);
                    }
                }
                wgmma_commit();
                wgmma_wait<0>();
#pragma unroll
                for (int j = 0; j < RT; ++j) {
                    reg_fence<8>(d[j]);
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        acc[j][0][e] += d[j][e];
                        if (M16) acc[j][1][e] += d[j][4 + e];
                    }
                }
            } else {
                const uint8_t *xr = stg + WB + g * XP + ks * 64 + 16 * t;
                const uint4 xa = *reinterpret_cast<const uint4 *>(xr);
                uint4 xb = make_uint4(0u, 0u, 0u, 0u);
                if (M16) xb = *reinterpret_cast<const uint4 *>(xr + 8 * XP);
#pragma unroll
                for (int j = 0; j < RT; ++j) {
                    const int at = rg * RT + j;  // 16-row tile: n8 tiles 2 at and 2 at + 1
                    const uint4 u = *reinterpret_cast<const uint4 *>(stg + (ks * 16 + 2 * at) * 512 + lane * 16);
                    const uint4 v = *reinterpret_cast<const uint4 *>(stg + (ks * 16 + 2 * at + 1) * 512 + lane * 16);
                    const uint32_t a0[4] = {u.x, v.x, u.y, v.y}, a1[4] = {u.z, v.z, u.w, v.w};
                    float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
                    mma_e4m3_16832(d0, a0, xa.x, xa.y);
                    mma_e4m3_16832(d0, a1, xa.z, xa.w);
                    if (M16) {
                        mma_e4m3_16832(d1, a0, xb.x, xb.y);
                        mma_e4m3_16832(d1, a1, xb.z, xb.w);
                    }
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        acc[j][0][e] += d0[e];
                        if (M16) acc[j][1][e] += d1[e];
                    }
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);
        }
    }
    __syncthreads();  // every stage consumed, so every copy landed: the ring is free for the reduction buffers
    // acc[j][tt][e]: channel 16 (rg * RT + j) + g + 8 (e >> 1), token 8 tt + 2t + (e & 1), K slice ks
    float *wred = reinterpret_cast<float *>(sm);  // [KSL][16 tokens][BN]
    float *tot = wred + KSL * 16 * WRS;           // [16][BN]
    if (warp < NW) {
        // WG: warp w of warpgroup wg holds the 16-row tile 4 wg + w (the wgmma accumulator layout is the mma.sync
        // one per 16 rows)
        const int ks = WG ? 0 : warp % KSL, rg = warp / KSL;
#pragma unroll
        for (int j = 0; j < RT; ++j) {
            const int tile = WG ? 4 * (warp >> 2) + (warp & 3) : rg * RT + j;
#pragma unroll
            for (int tt = 0; tt < 2; ++tt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    wred[(ks * 16 + 8 * tt + 2 * t + (e & 1)) * WRS + 16 * tile + g + 8 * (e >> 1)] = acc[j][tt][e];
        }
    }
    __syncthreads();
    if (PUSH && push2) {
        cluster_pair_push_store<BN, NTH, PUSH == 2 ? 2 : 1>(
            [&](int row, int c) {
                float v = 0.f;
#pragma unroll
                for (int q = 0; q < KSL; ++q) v += wred[(q * 16 + row) * WRS + c];
                return v;
            },
            [&](int row, int c, float v) {
                p.y[(size_t)row * p.n + n0 + c] = __float2bfloat16(v * (p.xs[row] * p.ws[n0 + c]));
            },
            p.m, split, recv);
        return;
    }
    for (int i = threadIdx.x; i < p.m * BN; i += NTH) {
        float s = 0.f;
#pragma unroll
        for (int q = 0; q < KSL; ++q) s += WRS == BN ? wred[q * 16 * BN + i] : wred[(q * 16 + i / BN) * WRS + i % BN];
        tot[i] = s;
    }
    if (p.splits == 1) {
        __syncthreads();
        for (int i = threadIdx.x; i < p.m * BN; i += NTH) {
            const int row = i / BN, c = i % BN;
            p.y[(size_t)row * p.n + n0 + c] = __float2bfloat16(tot[i] * (p.xs[row] * p.ws[n0 + c]));
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
        p.y[(size_t)row * p.n + n0 + c] = __float2bfloat16(v * (p.xs[row] * p.ws[n0 + c]));
    }
    cl.sync();  // no CTA leaves while another still reads its shared memory
#else
    __trap();
#endif
}

// The two forms: WG (wgmma, both operands in shared memory; 4 stages of 256 columns, K split pairs reduced by
// st.async pushes) and the mma.sync form with two CTAs per SM (5 stages of 128 columns, ~95 KB, registers capped at
// 112: uncapped the m16 form takes more and spills under __launch_bounds__(288, 2), which caps it at 96).
template <bool WG>
struct W8Form {
    static constexpr int STAGES = WG ? 4 : 5, KC = WG ? 256 : 128, MAXR = WG ? 255 : 112, PUSH = WG ? 2 : 0;
    static constexpr size_t SMEM = (size_t)STAGES * w8_stage_bytes(KC) + 2 * STAGES * 8 + (WG ? 1024 : 0) +
                                   (PUSH ? 16 * (W8_BN / 2) * 4 + 16 : 0);
    static_assert(WG || SMEM <= 113 * 1024, "two CTAs per SM (228 KB, 1 KB reserved per CTA)");
};

template <bool M16, bool WG>
int launch_w8a8(const W8Params &p0, int splits, cudaStream_t stream) {
    using F = W8Form<WG>;
    auto kern = gemm_w8a8<M16, WG, F::STAGES, F::KC, F::MAXR, F::PUSH>;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)F::SMEM));
        // two CTAs per SM need the whole unified L1 / shared array as shared memory
        if (!WG)
            ASSAY_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                (int)cudaSharedmemCarveoutMaxShared));
        configured = true;
    }
    W8Params p = p0;
    p.splits = splits;
    p.kper = p.k / splits;
    SplitKLaunch launch(dim3(p.n / W8_BN, splits, 1), (8 + 1) * 32, F::SMEM, stream, true);
    ASSAY_CUDA_TRY(cudaLaunchKernelEx(&launch.cfg, kern, p));
    return 0;
}

int g_w8a8_ok = -1;  // compute capability 9.x (the sm_90a code: fp8 mma, bulk copies, clusters)

int w8a8_sms() {
    int sms = assay_cuda_sm_count();
    return sms > 0 ? sms : 132;
}

}  // namespace

// The wgmma form (sw128 layout) while the 128-channel tiles fit one wave of one CTA per SM, else the mma.sync form.
extern "C" int assay_cuda_gemm_fp8_w8a8_layout(int32_t n) { return n / W8_BN > w8a8_sms() ? 0 : 1; }

extern "C" int assay_cuda_gemm_fp8_w8a8(const uint8_t *x_e4m3, const float *x_scale, const uint8_t *w_packed,
                                        const float *w_scale, void *y_bf16, int32_t m, int32_t n, int32_t k,
                                        assay_cuda_stream stream) {
    if (!x_e4m3 || !x_scale || !w_packed || !w_scale || !y_bf16) return assay_cuda_fail("gemm_fp8_w8a8: null pointer argument");
    if (m < 1 || m > 16 || n <= 0 || k <= 0 || n % W8_BN || k % W8_KC)
        return assay_cuda_fail("gemm_fp8_w8a8: shape m=%d n=%d k=%d (need 1<=m<=16, n%%128==0, k%%256==0)", m, n, k);
    if (g_w8a8_ok < 0) {
        int dev = 0, major = 0;
        g_w8a8_ok = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9;
    }
    if (!g_w8a8_ok) return assay_cuda_fail("gemm_fp8_w8a8: needs a compute capability 9.x device");
    // K splits (cluster size): the one whose CTA count best fills the SMs with one CTA each; ties to fewer.
    const int sms = w8a8_sms();
    const int tiles = n / W8_BN;
    int splits = 1;
    double best = 0;
    for (int s = 1; s <= 8; s *= 2) {
        if (k % (W8_KC * s)) break;
        const double waves = (double)tiles * s / sms, eff = waves / ceil(waves);
        if (eff > best + 0.02) { best = eff; splits = s; }
    }
    W8Params p;
    p.x = x_e4m3; p.xs = x_scale; p.w = w_packed; p.ws = w_scale; p.y = (__nv_bfloat16 *)y_bf16;
    p.m = m; p.n = n; p.k = k; p.kper = k; p.splits = 1;
    cudaStream_t s = (cudaStream_t)stream;
    const bool m16 = m > 8;
    // the wgmma form at one wave: m1 / m8 / m16 n8192 16.68 / 17.23 / 17.60 us (run h200-gpu9-int4-3); the mma.sync
    // form with two CTAs per SM above (the whole grid resident at once): m16 n28672 70.4 us against the wgmma form's
    // 76.1 (run h200-gpu7-gemm10)
    const int rc = tiles > sms ? (m16 ? launch_w8a8<true, false>(p, splits, s) : launch_w8a8<false, false>(p, splits, s))
                               : (m16 ? launch_w8a8<true, true>(p, splits, s) : launch_w8a8<false, true>(p, splits, s));
    if (rc < 0) return -1;
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
