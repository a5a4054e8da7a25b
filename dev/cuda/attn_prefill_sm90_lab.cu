// Kernel lab copy (dev/cuda, built only by -DASSAY_CUDA_LAB=ON and scripts/device-check.sh): every measured version of
// this family, selected by the lab variant (cuda_lab.h); variant 0 runs the product entry point of src/backend/cuda.
// Prefill attention for Hopper (sm_90a), lab versions 3 and 4 (bf16; 4 = default on compute capability 9.0) and
// the e4m3 version further down: TMA loads, wgmma, warp specialization, and the softmax of one key tile
// overlapped with the tensor-core work of its neighbours.
//
// CTA = 3 warpgroups. Warpgroup 0 is the producer: after giving most of its registers away (setmaxnreg) one
// thread issues the TMA copies of the Q tile and of the K and V tiles into a 2-stage ring, each stage with its
// own "full" mbarrier (completed by the copy engine's byte count) and "empty" mbarrier (arrived by the 8
// consumer warps when they no longer read the stage). Warpgroups 1 and 2 are the consumers, 64 query rows each
// (BM = 128 rows per CTA): S = Q K^T is one wgmma m64n128k16 per 16 of head_dim with both operands in shared
// memory (128-byte swizzled, K-major, exactly the layout the TMA box writes); O += P V takes P from registers
// (the fp32 S accumulator layout, converted to bf16 pairs, is the wgmma A-register fragment) and V from shared
// memory as an MN-major (transposed) operand, so V needs no transpose. Per key tile j the consumer issues
// S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back, waits only for S_j, does the masking and the online
// softmax of tile j while P_{j-1} V_{j-1} still runs on the tensor cores, then waits for it, rescales O and
// converts P_j. S, P and O together need 64 + 32 + 64 registers per thread (d = 128): hence 240 registers
// for the consumers and 24 for the producer. Version 4 adds ping-pong: the two consumer warpgroups take turns
// to issue their GEMMs (named barriers), so one warpgroup's softmax runs under the other's GEMMs.
//
// Tensor maps: Q, K, V are 3-D (head_dim, heads, tokens) over the packed varlen batch; a box is 64 elements of
// head_dim (128 bytes: the 128-byte swizzle limit) x 1 head x 128 tokens, so d = 128 loads two boxes per tile.
// Rows past a sequence's end belong to the next sequence (or are zero-filled past the tensor): keys there are
// masked to -inf, so their (finite) V rows get weight 0, and query rows there are never stored.
#include "common.cuh"
#include "cuda_lab.h"
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
    uint32_t zero;  // 0 (opaque to the compiler; see fa_wgmma_v5)
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

