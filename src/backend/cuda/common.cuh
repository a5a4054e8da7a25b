// Shared device helpers for the assay CUDA kernels: mma.sync wrappers, cp.async, error reporting.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>

#include "assay/cuda_kernels.h"

// Records a message for assay_cuda_last_error(); returns -1 so callers can `return cuda_fail(...)`.
int assay_cuda_fail(const char *fmt, ...);

// The Hopper decode GEMMs (gemm_decode_tma.cu) behind the entry points of gemm_decode.cu: 1 when the kernel ran, 0
// when the device or the shape needs the direct kernels, -1 on error.
enum GemmSm90 { GEMM_SM90_FP8, GEMM_SM90_INT4, GEMM_SM90_INT4_XF16 };
int assay_cuda_gemm_sm90(GemmSm90 kind, const void *x, const uint8_t *w, const float *col_scale, const uint16_t *gscale,
                         void *y, int m, int n, int k, cudaStream_t stream);

// cuTensorMapEncodeTiled (TMA descriptors), looked up once from the driver; nullptr when the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 assay_cuda_tensor_map_encoder();

#define ASSAY_CUDA_TRY(expr)                                                                 \
    do {                                                                                     \
        cudaError_t e_ = (expr);                                                             \
        if (e_ != cudaSuccess) return assay_cuda_fail("%s: %s", #expr, cudaGetErrorString(e_)); \
    } while (0)

#define ASSAY_CUDA_LAUNCHED()                                                                  \
    do {                                                                                       \
        cudaError_t e_ = cudaGetLastError();                                                   \
        if (e_ != cudaSuccess) return assay_cuda_fail("kernel launch: %s", cudaGetErrorString(e_)); \
    } while (0)

// ---- tensor-core primitives (sm_80+: mma.sync m16n8k16 with fp32 accumulators) -------------------------------
// Fragment layout (lane = 4*g + t): A regs a0=(row g, k 2t..2t+1) a1=(row g+8, k 2t..) a2=(row g, k 2t+8..)
// a3=(row g+8, k 2t+8..); B regs b0=(k 2t..2t+1, col g) b1=(k 2t+8.., col g); C c0,c1=(row g, col 2t, 2t+1),
// c2,c3=(row g+8, col 2t, 2t+1).
__device__ __forceinline__ void mma_bf16_16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16_16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with f16 accumulators: c[0] = (row g, cols 2t, 2t + 1), c[1] = (row g + 8, same cols) as f16 pairs.
__device__ __forceinline__ void mma_f16_16816_acc16(uint32_t *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
        : "+r"(c[0]), "+r"(c[1])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <bool F16>
__device__ __forceinline__ void mma_16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    if (F16) mma_f16_16816(c, a, b0, b1);
    else mma_bf16_16816(c, a, b0, b1);
}

// Integer mma.sync m16n8k32 (sm_80+), int32 accumulators: A (16 x 32 bytes, row) a0 = (row g, k 4t..4t+3),
// a1 = (row g + 8, k 4t..), a2 = (row g, k 16 + 4t..), a3 = (row g + 8, k 16 + 4t..); B (32 x 8, col) b0 = (k 4t..4t+3,
// col g), b1 = (k 16 + 4t.., col g); C as mma_f16_16816's. A signed bytes times B signed (S8) or unsigned (U8) bytes.
__device__ __forceinline__ void mma_s8s8_16832(int32_t *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_s8u8_16832(int32_t *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

// 16-byte asynchronous copy global -> shared; src_bytes 0 writes zeros (used past the end of a sequence).
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
template <bool F16>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    return F16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
}

// bf16 pair (as stored) -> f16 pair.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
    __nv_bfloat162 b = *reinterpret_cast<__nv_bfloat162 *>(&v);
    float2 f = __bfloat1622float2(b);
    return pack_f16(f.x, f.y);
}

// Four stored 8-bit KV/weight values (little-endian in w) -> two f16x2 registers, exact for e4m3, e5m2, int8.
template <int DT>
__device__ __forceinline__ void byte4_to_f16x4(uint32_t w, uint32_t &lo, uint32_t &hi) {
    if (DT == ASSAY_CUDA_FP8_E4M3) {
        __half2_raw a = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xFFFF), __NV_E4M3);
        __half2_raw b = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
        lo = (uint32_t)a.x | ((uint32_t)a.y << 16);
        hi = (uint32_t)b.x | ((uint32_t)b.y << 16);
    } else if (DT == ASSAY_CUDA_FP8_E5M2) {
        // e5m2 is the high byte of an f16: place each byte in the top of a 16-bit lane.
        lo = __byte_perm(w, 0, 0x1404);
        hi = __byte_perm(w, 0, 0x3424);
    } else {
        // int8, exact: u = v + 128 (flip the sign bits) as the low byte of an f16 whose high byte is 0x64 is
        // 1024 + u (the mantissa step is 1 in [1024, 2048)); subtracting 1152 leaves v. One LOP, two PRMT and two
        // f16x2 subtractions per 4 values instead of four integer-to-float conversions (quarter rate) and two packs.
        const uint32_t u = w ^ 0x80808080u;
        lo = __byte_perm(u, 0x64646464u, 0x4140);
        hi = __byte_perm(u, 0x64646464u, 0x4342);
        asm("sub.f16x2 %0, %0, %1;" : "+r"(lo) : "r"(0x64806480u));
        asm("sub.f16x2 %0, %0, %1;" : "+r"(hi) : "r"(0x64806480u));
    }
}

