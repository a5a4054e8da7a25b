/* test_cuda_pack.c — the host-side INT4 weight packings of the CUDA decode GEMMs (src/backend/cuda/cuda_pack.c and
 * the kernel lab's dev/cuda/cuda_pack_lab.c, plain C, no GPU needed) against the layouts their kernels read: every
 * code of random 4-bit weights is found again where the kernel's register recipe takes it. For
 * assay_cuda_int4_pack_i8 that recipe is the integer-mma dequantization (dev/cuda/gemm_decode_tma_lab.cu, int4
 * version 115): of word w of lane (g, t) in the block of 8-row tile nt and 128-column group gr, (w << 4) &
 * 0xF0F0F0F0 must hold 16 (q - 8) of columns 32t + 8w + 0..3 and w & 0xF0F0F0F0 the same of columns 32t + 8w +
 * 4..7, as signed bytes. On the GPU the same layouts are validated end to end by dev/cuda/kernel_check. */
#include <stdint.h>

#include "check.h"
#include "../../src/backend/cuda/cuda_pack.c"
#include "../../dev/cuda/cuda_pack_lab.c"

static uint32_t rng = 12345u;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int main(void) {
    enum { N = 24, K = 384 };
    static uint8_t q[N * K], packed[N * K / 2];
    for (int i = 0; i < N * K; ++i) q[i] = (uint8_t)(next_u32() & 15);

    /* assay_cuda_int4_pack: column offset o of word w at nibble (o >> 1) + 4 (o & 1) */
    assay_cuda_int4_pack(q, N, K, packed);
    int bad = 0;
    for (int nt = 0; nt < N / 8; ++nt)
        for (int gr = 0; gr < K / 128; ++gr)
            for (int lane = 0; lane < 32; ++lane)
                for (int w = 0; w < 4; ++w) {
                    const uint32_t word = get_le32(packed + ((size_t)nt * (K / 128) + gr) * 512 + lane * 16 + 4 * w);
                    const int g = lane >> 2, t = lane & 3;
                    for (int o = 0; o < 8; ++o) {
                        const int nib = (o >> 1) + 4 * (o & 1);
                        bad += (int)((word >> (4 * nib)) & 15) != q[(nt * 8 + g) * K + gr * 128 + 32 * t + 8 * w + o];
                    }
                }
    CHECK(bad == 0);

    /* assay_cuda_int4_pack_i8: the two A registers of the integer mma, 16 (q - 8) as signed bytes */
    assay_cuda_int4_pack_i8(q, N, K, packed);
    bad = 0;
    int seen[16] = {0};
    for (int nt = 0; nt < N / 8; ++nt)
        for (int gr = 0; gr < K / 128; ++gr)
            for (int lane = 0; lane < 32; ++lane)
                for (int w = 0; w < 4; ++w) {
                    const uint32_t word = get_le32(packed + ((size_t)nt * (K / 128) + gr) * 512 + lane * 16 + 4 * w);
                    const uint32_t lo = (word << 4) & 0xF0F0F0F0u, hi = word & 0xF0F0F0F0u;
                    const int g = lane >> 2, t = lane & 3;
                    for (int b = 0; b < 4; ++b) {
                        const int c = (nt * 8 + g) * K + gr * 128 + 32 * t + 8 * w;
                        const int8_t vlo = (int8_t)(uint8_t)(lo >> (8 * b)), vhi = (int8_t)(uint8_t)(hi >> (8 * b));
                        bad += vlo != 16 * (q[c + b] - 8);
                        bad += vhi != 16 * (q[c + 4 + b] - 8);
                        seen[q[c + b]]++;
                    }
                }
    CHECK(bad == 0);
    for (int v = 0; v < 16; ++v) CHECK(seen[v] > 0); /* every code, including 0 (-128) and 15 (112), was tested */

    /* assay_cuda_int4_pack_wi8 (stage blocks: one 16 KB run per 128-row tile and 256 columns, [16 n8 tiles][2
     * groups][512 bytes]): word w of lane (g, t) is k32 step w of the group; (w << 4) & 0xF0F0F0F0 holds 16 (q - 8)
     * of columns 32w + 4t + 0..3 and w & 0xF0F0F0F0 of columns 32w + 16 + 4t + 0..3 */
    enum { N2 = 128, K2 = 512 };
    static uint8_t q2[N2 * K2], packed2[N2 * K2 / 2];
    for (int i = 0; i < N2 * K2; ++i) q2[i] = (uint8_t)(next_u32() & 15);
    assay_cuda_int4_pack_wi8(q2, N2, K2, packed2);
    bad = 0;
    int seen2[16] = {0};
    for (int nt = 0; nt < N2 / 8; ++nt)
        for (int gr = 0; gr < K2 / 128; ++gr)
            for (int lane = 0; lane < 32; ++lane)
                for (int w = 0; w < 4; ++w) {
                    const size_t blk = ((((size_t)(nt / 16) * (K2 / 256) + gr / 2) * 16 + nt % 16) * 2 + gr % 2) * 512;
                    const uint32_t word = get_le32(packed2 + blk + lane * 16 + 4 * w);
                    const uint32_t lo = (word << 4) & 0xF0F0F0F0u, hi = word & 0xF0F0F0F0u;
                    const int g = lane >> 2, t = lane & 3;
                    for (int b = 0; b < 4; ++b) {
                        const int c = (nt * 8 + g) * K2 + gr * 128 + 32 * w + 4 * t + b;
                        bad += (int8_t)(uint8_t)(lo >> (8 * b)) != 16 * (q2[c] - 8);
                        bad += (int8_t)(uint8_t)(hi >> (8 * b)) != 16 * (q2[c + 16] - 8);
                        seen2[q2[c]]++;
                    }
                }
    CHECK(bad == 0);
    for (int v = 0; v < 16; ++v) CHECK(seen2[v] > 0);
    return check_finish("cuda_pack");
}
