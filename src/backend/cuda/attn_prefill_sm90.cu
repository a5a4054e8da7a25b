// Prefill attention for Hopper (sm_90a, compute capability 9.0): the bf16 kernel (fa_wgmma) and the e4m3 kernels
// (fa_wgmma_fp8_v2 with per-token K scales, fa_wgmma_fp8_v3 with per-block ones): TMA loads, wgmma, warp
// specialization, and the softmax of one key tile overlapped with the tensor-core work of its neighbours.
//
// CTA = 3 warpgroups. Warpgroup 0 is the producer: after giving most of its registers away (setmaxnreg) one
// thread issues the TMA copies of the Q tile and of the K and V tiles into a ring of stages, each stage with its
// own "full" mbarrier (completed by the copy engine's byte count) and "empty" mbarrier (arrived by the 8
// consumer warps when they no longer read the stage). Warpgroups 1 and 2 are the consumers, 64 query rows each
// (BM = 128 rows per CTA): S = Q K^T is one wgmma m64n128k16 per 16 of head_dim with both operands in shared
// memory (128-byte swizzled, K-major, exactly the layout the TMA box writes); O += P V takes P from registers
// (the fp32 S accumulator layout, converted to bf16 pairs, is the wgmma A-register fragment) and V from shared
// memory as an MN-major (transposed) operand, so V needs no transpose. Per key tile j the consumer issues
// S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back, waits only for S_j, does the masking and the online
// softmax of tile j while P_{j-1} V_{j-1} still runs on the tensor cores, then waits for it, rescales O and
// converts P_j. S, P and O together need 64 + 32 + 64 registers per thread (d = 128): hence 240 registers
// for the consumers and 24 for the producer. Ping-pong: the two consumer warpgroups take turns to issue their
// GEMMs (named barriers), so one warpgroup's softmax runs under the other's GEMMs.
//
// Tensor maps: Q, K, V are 3-D (head_dim, heads, tokens) over the packed varlen batch; a box is 64 elements of
// head_dim (128 bytes: the 128-byte swizzle limit) x 1 head x 128 tokens, so d = 128 loads two boxes per tile.
// Rows past a sequence's end belong to the next sequence (or are zero-filled past the tensor): keys there are
// masked to -inf, so their (finite) V rows get weight 0, and query rows there are never stored.
// The measured versions behind these kernels are in dev/cuda (attn_prefill_sm90_lab.cu, README.md).
#include "common.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <math.h>

// The sm_80 pass compiles the kernels to a trap, leaving the device functions below unused there.
#pragma nv_diag_suppress 177

namespace {

constexpr int BM = 128;    // query rows per CTA: 2 consumer warpgroups x 64
constexpr int BN = 128;    // keys per tile
constexpr int STAGES = 2;  // K/V ring depth
constexpr int NTHREADS = 384;

// D[64 x 128] (+)= A[64 x 16] * B[16 x 128], both operands in shared memory (128-byte swizzled, K-major).
__device__ __forceinline__ void wgmma_ss_n128(float *d, uint64_t da, uint64_t db, int accumulate) {
#ifdef ASSAY_SM90A
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(accumulate));
#else
    __trap();
#endif
}

// D[64 x 128] += A[64 x 16] * B[16 x 128], A (bf16 pairs) in registers, B in shared memory MN-major (transposed).
__device__ __forceinline__ void wgmma_rs_n128_tb(float *d, const uint32_t *a, uint64_t db) {
#ifdef ASSAY_SM90A
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#else
    __trap();
#endif
}

// D[64 x 64] += A[64 x 16] * B[16 x 64], A (bf16 pairs) in registers, B in shared memory MN-major (transposed).
__device__ __forceinline__ void wgmma_rs_n64_tb(float *d, const uint32_t *a, uint64_t db) {
#ifdef ASSAY_SM90A
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#else
    __trap();
#endif
}

// D[64 x 128] (+)= A[64 x 32] * B[32 x 128], e4m3 operands in shared memory (128-byte swizzled, K-major).
__device__ __forceinline__ void wgmma_ss_e4m3_n128(float *d, uint64_t da, uint64_t db, int accumulate) {
#ifdef ASSAY_SM90A
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(accumulate));
#else
    __trap();
#endif
}

// D[64 x 128] += A[64 x 32] * B[32 x 128], A (e4m3 quads) in registers, B in shared memory (K-major).
__device__ __forceinline__ void wgmma_rs_e4m3_n128(float *d, const uint32_t *a, uint64_t db) {
#ifdef ASSAY_SM90A
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#else
    __trap();
#endif
}


// D[64 x 136] += A[64 x 32] * B[32 x 136], A (e4m3 quads) in registers, B in shared memory (K-major). The 8 extra
// B rows are all ones (version 2 with the row sum on the tensor core): columns 128..135 of D get the row sums of A.
__device__ __forceinline__ void wgmma_rs_e4m3_n136(float *d, const uint32_t *a, uint64_t db) {
#ifdef ASSAY_SM90A
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n136k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67}, {%68, %69, %70, %71}, %72, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#else
    __trap();
#endif
}

// D[64 x 192] (+)= A[64 x 32] * B[32 x 192], e4m3 operands in shared memory (K-major, 128-byte swizzled): the S
// GEMM of version 3 (192-key tiles; B = a 128-row and a 64-row K box, 1024 bytes per 8 rows throughout).
__device__ __forceinline__ void wgmma_ss_e4m3_n192(float *d, uint64_t da, uint64_t db, int accumulate) {
#ifdef ASSAY_SM90A
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(da), "l"(db), "r"(accumulate));
#else
    __trap();
#endif
}

// Shared-memory matrix descriptor, 128-byte swizzle. K-major operands: SBO = 1024 (8 rows of 128 bytes), LBO
// unused. MN-major operands: LBO = byte distance between 64-element blocks along MN, SBO = between 8-row blocks
// along K.
__device__ __forceinline__ uint64_t sw128_desc(const void *p, uint32_t lbo, uint32_t sbo) {
    uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) | ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) |
           ((uint64_t)1 << 62);
}

__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                            uint64_t *bar) {
#ifdef ASSAY_SM90A
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];\n" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
        : "memory");
#else
    __trap();
#endif
}

struct WgParams {
    __nv_bfloat16 *o;
    float *lse;
    const int32_t *cu_q, *cu_k;
    int batch, hq, hkv;
    float scale_log2, scale;
    int causal;
};

template <int D>
struct Smem {
    static constexpr int Q_BYTES = BM * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int Q_OFF = 0;
    static constexpr int K_OFF = Q_BYTES;
    static constexpr int V_OFF = K_OFF + STAGES * KV_BYTES;
    static constexpr int BAR_OFF = V_OFF + STAGES * KV_BYTES;
    static constexpr int BYTES = BAR_OFF + 64 + 1024;  // barriers; slack to align the base to 1024
};

// 2^x with one MUFU.EX2 (exp2f adds a range test and two multiplies per call to keep denormal results; here
// results below 2^-126 may flush to zero, which softmax weights can afford: the row maximum gives 2^0 or 2^8).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Named barriers 1 and 2 (0 is __syncthreads): "consumer warpgroup c may issue its GEMMs now" (ping-pong).
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