__device__ __forceinline__ float warp_max_quad(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 1));
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 2));
    return v;
}
__device__ __forceinline__ float warp_sum_quad(float v) {
    v += __shfl_xor_sync(0xffffffff, v, 1);
    v += __shfl_xor_sync(0xffffffff, v, 2);
    return v;
}

// Randomized Hadamard rotation of one row of D = 32 * E values held by a warp (lane l holds values l*E .. l*E+E-1):
// v <- (v * signs) H / sqrt(D), H the Sylvester Hadamard matrix. Strides below E stay in the thread; larger ones
// pair lanes by shuffles. Q and K rows rotated with the same signs keep Q K^T exactly.
template <int E>
__device__ __forceinline__ void hadamard_rotate_lane(float *v, const int8_t *signs, int lane) {
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= (float)signs[lane * E + e];
#pragma unroll
    for (int h = 1; h < E; h <<= 1)
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (!(e & h)) {
                float a = v[e], b = v[e + h];
                v[e] = a + b;
                v[e + h] = a - b;
            }
#pragma unroll
    for (int lm = 1; lm < 32; lm <<= 1) {
        const bool upper = lane & lm;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            float o = __shfl_xor_sync(0xffffffffu, v[e], lm);
            v[e] = upper ? o - v[e] : v[e] + o;
        }
    }
    const float norm = rsqrtf((float)(32 * E));
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= norm;
}

// ---- wgmma group control (sm_90a: wgmma is in the architecture-specific feature set only) -------------------
// On other targets these compile to nothing; the kernels that issue wgmma trap there and are dispatched only on
// compute capability 9.0.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ASSAY_SM90A 1
#endif

__device__ __forceinline__ void wgmma_fence() {
#ifdef ASSAY_SM90A
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef ASSAY_SM90A
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef ASSAY_SM90A
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving reads or writes of accumulator registers across a wgmma wait.
template <int N>
__device__ __forceinline__ void reg_fence(float *r) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// ---- Hopper asynchronous copies (sm_90+): bulk copies global -> shared that complete on an mbarrier ----------
// The producer thread arms the barrier with the bytes it will receive (arrive + expect_tx), then issues the
// copies; consumers wait on the barrier's phase parity. On older targets these compile to a trap: callers
// dispatch to them only on compute capability >= 9.0.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ASSAY_SM90_ASYNC 1
#endif

// ---- cluster barrier halves and the split-K reduction of a cluster of two CTAs (sm_90) ----------------------
// relaxed: no memory ordering (the arrival only says "this CTA runs"); release / acquire: the stores before the
// arrive, also those into a peer's shared memory, are visible to the cluster after the wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_sync_release_acquire() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#else
    __trap();
#endif
}
// Makes the initialized barriers visible to the async proxy (the copy engine) and the rest of the cluster.
__device__ __forceinline__ void mbar_fence_init() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile(
        "{\n"
        ".reg .pred P1;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@!P1 bra WAIT_%=;\n"
        "}\n" ::"r"(smem_u32(bar)),
        "r"(parity)
        : "memory");
#else
    __trap();
#endif
}

// Split-K over a cluster of two CTAs (rank = split) by pushing: sum(row, c) is this CTA's partial for token row
// and column c of its BN columns (complete in shared memory when called); each thread keeps the partials of its
// outputs in its own half of the columns (split * BN / 2 ...) in registers and sends those of the peer's half
// into the peer's receive buffer [16][BN / 2] floats, then adds what it received and calls store(row, c, total)
// for rows < m. The pull form (two cluster barriers, remote loads) spent 17% of the int4 decode GEMM's warp
// samples here (the lab journal, round 14). MODE 1: st.shared::cluster, then one cluster barrier (release /
// acquire; the release waits for the remote stores). MODE 2: st.async with complete_tx on the peer's receive
// mbarrier, which the peer waits on: no cluster barrier, no fence; a CTA leaves once its own buffer is complete.
// Every thread of both CTAs calls cluster_pair_push_begin at entry (MODE 2: thread 0 initializes and arms the
// receive barrier for m rows; the cluster arrival there, waited for before the first remote store, also makes
// the peer's barrier initialization visible) and this at the end. Nobody reads this CTA's shared memory after it
// returns, so it may exit at once.
struct PairRecv {
    uint8_t *buf;   // [16][BN / 2] floats
    uint64_t *bar;  // MODE 2: the receive mbarrier
};
template <int MODE, int BN>
__device__ __forceinline__ void cluster_pair_push_begin(PairRecv r, int m) {
#ifdef ASSAY_SM90_ASYNC
    if (MODE == 2 && threadIdx.x == 0) {
        mbar_init(r.bar, 1);
        mbar_fence_init();
    }
    cluster_arrive_relaxed();
    if (MODE == 2 && threadIdx.x == 0) mbar_arrive_expect_tx(r.bar, m * (BN / 2) * 4);
#else
    (void)r; (void)m;
#endif
}
template <int BN, int NTH, int MODE, class Sum, class Store>
__device__ __forceinline__ void cluster_pair_push_store(Sum sum, Store store, int m, int split, PairRecv r) {
#ifdef ASSAY_SM90_ASYNC
    static_assert(MODE == 1 || MODE == 2, "push modes: 1 = stores + cluster barrier, 2 = st.async + mbarrier");
    constexpr int HALF = BN / 2, TOT = 16 * HALF, PER = (TOT + NTH - 1) / NTH;
    const int peer = split ^ 1;
    float own[PER], other[PER];
#pragma unroll
    for (int q = 0; q < PER; ++q) {
        const int i = threadIdx.x + q * NTH;
        if (TOT % NTH == 0 || i < TOT) {
            own[q] = sum(i / HALF, split * HALF + i % HALF);
            other[q] = sum(i / HALF, peer * HALF + i % HALF);
        }
    }
    uint32_t remote, remote_bar = 0;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(r.buf)), "r"(peer));
    if (MODE == 2)
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote_bar) : "r"(smem_u32(r.bar)), "r"(peer));
    cluster_wait();  // the peer's entry arrival: it runs (and, MODE 2, its receive barrier is initialized)