// KEEP (lab variants 7, 8 = 3, 4 with it): the P registers of the P V GEMM in flight stay live through the
// softmax (XOR into a value the epilogue reads), so ptxas cannot hoist the wait for that GEMM above the softmax
// to reuse them; everything else as in 3 / 4 (single P buffer, wait<0> after the softmax, 2 stages).
// OST (lab variant 9 = 4 + OST, round 9 of the FP8 kernel applied here): O leaves through shared memory in 16-byte
// row stores instead of 4-byte stores from the accumulator layout (see fa_wgmma_fp8_v3's OSTAGE).
template <int D, bool PINGPONG, bool KEEP = false, bool OST = false>
__global__ void __launch_bounds__(NTHREADS, 1)
    fa_wgmma(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
             const __grid_constant__ CUtensorMap tmv, WgParams p) {
#ifdef ASSAY_SM90A
    static_assert(!OST || PINGPONG, "the staged O store relies on the ping-pong order (see the epilogue)");
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

    // Ping-pong (lab variant 4): the two consumer warpgroups take turns to issue their GEMMs, so that one
    // warpgroup's softmax runs while the other's GEMMs own the tensor cores. Turn k of warpgroup c waits on
    // barrier 1 + c, which the other warpgroup arrives at after issuing its own turn; warpgroup 1 gives
    // warpgroup 0 its first turn and skips its last arrival, so every barrier phase completes exactly.
    int turns_left = n_max + 1;  // n_max QK^T issues + the final P V
    auto turn_begin = [&]() {
        if (PINGPONG) named_sync(1 + cw);
    };
    auto turn_end = [&]() {
        --turns_left;
        if (PINGPONG && !(cw == 1 && turns_left == 0)) named_arrive(2 - cw);
    };
    if (PINGPONG && cw == 1 && n_max > 0) named_arrive(1);

    float o[D / 2];
    float s[BN / 2];
    uint32_t pa[BN / 16][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    uint32_t keep = 0;
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
            if (KEEP) {
#pragma unroll
                for (int kc = 0; kc < BN / 16; ++kc) keep ^= pa[kc][0] ^ pa[kc][1] ^ pa[kc][2] ^ pa[kc][3];
            }
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
    keep &= p.zero;
    // OST: the K stage of key tile n_max - 2 holds both warpgroups' O (64 rows x D bf16 each, 16-byte chunk c of row
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
            if (p.lse && t == 0 && row < Lq + (int)keep)
                p.lse[(size_t)h * total_q + q0 + row] = lsum > 0.f ? m[r] * p.scale + logf(lsum) : -INFINITY;
        }
        asm volatile("bar.sync %0, 128;\n" ::"r"(5 + cw) : "memory");  // this warpgroup's O is in ob
        const int tw = tid & 127;
#pragma unroll
        for (int k = 0; k < 64 * CH / 128; ++k) {
            const int idx = tw + 128 * k, rl = idx / CH, ch = idx % CH;
            const int row = mblk * BM + cw * 64 + rl;
            if (row >= Lq + (int)keep) continue;
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
        if (row >= Lq + (int)keep) continue;
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

template <int D, bool PP, bool KEEP = false, bool OST = false>
int launch(const assay_cuda_attn_prefill_args *a, int total_q, int total_k, cudaStream_t stream) {
    constexpr int smem = Smem<D>::BYTES;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma<D, PP, KEEP, OST>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
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
    p.zero = 0;
    dim3 grid((a->max_seqlen_q + BM - 1) / BM, a->n_heads_q, a->batch);
    fa_wgmma<D, PP, KEEP, OST><<<grid, NTHREADS, smem, stream>>>(mq, mk, mv, p);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}


// ---- FP8 (e4m3) version of the same kernel (lab: attn_prefill_fp8 variant "sm90"), head_dim 128 --------------
// Operands: Q and K e4m3 codes [tokens][heads][128] with one scale per (token, head) row (as written by
// assay_cuda_fp8_quant_rows, Hadamard-rotated or not); V transposed, V^T codes [kv_head][128][vt_stride] with one
// scale per (kv_head, channel) (assay_cuda_fp8_quant_vt), because e4m3 wgmma takes K-major B operands only and the
// reduction dimension of P V is the key. S = Q K^T is m64n128k32 on codes; the K scale multiplies each column, the
// Q scale joins the softmax scale of each row; P = exp2(x - max + 8) lies in (0, 256], inside e4m3's range (the
// offset cancels against the row sum). P V is the register-A form: the fp32 S layout gives a lane keys
// {8i + 2t, 8i + 2t + 1} while the 8-bit A fragment holds k positions {4t .. 4t + 3} and {16 + 4t ..}: instead of
// moving bytes between lanes, V^T stores the keys of each 32-key block in the order that makes the positions of
// lane t's quads hold exactly its keys (position 4t + u <-> key 8(u >> 1) + 2t + (u & 1), the same + 16), so a
// lane packs its own four P values into each A register. The K scales of a tile are loaded while the GEMMs
// run; the V channel scales apply once, at the end. Lab variant 2 = this kernel without ping-pong, 1 = with the
// ping-pong of bf16 variant 4. The default is version 3 (fa_wgmma_fp8_v3 below: lab variant 32 without a causal
// mask, 31 with one) with per-block K scales and version 2 (fa_wgmma_fp8_v2, lab variant 4) with per-token ones.
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
constexpr int F8_STAGES = 2;
constexpr int F8_SMEM = F8_TILE * (1 + 2 * F8_STAGES) + F8_STAGES * BN * 4 + 64 + 1024;

template <bool PINGPONG>
__global__ void __launch_bounds__(NTHREADS, 1)
    fa_wgmma_fp8(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
                 const __grid_constant__ CUtensorMap tmv, Fp8WgParams p) {
#ifdef ASSAY_SM90A
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sm = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Qs = sm, *Ks = sm + F8_TILE, *Vs = sm + F8_TILE * (1 + F8_STAGES);
    float *KSs = reinterpret_cast<float *>(sm + F8_TILE * (1 + 2 * F8_STAGES));  // [stage][BN] K scales
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm + F8_TILE * (1 + 2 * F8_STAGES) + F8_STAGES * BN * 4);
    uint64_t *qfull = bars, *kfull = bars + 1, *vfull = kfull + F8_STAGES, *kempty = vfull + F8_STAGES,
             *vempty = kempty + F8_STAGES;

    const int b = blockIdx.z, h = blockIdx.y;
    const int mblk = gridDim.x - 1 - blockIdx.x;
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * BM >= Lq) return;
    const int vt0 = p.cu_vt[b];  // first V^T column of the sequence (a multiple of 16: TMA needs 16-byte aligned rows)
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
        for (int s = 0; s < F8_STAGES; ++s) {
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
                const int s = j % F8_STAGES;
                const uint32_t ph = (j / F8_STAGES) & 1;
                if (j >= F8_STAGES) mbar_wait(kempty + s, ph ^ 1);
                // The tile's K scales ride on the same barrier: a bulk copy of up to 512 bytes (the row ends at
                // vt_stride; columns are multiples of 32 floats, so the copy is 16-byte aligned and sized).
                const int kcol = vt0 + j * BN, nsc = min(BN, p.vt_stride - kcol);
                mbar_arrive_expect_tx(kfull + s, F8_TILE + nsc * 4);
                tma_load_3d(Ks + s * F8_TILE, &tmk, 0, hk, k0 + j * BN, kfull + s);
                bulk_g2s(KSs + s * BN, p.k_scale_t + (size_t)hk * p.vt_stride + kcol, nsc * 4, kfull + s);
                if (j >= F8_STAGES) mbar_wait(vempty + s, ph ^ 1);
                mbar_arrive_expect_tx(vfull + s, F8_TILE);
                tma_load_3d(Vs + s * F8_TILE, &tmv, vt0 + j * BN, 0, hk, vfull + s);  // V^T: (key, channel, head)
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
        if (PINGPONG) named_sync(1 + cw);
    };
    auto turn_end = [&]() {
        --turns_left;
        if (PINGPONG && !(cw == 1 && turns_left == 0)) named_arrive(2 - cw);
    };
    if (PINGPONG && cw == 1 && n_max > 0) named_arrive(1);

    float qf[2];  // per-row factor: q scale * softmax scale * log2(e)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        qf[r] = (row < Lq ? p.q_scale[(size_t)(q0 + row) * p.hq + h] : 1.f) * p.scale_log2;
    }
    float2 ksv[BN / 8];  // K scales of this lane's columns (from shared memory; past the row end: stale, masked)
    auto load_kscales = [&](int st) {
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) ksv[i] = *reinterpret_cast<const float2 *>(KSs + st * BN + i * 8 + 2 * t);
    };

    float o[F8_D / 2];
    float s[BN / 2];
    uint32_t pa[BN / 32][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < F8_D / 2; ++i) o[i] = 0.f;
    const unsigned char *Qw = Qs + cw * 64 * 128;

    auto issue_qk = [&](int st) {
        const unsigned char *Kt = Ks + st * F8_TILE;
#pragma unroll
        for (int kk = 0; kk < F8_D / 32; ++kk)
            wgmma_ss_e4m3_n128(s, sw128_desc(Qw + kk * 32, 16, 1024), sw128_desc(Kt + kk * 32, 16, 1024), kk > 0);
        wgmma_commit();
    };
    auto issue_pv = [&](int st) {
        const unsigned char *Vt = Vs + st * F8_TILE;
#pragma unroll
        for (int kc = 0; kc < BN / 32; ++kc) wgmma_rs_e4m3_n128(o, pa[kc], sw128_desc(Vt + kc * 32, 16, 1024));
        wgmma_commit();
    };
    auto softmax = [&](int j, float *alpha) {
        const bool need_mask = (j + 1) * BN > Lk || (p.causal && (j + 1) * BN - 1 > mblk * BM + diag);
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
            s[4 * i + 0] *= ksv[i].x;
            s[4 * i + 1] *= ksv[i].y;
            s[4 * i + 2] *= ksv[i].x;
            s[4 * i + 3] *= ksv[i].y;
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
            // Four independent chains (the compiler keeps the written order of float operations).
            float mq[4] = {m[r], -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) mq[i & 3] = fmaxf(mq[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            float mx = fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]));
            mx = warp_max_quad(mx);
            const float m_sc = mx == -INFINITY ? 0.f : mx * qf[r];
            alpha[r] = fast_exp2(m[r] * qf[r] - m_sc);
            const float off = 8.f - m_sc;  // P in (0, 256]: e4m3 keeps 3 mantissa bits down to 2^-6
            float sq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                const float p0 = fast_exp2(fmaf(s[4 * i + 2 * r], qf[r], off));
                const float p1 = fast_exp2(fmaf(s[4 * i + 2 * r + 1], qf[r], off));
                s[4 * i + 2 * r] = p0;
                s[4 * i + 2 * r + 1] = p1;
                sq[i & 3] += p0 + p1;
            }
            const float sum = (sq[0] + sq[1]) + (sq[2] + sq[3]);
            l[r] = l[r] * alpha[r] + sum;
            m[r] = mx;
        }
    };
    // e4m3 A fragment of k-chunk kc: a0 / a1 = rows g / g+8 at positions 4t..4t+3 = keys {2t, 2t+1, 8+2t, 9+2t}
    // of the chunk (n8 blocks 4kc and 4kc+1 of S), a2 / a3 the same 16 keys further (blocks 4kc+2, 4kc+3).
    auto convert_p = [&]() {
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
        float alpha[2];
        softmax(0, alpha);
        convert_p();
        for (int j = 1; j < n_max; ++j) {
            const int st = j % F8_STAGES, sp = (j - 1) % F8_STAGES;
            mbar_wait(kfull + st, (j / F8_STAGES) & 1);
            mbar_wait(vfull + sp, ((j - 1) / F8_STAGES) & 1);
            wgmma_fence();
            turn_begin();
            issue_qk(st);
            issue_pv(sp);
            turn_end();
            load_kscales(st);
            wgmma_wait<1>();
            reg_fence<BN / 2>(s);
            __syncwarp();
            if (lane == 0) mbar_arrive(kempty + st);
            softmax(j, alpha);
            wgmma_wait<0>();
            reg_fence<F8_D / 2>(o);
            if (lane == 0) mbar_arrive(vempty + sp);
            // Rescale only when a row maximum moved somewhere in the warp (rare after the first tiles); a skipped
            // multiply would have been by exactly 1.
            if (__any_sync(0xffffffff, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
                for (int i = 0; i < F8_D / 8; ++i) {
                    o[4 * i + 0] *= alpha[0];
                    o[4 * i + 1] *= alpha[0];
                    o[4 * i + 2] *= alpha[1];
                    o[4 * i + 3] *= alpha[1];
                }
            }
            convert_p();
        }
        const int sl = (n_max - 1) % F8_STAGES;
        mbar_wait(vfull + sl, ((n_max - 1) / F8_STAGES) & 1);
        wgmma_fence();
        turn_begin();
        issue_pv(sl);
        turn_end();
        wgmma_wait<0>();
        reg_fence<F8_D / 2>(o);
    }

    const float *vsc = p.v_scale + (size_t)hk * F8_D;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float lsum = warp_sum_quad(l[r]);
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = row0 + r * 8;
        if (row >= Lq) continue;
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

// ---- FP8 version 2 (lab variants 3 and 4 = 3 with ping-pong): the P V GEMM really overlaps the softmax -------
// In versions 1/2 ptxas schedules the wait for P_{j-1} V_{j-1} (wgmma.wait_group 0) at the top of the softmax's
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
// KBLOCK: K carries one scale per (kv head, 128-key tile) (assay_cuda_fp8_quant_k_blocks) instead of one per
// token: the scale is uniform over the tile's columns, so it joins the per-row factor (q scale * softmax scale)
// and the row maximum is taken on the raw S; 64 multiplies per thread and tile less, and no scale copies.
// TCSUM (lab variants 5, 6 = 5 with ping-pong): the row sums come from the tensor core: P V is m64n136k32 with 8
// rows of ones (e4m3 0x38) after each V^T stage in shared memory, so O's columns 128..135 accumulate the sums of
// the e4m3 P that the numerator used (64 adds per thread and tile less; rescaled with O).
constexpr int F8B_STAGES = 3;
constexpr float F8_RESCALE_TAU = 0.8f;
constexpr int F8B_VSTRIDE = F8_TILE + 1024;  // a V^T stage + 8 rows of e4m3 ones after it (TCSUM)
constexpr int F8B_SMEM = F8_TILE * (1 + F8B_STAGES) + F8B_VSTRIDE * F8B_STAGES + F8B_STAGES * BN * 4 + 128 + 1024;

// Lab modes of version 2 (bit mask): POLY4 / POLY2 compute 1/4 / 1/2 of the exponentials with a polynomial on
// the FMA pipe instead of MUFU (the MUFU unit does 16 exp2 per clock per SM: 1024 cycles per 128 x 128 tile, as
// long as the tensor work of the tile), LATEVOTE moves the warpgroup vote behind the exponentials. DIAG_* are
// timing probes that compute wrong results (never validated): no exponentials, no softmax at all, no loads
// after the first stages.
// TAU28: P = 2^(x - m + 6) with the rescale threshold tau = 2.8 instead of 2^(x - m + 8) and 0.8: P still
// <= 2^8.8 < 448, O is rescaled far less often on flat score distributions (simulated on N(0, 1) Q, K at d 128:
// a warpgroup rescales in 6% of the tiles instead of 68%), P loses 2 more binades at the bottom (weights below
// 2^-15.5 of the row maximum round to zero instead of below 2^-17.5).
// SPEC (with TCSUM only): the exponentials of tile j start at once with the running maxima of tile j - 1 and are
// packed straight into P, while the row maxima of the tile are reduced beside them; only when a maximum grows by
// more than RESCALE_TAU somewhere in the warp does the warp redo its P with the new maxima (S is still intact:
// P never overwrites it). Takes the max reduction off the path from S to the exponentials.
enum {
    F8M_POLY4 = 1, F8M_POLY2 = 2, F8M_LATEVOTE = 4, F8M_DIAG_NOEXP = 8, F8M_DIAG_NOSOFTMAX = 16, F8M_DIAG_NOLOAD = 32,
    F8M_SPEC = 64, F8M_TAU28 = 128, F8M_H2 = 256
};
// H2 (lab variants 23, 24 = 23 without ping-pong; not with TCSUM or SPEC): packed half-precision exponentials.
// x = S rf + off stays an fp32 FFMA (raw e4m3 scores can exceed f16's range), then each pair becomes one f16x2
// (cvt.rn.f16x2.f32), one ex2.approx.f16x2 computes both exponentials, the pair goes to e4m3 with
// cvt.rn.satfinite.e4m3x2.f16x2, and the row sum adds f16x2 pairs (HADD2) over 8 pairs per accumulator before
// widening to fp32 (each half <= 8 x 2^8.8 = 3.6e3, where f16 spacing is 2: ~2^-11 relative per add). x in f16
// has 11 significant bits: |x| <= 16 (the range that survives e4m3, whose smallest subnormal is 2^-9) is held
// to 2^-7, i.e. 0.5% relative error in P before e4m3's 2^-4 rounding. The row maxima and sums stay fp32.
// Measured (h200-gpu6-attn2-1): the same error as variant 4, but 11% slower: on sm_90 ptxas emits two MUFU.EX2
// per ex2.approx.f16x2 (264 in both kernels) plus unpacking, so the softmax stream grows instead of shrinking.
__device__ __forceinline__ uint32_t h2_exp2_pair(float x0, float x1) {  // x0 -> low half
    uint32_t h = 0, e = 0;
#ifdef ASSAY_SM90A
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(x1), "f"(x0));
    asm("ex2.approx.f16x2 %0, %1;" : "=r"(e) : "r"(h));
#endif
    return e;
}
__device__ __forceinline__ uint32_t h2_add(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ float2 h2_widen(uint32_t a) {
    float2 r;
    asm("{\n.reg .f16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.f32.f16 %0, lo;\ncvt.f32.f16 %1, hi;\n}" : "=f"(r.x), "=f"(r.y) : "r"(a));
    return r;
}
__device__ __forceinline__ uint32_t h2_to_e4m3x2(uint32_t e) {  // low half -> low byte
    uint16_t q = 0;
#ifdef ASSAY_SM90A
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(q) : "r"(e));
#endif
    return q;
}

