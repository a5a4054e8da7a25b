// mma.sync issue probe: does the tensor pipe's mma.sync m16n8k16 (f16 inputs, f32 or f16 accumulators) overlap
// with ALU instructions of the same warp and of the other warps of its scheduler?
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Idev/cuda -Isrc/backend/cuda \
//        -o build-dev/mma_probe dev/cuda/mma_probe.cu
//   build-dev/mma_probe [iterations]
//
// Each warp runs a loop of 4 mma.sync (4 independent accumulator chains, the int4 decode GEMM's m16 shape: two row
// tiles x two token tiles) with k ALU instructions after each mma (8 independent 32-bit chains, so their latency is
// hidden), all as inline asm so that the count is the one asked for (ptxas may still reorder). The sweep uses LOP3;
// then each instruction of the Op list alone and at 4 per mma (the int4 dequantization's, the FP8 attention
// softmax's and the FP8-weight dequantization's instructions). One CTA of W warps per SM (W / 4 warps per
// scheduler), every SM busy. The clock64 span of each warp's loop gives cycles per loop iteration; printed: SM
// cycles per mma per scheduler (W / 4 warps x 4 mma per iteration) and the ALU issue slots per scheduler per
// cycle. If the two pipes overlap, adding ALU work leaves the time flat until the issue slots fill; if the mma
// holds its scheduler, every ALU instruction adds to it. Why (the lab journal, decode GEMMs round 17): the int4
// decode GEMM at m16 runs ~32 mma.sync and ~250 other instructions per warp-stage at two warps per scheduler, and
// its time is close to the sum of the two, not the larger. Round 18 added the m16n8k32 byte forms (s8 x s8, s8 x u8,
// int32 accumulators: does the integer mma cost what the f16 one does for twice the K?), e4m3 (emulated on sm_90)
// and I2F beside the mma.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>

#include "common.cuh"  // mma_f16_16816 (f32 accumulators), mma_f16_16816_acc16
#include "lab_util.h"  // CK

// The ALU instructions probed (OP), each as volatile asm on 32-bit registers:
enum Op { LOP3_RRR, LOP3_RII, SHF_R, PRMT_RR, IADD3_RRR, IMAD_RRR, IMAD_HI, FFMA_RRR, HADD2_RR, HFMA2_RRR, FMNMX_RR,
          FSEL_RR, EX2, CVT_E4M3X2, CVT_F16X2, CVT_E4M3X2_TO_F16X2, HADD2_X2, HFMA2_X2, HADD2_HFMA2, I2F_R, OPS };
static const char *op_name[OPS] = {
    "lop3 (3 registers)", "lop3 (1 register, 2 immediates)", "shf.r (funnel, 2 registers)", "prmt (2 registers)",
    "iadd3 (3 registers)", "imad (3 registers)", "imad.hi (mul.hi.u32 by 2^24)", "ffma (3 registers)",
    "hadd2 (2 registers)", "hfma2 (3 registers)", "fmnmx (max.f32, 2 registers)", "fsel (selp.f32 on a compare)",
    "mufu.ex2 (ex2.approx.ftz.f32)", "2 x f2fp e4m3 pack into one register (counts as one)",
    "f2fp f16 pack (cvt.rn.f16x2.f32)", "e4m3x2 -> f16x2 unpack (cvt.rn.f16x2.e4m3x2)",
    "2 x hadd2 (counts as one)", "2 x hfma2 (counts as one)", "hadd2 + hfma2 (counts as one)",
    "i2f (cvt.rn.f32.s32)"};