template <int D, bool OST>
__global__ void __launch_bounds__(NTHREADS, 1)
    fa_wgmma(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
             const __grid_constant__ CUtensorMap tmv, WgParams p) {
#ifdef ASSAY_SM90A
    using L = Smem<D>;
    constexpr int DH = D / 64;  // 64-column halves of head_dim (one TMA box / swizzle atom column each)
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sm = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Qs = sm + L::Q_OFF;
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm + L::BAR_OFF);
    uint64_t *qfull = bars, *kfull = bars + 1, *vfull = kfull + STAGES, *kempty = vfull + STAGES,
             *vempty = kempty + STAGES;

    const int b = blockIdx.z, h = blockIdx.y;
    const int mblk = gridDim.x - 1 - blockIdx.x;  // heaviest causal blocks first
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * BM >= Lq) return;
    const int hk = h / (p.hq / p.hkv);
    const int diag = Lk - Lq;  // causal offset (bottom-right alignment)
    const int n_total = (Lk + BN - 1) / BN;
    int n_max = n_total;
    if (p.causal) {
        int x = (mblk + 1) * BM + diag;
        n_max = x <= 0 ? 0 : min(n_total, (x + BN - 1) / BN);
    }
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;

    if (tid == 0) {
        mbar_init(qfull, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(kfull + s, 1);
            mbar_init(vfull + s, 1);
            mbar_init(kempty + s, 8);  // one arrival per consumer warp
            mbar_init(vempty + s, 8);
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0 && n_max > 0) {
            mbar_arrive_expect_tx(qfull, L::Q_BYTES);
#pragma unroll
            for (int x = 0; x < DH; ++x) tma_load_3d(Qs + x * BM * 128, &tmq, x * 64, h, q0 + mblk * BM, qfull);
            for (int j = 0; j < n_max; ++j) {
                const int s = j % STAGES;
                const uint32_t ph = (j / STAGES) & 1;
                if (j >= STAGES) mbar_wait(kempty + s, ph ^ 1);
                mbar_arrive_expect_tx(kfull + s, L::KV_BYTES);
#pragma unroll
                for (int x = 0; x < DH; ++x)
                    tma_load_3d(sm + L::K_OFF + s * L::KV_BYTES + x * BN * 128, &tmk, x * 64, hk, k0 + j * BN,
                                kfull + s);
                if (j >= STAGES) mbar_wait(vempty + s, ph ^ 1);
                mbar_arrive_expect_tx(vfull + s, L::KV_BYTES);
#pragma unroll
                for (int x = 0; x < DH; ++x)
                    tma_load_3d(sm + L::V_OFF + s * L::KV_BYTES + x * BN * 128, &tmv, x * 64, hk, k0 + j * BN,
                                vfull + s);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int cw = wg - 1;            // consumer warpgroup: rows cw*64 .. cw*64+63 of the tile
    const int wiw = warp & 3;         // warp inside the warpgroup: 16 rows each
    const int g = lane >> 2, t = lane & 3;
    const int row0 = mblk * BM + cw * 64 + wiw * 16 + g;  // this thread's rows: row0 and row0 + 8

    // Ping-pong: the two consumer warpgroups take turns to issue their GEMMs, so that one
    // warpgroup's softmax runs while the other's GEMMs own the tensor cores. Turn k of warpgroup c waits on
    // barrier 1 + c, which the other warpgroup arrives at after issuing its own turn; warpgroup 1 gives
    // warpgroup 0 its first turn and skips its last arrival, so every barrier phase completes exactly.
    int turns_left = n_max + 1;  // n_max QK^T issues + the final P V
    auto turn_begin = [&]() {
        named_sync(1 + cw);
    };
    auto turn_end = [&]() {
        --turns_left;
        if (!(cw == 1 && turns_left == 0)) named_arrive(2 - cw);
    };
    if (cw == 1 && n_max > 0) named_arrive(1);

    float o[D / 2];
    float s[BN / 2];
    uint32_t pa[BN / 16][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;

    // Descriptors: Q rows of this warpgroup start cw*64 rows (cw*8 KB) into each 64-column half.
    const unsigned char *Qw = Qs + cw * 64 * 128;

    auto issue_qk = [&](int st) {
        const unsigned char *Kt = sm + L::K_OFF + st * L::KV_BYTES;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const int x = kk >> 2, w = (kk & 3) * 32;
            wgmma_ss_n128(s, sw128_desc(Qw + x * BM * 128 + w, 16, 1024), sw128_desc(Kt + x * BN * 128 + w, 16, 1024),
                          kk > 0);
        }
        wgmma_commit();
    };
    auto issue_pv = [&](int st) {
        const unsigned char *Vt = sm + L::V_OFF + st * L::KV_BYTES;
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
            const uint64_t dv = sw128_desc(Vt + kc * 16 * 128, BN * 128, 1024);
            if (D == 128) wgmma_rs_n128_tb(o, pa[kc], dv);
            else wgmma_rs_n64_tb(o, pa[kc], dv);
        }
        wgmma_commit();
    };
    // Masks (ragged end of K; causal diagonal), then the online softmax of S in place; returns the factors
    // that rescale O's two rows.
    auto softmax = [&](int j, float *alpha) {
        const bool need_mask = (j + 1) * BN > Lk || (p.causal && (j + 1) * BN - 1 > mblk * BM + diag);
        if (need_mask) {
#pragma unroll
            for (int i = 0; i < BN / 8; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = j * BN + i * 8 + 2 * t + (e & 1);
                    const int row = row0 + (e >> 1) * 8;
                    if (col >= Lk || (p.causal && col > row + diag)) s[4 * i + e] = -INFINITY;
                }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            // Four independent chains (the compiler keeps the written order of float operations).
            float mq[4] = {m[r], -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) mq[i & 3] = fmaxf(mq[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            float mx = fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]));
            mx = warp_max_quad(mx);
            const float m_sc = mx == -INFINITY ? 0.f : mx * p.scale_log2;
            alpha[r] = fast_exp2(m[r] * p.scale_log2 - m_sc);
            float sq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                const float p0 = fast_exp2(fmaf(s[4 * i + 2 * r], p.scale_log2, -m_sc));
                const float p1 = fast_exp2(fmaf(s[4 * i + 2 * r + 1], p.scale_log2, -m_sc));
                s[4 * i + 2 * r] = p0;
                s[4 * i + 2 * r + 1] = p1;
                sq[i & 3] += p0 + p1;
            }
            const float sum = (sq[0] + sq[1]) + (sq[2] + sq[3]);
            l[r] = l[r] * alpha[r] + sum;  // per-thread partial sums; the quad adds them at the end
            m[r] = mx;
        }
    };
    auto convert_p = [&]() {
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
            pa[kc][0] = pack_bf16(s[8 * kc + 0], s[8 * kc + 1]);
            pa[kc][1] = pack_bf16(s[8 * kc + 2], s[8 * kc + 3]);
            pa[kc][2] = pack_bf16(s[8 * kc + 4], s[8 * kc + 5]);
            pa[kc][3] = pack_bf16(s[8 * kc + 6], s[8 * kc + 7]);
        }
    };

    if (n_max > 0) {
        mbar_wait(qfull, 0);
        mbar_wait(kfull, 0);
        wgmma_fence();
        turn_begin();
        issue_qk(0);
        turn_end();
        wgmma_wait<0>();
        reg_fence<BN / 2>(s);
        if (lane == 0) mbar_arrive(kempty);
        float alpha[2];
        softmax(0, alpha);
        convert_p();
        for (int j = 1; j < n_max; ++j) {
            const int st = j % STAGES, sp = (j - 1) % STAGES;
            mbar_wait(kfull + st, (j / STAGES) & 1);
            mbar_wait(vfull + sp, ((j - 1) / STAGES) & 1);
            wgmma_fence();
            turn_begin();
            issue_qk(st);
            issue_pv(sp);
            turn_end();
            wgmma_wait<1>();  // S_j is done; P_{j-1} V_{j-1} may still run
            reg_fence<BN / 2>(s);
            if (lane == 0) mbar_arrive(kempty + st);
            softmax(j, alpha);
            wgmma_wait<0>();
            reg_fence<D / 2>(o);
            if (lane == 0) mbar_arrive(vempty + sp);
            // Rescale only when a row maximum moved somewhere in the warp (rare after the first tiles); a skipped
            // multiply would have been by exactly 1.
            if (__any_sync(0xffffffff, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
                for (int i = 0; i < D / 8; ++i) {
                    o[4 * i + 0] *= alpha[0];
                    o[4 * i + 1] *= alpha[0];
                    o[4 * i + 2] *= alpha[1];
                    o[4 * i + 3] *= alpha[1];
                }
            }
            convert_p();
        }
        const int sl = (n_max - 1) % STAGES;
        mbar_wait(vfull + sl, ((n_max - 1) / STAGES) & 1);
        wgmma_fence();
        turn_begin();
        issue_pv(sl);
        turn_end();
        wgmma_wait<0>();
        reg_fence<D / 2>(o);
    }

    const int total_q = p.cu_q[p.batch];
    // OST: O leaves through shared memory in 16-byte row stores instead of 4-byte stores from the accumulator
    // layout (+2.9% at d128 in run h200-gpu9-prefill9-1, 5.6% slower at d64). The K stage of key tile n_max - 2 holds both warpgroups' O (64 rows x D bf16 each, 16-byte chunk c of row
    // r at c ^ (r & 7)): under ping-pong both warpgroups finished that S before their last turn, which precedes
    // either final P V, and nothing loads after the last tile. Needs 2 key tiles (else the direct stores).
    if (OST && n_max >= 2) {
        constexpr int CH = D / 8;  // 16-byte chunks per row
        unsigned char *ob = sm + L::K_OFF + ((n_max - 2) % STAGES) * L::KV_BYTES + cw * 64 * D * 2;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float lsum = warp_sum_quad(l[r]);
            const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
            const int rl = wiw * 16 + g + 8 * r, row = row0 + r * 8;
#pragma unroll
            for (int i = 0; i < CH; ++i)
                *reinterpret_cast<uint32_t *>(ob + rl * D * 2 + ((i ^ (rl & 7)) << 4) + 4 * t) =
                    pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
            if (p.lse && t == 0 && row < Lq)
                p.lse[(size_t)h * total_q + q0 + row] = lsum > 0.f ? m[r] * p.scale + logf(lsum) : -INFINITY;
        }
        asm volatile("bar.sync %0, 128;\n" ::"r"(5 + cw) : "memory");  // this warpgroup's O is in ob
        const int tw = tid & 127;
#pragma unroll
        for (int k = 0; k < 64 * CH / 128; ++k) {
            const int idx = tw + 128 * k, rl = idx / CH, ch = idx % CH;
            const int row = mblk * BM + cw * 64 + rl;
            if (row >= Lq) continue;
            *reinterpret_cast<uint4 *>(p.o + ((size_t)(q0 + row) * p.hq + h) * D + ch * 8) =
                *reinterpret_cast<const uint4 *>(ob + rl * D * 2 + ((ch ^ (rl & 7)) << 4));
        }
        return;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float lsum = warp_sum_quad(l[r]);
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = row0 + r * 8;
        if (row >= Lq) continue;
        __nv_bfloat16 *dst = p.o + ((size_t)(q0 + row) * p.hq + h) * D;
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
            *reinterpret_cast<uint32_t *>(dst + i * 8 + 2 * t) = pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
        if (p.lse && t == 0)
            p.lse[(size_t)h * total_q + q0 + row] = lsum > 0.f ? m[r] * p.scale + logf(lsum) : -INFINITY;
    }