// 2^x on the FMA pipe: x = n + f (n = round(x), |f| <= 1/2), 2^f by a degree-2 fit (max relative error 1.7e-3,
// far below e4m3's 2^-4 rounding), n added to the exponent bits. x is clamped at -125 (also -inf: the result,
// ~2e-38, rounds to e4m3 zero like exp2(-inf)).
__device__ __forceinline__ float poly_exp2(float x) {
    x = fmaxf(x, -125.f);
    const float t = x + 12582912.f;  // 1.5 * 2^23: round(x) lands in the low mantissa bits
    const float f = x - (t - 12582912.f);
    const float p = fmaf(fmaf(0.23842891f, f, 0.703448f), f, 1.00044314f);
    return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

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

template <bool PINGPONG, bool KBLOCK, bool TCSUM, int MODE = 0>
__global__ void __launch_bounds__(NTHREADS, 1)
    fa_wgmma_fp8_v2(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
                    const __grid_constant__ CUtensorMap tmv, Fp8WgParams p) {
#ifdef ASSAY_SM90A
    constexpr int S = F8B_STAGES;
    constexpr float TAU = (MODE & F8M_TAU28) ? 2.8f : F8_RESCALE_TAU;
    constexpr float POFF = (MODE & F8M_TAU28) ? 6.f : 8.f;  // P = 2^(x - m + POFF) <= 2^(POFF + TAU) < 448
    constexpr int ON = TCSUM ? 68 : F8_D / 2;  // O accumulators per thread (+ 4 row-sum columns)
    constexpr int VST = TCSUM ? F8B_VSTRIDE : F8_TILE;
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
    if (TCSUM) {  // the ones rows after each V^T stage, written once; the tensor cores read them (async proxy)
        for (int i = tid; i < S * 256; i += NTHREADS)
            reinterpret_cast<uint32_t *>(Vs + (i >> 8) * VST + F8_TILE)[i & 255] = 0x38383838u;
        fence_proxy_async();
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0 && n_max > 0) {
            mbar_arrive_expect_tx(qfull, F8_TILE);
            tma_load_3d(Qs, &tmq, 0, h, q0 + mblk * BM, qfull);
            for (int j = 0; j < ((MODE & F8M_DIAG_NOLOAD) ? min(n_max, S) : n_max); ++j) {
                const int s = j % S;
                const uint32_t ph = (j / S) & 1;
                if (j >= S) mbar_wait(kempty + s, ph ^ 1);
                if (KBLOCK) {
                    mbar_arrive_expect_tx(kfull + s, F8_TILE);
                    tma_load_3d(Ks + s * F8_TILE, &tmk, 0, hk, k0 + j * BN, kfull + s);
                } else {
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
        if (PINGPONG) named_sync(1 + cw);
    };
    auto turn_end = [&]() {
        --turns_left;
        if (PINGPONG && !(cw == 1 && turns_left == 0)) named_arrive(2 - cw);
    };
    if (PINGPONG && cw == 1 && n_max > 0) named_arrive(1);

    float qf[2];  // per-row factor: q scale * softmax scale * log2(e)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        qf[r] = (row < Lq ? p.q_scale[(size_t)(q0 + row) * p.hq + h] : 1.f) * p.scale_log2;
    }
    const float *kblk = KBLOCK ? p.k_blk + (size_t)hk * p.kblk_stride + vt0 / 32 : nullptr;
    float ksv[BN / 4];  // per-token path: K scales of this lane's columns
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
            if (TCSUM) wgmma_rs_e4m3_n136(o, pa[kc], sw128_desc(Vt + kc * 32, 16, 1024));
            else wgmma_rs_e4m3_n128(o, pa[kc], sw128_desc(Vt + kc * 32, 16, 1024));
        }
        wgmma_commit();
    };
    // Masks, row maxima, P = 2^(x - max + 8) in place, row sums; returns the O rescale factors of the two rows.
    auto softmax = [&](int j, float kb, float *alpha, uint32_t (*pc)[4]) {
        const bool need_mask = (j + 1) * BN > Lk || (p.causal && (j + 1) * BN - 1 > mblk * BM + diag);
        if (!KBLOCK) {
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                s[4 * i + 0] *= ksv[2 * i];
                s[4 * i + 1] *= ksv[2 * i + 1];
                s[4 * i + 2] *= ksv[2 * i];
                s[4 * i + 3] *= ksv[2 * i + 1];
            }
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
            const float rf = KBLOCK ? qf[r] * kb : qf[r];  // > 0
            if (MODE & F8M_DIAG_NOSOFTMAX) {
#pragma unroll
                for (int i = 0; i < BN / 4; ++i) s[2 * i + r] *= rf;  // wrong on purpose: timing probe
                alpha[r] = 1.f;
                continue;
            }
            float mq[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) mq[i & 3] = fmaxf(mq[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            float mx = fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]));
            mx = warp_max_quad(mx);
            const float mxs = mx * rf;                      // -inf stays -inf
            const float mnew = mxs > m[r] + TAU ? mxs : m[r];
            alpha[r] = mnew == m[r] ? 1.f : fast_exp2(m[r] - mnew);
            const float off = POFF - (mnew == -INFINITY ? 0.f : mnew);  // P in (0, 2^(POFF + tau)]
            if (MODE & F8M_H2) {
                uint32_t acc[2], prev = 0;
#pragma unroll
                for (int i = 0; i < BN / 8; ++i) {
                    const uint32_t e = h2_exp2_pair(fmaf(s[4 * i + 2 * r], rf, off), fmaf(s[4 * i + 2 * r + 1], rf, off));
                    // P straight into the A fragment (convert_p's layout): pairs i - 1, i of row r share a register
                    if (i & 1) pc[i >> 2][(i >> 1 & 1) * 2 + r] = h2_to_e4m3x2(prev) | (h2_to_e4m3x2(e) << 16);
                    prev = e;
                    acc[i & 1] = i < 2 ? e : h2_add(acc[i & 1], e);
                }
                const float2 a0 = h2_widen(acc[0]), a1 = h2_widen(acc[1]);
                l[r] = l[r] * alpha[r] + ((a0.x + a0.y) + (a1.x + a1.y));
                m[r] = mnew;
                continue;
            }
            float sq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                // POLY4: the second element of every second pair (16 of 64 per thread); POLY2: every second element
                const bool poly1 = ((MODE & F8M_POLY4) && (i & 1)) || (MODE & F8M_POLY2);
                const float x0 = fmaf(s[4 * i + 2 * r], rf, off), x1 = fmaf(s[4 * i + 2 * r + 1], rf, off);
                const float p0 = (MODE & F8M_DIAG_NOEXP) ? fmaf(x0, 0.f, 1.f) : fast_exp2(x0);
                const float p1 = (MODE & F8M_DIAG_NOEXP) ? fmaf(x1, 0.f, 1.f) : poly1 ? poly_exp2(x1) : fast_exp2(x1);
                s[4 * i + 2 * r] = p0;
                s[4 * i + 2 * r + 1] = p1;
                if (!TCSUM) sq[i & 3] += p0 + p1;
            }
            if (!TCSUM) l[r] = l[r] * alpha[r] + ((sq[0] + sq[1]) + (sq[2] + sq[3]));
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
    // SPEC softmax (TCSUM): masks, then P = 2^(S rf - m + 8) with the running maxima m packed into pa, the tile's
    // maxima beside it; the warp redoes P when a maximum moved by more than tau. Returns the O rescale factors.
    auto exp_pack = [&](uint32_t (*pa)[4], const float *rf, const float *off) {
#pragma unroll
        for (int kc = 0; kc < BN / 32; ++kc)
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int i = 4 * kc + 2 * hh;
                    float x[4] = {fmaf(s[4 * i + 2 * r], rf[r], off[r]), fmaf(s[4 * i + 2 * r + 1], rf[r], off[r]),
                                  fmaf(s[4 * i + 4 + 2 * r], rf[r], off[r]), fmaf(s[4 * i + 4 + 2 * r + 1], rf[r], off[r])};
                    float e[4];
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        const bool poly = ((MODE & F8M_POLY4) && u == 3) || ((MODE & F8M_POLY2) && (u & 1));
                        e[u] = poly ? poly_exp2(x[u]) : fast_exp2(x[u]);
                    }
                    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(e[0], e[1]), __NV_SATFINITE, __NV_E4M3);
                    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(e[2], e[3]), __NV_SATFINITE, __NV_E4M3);
                    pa[kc][2 * hh + r] = lo | (hi << 16);
                }
    };
    auto softmax_spec = [&](int j, float kb, float *alpha, uint32_t (*pa)[4]) {
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
        float rf[2], off[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            rf[r] = KBLOCK ? qf[r] * kb : qf[r];
            off[r] = POFF - (m[r] == -INFINITY ? 0.f : m[r]);
        }
        exp_pack(pa, rf, off);
        bool slow = false;
        float mxs[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mq[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) mq[i & 3] = fmaxf(mq[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            mxs[r] = warp_max_quad(fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]))) * rf[r];
            slow |= mxs[r] > m[r] + TAU;  // also the first valid tile of a row (m = -inf)
            alpha[r] = 1.f;
        }
        if (__any_sync(0xffffffffu, slow)) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const float mnew = mxs[r] > m[r] + TAU ? mxs[r] : m[r];
                alpha[r] = mnew == m[r] ? 1.f : fast_exp2(m[r] - mnew);
                off[r] = POFF - (mnew == -INFINITY ? 0.f : mnew);
                m[r] = mnew;
            }
            exp_pack(pa, rf, off);
        }
    };
    // One tile j >= 1: issue S_j and P_{j-1} V_{j-1} (P in pp), softmax of S_j under the GEMM, P_j into pc.
    auto step = [&](int j, uint32_t (*pc)[4], uint32_t (*pp)[4]) {
        const int st = j % S, sp = (j - 1) % S;
        const float kb = KBLOCK ? __ldg(kblk + j * (BN / 32)) : 1.f;
        if (!(MODE & F8M_DIAG_NOLOAD) || j < S) mbar_wait(kfull + st, (j / S) & 1);
        if (!(MODE & F8M_DIAG_NOLOAD) || j - 1 < S) mbar_wait(vfull + sp, ((j - 1) / S) & 1);
        wgmma_fence();
        turn_begin();
        issue_qk(st);
        issue_pv(sp, pp);
        turn_end();
        if (!KBLOCK) load_kscales(st);
        wgmma_wait<1>();  // S_j done, and P_{j-2} V_{j-2} (an older group)
        reg_fence<BN / 2>(s);
        __syncwarp();
        if (lane == 0) {
            mbar_arrive(kempty + st);
            if (j >= 2) mbar_arrive(vempty + (j - 2) % S);
        }
        float alpha[2];
        if (MODE & F8M_SPEC) softmax_spec(j, kb, alpha, pc);
        else softmax(j, kb, alpha, pc);
#pragma unroll
        for (int kc = 0; kc < BN / 32; ++kc) keep ^= pp[kc][0] ^ pp[kc][1] ^ pp[kc][2] ^ pp[kc][3];
        // LATEVOTE: the vote also reads the row sums, so it cannot be scheduled before the exponentials
        const bool late = (MODE & F8M_LATEVOTE) && !TCSUM && l[1] < 0.f;  // never true
        if (warpgroup_any(alpha[0] != 1.f || alpha[1] != 1.f || late, 3 + cw)) {
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
        if (!(MODE & (F8M_SPEC | F8M_H2))) convert_p(pc);  // H2: the softmax wrote P
    };

    if (n_max > 0) {
        mbar_wait(qfull, 0);
        mbar_wait(kfull, 0);
        const float kb0 = KBLOCK ? __ldg(kblk) : 1.f;
        wgmma_fence();
        turn_begin();
        issue_qk(0);
        turn_end();
        if (!KBLOCK) load_kscales(0);
        wgmma_wait<0>();
        reg_fence<BN / 2>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty);
        float alpha0[2];
        if (MODE & F8M_SPEC) softmax_spec(0, kb0, alpha0, pa0);
        else {
            softmax(0, kb0, alpha0, pa0);
            if (!(MODE & F8M_H2)) convert_p(pa0);
        }
        int j = 1;
        for (; j + 1 < n_max; j += 2) {
            step(j, pa1, pa0);
            step(j + 1, pa0, pa1);
        }
        if (j < n_max) step(j, pa1, pa0);
        const int last = n_max - 1, sl = last % S;
        if (!(MODE & F8M_DIAG_NOLOAD) || last < S) mbar_wait(vfull + sl, (last / S) & 1);
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
        const float lsum = TCSUM ? o[F8_D / 2 + 2 * r] : warp_sum_quad(l[r]);  // TCSUM: column 128 + 2t
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

// ---- FP8 version 3 (lab variants 25-27): wider key tiles --------------------------------------------------------
// Version 2 issues ~480 instructions per warp and 128-key tile in its common path (SASS, kblk v4): per element an
// FMNMX, an FFMA, a MUFU.EX2, an FADD, half an F2FP and a quarter PRMT (~300 per tile), and ~180 per tile that do
// not depend on the tile width: stage and phase arithmetic (divisions by 3), wgmma descriptors rebuilt per tile
// (R2UR, LOP3, SHF), mbarrier waits and arrivals, the ping-pong barriers, the quad shuffles of the row maxima,
// the rescale decision and vote, the XOR that keeps the in-flight P alive; plus the O rescale (64 FMUL), which
// runs in ~81% of the tiles on the outlier data. Version 3 pays those once per TBN = 192 keys:
// - S is one m64n192k32 per 32 of head_dim over a 128-row and a 64-row K box (24 KB per stage); V^T of a tile is
//   a 128-key box (128-byte swizzle) and a 64-key box (64-byte swizzle: a box's inner extent may not exceed its
//   swizzle span), so P V is 4 x m64n128k32 on the first and 2 on the second (descriptor layout 64B, 512 bytes
//   per 8 rows). 3 stages, 136 KB.
// - The 128-key K blocks (per-block scales) start every 128 keys of the sequence, so a 192-key tile holds two
//   of them: split at key 128 in even tiles and at key 64 in odd ones. The loop is unrolled by two anyway (P
//   double-buffered, as in version 2), which makes the split a constant in each half. The row maximum is
//   max(max_a kb_a, max_b kb_b) q_f; one shuffle pair per row and tile.
// - DBUF (variants 25, 26 = 25 without ping-pong): version 2's scheme (P double-buffered, the in-flight buffer
//   kept live, no wait for P V in the common path, warpgroup vote before the O rescale). Registers: S 96 + O 64
//   + 2 x P 24. Variant 27: single P buffer, exponentials in place in S, an unconditional wait for P_{j-1} V_{j-1}
//   before P_j is written, per-warp rescale decision (no vote), ping-pong. KEEP (variant 29 = 27 + KEEP, the
//   default until run h200-gpu7-fp8pf4; 30 = 29 without ping-pong; 31 = 29 on 128-key tiles): the single P buffer is XORed into `keep`
//   after the exponentials, so ptxas cannot hoist the wait for P_{j-1} V_{j-1} above the row maxima (it does
//   in 27: the P registers look dead from the issue on); the wait then sits among the exponentials.
//   Measured (h200-gpu7-fp8pf2, full / causal TFLOP/s): 29 844 / 714 vs the previous default (version 2) 778 /
//   663, 27 786 / 668, 30 826 / 693, 25 756, 26 761, 28 783.
// - Stages, phases and descriptors advance by additions (no divisions, no descriptor rebuilds per tile).
// A 256-key version (m64n256k32, S 128 + O 64 + P 32 = 224 registers with P single-buffered) spilled 144 bytes
// and ptxas serialized its wgmma (C7512), so it is not here.
// TBN = 128 (variant 28): the same kernel with version 2's tile width, which separates the cheaper per-tile
// bookkeeping from the wider tile.
// LATE (variant 32 = 29 + LATE; 33 = 31 + LATE, 34 = 30 + LATE): in 29's SASS the wait for P_{j-1} V_{j-1}
// still sits at the top of the softmax in the even half of the unrolled loop (before the row maxima and all 98
// MUFU.EX2) and after 25-34 of them in the odd half: a wait may always move up, and ptxas's scheduler moves it. LATE puts a differently tagged copy of the
// wait in each arm of the rescale branch (identical inline asm in both arms would be hoisted above the branch),
// so the wait starts a basic block that follows the whole softmax block; SASS: both waits after all 98
// exponentials in both halves, the same instruction count (2301 vs 2299 per unrolled loop), no spills.
// Measured (h200-gpu7-fp8pf4/5, full / causal TFLOP/s): 32 850 / 715 vs 29 828 / 704 in the same build, but
// 29 as built before the tmq64 argument was added ran 848 / 716 in the same call: the argument changed 29's
// codegen, and LATE is worth ~0 on 192-key tiles; 33 (128-key tiles) lost 2% to 31, whose hoisted wait is the
// faster schedule there; 34 838 (30: 826).
// NCW = 3 (three consumer warpgroups, 192 query rows per CTA, 160 registers each, 128-key tiles, single P kept
// live: S 64 + O 64 + P 16) compiles to 372-424 bytes of spills and serialized wgmma (C7512), so no variant
// instantiates it; the parameter stays for a later attempt with fewer live registers. Removing it and its Q map
// (round 5, h200-gpu7-fp8pf6) gave 29 and 31 their pre-round-4 SASS back but made 32 5% slower (805 vs 847 full),
// and the best full variant without it (29, 843) was still slower than 32 with it, so the argument stays.
constexpr int F83_STAGES = 3;
// Lab modes of version 3 (bit mask, round 6). S2 (128-key tiles, single P kept live): S double-buffered (s for
// the even tiles, s2 for the odd ones), so S_{j+1} is issued before the softmax of tile j, together with
// P_{j-1} V_{j-1}; the S GEMM's latency leaves the warpgroup's critical path (GEMM -> softmax -> GEMM), which in
// the other variants holds S_j's whole GEMM before every softmax. Registers: 2 x S 64 + O 64 + P 16 = 208 live
// across the softmax. TAU48: O rescale threshold 4.8 (log2 units) with P = 2^(x - m + 4) (still <= 2^8.8 < 448):
// fewer O rescales, P loses 4 binades at the bottom (weights below ~2^-13 of the row maximum round to zero).
// Measured (h200-gpu8-fp8pf1, full / causal TFLOP/s, outlier data): 35 (S2) 778 / 665 and 36 (S2 without
// ping-pong) 820 / 676 vs 31 843 / 718; 37 (32 + TAU48) 852 / 710 vs 32 855 / 712 (randn 864 vs 850); 38 782 / 667.
// ST4 / ST5 (round 7): 4 / 5 K/V stages instead of 3 (128-key tiles: 144 / 176 KB). With S2 the K tile two ahead
// is needed one step earlier; with 3 stages the producer can start it only when V_{j-2} is freed, one softmax
// before it is needed; 4-5 stages give it two or more. Measured (h200-gpu8-fp8pf2, full / causal TFLOP/s): 39
// (35, 4 stages) 777 / 664 and 40 (35, 5) 775 / 663 vs 35 777 / 666; 41 (36, 5) 822 / 679 vs 36 822 / 679; 42
// (31, 5) 836 / 717 vs 31 839 / 721: the load lead is not what S2 loses.
// SW4 / SW38 / SW8 (round 8): 1/4, 3/8 or 1/8 of each tile's exponentials in software on the FMA / ALU pipes
// (poly_exp2: magic-number round, degree-2 minimax polynomial on the fraction, integer add into the exponent;
// relative error 1.7e-3, far below the 2^-4 of P's e4m3 rounding). Whole key columns are picked at compile time
// (in each row, both elements of the 8-key groups i with i % 4 == 3, i % 8 in {2, 5, 7}, or i % 8 == 7), so there
// is no per-element branch. Why: Nsight Compute sampling of v32 (h200-gpu9-ncu) shows the 96 MUFU.EX2 of a tile
// issued back to back, each waiting the MUFU interval (~8 cycles per warp instruction) with idle issue slots.
// Measured (h200-gpu9-fp8pf8-1/2, full / causal TFLOP/s, outlier data): 43 (32 + SW4) 810 / 695, 44 (SW38) 806 /
// 686, 45 (SW8) 815-827 / 700-707 vs 32 849-858; 46 (31 + SW4) 791 / 687, 47 (SW38) 788 / 685, 48 (SW8) 823-836 /
// 707-718 vs 31 718-727 causal: every split loses. The probe 49 (32 with no MUFU for P) ran 983 / 827: the
// exponentials cost ~15%, but not in a form 6 more instructions per element can buy back.
// DIAG_NOEXP (timing probe, wrong results on purpose): every exponential of P is one FFMA (x * 0 + 1) instead of
// MUFU.EX2 (the O rescale factors stay exact): what the exponentials cost version 3 at most.
// ST2 (round 11): 2 K/V stages, so that a one-warpgroup CTA (NCW = 1) of 192-key tiles fits twice per SM.
// DIAG_NOLOAD (timing probe, round 11, wrong results on purpose): only the first S key tiles are loaded and the
// later tiles reuse their stages without waiting, so the loop runs without L2 -> SM traffic.
enum { F83M_S2 = 1, F83M_TAU48 = 2, F83M_ST4 = 4, F83M_ST5 = 8, F83M_SW4 = 16, F83M_SW38 = 32, F83M_SW8 = 64,
       F83M_DIAG_NOEXP = 128, F83M_OSTAGE = 256, F83M_ST2 = 1024, F83M_DIAG_NOLOAD = 2048, F83M_LOGP = 8192,
       F83M_LOGPX = 16384, F83M_LOGPF = 32768 };  // 4096: MCAST, removed (journal round 11)
// LOGP (round 11): P without exponentials. An e4m3 code is close to 8 log2(value) + 56 (exponent field x 8 plus the
// 3-bit mantissa, a linear interpolation of 2^f inside each binade: at most +6.1% off), so P = 2^x with x = S rf -
// m + 8 <= 8.8 is written straight as the code round(8 x + 55) in [0, 126]: one FFMA whose result carries the
// integer in its low mantissa bits (the 1.5 x 2^23 magic number), one FMNMX for the floor at code 0, and byte
// permutes that pack four codes into an A-fragment register; no MUFU, no F2FP. The row sums come from the tensor
// core (P V as m64n136k32 against 8 rows of e4m3 ones after each V^T box, as version 2's TCSUM), so they sum the
// very codes the numerator used. A numpy simulation (N(0, s^2) scores, s = 1 and 4) puts the output error from P
// at 1.2x / 1.75x that of exact exponentials rounded to e4m3; LOGPX (round(8 x + 55.7) with the offset kept exact,
// one FADD more per element) at 1.18x / 1.36x. The magic number rounds the offset itself to an integer (its ulp
// is 1), so without LOGPX the offset is 55, which keeps the code at most 126 (x <= 8.8; 127 is e4m3's NaN): 55.7
// there reached 127 when the offset rounded up (NaN rows in run h200-gpu15-fp8pf11-4). LOGPF: the magic number
// 1.5 x 2^15 instead, whose ulp is 2^-8, so the offset keeps 8 fraction bits and the code is the second byte,
// floor(8 x + 55.7 + 0.5): LOGPX's offset at LOGP's two instructions.
// V^T bytes of a stage (LOGP: each box followed by its 8 rows of ones, the 64-key box at 17408) and the shared
// memory of a version-3 CTA
__host__ __device__ constexpr int f83_vst(int tbn, int mode) {
    return (mode & F83M_LOGP) ? (tbn > 128 ? 26624 : 17408) : F8_TILE + (tbn - 128) * 128;
}
__host__ __device__ constexpr int f83_smem(int tbn, int ncw, int nst, int mode) {
    return ncw * 64 * 128 + nst * (tbn * 128 + f83_vst(tbn, mode)) + (nst <= 3 ? 128 : 256) + 1024;
}
// true: the exponentials of 8-key group i (of a row) use poly_exp2 instead of MUFU.EX2
__host__ __device__ constexpr bool f83_sw(int mode, int i) {
    return ((mode & F83M_SW4) && (i & 3) == 3) || ((mode & F83M_SW8) && (i & 7) == 7) ||
           ((mode & F83M_SW38) && ((i & 7) == 2 || (i & 7) == 5 || (i & 7) == 7));
}
__host__ __device__ constexpr int f83_stages(int mode) {
    return (mode & F83M_ST5) ? 5 : (mode & F83M_ST4) ? 4 : (mode & F83M_ST2) ? 2 : F83_STAGES;
}
template <int TBN, int NCW = 2, int NST = F83_STAGES>
struct F83 {
    static constexpr int QB = NCW * 64 * 128;                           // Q bytes (NCW consumer warpgroups)
    static constexpr int KST = TBN * 128;                               // K bytes of a stage
    static constexpr int VST = F8_TILE + (TBN - 128) * 128;             // V^T bytes (128-key box + 64-key box)
    static constexpr int BARB = NST <= 3 ? 128 : 256;                   // mbarriers: 1 + 4 x NST of 8 bytes
    static constexpr int SMEM = QB + NST * (KST + VST) + BARB + 1024;
};
static_assert(F83<128, 2, 5>::SMEM <= 232448, "FP8 version 3 with 5 stages exceeds the sm_90 opt-in limit");
static_assert(F83<192>::SMEM <= 232448, "FP8 version 3 shared memory exceeds the sm_90 opt-in limit");

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

// NCW = 1 (round 11): one consumer warpgroup of 64 query rows and no ping-pong inside the CTA; two CTAs share an
// SM (128 registers at launch, setmaxnreg 232 / 24), so the hardware interleaves their GEMMs and softmaxes and one
// CTA's start and end run beside the other's loop. Each CTA reads its own K / V: twice version 3's L2 traffic.
template <int TBN, bool PINGPONG, bool DBUF, bool KEEP = false, bool LATE = false, int NCW = 2, int MODE = 0>
__global__ void __launch_bounds__(128 * (NCW + 1), NCW == 1 ? 2 : 1)
    fa_wgmma_fp8_v3(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
                    const __grid_constant__ CUtensorMap tmv, const __grid_constant__ CUtensorMap tmk64,
                    const __grid_constant__ CUtensorMap tmv64, const __grid_constant__ CUtensorMap tmq64,
                    Fp8WgParams p) {
#ifdef ASSAY_SM90A
    constexpr bool LOGP = (MODE & F83M_LOGP) != 0;
    constexpr int S = f83_stages(MODE), F83_KST = F83<TBN>::KST, F83_VST = f83_vst(TBN, MODE), QB = F83<TBN, NCW>::QB;
    constexpr int ON = LOGP ? F8_D / 2 + 4 : F8_D / 2;  // O accumulators per thread (LOGP: + the row-sum columns)
    constexpr int V64 = LOGP ? F8_TILE + 1024 : F8_TILE;  // offset of the 64-key V^T box in a stage
    constexpr int BM = NCW * 64;  // query rows per CTA (shadows the file's 128)
    constexpr bool S2 = (MODE & F83M_S2) != 0;
    constexpr float TAU = (MODE & F83M_TAU48) ? 4.8f : F8_RESCALE_TAU, POFF = (MODE & F83M_TAU48) ? 4.f : 8.f;
    static_assert(!LATE || (KEEP && !DBUF), "LATE orders the wait of the single kept P buffer");
    static_assert(!S2 || (KEEP && !DBUF && TBN == 128 && NCW == 2), "S2: 128-key tiles, single P kept live");
    static_assert(!DBUF || S == 3, "DBUF frees the V stage of tile j - 2 at a 3-stage offset");
    static_assert(NCW != 3 || (TBN == 128 && !DBUF), "3 consumer warpgroups: 128-key tiles, single P");
    static_assert(NCW != 1 || (!PINGPONG && !DBUF && f83_smem(TBN, 1, S, MODE) <= 232448 / 2 - 1024),
                  "1 consumer warpgroup: no ping-pong, and two CTAs per SM");
    static_assert(!LOGP || (!S2 && !DBUF && !(MODE & (F83M_SW4 | F83M_SW38 | F83M_SW8 | F83M_DIAG_NOEXP))),
                  "LOGP: single P, no exponentials to split");
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
    if constexpr (LOGP) {  // the ones rows after each V^T box, written once; the tensor cores read them (async proxy)
        constexpr int OW = TBN > 128 ? 384 : 256;  // words: 256 after the 128-key box, 128 after the 64-key box
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
            if (NCW == 1) tma_load_3d(Qs, &tmq64, 0, h, q0 + mblk * BM, qfull);
            else tma_load_3d(Qs, &tmq, 0, h, q0 + mblk * BM, qfull);
            if (NCW == 3) tma_load_3d(Qs + F8_TILE, &tmq64, 0, h, q0 + mblk * BM + 128, qfull);
            // Boxes past the tensor's end are zero-filled and still count their bytes; their keys are masked, and
            // zero V^T codes keep P V finite.
            for (int j = 0, s = 0, ph = 0; j < ((MODE & F83M_DIAG_NOLOAD) ? min(n_max, S) : n_max); ++j) {
                if (j >= S) mbar_wait(kempty + s, ph ^ 1);
                mbar_arrive_expect_tx(kfull + s, F83_KST);
                tma_load_3d(Ks + s * F83_KST, &tmk, 0, hk, k0 + j * TBN, kfull + s);
                if (TBN > 128) tma_load_3d(Ks + s * F83_KST + F8_TILE, &tmk64, 0, hk, k0 + j * TBN + 128, kfull + s);
                if (j >= S) mbar_wait(vempty + s, ph ^ 1);
                mbar_arrive_expect_tx(vfull + s, F83<TBN>::VST);
                tma_load_3d(Vs + s * F83_VST, &tmv, vt0 + j * TBN, 0, hk, vfull + s);
                if (TBN > 128) tma_load_3d(Vs + s * F83_VST + V64, &tmv64, vt0 + j * TBN + 128, 0, hk, vfull + s);
                if (++s == S) s = 0, ph ^= 1;
            }
        }
        return;
    }

    // 2 consumer warpgroups: 240 registers each (2 x 128 x 240 + 128 x 24 <= 64K); 3: 160 each; 1: 232 (the CTA's
    // 256 x 128 launch registers, two CTAs per SM)
    if (NCW == 3) asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n");
    else if (NCW == 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int cw = wg - 1, wiw = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = mblk * BM + cw * 64 + wiw * 16 + g;
    // Ping-pong turns, round robin over the NCW consumer warpgroups (barrier 1 + c: "c may issue now", synced by
    // c and arrived by its predecessor): the last one (the final P V of the last warpgroup) passes it to nobody.
    auto turn_begin = [&]() {
        if (PINGPONG) named_sync(1 + cw);
    };
    auto turn_end = [&](bool final) {
        if (PINGPONG && !(cw == NCW - 1 && final)) named_arrive(cw == NCW - 1 ? 1 : 2 + cw);
    };
    if (PINGPONG && cw == NCW - 1 && n_max > 0) named_arrive(1);

    float qf[2];  // per-row factor: q scale * softmax scale * log2(e)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        qf[r] = (row < Lq ? p.q_scale[(size_t)(q0 + row) * p.hq + h] : 1.f) * p.scale_log2;
    }
    const float *kblk = p.k_blk + (size_t)hk * p.kblk_stride + vt0 / 32;

    float o[ON];
    float s[TBN / 2], s2[S2 ? TBN / 2 : 1];  // s2: S of the odd tiles (S2)
    uint32_t pa0[TBN / 32][4], pa1[DBUF ? TBN / 32 : 1][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
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
            if (TBN == 192) wgmma_ss_e4m3_n192(sx, dq + 2 * kk, d + 2 * kk, kk > 0);
            else wgmma_ss_e4m3_n128(sx, dq + 2 * kk, d + 2 * kk, kk > 0);
        }
        wgmma_commit();
    };
    auto issue_qk = [&](int st) { issue_qk_to(st, s); };
    auto issue_pv = [&](int st, uint32_t (*pa)[4]) {
        const uint64_t d = dv + (uint64_t)(st * (F83_VST >> 4)), d64 = dv64 + (uint64_t)(st * (F83_VST >> 4));
#pragma unroll
        for (int kc = 0; kc < TBN / 32; ++kc) {
            if constexpr (LOGP) wgmma_rs_e4m3_n136(o, pa[kc], kc < 4 ? d + 2 * kc : d64 + 2 * (kc - 4));
            else wgmma_rs_e4m3_n128(o, pa[kc], kc < 4 ? d + 2 * kc : d64 + 2 * (kc - 4));
        }
        (void)d64;
        wgmma_commit();
    };
    // Masks, row maxima, P = 2^(x - max + 8) in place in s (DBUF: packed straight into pc), row sums; returns the
    // O rescale factors. odd: the tile's K-block split is at key 64 instead of 128 (constant after inlining).
    auto softmax_on = [&](float *s, int j, bool odd, float *alpha) {
        const int split = odd && TBN == 192 ? 8 : 16;  // in groups of 8 keys
        // k_quant_blocks writes a block's scale at its first 32-column slot only: slot 4 * (key / 128)
        const float kba = __ldg(kblk + ((j * TBN) >> 7 << 2));
        const float kbb = TBN > 128 && j * TBN + split * 8 < Lk ? __ldg(kblk + ((j * TBN + split * 8) >> 7 << 2)) : 1.f;
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
            const float mxs = warp_max_quad(TBN > 128 ? fmaxf(mxa * rfa, mxb * rfb) : mxa * rfa);  // -inf stays
            const float mnew = mxs > m[r] + TAU ? mxs : m[r];
            alpha[r] = mnew == m[r] ? 1.f : fast_exp2(m[r] - mnew);
            const float off = POFF - (mnew == -INFINITY ? 0.f : mnew);
            if constexpr (LOGP) {  // codes in the low bits of 1.5 x 2^23 + code, floored at code 0 (-inf -> 0)
                constexpr float MAGIC = 12582912.f;
                // LOGPX: round(8 x + 55.7), the offset kept exact (one FADD more); else the offset 8 off + 55 is
                // itself rounded to an integer inside the magic number: round(8 x + 55 + d), d in [-0.5, 0.5]
                // per row and tile, at most code 126 (x <= 8.8; 127 is e4m3's NaN)
                constexpr float MAGICF = 49152.f;  // LOGPF: 1.5 x 2^15, code = bits 8-15
                const float off8 = (MODE & F83M_LOGPX)   ? fmaf(8.f, off, 55.7f)
                                   : (MODE & F83M_LOGPF) ? fmaf(8.f, off, 56.2f + MAGICF)
                                                         : fmaf(8.f, off, 55.f + MAGIC);
#pragma unroll
                for (int i = 0; i < TBN / 8; ++i) {
                    const float rf8 = 8.f * (i < split ? rfa : rfb);
                    if (MODE & F83M_LOGPX) {
                        s[4 * i + 2 * r] = fmaxf(fmaf(s[4 * i + 2 * r], rf8, off8) + MAGIC, MAGIC);
                        s[4 * i + 2 * r + 1] = fmaxf(fmaf(s[4 * i + 2 * r + 1], rf8, off8) + MAGIC, MAGIC);
                    } else {
                        constexpr float FLOOR = (MODE & F83M_LOGPF) ? MAGICF : MAGIC;
                        s[4 * i + 2 * r] = fmaxf(fmaf(s[4 * i + 2 * r], rf8, off8), FLOOR);
                        s[4 * i + 2 * r + 1] = fmaxf(fmaf(s[4 * i + 2 * r + 1], rf8, off8), FLOOR);
                    }
                }
                m[r] = mnew;
                continue;
            }
            float sq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < TBN / 8; ++i) {
                const float rf = i < split ? rfa : rfb;
                const float x0 = fmaf(s[4 * i + 2 * r], rf, off), x1 = fmaf(s[4 * i + 2 * r + 1], rf, off);
                const bool sw = f83_sw(MODE, i);  // constant after unrolling
                constexpr bool noexp = (MODE & F83M_DIAG_NOEXP) != 0;
                const float p0 = noexp ? fmaf(x0, 0.f, 1.f) : sw ? poly_exp2(x0) : fast_exp2(x0);
                const float p1 = noexp ? fmaf(x1, 0.f, 1.f) : sw ? poly_exp2(x1) : fast_exp2(x1);
                s[4 * i + 2 * r] = p0;
                s[4 * i + 2 * r + 1] = p1;
                sq[i & 3] = i < 4 ? p0 + p1 : sq[i & 3] + (p0 + p1);  // (0 + x is not folded either)
            }
            l[r] = l[r] * alpha[r] + ((sq[0] + sq[1]) + (sq[2] + sq[3]));
            m[r] = mnew;
        }
    };
    auto softmax = [&](int j, bool odd, float *alpha, uint32_t (*pc)[4]) { softmax_on(s, j, odd, alpha); };
    auto convert_p_from = [&](const float *s, uint32_t (*pa)[4]) {
#pragma unroll
        for (int kc = 0; kc < TBN / 32; ++kc)
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int i = 4 * kc + 2 * hh;
                    if constexpr (LOGP) {  // the code bytes of four values (LOGPF: the second byte)
                        constexpr uint32_t SEL = (MODE & F83M_LOGPF) ? 0x0051 : 0x0040;
                        const uint32_t lo = __byte_perm(__float_as_uint(s[4 * i + 2 * r]),
                                                        __float_as_uint(s[4 * i + 2 * r + 1]), SEL);
                        const uint32_t hi = __byte_perm(__float_as_uint(s[4 * i + 4 + 2 * r]),
                                                        __float_as_uint(s[4 * i + 4 + 2 * r + 1]), SEL);
                        pa[kc][2 * hh + r] = __byte_perm(lo, hi, 0x5410);
                        continue;
                    }
                    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]),
                                                                 __NV_SATFINITE, __NV_E4M3);
                    const uint32_t hi = __nv_cvt_float2_to_fp8x2(
                        make_float2(s[4 * i + 4 + 2 * r], s[4 * i + 4 + 2 * r + 1]), __NV_SATFINITE, __NV_E4M3);
                    pa[kc][2 * hh + r] = lo | (hi << 16);
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
    // LATE: the wait for every pending wgmma group sits in both arms of the rescale branch, each copy with its own
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
    // st / phk: stage and phase of tile j; tile j - 1 is in stage sp (phase phv), tile j - 2 in sq2 (S = 3).
    int st = 0, phk = 0;
    // One tile j >= 1: issue S_j and P_{j-1} V_{j-1} (P in pp), softmax of S_j under the GEMM, P_j into pc.
    auto step = [&](int j, bool odd, uint32_t (*pc)[4], uint32_t (*pp)[4]) {
        if (++st == S) st = 0, phk ^= 1;
        const int sp = st == 0 ? S - 1 : st - 1, phv = st == 0 ? phk ^ 1 : phk, sq2 = st == S - 1 ? 0 : st + 1;
        if (!(MODE & F83M_DIAG_NOLOAD) || j < S) mbar_wait(kfull + st, phk);
        if (!(MODE & F83M_DIAG_NOLOAD) || j - 1 < S) mbar_wait(vfull + sp, phv);
        wgmma_fence();
        turn_begin();
        issue_qk(st);
        issue_pv(sp, pp);
        turn_end(false);
        wgmma_wait<1>();  // S_j done (DBUF: and P_{j-2} V_{j-2}, an older group)
        reg_fence<TBN / 2>(s);
        __syncwarp();
        if (lane == 0) {
            mbar_arrive(kempty + st);
            if (DBUF && j >= 2) mbar_arrive(vempty + sq2);
        }
        float alpha[2];
        softmax(j, odd, alpha, pc);
        if (DBUF) {
#pragma unroll
            for (int kc = 0; kc < TBN / 32; ++kc) keep ^= pp[kc][0] ^ pp[kc][1] ^ pp[kc][2] ^ pp[kc][3];
            if (warpgroup_any(alpha[0] != 1.f || alpha[1] != 1.f, 3 + cw)) {
                wgmma_wait<0>();  // P_{j-1} V_{j-1} done
                reg_fence<ON>(o);
                rescale(alpha);
            }
        } else {
            if (KEEP) {  // P stays live through the exponentials, so ptxas cannot hoist the wait above them
#pragma unroll
                for (int kc = 0; kc < TBN / 32; ++kc) keep ^= pp[kc][0] ^ pp[kc][1] ^ pp[kc][2] ^ pp[kc][3];
            }
            if (LATE) {
                wait_late_then_rescale(alpha);
                __syncwarp();
                if (lane == 0) mbar_arrive(vempty + sp);
            } else {
                wgmma_wait<0>();  // P_{j-1} V_{j-1} done: its V stage is free and P may be overwritten
                reg_fence<ON>(o);
                __syncwarp();
                if (lane == 0) mbar_arrive(vempty + sp);
                if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) rescale(alpha);
            }
        }
        convert_p(pc);
    };

    // S2: stage and phase of tiles j - 1, j, j + 1 rotate through (s0, p0), (s1, p1), (s2n, p2n). S_{j+1} is issued
    // before P_{j-1} V_{j-1} in the same turn, so the wait for P V after the softmax also retires S_{j+1} (groups
    // complete in order) and no group is pending across the loop's back edge (with one pending there ptxas
    // serialized every wgmma: C7514 / C7515).
    auto step2 = [&](int j, float *sc, float *sn, int &s0, int &p0, int &s1, int &p1, int &s2n, int &p2n) {
        // After the last tile S_{j+1} is computed anyway, from a stage nothing writes any more, and discarded: a
        // wgmma under a branch made ptxas serialize them all.
        mbar_wait(vfull + s0, p0);
        if (j + 1 < n_max) mbar_wait(kfull + s2n, p2n);
        wgmma_fence();
        turn_begin();
        issue_qk_to(s2n, sn);  // into the buffer of S_{j-1}, dead since P_{j-1} was packed
        issue_pv(s0, pa0);
        turn_end(false);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty + s1);  // S_j was retired by the previous wait
        float alpha[2];
        softmax_on(sc, j, false, alpha);