#pragma unroll
    for (int q = 0; q < PER; ++q) {
        const int i = threadIdx.x + q * NTH;
        if ((TOT % NTH == 0 || i < TOT) && i / HALF < m) {
            if (MODE == 2)
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n"
                             ::"r"(remote + 4u * i), "f"(other[q]), "r"(remote_bar) : "memory");
            else
                asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote + 4u * i), "f"(other[q]) : "memory");
        }
    }
    if (MODE == 2) mbar_wait(r.bar, 0);
    else cluster_sync_release_acquire();  // the peer's partials of this CTA's columns have landed
    const float *recv = reinterpret_cast<const float *>(r.buf);
#pragma unroll
    for (int q = 0; q < PER; ++q) {
        const int i = threadIdx.x + q * NTH;
        if ((TOT % NTH == 0 || i < TOT) && i / HALF < m) store(i / HALF, split * HALF + i % HALF, own[q] + recv[i]);
    }
#else
    (void)sum; (void)store; (void)m; (void)split; (void)r;
    __trap();
#endif
}

// bytes % 16 == 0, both addresses 16-byte aligned.
__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(smem_u32(bar))
        : "memory");
#else
    __trap();
#endif
}
// An L2 policy that marks lines for early eviction (data read once, e.g. streamed weights), for the
// .L2::cache_hint form of the bulk copy below.
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
    uint64_t pol = 0;
#ifdef ASSAY_SM90_ASYNC
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
#endif
    return pol;
}
// bulk_g2s with an L2 cache policy (l2_policy_evict_first).
__device__ __forceinline__ void bulk_g2s_hint(void *dst, const void *src, uint32_t bytes, uint64_t *bar, uint64_t pol) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
            smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
        : "memory");
#else
    __trap();
#endif
}

// cp.async copies are tracked by the mbarrier: arrives once every cp.async this thread issued before has landed
// (.noinc: the arrival is one of the barrier's expected count).
__device__ __forceinline__ void cp_async_mbar_arrive(uint64_t *bar) {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src));
}
// Data written through the generic proxy (stores, cp.async) is read by wgmma / bulk copies through the async proxy.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Descriptor of a K-major shared-memory wgmma operand in the 128-byte swizzle (8-row atoms of 1024 bytes; SBO = 1024).
__device__ __forceinline__ uint64_t wg_desc_sw128(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

// Programmatic dependent launch (sm_90): a kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization
// may start while the previous kernel in the stream still runs; griddepcontrol.wait blocks until that kernel has
// completed and its writes are visible (a no-op when launched without the attribute); launch_dependents lets the
// next such kernel start launching.
__device__ __forceinline__ void pdl_wait() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#ifdef ASSAY_SM90_ASYNC
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Host side: the launch configuration of the split-K decode GEMMs. The grid's y CTAs (the K split of one column
// tile) form a thread-block cluster, and with pdl the kernel may start before the previous kernel in the stream
// ends (it waits for it itself, griddepcontrol.wait). Not copyable: cfg.attrs points into the object.
struct SplitKLaunch {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    SplitKLaunch(dim3 grid, int threads, size_t smem, cudaStream_t stream, bool pdl) {
        cfg.gridDim = grid;
        cfg.blockDim = dim3(threads, 1, 1);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = stream;
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 1;
        attr[0].val.clusterDim.y = grid.y;
        attr[0].val.clusterDim.z = 1;
        attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[1].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = pdl ? 2 : 1;
    }
    SplitKLaunch(const SplitKLaunch &) = delete;
    SplitKLaunch &operator=(const SplitKLaunch &) = delete;
};