#else
    __trap();
#endif
}

// 3-D map over a packed [tokens][heads][d] bf16 tensor; box = 64 of d x 1 head x `rows` tokens, 128-byte swizzle.
int make_map(CUtensorMap *m, const void *base, int d, int heads, int tokens, int rows) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = assay_cuda_tensor_map_encoder();
    if (!enc) return assay_cuda_fail("attn_prefill: cuTensorMapEncodeTiled is not available");
    cuuint64_t dims[3] = {(cuuint64_t)d, (cuuint64_t)heads, (cuuint64_t)(tokens > 0 ? tokens : 1)};
    cuuint64_t strides[2] = {(cuuint64_t)d * 2, (cuuint64_t)heads * d * 2};
    cuuint32_t box[3] = {64, 1, (cuuint32_t)rows};
    cuuint32_t estr[3] = {1, 1, 1};
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(base), dims, strides, box, estr,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return assay_cuda_fail("attn_prefill: cuTensorMapEncodeTiled failed (%d)", (int)r);
    return 0;
}

template <int D, bool OST>
int launch(const assay_cuda_attn_prefill_args *a, int total_q, int total_k, cudaStream_t stream) {
    constexpr int smem = Smem<D>::BYTES;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma<D, OST>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = true;
    }
    CUtensorMap mq, mk, mv;
    if (make_map(&mq, a->q, D, a->n_heads_q, total_q, BM) || make_map(&mk, a->k, D, a->n_heads_kv, total_k, BN) ||
        make_map(&mv, a->v, D, a->n_heads_kv, total_k, BN))
        return -1;
    WgParams p;
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
    dim3 grid((a->max_seqlen_q + BM - 1) / BM, a->n_heads_q, a->batch);
    fa_wgmma<D, OST><<<grid, NTHREADS, smem, stream>>>(mq, mk, mv, p);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}


// ---- FP8 (e4m3), head_dim 128 ----------------------------------------------------------------------------------
// Operands: Q and K e4m3 codes [tokens][heads][128] with one scale per (token, head) row (as written by
// assay_cuda_fp8_quant_rows, Hadamard-rotated or not) or, for K, one per (kv head, 128-key block)
// (assay_cuda_fp8_quant_k_blocks); V transposed, V^T codes [kv_head][128][vt_stride] with one scale per (kv_head,
// channel) (assay_cuda_fp8_quant_vt), because e4m3 wgmma takes K-major B operands only and the reduction dimension
// of P V is the key. S = Q K^T is m64nNk32 on codes; the Q scale joins the softmax scale of each row; P = exp2(x -
// max + 8) lies in (0, 256], inside e4m3's range (the offset cancels against the row sum). P V is the register-A
// form: the fp32 S layout gives a lane keys {8i + 2t, 8i + 2t + 1} while the 8-bit A fragment holds k positions
// {4t .. 4t + 3} and {16 + 4t ..}: instead of moving bytes between lanes, V^T stores the keys of each 32-key block in
// the order that makes the positions of lane t's quads hold exactly its keys (position 4t + u <-> key 8(u >> 1) +
// 2t + (u & 1), the same + 16), so a lane packs its own four P values into each A register. The V channel scales
// apply once, at the end.
struct Fp8WgParams {
    __nv_bfloat16 *o;
    const float *q_scale, *k_scale_t, *v_scale;  // [total_q][hq], [hkv][vt_stride], [hkv][128]
    const int32_t *cu_q, *cu_k, *cu_vt;
    int batch, hq, hkv, vt_stride;
    float scale_log2;
    int causal;
    const float *k_blk;  // version 2 with per-block K scales: [hkv][kblk_stride], tile of column c at c / 32
    int kblk_stride;
    uint32_t zero;       // 0 (opaque to the compiler; see fa_wgmma_fp8_v2)
};

constexpr int F8_D = 128;
constexpr int F8_TILE = 128 * 128;  // bytes of one Q, K or V^T tile

// ---- per-token K scales (fa_wgmma_fp8_v2): the P V GEMM really overlaps the softmax ---------------------------
// In a plain port of the bf16 kernel ptxas schedules the wait for P_{j-1} V_{j-1} (wgmma.wait_group 0) at the top of the softmax's
// basic block, before the row maxima (seen in the SASS: WARPGROUP.DEPBAR.LE gsb0, 0x0 ahead of every MUFU.EX2
// of the loop), and gives the dead P registers of that GEMM to softmax temporaries, so a warpgroup's softmax
// never runs under its own P V. Here the wait for P V is gone from the common path:
// - P is double-buffered (pa0 / pa1, the loop unrolled by two): tile j's P is written while P_{j-1} V_{j-1}
//   still reads the other buffer, whose registers stay live through the softmax (a cheap XOR into `keep`,
//   which the epilogue reads) so that the register allocator cannot hand them to temporaries.
// - The wait<1> after issuing S_j and P_{j-1} V_{j-1} also retires P_{j-2} V_{j-2} (groups complete in order),
//   which frees that V stage; 3 stages keep the loads two tiles ahead.
// - O is rescaled only when a row maximum grows by more than RESCALE_TAU (log2 units) anywhere in the
//   warpgroup (a bar.red vote: wgmma.wait_group must be executed by the whole warpgroup); only then does the
//   warpgroup wait for P_{j-1} V_{j-1}. Below the threshold the stale maximum stays: P <= 2^(8 + tau) = 446 <
//   448, still inside e4m3's range, and the row sum uses the same stale maximum, so the result is unchanged.
// The K scales of a tile come with the K tile (a bulk copy onto the same mbarrier) and multiply S's columns.
constexpr int F8B_STAGES = 3;
constexpr float F8_RESCALE_TAU = 0.8f;
constexpr int F8B_VSTRIDE = F8_TILE + 1024;  // a V^T stage + 1 KB (the shared-memory size the kernel was measured with)
constexpr int F8B_SMEM = F8_TILE * (1 + F8B_STAGES) + F8B_VSTRIDE * F8B_STAGES + F8B_STAGES * BN * 4 + 128 + 1024;

// OR of pred over the 128 threads of a warpgroup (named barrier `id`; every thread of the warpgroup must call it).
__device__ __forceinline__ bool warpgroup_any(bool pred, int id) {
    uint32_t r;
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, 128, p;\nselp.u32 %0, 1, 0, q;\n}\n"
        : "=r"(r)
        : "r"((uint32_t)pred), "r"(id)
        : "memory");
    return r != 0;
}