#pragma unroll
        for (int kc = 0; kc < TBN / 32; ++kc) keep ^= pa0[kc][0] ^ pa0[kc][1] ^ pa0[kc][2] ^ pa0[kc][3];
        // S_{j+1} and P_{j-1} V_{j-1} done: V stage free, P may be overwritten. The wait sits in both arms of the
        // rescale branch (LATE): as one wait ptxas hoisted it above the softmax (SASS: above all 64 MUFU.EX2 in
        // one half of the unrolled loop, above all but 2 in the other), which puts both GEMMs back on the path.
        wait_late_then_rescale(alpha);
        reg_fence<TBN / 2>(sn);
        __syncwarp();
        if (lane == 0) mbar_arrive(vempty + s0);
        convert_p_from(sc, pa0);
        // rotate: j -> j - 1, j + 1 -> j, j + 2 -> j + 1
        s0 = s1, p0 = p1, s1 = s2n, p1 = p2n;
        if (++s2n == S) s2n = 0, p2n ^= 1;
    };
    if (S2 && n_max > 0) {
        int s0 = 0, p0 = 0, s1 = 1, p1 = 0, s2n = 2, p2n = 0;  // tiles j - 1 = 0, j = 1, j + 1 = 2 at j = 1
        mbar_wait(qfull, 0);
        mbar_wait(kfull, 0);
        if (n_max > 1) mbar_wait(kfull + 1, 0);
        wgmma_fence();
        turn_begin();
        issue_qk_to(0, s);
        issue_qk_to(1, s2);  // read and discarded when n_max == 1
        turn_end(false);
        wgmma_wait<1>();  // S_0 done
        reg_fence<TBN / 2>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty);
        float alpha0[2];
        softmax_on(s, 0, false, alpha0);
        wgmma_wait<0>();  // S_1
        reg_fence<TBN / 2>(s2);
        convert_p_from(s, pa0);
        int j = 1;
        for (; j + 1 < n_max; j += 2) {
            step2(j, s2, s, s0, p0, s1, p1, s2n, p2n);
            step2(j + 1, s, s2, s0, p0, s1, p1, s2n, p2n);
        }
        if (j < n_max) step2(j, s2, s, s0, p0, s1, p1, s2n, p2n);
        // s0, p0: the stage of the last tile
        mbar_wait(vfull + s0, p0);
        wgmma_fence();
        turn_begin();
        issue_pv(s0, pa0);
        turn_end(true);
        wgmma_wait<0>();
        reg_fence<ON>(o);
    } else if (n_max > 0) {
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
        softmax(0, false, alpha0, pa0);
        convert_p(pa0);
        int j = 1;
        for (; j + 1 < n_max; j += 2) {
            step(j, true, DBUF ? pa1 : pa0, pa0);
            step(j + 1, false, pa0, DBUF ? pa1 : pa0);
        }
        if (j < n_max) step(j, true, DBUF ? pa1 : pa0, pa0);
        const int last = n_max - 1;
        if (!(MODE & F83M_DIAG_NOLOAD) || last < S) mbar_wait(vfull + st, phk);  // st, phk: the last tile's stage
        wgmma_fence();
        turn_begin();
        if (DBUF && (last & 1)) issue_pv(st, pa1);
        else issue_pv(st, pa0);
        turn_end(true);
        wgmma_wait<0>();
        reg_fence<ON>(o);
    }

    const float *vsc = p.v_scale + (size_t)hk * F8_D;
    keep &= p.zero;  // 0: only keeps the P registers of the GEMM in flight alive (see version 2)
    // OSTAGE (round 9): O goes through shared memory and out in 16-byte stores, a 256-byte row per 16 lanes (the
    // direct stores below write 4 bytes per lane, 8 rows x 16 bytes per warp instruction: 5% of v32's samples, lg
    // throttle, plus the exit waiting for them to drain). The buffers are the K stages of key tiles n_max - 2
    // (warpgroup 0) and n_max - 3 (warpgroup 1): both warpgroups finished those S GEMMs before their last turn, and
    // nothing loads after the last tile. 16-byte chunk c of row r sits at chunk c ^ (r & 7) (conflict-free writes
    // of the accumulator layout and reads of whole rows). Needs 3 key tiles (else the direct stores).
    if ((MODE & F83M_OSTAGE) && !S2 && n_max >= 3) {
        unsigned char *ob = Ks + ((st + 2 * S - 1 - cw) % S) * F83_KST;  // st: the stage of key tile n_max - 1
        static_assert(64 * 256 <= F83_KST, "a warpgroup's O fits one K stage");
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float lsum = LOGP ? o[F8_D / 2 + 2 * r] : warp_sum_quad(l[r]);  // LOGP: column 128 + 2t
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
        const float lsum = LOGP ? o[F8_D / 2 + 2 * r] : warp_sum_quad(l[r]);
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

// ---- bf16 version 5 (lab variants 5 and 6 = 5 with ping-pong): FP8 version 2's fix applied to the bf16 kernel --
// The SASS of v3/v4 has the same hoisted wait as FP8 version 1 (WARPGROUP.DEPBAR.LE gsb0, 0x0 for P_{j-1} V_{j-1}
// at the top of the softmax, the P registers reused by softmax temporaries). As in fa_wgmma_fp8_v2:
// - P double-buffered (pa0 / pa1, loop unrolled by two), the buffer that the GEMM in flight reads kept live
//   through the softmax (XOR into `keep`, read by the epilogue), so ptxas has no reason to wait for that GEMM;
// - the wait<1> after issuing S_j and P_{j-1} V_{j-1} retires P_{j-2} V_{j-2}, which frees its V stage: 3 stages
//   (d128: 32 KB Q + 3 x 64 KB K/V = 224 KB of the 227 KB);
// - O is rescaled only when a row maximum grows by more than BF_TAU (log2 units) somewhere in the warpgroup
//   (bar.red vote); only then does the warpgroup wait for P_{j-1} V_{j-1}. Below the threshold the stale maximum
//   stays: P = 2^(x - m) <= 2^BF_TAU, far inside bf16's range, and the row sum uses the same stale maximum, so the
//   result is unchanged (bf16 keeps 8 significant bits at any magnitude; O and l accumulate in fp32).
// Registers per consumer thread (d128): S 64 + O 64 + 2 x P 32 = 192 of 240.
// Measured (h200-gpu6-attn2-1/2): validates everywhere, but not faster: d128 v6 622 vs v4 625 TFLOP/s, d64 384
// vs 423 (the vote and the larger loop cost more than the overlap gains once ping-pong hides the softmax).
constexpr int BF_STAGES = 3;
constexpr float BF_TAU = 8.f;

template <int D>
struct Smem2 {
    static constexpr int Q_BYTES = BM * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int K_OFF = Q_BYTES;
    static constexpr int V_OFF = K_OFF + BF_STAGES * KV_BYTES;
    static constexpr int BAR_OFF = V_OFF + BF_STAGES * KV_BYTES;
    static constexpr int BYTES = BAR_OFF + 128 + 1024;
};
static_assert(Smem2<128>::BYTES <= 232448, "bf16 version 5 shared memory exceeds the sm_90 opt-in limit");

template <int D, bool PINGPONG>
__global__ void __launch_bounds__(NTHREADS, 1)
    fa_wgmma_v5(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
                const __grid_constant__ CUtensorMap tmv, WgParams p) {
#ifdef ASSAY_SM90A
    using L = Smem2<D>;
    constexpr int S = BF_STAGES;
    constexpr int DH = D / 64;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sm = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Qs = sm;
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm + L::BAR_OFF);
    uint64_t *qfull = bars, *kfull = bars + 1, *vfull = kfull + S, *kempty = vfull + S, *vempty = kempty + S;

    const int b = blockIdx.z, h = blockIdx.y;
    const int mblk = gridDim.x - 1 - blockIdx.x;
    const int q0 = p.cu_q[b], Lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], Lk = p.cu_k[b + 1] - k0;
    if (mblk * BM >= Lq) return;
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
            mbar_arrive_expect_tx(qfull, L::Q_BYTES);