template <int OP>
__device__ __forceinline__ uint32_t alu(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r;
    if (OP == LOP3_RRR) asm volatile("lop3.b32 %0, %1, %2, %3, 0x96;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == LOP3_RII) asm volatile("lop3.b32 %0, %1, 0x000F000F, 0x64006400, 0xEA;\n" : "=r"(r) : "r"(a));
    if (OP == SHF_R) asm volatile("shf.r.clamp.b32 %0, %1, %2, 8;\n" : "=r"(r) : "r"(a), "r"(b));
    if (OP == PRMT_RR) asm volatile("prmt.b32 %0, %1, %2, 0x4240;\n" : "=r"(r) : "r"(a), "r"(b));
    if (OP == IADD3_RRR)
        asm volatile("add.u32 %0, %1, %2;\n\tadd.u32 %0, %0, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == IMAD_RRR) asm volatile("mad.lo.u32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == IMAD_HI) asm volatile("mul.hi.u32 %0, %1, 16777216;\n" : "=r"(r) : "r"(a));
    if (OP == FFMA_RRR) asm volatile("fma.rn.f32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == HADD2_RR) asm volatile("add.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    if (OP == HFMA2_RRR) asm volatile("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == FMNMX_RR) asm volatile("max.f32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    if (OP == FSEL_RR)
        asm volatile("{\n.reg .pred q;\nsetp.lt.f32 q, %1, %3;\nselp.f32 %0, %1, %2, q;\n}\n"
                     : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == EX2) asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=r"(r) : "r"(a));
    if (OP == CVT_E4M3X2)
        asm volatile("{\n.reg .b16 h0, h1;\ncvt.rn.satfinite.e4m3x2.f32 h0, %1, %2;\n"
                     "cvt.rn.satfinite.e4m3x2.f32 h1, %2, %3;\n"
                     "mov.b32 %0, {h0, h1};\n}\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == CVT_F16X2) asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    // pairs of dependent f16x2 instructions (the int4 dequantization's mix: v104 32 + 32, v114 64 HADD2 + 0)
    if (OP == HADD2_X2)
        asm volatile("add.rn.f16x2 %0, %1, %2;\n\tadd.rn.f16x2 %0, %0, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == HFMA2_X2)
        asm volatile("fma.rn.f16x2 %0, %1, %2, %3;\n\tfma.rn.f16x2 %0, %0, %2, %3;\n"
                     : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == HADD2_HFMA2)
        asm volatile("add.rn.f16x2 %0, %1, %2;\n\tfma.rn.f16x2 %0, %0, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    if (OP == CVT_E4M3X2_TO_F16X2)  // (the e4m3 pair taken from the low half of a; the result feeds the chain)
        asm volatile("{\n.reg .b16 h;\nmov.b32 {h, _}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;\n}\n" : "=r"(r) : "r"(a));
    if (OP == I2F_R) asm volatile("cvt.rn.f32.s32 %0, %1;\n" : "=r"(r) : "r"(a));
    return r;
}

// The mma.sync forms probed: m16n8k16 f16 with f32 / f16 accumulators, m16n8k32 on bytes (s8 x s8, s8 x u8; int32
// accumulators) and on e4m3 (f32 accumulators): twice the K per instruction of the f16 form.
enum Kind { K_F16, K_F16_ACC16, K_S8, K_S8U8, K_E4M3, KINDS };
static const char *kind_name[KINDS] = {"f16 m16n8k16 acc f32", "f16 m16n8k16 acc f16", "s8.s8 m16n8k32 acc s32",
                                       "s8.u8 m16n8k32 acc s32", "e4m3 m16n8k32 acc f32"};
__device__ __forceinline__ void mma_e4m3_16832(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// MMA: mma.sync per iteration (0 = the ALU work alone); ALU: instructions OP after each of them (or per iteration
// when MMA = 0)
template <int MMA, int ALU, int KIND, int OP = LOP3_RRR>
__global__ void probe(unsigned long long *cycles, uint32_t *sink, int iters, uint32_t seed) {
    const uint32_t lane = threadIdx.x & 31;
    uint32_t a[4] = {seed ^ lane, seed + lane, seed * 3u + lane, seed * 5u ^ lane};
    const uint32_t b0 = seed * 7u + lane, b1 = seed * 11u ^ lane;
    float acc[4][4] = {};
    uint32_t acc16[4][2] = {};
    int32_t iacc[4][4] = {};
    uint32_t r[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = seed * (i + 13u) + lane;
    __syncthreads();
    const unsigned long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < (MMA > 0 ? MMA : 1); ++c) {
            if (MMA > 0) {
                if (KIND == K_F16_ACC16) mma_f16_16816_acc16(acc16[c & 3], a, b0, b1);
                else if (KIND == K_S8) mma_s8s8_16832(iacc[c & 3], a, b0, b1);
                else if (KIND == K_S8U8) mma_s8u8_16832(iacc[c & 3], a, b0, b1);
                else if (KIND == K_E4M3) mma_e4m3_16832(acc[c & 3], a, b0, b1);
                else mma_f16_16816(acc[c & 3], a, b0, b1);
            }
#pragma unroll
            for (int i = 0; i < ALU; ++i) r[i & 7] = alu<OP>(r[i & 7], r[(i + 1) & 7], r[(i + 3) & 7]);
        }
    }
    const unsigned long long t1 = clock64();
    __syncthreads();
    uint32_t s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s ^= r[i];
#pragma unroll
    for (int c = 0; c < 4; ++c)
        s ^= __float_as_uint(acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3]) ^ acc16[c][0] ^ acc16[c][1] ^
             (uint32_t)(iacc[c][0] + iacc[c][1] + iacc[c][2] + iacc[c][3]);
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (lane == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
}

struct Row { int mma, alu, warps, op, kind; double cyc_iter, cyc_per_mma_sched, alu_per_cyc_sched; };

template <int MMA, int ALU, int KIND, int OP = LOP3_RRR>
Row run(int warps, int sms, int iters) {
    unsigned long long *dc;
    uint32_t *ds;
    const int nw = sms * warps;
    CK(cudaMalloc(&dc, nw * sizeof(unsigned long long)));
    CK(cudaMalloc(&ds, nw * 32 * sizeof(uint32_t)));
    probe<MMA, ALU, KIND, OP><<<sms, warps * 32>>>(dc, ds, iters / 10, 12345u);  // warm-up (clocks up)
    CK(cudaGetLastError());
    probe<MMA, ALU, KIND, OP><<<sms, warps * 32>>>(dc, ds, iters, 12345u);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<unsigned long long> c(nw);
    CK(cudaMemcpy(c.data(), dc, nw * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::sort(c.begin(), c.end());
    const double med = (double)c[nw / 2] / iters;  // median warp's cycles per iteration
    CK(cudaFree(dc));
    CK(cudaFree(ds));
    Row r;
    r.mma = MMA; r.alu = ALU; r.warps = warps; r.op = OP; r.kind = KIND; r.cyc_iter = med;
    const double per_sched = warps / 4.0;  // warps per scheduler (warp i on scheduler i % 4)
    r.cyc_per_mma_sched = MMA ? med / (per_sched * MMA) : 0.0;
    r.alu_per_cyc_sched = per_sched * (MMA > 0 ? MMA : 1) * ALU / med;
    return r;
}

static void print(const Row &r) {
    printf("PROBE  mma %d  alu/mma %2d  warps/SM %2d  mma %s  cycles/iter %8.2f  cycles per mma per scheduler %6.2f  "
           "ALU issue per scheduler-cycle %.3f  op %s\n",
           r.mma, r.alu, r.warps, kind_name[r.kind], r.cyc_iter, r.cyc_per_mma_sched, r.alu_per_cyc_sched,
           op_name[r.op]);
}

template <int ALU>
void sweep(int sms, int iters) {
    for (int w : {4, 8, 16}) {
        print(run<4, ALU, K_F16>(w, sms, iters));
        print(run<0, ALU * 4, K_F16>(w, sms, iters));  // the same ALU work without the mma
    }
}

template <int OP>
void op_rows(int sms, int iters) {
    print(run<0, 32, K_F16, OP>(16, sms, iters));
    print(run<4, 4, K_F16, OP>(8, sms, iters));
}

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 20000;
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("mma_probe: %s, %d SMs, %d iterations of 4 mma.sync m16n8k16 (f16 x f16) per warp\n", prop.name, sms, iters);
    for (int w : {4, 8, 16}) print(run<4, 0, K_F16>(w, sms, iters));
    for (int w : {4, 8, 16}) print(run<4, 0, K_F16_ACC16>(w, sms, iters));
    // the byte and e4m3 forms alone and beside 2 / 4 / 8 LOP3 (round 18: int4 weights as bytes for an integer mma)
    for (int w : {4, 8, 16}) print(run<4, 0, K_S8>(w, sms, iters));
    for (int w : {4, 8, 16}) print(run<4, 0, K_S8U8>(w, sms, iters));
    for (int w : {4, 8, 16}) print(run<4, 0, K_E4M3>(w, sms, iters));
    print(run<4, 2, K_S8>(8, sms, iters));
    print(run<4, 4, K_S8>(8, sms, iters));
    print(run<4, 8, K_S8>(8, sms, iters));
    print(run<4, 4, K_S8, FFMA_RRR>(8, sms, iters));
    print(run<4, 4, K_S8, I2F_R>(8, sms, iters));
    print(run<4, 4, K_E4M3>(8, sms, iters));
    sweep<2>(sms, iters);
    sweep<4>(sms, iters);
    sweep<6>(sms, iters);
    sweep<8>(sms, iters);
    sweep<12>(sms, iters);
    sweep<16>(sms, iters);
    for (int w : {4, 8, 16}) print(run<4, 8, K_F16_ACC16>(w, sms, iters));
    // each instruction alone (the issue rate of its pipe) and 4 per mma at two warps per scheduler
    op_rows<LOP3_RRR>(sms, iters);
    op_rows<LOP3_RII>(sms, iters);
    op_rows<SHF_R>(sms, iters);
    op_rows<PRMT_RR>(sms, iters);
    op_rows<IADD3_RRR>(sms, iters);
    op_rows<IMAD_RRR>(sms, iters);
    op_rows<IMAD_HI>(sms, iters);
    op_rows<FFMA_RRR>(sms, iters);
    op_rows<HADD2_RR>(sms, iters);
    op_rows<HFMA2_RRR>(sms, iters);
    op_rows<FMNMX_RR>(sms, iters);
    op_rows<FSEL_RR>(sms, iters);
    op_rows<EX2>(sms, iters);
    op_rows<CVT_E4M3X2>(sms, iters);
    op_rows<CVT_F16X2>(sms, iters);
    op_rows<CVT_E4M3X2_TO_F16X2>(sms, iters);
    op_rows<HADD2_X2>(sms, iters);
    op_rows<HFMA2_X2>(sms, iters);
    op_rows<HADD2_HFMA2>(sms, iters);
    op_rows<I2F_R>(sms, iters);
    return 0;
}