__global__ void __launch_bounds__(NTHREADS, 1)
    fa_wgmma_fp8_v2(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
                    const __grid_constant__ CUtensorMap tmv, Fp8WgParams p) {
#ifdef ASSAY_SM90A
    constexpr int S = F8B_STAGES;
    constexpr float TAU = F8_RESCALE_TAU;
    constexpr float POFF = 8.f;  // P = 2^(x - m + POFF) <= 2^(POFF + TAU) < 448
    constexpr int ON = F8_D / 2;  // O accumulators per thread
    constexpr int VST = F8_TILE;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sm = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Qs = sm, *Ks = sm + F8_TILE, *Vs = sm + F8_TILE * (1 + S);
    float *KSs = reinterpret_cast<float *>(sm + F8_TILE * (1 + S) + VST * S);  // [stage][BN] K scales (per token)
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm + F8_TILE * (1 + S) + VST * S + S * BN * 4);
    uint64_t *qfull = bars, *kfull = bars + 1, *vfull = kfull + S, *kempty = vfull + S, *vempty = kempty + S;

    const int b = blockIdx.z, h = blockIdx.y;
    const int mblk = gridDim.x - 1 - blockIdx.x;
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * BM >= Lq) return;
    const int vt0 = p.cu_vt[b];
    const int hk = h / (p.hq / p.hkv);
    const int diag = Lk - Lq;
    const int n_total = (Lk + BN - 1) / BN;
    int n_max = n_total;
    if (p.causal) {
        int x = (mblk + 1) * BM + diag;
        n_max = x <= 0 ? 0 : min(n_total, (x + BN - 1) / BN);
    }
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;

    if (tid == 0) {
        mbar_init(qfull, 1);
        for (int s = 0; s < S; ++s) {
            mbar_init(kfull + s, 1);
            mbar_init(vfull + s, 1);
            mbar_init(kempty + s, 8);
            mbar_init(vempty + s, 8);
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0 && n_max > 0) {
            mbar_arrive_expect_tx(qfull, F8_TILE);
            tma_load_3d(Qs, &tmq, 0, h, q0 + mblk * BM, qfull);
            for (int j = 0; j < n_max; ++j) {
                const int s = j % S;
                const uint32_t ph = (j / S) & 1;
                if (j >= S) mbar_wait(kempty + s, ph ^ 1);
                {  // the K tile and its K scales
                    const int kcol = vt0 + j * BN, nsc = min(BN, p.vt_stride - kcol);
                    mbar_arrive_expect_tx(kfull + s, F8_TILE + nsc * 4);
                    tma_load_3d(Ks + s * F8_TILE, &tmk, 0, hk, k0 + j * BN, kfull + s);
                    bulk_g2s(KSs + s * BN, p.k_scale_t + (size_t)hk * p.vt_stride + kcol, nsc * 4, kfull + s);
                }
                if (j >= S) mbar_wait(vempty + s, ph ^ 1);
                mbar_arrive_expect_tx(vfull + s, F8_TILE);
                tma_load_3d(Vs + s * VST, &tmv, vt0 + j * BN, 0, hk, vfull + s);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int cw = wg - 1, wiw = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = mblk * BM + cw * 64 + wiw * 16 + g;
    int turns_left = n_max + 1;
    auto turn_begin = [&]() {
        named_sync(1 + cw);
    };
    auto turn_end = [&]() {
        --turns_left;
        if (!(cw == 1 && turns_left == 0)) named_arrive(2 - cw);
    };
    if (cw == 1 && n_max > 0) named_arrive(1);

    float qf[2];  // per-row factor: q scale * softmax scale * log2(e)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        qf[r] = (row < Lq ? p.q_scale[(size_t)(q0 + row) * p.hq + h] : 1.f) * p.scale_log2;
    }
    float ksv[BN / 4];  // K scales of this lane's columns
    auto load_kscales = [&](int st) {
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
            const float2 v = *reinterpret_cast<const float2 *>(KSs + st * BN + i * 8 + 2 * t);
            ksv[2 * i] = v.x;
            ksv[2 * i + 1] = v.y;
        }
    };

    float o[ON];
    float s[BN / 2];
    uint32_t pa0[BN / 32][4], pa1[BN / 32][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // m: running maxima, scaled (log2 units)
    uint32_t keep = 0;
#pragma unroll
    for (int i = 0; i < ON; ++i) o[i] = 0.f;
    const unsigned char *Qw = Qs + cw * 64 * 128;

    auto issue_qk = [&](int st) {
        const unsigned char *Kt = Ks + st * F8_TILE;
#pragma unroll
        for (int kk = 0; kk < F8_D / 32; ++kk)
            wgmma_ss_e4m3_n128(s, sw128_desc(Qw + kk * 32, 16, 1024), sw128_desc(Kt + kk * 32, 16, 1024), kk > 0);
        wgmma_commit();
    };
    auto issue_pv = [&](int st, uint32_t (*pa)[4]) {
        const unsigned char *Vt = Vs + st * VST;
#pragma unroll
        for (int kc = 0; kc < BN / 32; ++kc) {
            wgmma_rs_e4m3_n128(o, pa[kc], sw128_desc(Vt + kc * 32, 16, 1024));
        }
        wgmma_commit();
    };
    // Masks, row maxima, P = 2^(x - max + 8) in place, row sums; returns the O rescale factors of the two rows.
    auto softmax = [&](int j, float *alpha) {
        const bool need_mask = (j + 1) * BN > Lk || (p.causal && (j + 1) * BN - 1 > mblk * BM + diag);
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
            s[4 * i + 0] *= ksv[2 * i];
            s[4 * i + 1] *= ksv[2 * i + 1];
            s[4 * i + 2] *= ksv[2 * i];
            s[4 * i + 3] *= ksv[2 * i + 1];
        }
        if (need_mask) {
#pragma unroll
            for (int i = 0; i < BN / 8; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = j * BN + i * 8 + 2 * t + (e & 1);
                    const int row = row0 + (e >> 1) * 8;
                    if (col >= Lk || (p.causal && col > row + diag)) s[4 * i + e] = -INFINITY;
                }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float rf = qf[r];  // > 0
            float mq[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) mq[i & 3] = fmaxf(mq[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            float mx = fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]));
            mx = warp_max_quad(mx);
            const float mxs = mx * rf;                      // -inf stays -inf
            const float mnew = mxs > m[r] + TAU ? mxs : m[r];
            alpha[r] = mnew == m[r] ? 1.f : fast_exp2(m[r] - mnew);
            const float off = POFF - (mnew == -INFINITY ? 0.f : mnew);  // P in (0, 2^(POFF + tau)]
            float sq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                const float x0 = fmaf(s[4 * i + 2 * r], rf, off), x1 = fmaf(s[4 * i + 2 * r + 1], rf, off);
                const float p0 = fast_exp2(x0);
                const float p1 = fast_exp2(x1);
                s[4 * i + 2 * r] = p0;
                s[4 * i + 2 * r + 1] = p1;
                sq[i & 3] += p0 + p1;
            }
            l[r] = l[r] * alpha[r] + ((sq[0] + sq[1]) + (sq[2] + sq[3]));
            m[r] = mnew;
        }
    };
    auto convert_p = [&](uint32_t (*pa)[4]) {
#pragma unroll
        for (int kc = 0; kc < BN / 32; ++kc)
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int i = 4 * kc + 2 * hh;
                    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]),
                                                                 __NV_SATFINITE, __NV_E4M3);
                    const uint32_t hi = __nv_cvt_float2_to_fp8x2(
                        make_float2(s[4 * i + 4 + 2 * r], s[4 * i + 4 + 2 * r + 1]), __NV_SATFINITE, __NV_E4M3);
                    pa[kc][2 * hh + r] = lo | (hi << 16);
                }
    };
    // One tile j >= 1: issue S_j and P_{j-1} V_{j-1} (P in pp), softmax of S_j under the GEMM, P_j into pc.
    auto step = [&](int j, uint32_t (*pc)[4], uint32_t (*pp)[4]) {
        const int st = j % S, sp = (j - 1) % S;
        mbar_wait(kfull + st, (j / S) & 1);
        mbar_wait(vfull + sp, ((j - 1) / S) & 1);
        wgmma_fence();
        turn_begin();
        issue_qk(st);
        issue_pv(sp, pp);
        turn_end();
        load_kscales(st);
        wgmma_wait<1>();  // S_j done, and P_{j-2} V_{j-2} (an older group)
        reg_fence<BN / 2>(s);
        __syncwarp();
        if (lane == 0) {
            mbar_arrive(kempty + st);
            if (j >= 2) mbar_arrive(vempty + (j - 2) % S);
        }
        float alpha[2];
        softmax(j, alpha);
#pragma unroll
        for (int kc = 0; kc < BN / 32; ++kc) keep ^= pp[kc][0] ^ pp[kc][1] ^ pp[kc][2] ^ pp[kc][3];
        if (warpgroup_any(alpha[0] != 1.f || alpha[1] != 1.f, 3 + cw)) {
            wgmma_wait<0>();  // P_{j-1} V_{j-1} done
            reg_fence<ON>(o);
#pragma unroll
            for (int i = 0; i < ON / 4; ++i) {
                o[4 * i + 0] *= alpha[0];
                o[4 * i + 1] *= alpha[0];
                o[4 * i + 2] *= alpha[1];
                o[4 * i + 3] *= alpha[1];
            }
        }
        convert_p(pc);
    };

    if (n_max > 0) {
        mbar_wait(qfull, 0);
        mbar_wait(kfull, 0);
        wgmma_fence();
        turn_begin();
        issue_qk(0);
        turn_end();
        load_kscales(0);
        wgmma_wait<0>();
        reg_fence<BN / 2>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty);
        float alpha0[2];
        softmax(0, alpha0);
        convert_p(pa0);
        int j = 1;
        for (; j + 1 < n_max; j += 2) {
            step(j, pa1, pa0);
            step(j + 1, pa0, pa1);
        }
        if (j < n_max) step(j, pa1, pa0);
        const int last = n_max - 1, sl = last % S;
        mbar_wait(vfull + sl, (last / S) & 1);
        wgmma_fence();
        turn_begin();
        if (last & 1) issue_pv(sl, pa1);
        else issue_pv(sl, pa0);
        turn_end();
        wgmma_wait<0>();
        reg_fence<ON>(o);
    }

    const float *vsc = p.v_scale + (size_t)hk * F8_D;
    keep &= p.zero;  // 0: only keeps the P registers of the GEMM in flight alive (see above)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float lsum = warp_sum_quad(l[r]);
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = row0 + r * 8;
        if (row >= Lq + (int)keep) continue;
        __nv_bfloat16 *dst = p.o + ((size_t)(q0 + row) * p.hq + h) * F8_D;
#pragma unroll
        for (int i = 0; i < F8_D / 8; ++i) {
            const int c = i * 8 + 2 * t;
            *reinterpret_cast<uint32_t *>(dst + c) =
                pack_bf16(o[4 * i + 2 * r] * inv * __ldg(vsc + c), o[4 * i + 2 * r + 1] * inv * __ldg(vsc + c + 1));
        }
    }
#else
    __trap();
#endif
}