#pragma unroll
            for (int x = 0; x < DH; ++x) tma_load_3d(Qs + x * BM * 128, &tmq, x * 64, h, q0 + mblk * BM, qfull);
            for (int j = 0; j < n_max; ++j) {
                const int s = j % S;
                const uint32_t ph = (j / S) & 1;
                if (j >= S) mbar_wait(kempty + s, ph ^ 1);
                mbar_arrive_expect_tx(kfull + s, L::KV_BYTES);
#pragma unroll
                for (int x = 0; x < DH; ++x)
                    tma_load_3d(sm + L::K_OFF + s * L::KV_BYTES + x * BN * 128, &tmk, x * 64, hk, k0 + j * BN,
                                kfull + s);
                if (j >= S) mbar_wait(vempty + s, ph ^ 1);
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
    const int cw = wg - 1, wiw = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = mblk * BM + cw * 64 + wiw * 16 + g;
    int turns_left = n_max + 1;
    auto turn_begin = [&]() {
        if (PINGPONG) named_sync(1 + cw);
    };
    auto turn_end = [&]() {
        --turns_left;
        if (PINGPONG && !(cw == 1 && turns_left == 0)) named_arrive(2 - cw);
    };
    if (PINGPONG && cw == 1 && n_max > 0) named_arrive(1);

    float o[D / 2];
    float s[BN / 2];
    uint32_t pa0[BN / 16][4], pa1[BN / 16][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // m: running maxima, scaled (log2 units)
    uint32_t keep = 0;
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
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
    auto issue_pv = [&](int st, uint32_t (*pa)[4]) {
        const unsigned char *Vt = sm + L::V_OFF + st * L::KV_BYTES;
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
            const uint64_t dv = sw128_desc(Vt + kc * 16 * 128, BN * 128, 1024);
            if (D == 128) wgmma_rs_n128_tb(o, pa[kc], dv);
            else wgmma_rs_n64_tb(o, pa[kc], dv);
        }
        wgmma_commit();
    };
    // Masks, row maxima, P = 2^(S scale - m) in place (m possibly stale by up to BF_TAU), row sums.
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
            float mq[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) mq[i & 3] = fmaxf(mq[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            const float mx = warp_max_quad(fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3])));
            const float mxs = mx * p.scale_log2;  // -inf stays -inf
            const float mnew = mxs > m[r] + BF_TAU ? mxs : m[r];
            alpha[r] = mnew == m[r] ? 1.f : fast_exp2(m[r] - mnew);
            const float off = mnew == -INFINITY ? 0.f : -mnew;
            float sq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                const float p0 = fast_exp2(fmaf(s[4 * i + 2 * r], p.scale_log2, off));
                const float p1 = fast_exp2(fmaf(s[4 * i + 2 * r + 1], p.scale_log2, off));
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
        for (int kc = 0; kc < BN / 16; ++kc) {
            pa[kc][0] = pack_bf16(s[8 * kc + 0], s[8 * kc + 1]);
            pa[kc][1] = pack_bf16(s[8 * kc + 2], s[8 * kc + 3]);
            pa[kc][2] = pack_bf16(s[8 * kc + 4], s[8 * kc + 5]);
            pa[kc][3] = pack_bf16(s[8 * kc + 6], s[8 * kc + 7]);
        }
    };
    auto step = [&](int j, uint32_t (*pc)[4], uint32_t (*pp)[4]) {
        const int st = j % S, sp = (j - 1) % S;
        mbar_wait(kfull + st, (j / S) & 1);
        mbar_wait(vfull + sp, ((j - 1) / S) & 1);
        wgmma_fence();
        turn_begin();
        issue_qk(st);
        issue_pv(sp, pp);
        turn_end();
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
        for (int kc = 0; kc < BN / 16; ++kc) keep ^= pp[kc][0] ^ pp[kc][1] ^ pp[kc][2] ^ pp[kc][3];
        if (warpgroup_any(alpha[0] != 1.f || alpha[1] != 1.f, 3 + cw)) {
            wgmma_wait<0>();  // P_{j-1} V_{j-1} done
            reg_fence<D / 2>(o);
#pragma unroll
            for (int i = 0; i < D / 8; ++i) {
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
        wgmma_wait<0>();
        reg_fence<BN / 2>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(kempty);
        float alpha0[2];
        softmax(0, alpha0);  // O is still zero: nothing to rescale
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
        reg_fence<D / 2>(o);
    }

    const int total_q = p.cu_q[p.batch];
    keep &= p.zero;  // 0: only keeps the P registers of the GEMM in flight alive (see above)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float lsum = warp_sum_quad(l[r]);
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = row0 + r * 8;
        if (row >= Lq + (int)keep) continue;
        __nv_bfloat16 *dst = p.o + ((size_t)(q0 + row) * p.hq + h) * D;
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
            *reinterpret_cast<uint32_t *>(dst + i * 8 + 2 * t) = pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
        if (p.lse && t == 0)
            p.lse[(size_t)h * total_q + q0 + row] = lsum > 0.f ? m[r] * (p.scale / p.scale_log2) + logf(lsum) : -INFINITY;
    }
#else
    __trap();
#endif
}

