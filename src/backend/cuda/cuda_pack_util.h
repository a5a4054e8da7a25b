/* Helpers of the host-side weight packings (cuda_pack.c and the kernel lab's dev/cuda/cuda_pack_lab.c). */
#ifndef ASSAY_CUDA_PACK_UTIL_H
#define ASSAY_CUDA_PACK_UTIL_H
#include <stddef.h>
#include <stdint.h>

/* the GPU reads the packed words as little-endian uint32 whatever the host's byte order */
static inline void put_le32(uint8_t *dst, uint32_t word) {
    dst[0] = (uint8_t)word;
    dst[1] = (uint8_t)(word >> 8);
    dst[2] = (uint8_t)(word >> 16);
    dst[3] = (uint8_t)(word >> 24);
}

/* The blocks of the INT4 kernels' lane-order layouts: for each 8-row tile nt and 128-column group gr, 512 bytes at
 * (nt * (k/128) + gr) * 512, in which lane (g, t) = 4g + t owns bytes [16*lane, 16*lane + 16): row nt*8 + g, columns
 * gr*128 + 32t + [0, 32), word w of those 16 bytes holding columns 8w..8w+7, arranged by word_of (given the 8
 * codes). */
static inline void pack_lane_blocks(const uint8_t *q, int32_t n, int32_t k, uint8_t *out,
                                    uint32_t (*word_of)(const uint8_t *)) {
    int32_t ngroup = k / 128;
    for (int32_t nt = 0; nt < n / 8; ++nt)
        for (int32_t gr = 0; gr < ngroup; ++gr) {
            uint8_t *blk = out + ((size_t)nt * ngroup + gr) * 512;
            for (int lane = 0; lane < 32; ++lane) {
                int g = lane >> 2, t = lane & 3;
                const uint8_t *row = q + (size_t)(nt * 8 + g) * k + gr * 128 + 32 * t;
                for (int w = 0; w < 4; ++w) put_le32(blk + lane * 16 + 4 * w, word_of(row + 8 * w));
            }
        }
}

/* assay_cuda_int4_pack (see gemm_decode.cu): column offset o sits in nibble (o >> 1) + 4*(o & 1), so that the low
 * nibbles of each 16-bit half are one mma register pair. */
static inline uint32_t word_int4(const uint8_t *cols) {
    uint32_t word = 0;
    for (int o = 0; o < 8; ++o) word |= (uint32_t)(cols[o] & 15) << (4 * ((o >> 1) + 4 * (o & 1)));
    return word;
}

#endif