// ---- per-block K scales (fa_wgmma_fp8_v3): 192-key tiles, P as e4m3 codes without exponentials ---------------
// The per-tile work that does not depend on the tile width (stage and phase arithmetic, descriptors, mbarrier waits
// and arrivals, the ping-pong barriers, the quad shuffles of the row maxima, the rescale decision) is paid once per
// 192 keys: S is one m64n192k32 per 32 of head_dim over a 128-row and a 64-row K box (24 KB per stage); V^T of a
// tile is a 128-key box (128-byte swizzle) and a 64-key box (64-byte swizzle: a box's inner extent may not exceed
// its swizzle span), so P V is 4 wgmma on the first and 2 on the second (descriptor layout 64B, 512 bytes per 8
// rows). 3 stages; stages, phases and descriptors advance by additions.
// - The 128-key K blocks (per-block scales) start every 128 keys of the sequence, so a 192-key tile holds two of
//   them: split at key 128 in even tiles and at key 64 in odd ones (the loop is unrolled by two, which makes the
//   split a constant in each half). The row maximum is max(max_a kb_a, max_b kb_b) q_f; one shuffle pair per row.
// - P single-buffered and XORed into `keep` after the softmax, so ptxas cannot hoist the wait for P_{j-1} V_{j-1}
//   above it; a differently tagged copy of that wait in each arm of the rescale branch (identical inline asm in
//   both arms would be hoisted above the branch) puts it after the whole softmax block.
// - P without exponentials: an e4m3 code is close to 8 log2(value) + 56 (exponent field x 8 plus the 3-bit
//   mantissa, a linear interpolation of 2^f inside each binade: at most +6.1% off), so P = 2^x with x = S rf - m +
//   8 <= 8.8 is written straight as the code floor(8 x + 56.2) in [0, 126]: one FFMA whose result carries the code
//   in bits 8-15 (the magic number 1.5 x 2^15, whose ulp is 2^-8, so the offset keeps 8 fraction bits), one FMNMX
//   for the floor at code 0, and byte permutes that pack four codes into an A-fragment register; no MUFU, no F2FP.
//   The row sums come from the tensor core (P V as m64n136k32 against 8 rows of e4m3 ones after each V^T box), so
//   they sum the very codes the numerator used. On outlier data the output error is the exponential kernel's; on
//   flat N(0, 1) scores it is 1.6x (run h200-gpu15-fp8pf11-6; the lab keeps the exponential form).
// - O leaves through shared memory in 16-byte stores (see the epilogue).
// The unused 64-row Q map (tmq64) stays an argument: removing it changed the kernel's schedule (5% slower in run
// h200-gpu7-fp8pf6).
constexpr int F83_STAGES = 3;
constexpr int F8_TBN = 192;                         // keys per tile
constexpr int F83_VSTB = 26624;                     // V^T bytes of a stage: each box followed by its 8 rows of ones,
                                                    // the 64-key box at 17408
constexpr int F83_SMEM = 2 * 64 * 128 + F83_STAGES * (F8_TBN * 128 + F83_VSTB) + 128 + 1024;
static_assert(F83_SMEM <= 232448, "shared memory exceeds the sm_90 opt-in limit");

// K-major 64-byte swizzle descriptor (8 rows of 64 bytes = 512 between 8-row groups), layout type 2.
__device__ __forceinline__ uint64_t sw64_desc(const void *p) {
    uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(512 >> 4) << 32) | ((uint64_t)2 << 62);
}

// wgmma.wait_group 0 with a distinct comment per call site: identical inline asm in both arms of a branch would be
// hoisted above it by the compiler (LATE).
template <int TAG>
__device__ __forceinline__ void wgmma_wait0_tagged() {
    if (TAG == 1) asm volatile("wgmma.wait_group.sync.aligned 0; // a\n" ::: "memory");
    else asm volatile("wgmma.wait_group.sync.aligned 0; // b\n" ::: "memory");
}

__global__ void __launch_bounds__(128 * 3, 1)
    fa_wgmma_fp8_v3(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
                    const __grid_constant__ CUtensorMap tmv, const __grid_constant__ CUtensorMap tmk64,
                    const __grid_constant__ CUtensorMap tmv64, const __grid_constant__ CUtensorMap tmq64,
                    Fp8WgParams p) {
#ifdef ASSAY_SM90A
    constexpr int TBN = F8_TBN, NCW = 2;
    constexpr int S = F83_STAGES, F83_KST = TBN * 128, F83_VST = F83_VSTB, QB = NCW * 64 * 128;
    constexpr int ON = F8_D / 2 + 4;  // O accumulators per thread, + the row-sum columns
    constexpr int V64 = F8_TILE + 1024;  // offset of the 64-key V^T box in a stage
    constexpr int BM = NCW * 64;  // query rows per CTA (shadows the file's 128)
    constexpr float TAU = F8_RESCALE_TAU, POFF = 8.f;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sm = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Qs = sm, *Ks = sm + QB, *Vs = sm + QB + S * F83_KST;
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm + QB + S * (F83_KST + F83_VST));
    uint64_t *qfull = bars, *kfull = bars + 1, *vfull = kfull + S, *kempty = vfull + S, *vempty = kempty + S;

    const int b = blockIdx.z, h = blockIdx.y;
    const int mblk = gridDim.x - 1 - blockIdx.x;
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * BM >= Lq) return;
    const int vt0 = p.cu_vt[b];
    const int hk = h / (p.hq / p.hkv);
    const int diag = Lk - Lq;
    const int n_total = (Lk + TBN - 1) / TBN;
    int n_max = n_total;
    if (p.causal) {
        int x = (mblk + 1) * BM + diag;
        n_max = x <= 0 ? 0 : min(n_total, (x + TBN - 1) / TBN);
    }
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;

    if (tid == 0) {
        mbar_init(qfull, 1);
        for (int s = 0; s < S; ++s) {
            mbar_init(kfull + s, 1);
            mbar_init(vfull + s, 1);
            mbar_init(kempty + s, 4 * NCW);
            mbar_init(vempty + s, 4 * NCW);
        }
        mbar_fence_init();
    }
    {  // the ones rows after each V^T box, written once; the tensor cores read them (async proxy)
        constexpr int OW = 384;  // words: 256 after the 128-key box, 128 after the 64-key box
        for (int i = tid; i < S * OW; i += 128 * (NCW + 1)) {
            const int st = i / OW, w = i % OW;
            unsigned char *v = Vs + st * F83_VST;
            if (w < 256) reinterpret_cast<uint32_t *>(v + F8_TILE)[w] = 0x38383838u;
            else reinterpret_cast<uint32_t *>(v + V64 + 8192)[w - 256] = 0x38383838u;
        }
        fence_proxy_async();
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0 && n_max > 0) {
            mbar_arrive_expect_tx(qfull, QB);
            tma_load_3d(Qs, &tmq, 0, h, q0 + mblk * BM, qfull);
            // Boxes past the tensor's end are zero-filled and still count their bytes; their keys are masked, and
            // zero V^T codes keep P V finite.
            for (int j = 0, s = 0, ph = 0; j < n_max; ++j) {
                if (j >= S) mbar_wait(kempty + s, ph ^ 1);
                mbar_arrive_expect_tx(kfull + s, F83_KST);
                tma_load_3d(Ks + s * F83_KST, &tmk, 0, hk, k0 + j * TBN, kfull + s);
                tma_load_3d(Ks + s * F83_KST + F8_TILE, &tmk64, 0, hk, k0 + j * TBN + 128, kfull + s);
                if (j >= S) mbar_wait(vempty + s, ph ^ 1);
                mbar_arrive_expect_tx(vfull + s, F8_TILE + (TBN - 128) * 128);
                tma_load_3d(Vs + s * F83_VST, &tmv, vt0 + j * TBN, 0, hk, vfull + s);
                tma_load_3d(Vs + s * F83_VST + V64, &tmv64, vt0 + j * TBN + 128, 0, hk, vfull + s);
                if (++s == S) s = 0, ph ^= 1;
            }
        }
        return;
    }

    // 2 consumer warpgroups: 240 registers each (2 x 128 x 240 + 128 x 24 <= 64K)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int cw = wg - 1, wiw = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = mblk * BM + cw * 64 + wiw * 16 + g;
    // Ping-pong turns, round robin over the NCW consumer warpgroups (barrier 1 + c: "c may issue now", synced by
    // c and arrived by its predecessor): the last one (the final P V of the last warpgroup) passes it to nobody.
    auto turn_begin = [&]() { named_sync(1 + cw); };
    auto turn_end = [&](bool final) {
        if (!(cw == NCW - 1 && final)) named_arrive(cw == NCW - 1 ? 1 : 2 + cw);
    };
    if (cw == NCW - 1 && n_max > 0) named_arrive(1);

    float qf[2];  // per-row factor: q scale * softmax scale * log2(e)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        qf[r] = (row < Lq ? p.q_scale[(size_t)(q0 + row) * p.hq + h] : 1.f) * p.scale_log2;
    }
    const float *kblk = p.k_blk + (size_t)hk * p.kblk_stride + vt0 / 32;

    float o[ON];
    float s[TBN / 2];
    uint32_t pa0[TBN / 32][4];
    float m[2] = {-INFINITY, -INFINITY};
    uint32_t keep = 0;
