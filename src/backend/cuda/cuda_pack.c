/* Host-side weight packing for the CUDA decode GEMMs (plain C11, no CUDA runtime needed). */
#include "assay/cuda_kernels.h"
#include "cuda_pack_util.h"

void assay_cuda_int4_pack(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    pack_lane_blocks(q, n, k, out, word_int4);
}

/* Layout (gemm_decode_tma.cu, gemm_fp8_ring): for each 128-row tile nb, each 64-column chunk kc and each of its 16 8-row
 * tiles nt, a 512-byte block at ((nb * (k/64) + kc) * 16 + nt) * 512. Lane (g, t) = 4g + t owns bytes
 * [16*lane, 16*lane + 16): row nb*128 + nt*8 + g, columns kc*64 + 16t + [0, 16), in order. One pipeline stage
 * of a CTA (4 chunks of 64 columns) is then one contiguous 32 KB run. */
void assay_cuda_fp8w_pack(const uint8_t *w, int32_t n, int32_t k, uint8_t *out) {
    int32_t nkc = k / 64;
    for (int32_t nb = 0; nb < n / 128; ++nb)
        for (int32_t kc = 0; kc < nkc; ++kc)
            for (int nt = 0; nt < 16; ++nt) {
                uint8_t *blk = out + (((size_t)nb * nkc + kc) * 16 + nt) * 512;
                for (int lane = 0; lane < 32; ++lane) {
                    int g = lane >> 2, t = lane & 3;
                    const uint8_t *src = w + (size_t)(nb * 128 + nt * 8 + g) * k + kc * 64 + 16 * t;
                    for (int i = 0; i < 16; ++i) blk[lane * 16 + i] = src[i];
                }
            }
}

/* Layout (gemm_decode_w8a8.cu, the wgmma form): the shared-memory image that wgmma reads as its A operand
 * (K-major, 128-byte swizzle), stored in the order the kernel streams it. For each 128-row tile nb and each
 * 256-column stage st, 32 KB at (nb * (k/256) + st) * 32768: two 16 KB halves kb (columns st*256 + kb*128 +
 * [0, 128)), each 128 rows of 128 bytes, the 16-byte piece c of row r stored at piece position c ^ (r & 7). The
 * swizzle repeats every 8 rows (1024 bytes), so a 1024-byte aligned copy of the run is the tile wgmma expects. */
void assay_cuda_fp8w_pack_sw128(const uint8_t *w, int32_t n, int32_t k, uint8_t *out) {
    int32_t nst = k / 256;
    for (int32_t nb = 0; nb < n / 128; ++nb)
        for (int32_t st = 0; st < nst; ++st)
            for (int kb = 0; kb < 2; ++kb)
                for (int r = 0; r < 128; ++r) {
                    uint8_t *row = out + ((size_t)nb * nst + st) * 32768 + kb * 16384 + r * 128;
                    const uint8_t *src = w + (size_t)(nb * 128 + r) * k + st * 256 + kb * 128;
                    for (int c = 0; c < 8; ++c)
                        for (int i = 0; i < 16; ++i) row[((c ^ (r & 7)) << 4) + i] = src[c * 16 + i];
                }
}