template <int D, bool PP>
int launch_v5(const assay_cuda_attn_prefill_args *a, int total_q, int total_k, cudaStream_t stream) {
    constexpr int smem = Smem2<D>::BYTES;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma_v5<D, PP>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
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
    p.zero = 0;
    dim3 grid((a->max_seqlen_q + BM - 1) / BM, a->n_heads_q, a->batch);
    fa_wgmma_v5<D, PP><<<grid, NTHREADS, smem, stream>>>(mq, mk, mv, p);
    ASSAY_CUDA_LAUNCHED();
    return 0;
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

// Called by assay_cuda_attn_prefill for variants 3-8 (arguments already checked): 3 = fa_wgmma, 4 = 3 with
// ping-pong, 5 = fa_wgmma_v5 (version 5: P double-buffered, no P V wait in the common path), 6 = 5 with ping-pong,
// 7 / 8 = 3 / 4 with the in-flight P registers kept live (KEEP), 9 = 4 with O stored through shared memory (OST).
// total_q / total_k: the packed token counts (cu_seqlens[batch]), which the tensor maps need on the host.
int lab_attn_prefill_sm90(const assay_cuda_attn_prefill_args *a, int total_q, int total_k, int variant,
                          cudaStream_t stream) {
    if (a->head_dim == 128)
        return variant == 3   ? launch<128, false>(a, total_q, total_k, stream)
               : variant == 4 ? launch<128, true>(a, total_q, total_k, stream)
               : variant == 5 ? launch_v5<128, false>(a, total_q, total_k, stream)
               : variant == 6 ? launch_v5<128, true>(a, total_q, total_k, stream)
               : variant == 7 ? launch<128, false, true>(a, total_q, total_k, stream)
               : variant == 8 ? launch<128, true, true>(a, total_q, total_k, stream)
                              : launch<128, true, false, true>(a, total_q, total_k, stream);
    if (a->head_dim == 64)
        return variant == 3   ? launch<64, false>(a, total_q, total_k, stream)
               : variant == 4 ? launch<64, true>(a, total_q, total_k, stream)
               : variant == 5 ? launch_v5<64, false>(a, total_q, total_k, stream)
               : variant == 6 ? launch_v5<64, true>(a, total_q, total_k, stream)
               : variant == 7 ? launch<64, false, true>(a, total_q, total_k, stream)
               : variant == 8 ? launch<64, true, true>(a, total_q, total_k, stream)
                              : launch<64, true, false, true>(a, total_q, total_k, stream);
    return assay_cuda_fail("attn_prefill: head_dim %d not supported by the sm_90 kernel (64, 128)", a->head_dim);
}

// The lab variants of FP8 version 3 (per-block K scales only); the comment at the launch says what each one is.
static bool fp8_v3_variant(int v) {
    return (v >= 25 && v <= 53 && v != 51) || v == 56 || v == 59 || v == 60 || v == 63 || (v >= 65 && v <= 67);
}

extern "C" int assay_lab_attn_prefill_fp8_sm90(const assay_cuda_attn_prefill_fp8_sm90_args *a, int variant,
                                               assay_cuda_stream stream) {
    if (!variant) return assay_cuda_attn_prefill_fp8_sm90(a, stream);
    if (!a || !a->q || !a->k || !a->vt || !a->q_scale || (!a->k_scale_t && !a->k_block_scale) || !a->v_scale || !a->o || !a->cu_seqlens_q ||
        !a->cu_seqlens_k || !a->cu_seqlens_vt)
        return assay_cuda_fail("attn_prefill_fp8_sm90: null pointer argument");
    if (a->head_dim != 128 || a->batch <= 0 || a->n_heads_q <= 0 || a->n_heads_kv <= 0 ||
        a->n_heads_q % a->n_heads_kv || a->total_q <= 0 || a->total_k <= 0 || a->vt_stride < a->total_k ||
        a->vt_stride % 32)
        return assay_cuda_fail("attn_prefill_fp8_sm90: bad shape (d %d, heads %d/%d, vt_stride %d)", a->head_dim,
                               a->n_heads_q, a->n_heads_kv, a->vt_stride);
    const bool lab_kblk = (variant >= 7 && variant <= 18) || (variant >= 20 && variant <= 24) ||
                          fp8_v3_variant(variant);
    if (variant < 0 || (variant > 6 && !lab_kblk) || (a->k_block_scale && (variant == 1 || variant == 2)) ||
        (lab_kblk && !a->k_block_scale))
        return assay_cuda_fail("attn_prefill_fp8_sm90: variant %d not available %s", variant,
                               a->k_block_scale ? "with per-block K scales (0, 3-18, 20-50, 52, 53, 56, 59, 60, 63, 65-67)"
                                                : "with per-token K scales (0-6)");
    if (a->max_seqlen_q == 0) return 0;
    static bool configured = false;
    if (!configured) {
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma_fp8<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, F8_SMEM));
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(fa_wgmma_fp8<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, F8_SMEM));
        configured = true;
    }
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
    // default with per-block K scales: version 3 with ping-pong and the single P kept live, on 192-key tiles with
    // the P V wait after the softmax, O stored through shared memory in 16-byte rows, and P written as e4m3 codes
    // without exponentials, its row sums on the tensor core (LOGP, with the offset's fraction: LOGPF): lab variant
    // 67, with and without a causal mask (run h200-gpu15-fp8pf11-6: 1009-1011 / 847-848 TFLOP/s against 864-865 /
    // 748-749 for 52 / 53, the defaults from h200-gpu9-fp8pf9-2 to h200-gpu15-fp8pf11-4; its error is level with
    // 52's on outlier data and 1.6x on flat N(0, 1) scores: variant 52 keeps the exponentials); with
    // per-token K scales version 2 with ping-pong (runs h200-gpu6-fp8pf1/2)
    const int v = variant == 0 ? (a->k_block_scale ? 67 : 4) : variant;
    if (v == 1) fa_wgmma_fp8<true><<<grid, NTHREADS, F8_SMEM, st>>>(mq, mk, mv, p);
    else if (v == 2) fa_wgmma_fp8<false><<<grid, NTHREADS, F8_SMEM, st>>>(mq, mk, mv, p);
    else if (fp8_v3_variant(v)) {  // version 3: 192-key tiles, 25 = ping-pong, 26 = 25 without, 27 = single P;
                                    // 28 = 25 on 128-key tiles; 29 = 27 + KEEP, 30 = 29 without
                                    // ping-pong, 31 = 29 on 128-key tiles (the causal default); 32 = 29 +
                                    // LATE (the default without a causal mask), 33 = 31 + LATE, 34 = 30 + LATE;
                                    // round 6: 35 = 31 + S2 (S double-buffered), 36 = 35 without ping-pong,
                                    // 37 = 32 + TAU48, 38 = 35 + TAU48; round 7: 39 = 35 with 4
                                    // stages, 40 = 35 with 5, 41 = 36 with 5, 42 = 31 with 5; round 8:
                                    // 43 / 44 / 45 = 32 + SW4 / SW38 / SW8, 46 / 47 / 48 = 31 + SW4 / SW38 / SW8;
                                    // timing probes 49 / 50 = 32 / 31 + DIAG_NOEXP; round 9: 52 / 53 = 32 / 31 +
                                    // OSTAGE (51, a persistent version 4, was slower and is gone: journal round 9);
                                    // round 11: 56 = one consumer warpgroup, two CTAs per SM (NCW = 1, no
                                    // ping-pong, 52's 192-key tiles with LATE and OSTAGE, 2 stages); timing probes
                                    // 59 / 60 = 52 / 56 + DIAG_NOLOAD; 63 / 65 = 52 / 56 + LOGP (P codes without
                                    // exponentials), 66 = 63 + LOGPX, 67 = 63 + LOGPF (the default; 57, 58, 61, 62
                                    // and 64 were slower and are gone: journal round 11)
        CUtensorMap mk64, mv64, mq64;  // the 64-key remainder of a tile: K rows, and V^T keys (64-byte swizzle);
                                       // a 64-row Q tile (NCW = 1; the last 64 rows of a 192-row one for NCW = 3)
        const cuuint32_t box_k64[3] = {128, 1, 64}, box_vt64[3] = {64, 128, 1};
        if (make_map_u8(&mk64, a->k, dk, sk, box_k64) ||
            make_map_u8(&mv64, a->vt, dv, sv, box_vt64, CU_TENSOR_MAP_SWIZZLE_64B) ||
            make_map_u8(&mq64, a->q, dq, sq, box_k64))
            return -1;
        auto kern = v == 25   ? fa_wgmma_fp8_v3<192, true, true>
                    : v == 26 ? fa_wgmma_fp8_v3<192, false, true>
                    : v == 27 ? fa_wgmma_fp8_v3<192, true, false>
                    : v == 28 ? fa_wgmma_fp8_v3<128, true, true>
                    : v == 29 ? fa_wgmma_fp8_v3<192, true, false, true>
                    : v == 30 ? fa_wgmma_fp8_v3<192, false, false, true>
                    : v == 31 ? fa_wgmma_fp8_v3<128, true, false, true>
                    : v == 32 ? fa_wgmma_fp8_v3<192, true, false, true, true>
                    : v == 33 ? fa_wgmma_fp8_v3<128, true, false, true, true>
                    : v == 34 ? fa_wgmma_fp8_v3<192, false, false, true, true>
                    : v == 35 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_S2>
                    : v == 36 ? fa_wgmma_fp8_v3<128, false, false, true, false, 2, F83M_S2>
                    : v == 37 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_TAU48>
                    : v == 38 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_S2 | F83M_TAU48>
                    : v == 39 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_S2 | F83M_ST4>
                    : v == 40 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_S2 | F83M_ST5>
                    : v == 41 ? fa_wgmma_fp8_v3<128, false, false, true, false, 2, F83M_S2 | F83M_ST5>
                    : v == 42 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_ST5>
                    : v == 43 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_SW4>
                    : v == 44 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_SW38>
                    : v == 45 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_SW8>
                    : v == 46 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_SW4>
                    : v == 47 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_SW38>
                    : v == 48 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_SW8>
                    : v == 49 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_DIAG_NOEXP>
                    : v == 50 ? fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_DIAG_NOEXP>
                    : v == 52 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_OSTAGE>
                    : v == 56 ? fa_wgmma_fp8_v3<192, false, false, true, true, 1, F83M_OSTAGE | F83M_ST2>
                    : v == 59 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_OSTAGE | F83M_DIAG_NOLOAD>
                    : v == 60 ? fa_wgmma_fp8_v3<192, false, false, true, true, 1,
                                                F83M_OSTAGE | F83M_ST2 | F83M_DIAG_NOLOAD>
                    : v == 63 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_OSTAGE | F83M_LOGP>
                    : v == 65 ? fa_wgmma_fp8_v3<192, false, false, true, true, 1, F83M_OSTAGE | F83M_ST2 | F83M_LOGP>
                    : v == 66 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_OSTAGE | F83M_LOGP | F83M_LOGPX>
                    : v == 67 ? fa_wgmma_fp8_v3<192, true, false, true, true, 2, F83M_OSTAGE | F83M_LOGP | F83M_LOGPF>
                              : fa_wgmma_fp8_v3<128, true, false, true, false, 2, F83M_OSTAGE>;
        const bool one_wg = v == 56 || v == 60 || v == 65;  // NCW = 1: 64 query rows and 256 threads per CTA
        const int smem = v == 63 || v == 66 || v == 67 ? f83_smem(192, 2, 3, F83M_LOGP)
                         : v == 65                     ? f83_smem(192, 1, 2, F83M_LOGP)
                         : v == 56 || v == 60          ? F83<192, 1, 2>::SMEM
                         : v == 39                     ? F83<128, 2, 4>::SMEM
                         : v >= 40 && v <= 42          ? F83<128, 2, 5>::SMEM
                         : v == 28 || v == 31 || v == 33 || v == 35 || v == 36 || v == 38 || (v >= 46 && v <= 53 && v != 49 && v != 52) ? F83<128>::SMEM
                                                                                                     : F83<192>::SMEM;
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        if (one_wg) grid.x = (a->max_seqlen_q + 63) / 64;
        kern<<<grid, one_wg ? 256 : NTHREADS, smem, st>>>(mq, mk, mv, mk64, mv64, mq64, p);
    } else if (v >= 7) {  // lab variants on version 2 with per-block K scales, ping-pong unless noted (see F8M_*)
        auto kern = v == 7    ? fa_wgmma_fp8_v2<true, true, false, F8M_POLY4>
                    : v == 8  ? fa_wgmma_fp8_v2<true, true, false, F8M_POLY2>
                    : v == 9  ? fa_wgmma_fp8_v2<true, true, false, F8M_LATEVOTE>
                    : v == 10 ? fa_wgmma_fp8_v2<true, true, true, F8M_POLY4>
                    : v == 11 ? fa_wgmma_fp8_v2<true, true, true, F8M_POLY2>
                    : v == 12 ? fa_wgmma_fp8_v2<true, true, true, F8M_SPEC>
                    : v == 13 ? fa_wgmma_fp8_v2<true, true, true, F8M_SPEC | F8M_POLY4>
                    : v == 14 ? fa_wgmma_fp8_v2<true, true, true, F8M_SPEC | F8M_POLY2>
                    : v == 15 ? fa_wgmma_fp8_v2<false, true, true, F8M_SPEC | F8M_POLY4>
                    : v == 16 ? fa_wgmma_fp8_v2<true, true, false, F8M_TAU28>
                    : v == 17 ? fa_wgmma_fp8_v2<true, true, true, F8M_SPEC | F8M_TAU28>
                    : v == 18 ? fa_wgmma_fp8_v2<true, true, true, F8M_TAU28>
                    : v == 20 ? fa_wgmma_fp8_v2<true, true, false, F8M_DIAG_NOEXP>
                    : v == 21 ? fa_wgmma_fp8_v2<true, true, false, F8M_DIAG_NOSOFTMAX>
                    : v == 22 ? fa_wgmma_fp8_v2<true, true, false, F8M_DIAG_NOLOAD>
                    : v == 23 ? fa_wgmma_fp8_v2<true, true, false, F8M_H2>
                              : fa_wgmma_fp8_v2<false, true, false, F8M_H2>;
        ASSAY_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, F8B_SMEM));
        kern<<<grid, NTHREADS, F8B_SMEM, st>>>(mq, mk, mv, p);
    } else {
        const bool pp = v == 4 || v == 6, tc = v >= 5;
        auto kern = a->k_block_scale ? (pp ? (tc ? fa_wgmma_fp8_v2<true, true, true> : fa_wgmma_fp8_v2<true, true, false>)
                                           : (tc ? fa_wgmma_fp8_v2<false, true, true> : fa_wgmma_fp8_v2<false, true, false>))
                                     : (pp ? (tc ? fa_wgmma_fp8_v2<true, false, true> : fa_wgmma_fp8_v2<true, false, false>)
                                           : (tc ? fa_wgmma_fp8_v2<false, false, true> : fa_wgmma_fp8_v2<false, false, false>));
        static bool configured2[2][2][2] = {};
        bool &cf = configured2[a->k_block_scale != nullptr][pp][tc];
        if (!cf) {
            ASSAY_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, F8B_SMEM));
            cf = true;
        }
        kern<<<grid, NTHREADS, F8B_SMEM, st>>>(mq, mk, mv, p);
    }
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