#pragma unroll
    for (int i = 0; i < ON; ++i) o[i] = 0.f;
    // Descriptors of stage 0; a stage (or a 32-byte k step) moves the start address field by bytes >> 4.
    const uint64_t dq = sw128_desc(Qs + cw * 64 * 128, 16, 1024);
    const uint64_t dk = sw128_desc(Ks, 16, 1024), dv = sw128_desc(Vs, 16, 1024), dv64 = sw64_desc(Vs + V64);

    auto issue_qk_to = [&](int st, float *sx) {
        const uint64_t d = dk + (uint64_t)(st * (F83_KST >> 4));
#pragma unroll
        for (int kk = 0; kk < F8_D / 32; ++kk) {
            wgmma_ss_e4m3_n192(sx, dq + 2 * kk, d + 2 * kk, kk > 0);
        }
        wgmma_commit();
    };
    auto issue_qk = [&](int st) { issue_qk_to(st, s); };
    auto issue_pv = [&](int st, uint32_t (*pa)[4]) {
        const uint64_t d = dv + (uint64_t)(st * (F83_VST >> 4)), d64 = dv64 + (uint64_t)(st * (F83_VST >> 4));
#pragma unroll
        for (int kc = 0; kc < TBN / 32; ++kc) {
            wgmma_rs_e4m3_n136(o, pa[kc], kc < 4 ? d + 2 * kc : d64 + 2 * (kc - 4));
        }
        (void)d64;
        wgmma_commit();
    };
    // Masks, row maxima, P = 2^(x - max + 8) as e4m3 codes in place in s (no exponentials: see above); returns the O rescale
    // factors. odd: the tile's K-block split is at key 64 instead of 128 (constant after inlining).
    auto softmax_on = [&](float *s, int j, bool odd, float *alpha) {
        const int split = odd ? 8 : 16;  // in groups of 8 keys
        // k_quant_blocks writes a block's scale at its first 32-column slot only: slot 4 * (key / 128)
        const float kba = __ldg(kblk + ((j * TBN) >> 7 << 2));
        const float kbb = j * TBN + split * 8 < Lk ? __ldg(kblk + ((j * TBN + split * 8) >> 7 << 2)) : 1.f;
        const bool need_mask = (j + 1) * TBN > Lk || (p.causal && (j + 1) * TBN - 1 > mblk * BM + diag);
        if (need_mask) {
#pragma unroll
            for (int i = 0; i < TBN / 8; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = j * TBN + i * 8 + 2 * t + (e & 1);
                    const int row = row0 + (e >> 1) * 8;
                    if (col >= Lk || (p.causal && col > row + diag)) s[4 * i + e] = -INFINITY;
                }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float rfa = qf[r] * kba, rfb = qf[r] * kbb;  // > 0
            float mq[8];  // 0-3: the first K block of the tile, 4-7: the second
#pragma unroll
            for (int u = 0; u < 8; ++u) mq[u] = -INFINITY;
#pragma unroll
            for (int i = 0; i < TBN / 8; ++i) {
                // the first pair of an accumulator replaces the -inf (fmaxf(-inf, x) is not folded: NaN rules)
                const int u = (i >= split) * 4 + (i & 3), first = (i < split ? i : i - split) < 4;
                const float v = fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]);
                mq[u] = first ? v : fmaxf(mq[u], v);
            }
            const float mxa = fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]));
            const float mxb = fmaxf(fmaxf(mq[4], mq[5]), fmaxf(mq[6], mq[7]));
            const float mxs = warp_max_quad(fmaxf(mxa * rfa, mxb * rfb));  // -inf stays
            const float mnew = mxs > m[r] + TAU ? mxs : m[r];
            alpha[r] = mnew == m[r] ? 1.f : fast_exp2(m[r] - mnew);
            const float off = POFF - (mnew == -INFINITY ? 0.f : mnew);
            {  // codes in bits 8-15 of 1.5 x 2^15 + code / 256 (its ulp is 2^-8), floored at code 0 (-inf -> 0)
                constexpr float MAGICF = 49152.f;
                const float off8 = fmaf(8.f, off, 56.2f + MAGICF);
#pragma unroll
                for (int i = 0; i < TBN / 8; ++i) {
                    const float rf8 = 8.f * (i < split ? rfa : rfb);
                    s[4 * i + 2 * r] = fmaxf(fmaf(s[4 * i + 2 * r], rf8, off8), MAGICF);
                    s[4 * i + 2 * r + 1] = fmaxf(fmaf(s[4 * i + 2 * r + 1], rf8, off8), MAGICF);
                }
                m[r] = mnew;
                continue;
            }
        }
    };
    auto softmax = [&](int j, bool odd, float *alpha) { softmax_on(s, j, odd, alpha); };
    auto convert_p_from = [&](const float *s, uint32_t (*pa)[4]) {
#pragma unroll
        for (int kc = 0; kc < TBN / 32; ++kc)
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int i = 4 * kc + 2 * hh;
                    // the code bytes of four values (the second byte of each)
                    const uint32_t lo = __byte_perm(__float_as_uint(s[4 * i + 2 * r]),
                                                    __float_as_uint(s[4 * i + 2 * r + 1]), 0x0051);
                    const uint32_t hi = __byte_perm(__float_as_uint(s[4 * i + 4 + 2 * r]),
                                                    __float_as_uint(s[4 * i + 4 + 2 * r + 1]), 0x0051);
                    pa[kc][2 * hh + r] = __byte_perm(lo, hi, 0x5410);
                }
    };
    auto convert_p = [&](uint32_t (*pa)[4]) { convert_p_from(s, pa); };
    auto rescale = [&](const float *alpha) {
#pragma unroll
        for (int i = 0; i < ON / 4; ++i) {
            o[4 * i + 0] *= alpha[0];
            o[4 * i + 1] *= alpha[0];
            o[4 * i + 2] *= alpha[1];
            o[4 * i + 3] *= alpha[1];
        }
    };
    // The wait for every pending wgmma group sits in both arms of the rescale branch, each copy with its own
    // tag (identical asm in both arms would be hoisted above the branch), so it follows every instruction of the
    // softmax block; a single wait was hoisted by ptxas above the exponentials.
    auto wait_late_then_rescale = [&](const float *alpha) {
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
            wgmma_wait0_tagged<1>();
            reg_fence<ON>(o);
            rescale(alpha);
        } else {
            wgmma_wait0_tagged<2>();
            reg_fence<ON>(o);
        }
    };
    // st / phk: stage and phase of tile j; tile j - 1 is in stage sp (phase phv).
    int st = 0, phk = 0;
    // One tile j >= 1: issue S_j and P_{j-1} V_{j-1} (P in pp), softmax of S_j under the GEMM, P_j into pc.
    auto step = [&](int j, bool odd, uint32_t (*pc)[4], uint32_t (*pp)[4]) {
        if (++st == S) st = 0, phk ^= 1;
        const int sp = st == 0 ? S - 1 : st - 1, phv = st == 0 ? phk ^ 1 : phk;
        mbar_wait(kfull + st, phk);
        mbar_wait(vfull + sp, phv);
        wgmma_fence();
        turn_begin();
        issue_qk(st);
        issue_pv(sp, pp);
        turn_end(false);
        wgmma_wait<1>();  // S_j done
        reg_fence<TBN / 2>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty + st);
        float alpha[2];
        softmax(j, odd, alpha);
        // P stays live through the softmax, so ptxas cannot hoist the wait above it
#pragma unroll
        for (int kc = 0; kc < TBN / 32; ++kc) keep ^= pp[kc][0] ^ pp[kc][1] ^ pp[kc][2] ^ pp[kc][3];
        wait_late_then_rescale(alpha);
        __syncwarp();
        if (lane == 0) mbar_arrive(vempty + sp);
        convert_p(pc);
    };

    if (n_max > 0) {
        mbar_wait(qfull, 0);
        mbar_wait(kfull, 0);
        wgmma_fence();
        turn_begin();
        issue_qk(0);
        turn_end(false);
        wgmma_wait<0>();
        reg_fence<TBN / 2>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty);
        float alpha0[2];
        softmax(0, false, alpha0);
        convert_p(pa0);
        int j = 1;
        for (; j + 1 < n_max; j += 2) {
            step(j, true, pa0, pa0);
            step(j + 1, false, pa0, pa0);
        }
        if (j < n_max) step(j, true, pa0, pa0);
        mbar_wait(vfull + st, phk);  // st, phk: the last tile's stage
        wgmma_fence();
        turn_begin();
        issue_pv(st, pa0);
        turn_end(true);
        wgmma_wait<0>();
        reg_fence<ON>(o);
    }

    const float *vsc = p.v_scale + (size_t)hk * F8_D;
    keep &= p.zero;  // 0: only keeps the P registers of the GEMM in flight alive (see version 2)
    // O goes through shared memory and out in 16-byte stores, a 256-byte row per 16 lanes (the
    // direct stores below write 4 bytes per lane, 8 rows x 16 bytes per warp instruction: 5% of v32's samples, lg
    // throttle, plus the exit waiting for them to drain). The buffers are the K stages of key tiles n_max - 2
    // (warpgroup 0) and n_max - 3 (warpgroup 1): both warpgroups finished those S GEMMs before their last turn, and
    // nothing loads after the last tile. 16-byte chunk c of row r sits at chunk c ^ (r & 7) (conflict-free writes
    // of the accumulator layout and reads of whole rows). Needs 3 key tiles (else the direct stores).
    if (n_max >= 3) {
        unsigned char *ob = Ks + ((st + 2 * S - 1 - cw) % S) * F83_KST;  // st: the stage of key tile n_max - 1
        static_assert(64 * 256 <= F83_KST, "a warpgroup's O fits one K stage");
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float lsum = o[F8_D / 2 + 2 * r];  // column 128 + 2t
            const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
            const int rl = wiw * 16 + g + 8 * r;  // row within the warpgroup's 64
#pragma unroll
            for (int i = 0; i < F8_D / 8; ++i) {
                const int c = i * 8 + 2 * t;
                *reinterpret_cast<uint32_t *>(ob + rl * 256 + ((i ^ (rl & 7)) << 4) + 4 * t) =
                    pack_bf16(o[4 * i + 2 * r] * inv * __ldg(vsc + c), o[4 * i + 2 * r + 1] * inv * __ldg(vsc + c + 1));
            }
        }
        asm volatile("bar.sync %0, 128;\n" ::"r"(5 + cw) : "memory");  // this warpgroup's O is in ob
        const int tw = tid & 127;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int idx = tw + 128 * k, rl = idx >> 4, ch = idx & 15;
            const int row = mblk * BM + cw * 64 + rl;
            if (row >= Lq + (int)keep) continue;
            const uint4 v = *reinterpret_cast<const uint4 *>(ob + rl * 256 + ((ch ^ (rl & 7)) << 4));
            *reinterpret_cast<uint4 *>(p.o + ((size_t)(q0 + row) * p.hq + h) * F8_D + ch * 8) = v;
        }
        return;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float lsum = o[F8_D / 2 + 2 * r];
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = row0 + r * 8;
        if (row >= Lq + (int)keep) continue;
        __nv_bfloat16 *dst = p.o + ((size_t)(q0 + row) * p.hq + h) * F8_D;
#pragma unroll
        for (int i = 0; i < F8_D / 8; ++i) {
            const int c = i * 8 + 2 * t;
            *reinterpret_cast<uint32_t *>(dst + c) =
                pack_bf16(o[4 * i + 2 * r] * inv * __ldg(vsc + c), o[4 * i + 2 * r + 1] * inv * __ldg(vsc + c + 1));
        }
    }
#else
    __trap();
#endif
}

// K bf16 [tokens][hkv][128] -> e4m3 codes (Hadamard-rotated when signs) with one scale per (kv head, 128-key
// block of a sequence): block i of sequence b -> block_scale[hk][(cu_vt[b] + 128 i) / 32]. One CTA (8 warps)
// per (block, kv head, sequence); warp w rotates rows w, w + 8, ... in registers, then the block's amax.
__global__ void __launch_bounds__(256) k_quant_blocks(const __nv_bfloat16 *k, const int32_t *cu_k,
                                                      const int32_t *cu_vt, int hkv, const int8_t *signs,
                                                      uint8_t *out, float *bscale, int bs_stride) {
    __shared__ float wmax[8];
    const int hk = blockIdx.y, b = blockIdx.z;
    const int len = cu_k[b + 1] - cu_k[b], r0 = blockIdx.x * 128;
    if (r0 >= len) return;
    const int n = min(128, len - r0), warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float v[16][4];
    float mx = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const int row = warp + 8 * i;
        if (row < n) {  // warp-uniform
            const uint2 w = *reinterpret_cast<const uint2 *>(k + ((size_t)(cu_k[b] + r0 + row) * hkv + hk) * 128 + lane * 4);
            const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w.x));
            const float2 c = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w.y));
            v[i][0] = a.x; v[i][1] = a.y; v[i][2] = c.x; v[i][3] = c.y;
            if (signs) hadamard_rotate_lane<4>(v[i], signs, lane);
#pragma unroll
            for (int e = 0; e < 4; ++e) mx = fmaxf(mx, fabsf(v[i][e]));
        }
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) wmax[warp] = mx;
    __syncthreads();
    float amax = 0.f;
#pragma unroll
    for (int w = 0; w < 8; ++w) amax = fmaxf(amax, wmax[w]);
    const float inv = amax > 0.f ? 448.f / amax : 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const int row = warp + 8 * i;
        if (row < n) {
            const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[i][0] * inv, v[i][1] * inv), __NV_SATFINITE, __NV_E4M3);
            const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[i][2] * inv, v[i][3] * inv), __NV_SATFINITE, __NV_E4M3);
            *reinterpret_cast<uint32_t *>(out + ((size_t)(cu_k[b] + r0 + row) * hkv + hk) * 128 + lane * 4) = lo | (hi << 16);
        }
    }
    if (threadIdx.x == 0) bscale[(size_t)hk * bs_stride + (cu_vt[b] + r0) / 32] = amax > 0.f ? amax / 448.f : 1.f;
}

// V (bf16 [tokens][hkv][d]) -> per-(head, channel) absolute maxima (as float bits; amax must start at 0).
__global__ void v_amax(const __nv_bfloat16 *v, int64_t n, int hd, unsigned int *amax) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += (int64_t)gridDim.x * blockDim.x) {
        float2 f = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162 *>(v)[i]);
        const int c = (int)((2 * i) % hd);
        atomicMax(amax + c, __float_as_uint(fabsf(f.x)));
        atomicMax(amax + c + 1, __float_as_uint(fabsf(f.y)));
    }
}
// One block per (64-token tile, kv head, sequence): codes of V^T through a shared-memory transpose, each code
// divided by its channel's scale (amax / 448). Sequence b's tokens go to columns cu_vt[b] ...
__global__ void v_quant_t(const __nv_bfloat16 *v, const int32_t *cu_k, const int32_t *cu_vt, int hkv,
                          const unsigned int *amax, uint8_t *vt, int vt_stride) {
    __shared__ uint8_t tile[128][64 + 4];
    const int h = blockIdx.y, b = blockIdx.z;
    const int len = cu_k[b + 1] - cu_k[b];
    if (blockIdx.x * 64 >= len) return;
    const int tok0 = cu_k[b] + blockIdx.x * 64, col0 = cu_vt[b] + blockIdx.x * 64, end = cu_k[b + 1];
    for (int idx = threadIdx.x; idx < 64 * 128; idx += blockDim.x) {
        const int r = idx >> 7, c = idx & 127, tok = tok0 + r;
        uint8_t code = 0;
        if (tok < end) {
            const float a = __uint_as_float(amax[h * 128 + c]);
            const float x = __bfloat162float(v[((size_t)tok * hkv + h) * 128 + c]);
            code = (uint8_t)__nv_cvt_float_to_fp8(a > 0.f ? x * (448.f / a) : 0.f, __NV_SATFINITE, __NV_E4M3);
        }
        tile[c][r] = code;
    }
    __syncthreads();
    // Key r of each 32-key block goes to position (r & 16) | ((r >> 1) & 3) << 2 | ((r >> 3) & 1) << 1 | (r & 1):
    // the attention kernel's P fragment order (a lane's A quad = its own S columns). Tiles start at multiples
    // of 32 keys of the sequence, so the permutation never leaves the sequence's (32-padded) columns.
    for (int idx = threadIdx.x; idx < 64 * 128; idx += blockDim.x) {
        const int c = idx >> 6, r = idx & 63;
        const int pos = (r & ~31) | (r & 16) | (((r >> 1) & 3) << 2) | (((r >> 3) & 1) << 1) | (r & 1);
        if (tok0 + r < end) vt[((size_t)h * 128 + c) * vt_stride + col0 + pos] = tile[c][r];
    }
}
__global__ void amax_to_scale(const unsigned int *amax, float *scale, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float a = __uint_as_float(amax[i]);
        scale[i] = a > 0.f ? a / 448.f : 1.f;
    }
}
// s [tokens][heads] -> st [heads][st_stride], sequence b's tokens at columns cu_st[b] ...
__global__ void transpose_scales(const float *s, const int32_t *cu, const int32_t *cu_st, int heads, float *st,
                                 int st_stride) {
    const int b = blockIdx.y, pos = blockIdx.x * blockDim.x + threadIdx.x;
    if (pos >= cu[b + 1] - cu[b]) return;
    for (int h = 0; h < heads; ++h) st[(size_t)h * st_stride + cu_st[b] + pos] = s[(size_t)(cu[b] + pos) * heads + h];
}

int make_map_u8(CUtensorMap *m, const void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                const cuuint32_t *box, CUtensorMapSwizzle swz = CU_TENSOR_MAP_SWIZZLE_128B) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = assay_cuda_tensor_map_encoder();
    if (!enc) return assay_cuda_fail("attn_prefill_fp8: cuTensorMapEncodeTiled is not available");
    cuuint32_t estr[3] = {1, 1, 1};
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void *>(base), dims, strides, box, estr,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return assay_cuda_fail("attn_prefill_fp8: cuTensorMapEncodeTiled failed (%d)", (int)r);
    return 0;
}

}  // namespace

// Called by assay_cuda_attn_prefill on compute capability 9.0 (arguments already checked): fa_wgmma with ping-pong,
// O stored through shared memory at d128 (+2.9% in run h200-gpu9-prefill9-1) and directly at d64 (where the staged
// store was 5.6% slower). total_q / total_k: the packed token counts (cu_seqlens[batch]), which the tensor maps need
// on the host.
int assay_cuda_attn_prefill_sm90(const assay_cuda_attn_prefill_args *a, int total_q, int total_k, cudaStream_t stream) {
    if (a->head_dim == 128) return launch<128, true>(a, total_q, total_k, stream);
    if (a->head_dim == 64) return launch<64, false>(a, total_q, total_k, stream);
    return assay_cuda_fail("attn_prefill: head_dim %d not supported by the sm_90 kernel (64, 128)", a->head_dim);
}

extern "C" int assay_cuda_fp8_quant_vt(const void *v_bf16, const int32_t *cu_seqlens_k, const int32_t *cu_seqlens_vt,
                                       int32_t batch, int32_t max_seqlen_k, int32_t total_k, int32_t n_heads_kv,
                                       int32_t d, uint8_t *vt, int32_t vt_stride, float *v_scale,
                                       unsigned int *amax_ws, assay_cuda_stream stream) {
    if (!v_bf16 || !cu_seqlens_k || !cu_seqlens_vt || !vt || !v_scale || !amax_ws)
        return assay_cuda_fail("fp8_quant_vt: null pointer argument");
    if (d != 128 || batch <= 0 || total_k <= 0 || max_seqlen_k <= 0 || n_heads_kv <= 0 || vt_stride < total_k ||
        vt_stride % 32)
        return assay_cuda_fail("fp8_quant_vt: bad shape (d %d, tokens %d, stride %d)", d, total_k, vt_stride);
    cudaStream_t s = (cudaStream_t)stream;
    const int n = n_heads_kv * d;
    ASSAY_CUDA_TRY(cudaMemsetAsync(amax_ws, 0, (size_t)n * 4, s));
    ASSAY_CUDA_TRY(cudaMemsetAsync(vt, 0, (size_t)n * vt_stride, s));  // padding columns: zero codes
    const int64_t elems = (int64_t)total_k * n;
    int blocks = (int)((elems / 2 + 255) / 256);
    if (blocks > 4096) blocks = 4096;
    v_amax<<<blocks, 256, 0, s>>>((const __nv_bfloat16 *)v_bf16, elems, n, amax_ws);
    ASSAY_CUDA_LAUNCHED();
    v_quant_t<<<dim3((max_seqlen_k + 63) / 64, n_heads_kv, batch), 256, 0, s>>>(
        (const __nv_bfloat16 *)v_bf16, cu_seqlens_k, cu_seqlens_vt, n_heads_kv, amax_ws, vt, vt_stride);
    ASSAY_CUDA_LAUNCHED();
    amax_to_scale<<<(n + 255) / 256, 256, 0, s>>>(amax_ws, v_scale, n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_transpose_scales(const float *s, const int32_t *cu_seqlens, const int32_t *cu_seqlens_st,
                                           int32_t batch, int32_t max_seqlen, int32_t heads, float *st,
                                           int32_t st_stride, assay_cuda_stream stream) {
    if (!s || !st || !cu_seqlens || !cu_seqlens_st || batch <= 0 || max_seqlen <= 0 || heads <= 0)
        return assay_cuda_fail("transpose_scales: bad argument");
    ASSAY_CUDA_TRY(cudaMemsetAsync(st, 0, (size_t)heads * st_stride * 4, (cudaStream_t)stream));
    transpose_scales<<<dim3((max_seqlen + 255) / 256, batch), 256, 0, (cudaStream_t)stream>>>(
        s, cu_seqlens, cu_seqlens_st, heads, st, st_stride);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

extern "C" int assay_cuda_attn_prefill_fp8_sm90(const assay_cuda_attn_prefill_fp8_sm90_args *a,
                                                assay_cuda_stream stream) {
    if (!a || !a->q || !a->k || !a->vt || !a->q_scale || (!a->k_scale_t && !a->k_block_scale) || !a->v_scale || !a->o || !a->cu_seqlens_q ||
        !a->cu_seqlens_k || !a->cu_seqlens_vt)
        return assay_cuda_fail("attn_prefill_fp8_sm90: null pointer argument");
    if (a->head_dim != 128 || a->batch <= 0 || a->n_heads_q <= 0 || a->n_heads_kv <= 0 ||
        a->n_heads_q % a->n_heads_kv || a->total_q <= 0 || a->total_k <= 0 || a->vt_stride < a->total_k ||
        a->vt_stride % 32)
        return assay_cuda_fail("attn_prefill_fp8_sm90: bad shape (d %d, heads %d/%d, vt_stride %d)", a->head_dim,
                               a->n_heads_q, a->n_heads_kv, a->vt_stride);
    if (a->max_seqlen_q == 0) return 0;
    CUtensorMap mq, mk, mv;
    const cuuint64_t dq[3] = {128, (cuuint64_t)a->n_heads_q, (cuuint64_t)a->total_q};
    const cuuint64_t sq[2] = {128, (cuuint64_t)a->n_heads_q * 128};
    const cuuint64_t dk[3] = {128, (cuuint64_t)a->n_heads_kv, (cuuint64_t)a->total_k};
    const cuuint64_t sk[2] = {128, (cuuint64_t)a->n_heads_kv * 128};
    const cuuint64_t dv[3] = {(cuuint64_t)a->vt_stride, 128, (cuuint64_t)a->n_heads_kv};
    const cuuint64_t sv[2] = {(cuuint64_t)a->vt_stride, (cuuint64_t)a->vt_stride * 128};
    const cuuint32_t box_rows[3] = {128, 1, 128}, box_vt[3] = {128, 128, 1};
    if (make_map_u8(&mq, a->q, dq, sq, box_rows) || make_map_u8(&mk, a->k, dk, sk, box_rows) ||
        make_map_u8(&mv, a->vt, dv, sv, box_vt))
        return -1;
    Fp8WgParams p;
    p.o = (__nv_bfloat16 *)a->o;
    p.q_scale = a->q_scale;
    p.k_scale_t = a->k_scale_t;
    p.v_scale = a->v_scale;
    p.cu_q = a->cu_seqlens_q;
    p.cu_k = a->cu_seqlens_k;
    p.cu_vt = a->cu_seqlens_vt;
    p.batch = a->batch;
    p.hq = a->n_heads_q;
    p.hkv = a->n_heads_kv;
    p.vt_stride = a->vt_stride;
    p.scale_log2 = a->scale * 1.4426950408889634f;
    p.causal = a->causal;
    p.k_blk = a->k_block_scale;
    p.kblk_stride = a->vt_stride / 32;
    p.zero = 0;
    dim3 grid((a->max_seqlen_q + BM - 1) / BM, a->n_heads_q, a->batch);
    cudaStream_t st = (cudaStream_t)stream;
    // per-block K scales: fa_wgmma_fp8_v3 (1009-1011 / 847-848 TFLOP/s full / causal at B4 H32 N4096 in run
    // h200-gpu15-fp8pf11-6); per-token K scales: fa_wgmma_fp8_v2 with ping-pong (runs h200-gpu6-fp8pf1/2)
    if (a->k_block_scale) {
        CUtensorMap mk64, mv64, mq64;  // the 64-key remainder of a tile: K rows, and V^T keys (64-byte swizzle)
        const cuuint32_t box_k64[3] = {128, 1, 64}, box_vt64[3] = {64, 128, 1};
        if (make_map_u8(&mk64, a->k, dk, sk, box_k64) ||
            make_map_u8(&mv64, a->vt, dv, sv, box_vt64, CU_TENSOR_MAP_SWIZZLE_64B) ||
            make_map_u8(&mq64, a->q, dq, sq, box_k64))
            return -1;
        static bool configured = false;
        if (!configured) {
            ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma_fp8_v3, cudaFuncAttributeMaxDynamicSharedMemorySize, F83_SMEM));
            configured = true;
        }
        fa_wgmma_fp8_v3<<<grid, NTHREADS, F83_SMEM, st>>>(mq, mk, mv, mk64, mv64, mq64, p);
    } else {
        static bool configured = false;
        if (!configured) {
            ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma_fp8_v2, cudaFuncAttributeMaxDynamicSharedMemorySize, F8B_SMEM));
            configured = true;
        }
        fa_wgmma_fp8_v2<<<grid, NTHREADS, F8B_SMEM, st>>>(mq, mk, mv, p);
    }
    ASSAY_CUDA_LAUNCHED();
    return 0;
}


extern "C" int assay_cuda_fp8_quant_k_blocks(const void *k_bf16, const int32_t *cu_seqlens_k,
                                             const int32_t *cu_seqlens_vt, int32_t batch, int32_t max_seqlen_k,
                                             int32_t n_heads_kv, int32_t d, const int8_t *signs, uint8_t *out,
                                             float *block_scale, int32_t vt_stride, assay_cuda_stream stream) {
    if (!k_bf16 || !cu_seqlens_k || !cu_seqlens_vt || !out || !block_scale)
        return assay_cuda_fail("fp8_quant_k_blocks: null pointer argument");
    if (d != 128 || batch <= 0 || max_seqlen_k <= 0 || n_heads_kv <= 0 || vt_stride <= 0 || vt_stride % 32)
        return assay_cuda_fail("fp8_quant_k_blocks: bad shape (d %d, stride %d)", d, vt_stride);
    k_quant_blocks<<<dim3((max_seqlen_k + 127) / 128, n_heads_kv, batch), 256, 0, (cudaStream_t)stream>>>(
        (const __nv_bfloat16 *)k_bf16, cu_seqlens_k, cu_seqlens_vt, n_heads_kv, signs, out, block_scale,
        vt_stride / 32);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
