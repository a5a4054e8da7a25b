/* The kernel lab's weight packings (the layouts of the lab versions of the decode GEMMs; plain C11). */
#include "../../src/backend/cuda/cuda_pack_util.h"
#include "assay/cuda_kernels.h"
#include "cuda_lab.h"

/* The blocks of assay_cuda_int4_pack_st and _wn in the stage order below; word w of lane (g, t) of the block of 8-row tile
 * nt and group gr from word_of(the group's 128 codes of row nt*8 + g, t, w). */
static void pack_stage_blocks(const uint8_t *q, int32_t n, int32_t k, uint8_t *out,
                              uint32_t (*word_of)(const uint8_t *, int, int)) {
    int32_t ngroup = k / 128;
    for (int32_t nt = 0; nt < n / 8; ++nt)
        for (int32_t gr = 0; gr < ngroup; ++gr) {
            uint8_t *blk = out + ((((size_t)(nt / 16) * (ngroup / 2) + gr / 2) * 16 + nt % 16) * 2 + gr % 2) * 512;
            for (int lane = 0; lane < 32; ++lane) {
                const uint8_t *row = q + (size_t)(nt * 8 + (lane >> 2)) * k + gr * 128;
                for (int w = 0; w < 4; ++w) put_le32(blk + lane * 16 + 4 * w, word_of(row, lane & 3, w));
            }
        }
}

/* Layout (gemm_decode_tma_lab.cu, lab versions 95, 97, 98): the 512-byte blocks of assay_cuda_int4_pack in the order one
 * CTA of 128 rows streams them, so that a 256-column stage is one contiguous 16 KB run (one bulk copy): block
 * (8-row tile nt, group gr) of 128-row tile nb = nt / 16 sits at (((nb * (k/256) + gr / 2) * 16 + nt % 16) * 2 +
 * gr % 2) * 512. Inside a block the columns of a lane are permuted: word w of lane (g, t) holds columns
 * 64 (w >> 1) + 16 t + 8 (w & 1) + [0, 8) of the group (nibble order as above) instead of 32 t + 8 w + [0, 8).
 * That is the order in which lane t reads its four 16-byte X chunks from an unswizzled X row (pitch 528 bytes)
 * without bank conflicts: at chunk step w the four lanes t of a row read chunks 2t + (w & 1) of a 64-column half,
 * the next row (16 bytes further on the banks) the other parity. */
static uint32_t word_st(const uint8_t *row, int t, int w) { return word_int4(row + 64 * (w >> 1) + 16 * t + 8 * (w & 1)); }

void assay_cuda_int4_pack_st(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    pack_stage_blocks(q, n, k, out, word_st);
}

/* Layout (gemm_decode_tma_lab.cu, lab version 134 (113 in round 17): wgmma with the dequantized weights as the register A operand and X
 * read by the tensor cores in its natural column order): the stage-by-stage block order of assay_cuda_int4_pack_st
 * (one 16 KB run per 128-row tile and 256 columns: blocks [16 n8 tiles][2 groups][512 bytes]), but inside a block
 * nibble p of word w of lane (g, t) holds row nt*8 + g, column gr*128 + 32w + 16((p >> 1) & 1) + 8(p & 1) + 2t +
 * (p >> 2). Word w then serves k16 steps 2w and 2w + 1: for step 2w + s the nibbles (2s, 2s + 4), at bits 8s and
 * 8s + 16, are columns (2t, 2t + 1) of the step and (2s + 1, 2s + 5) columns (2t + 8, 2t + 9): the A fragment
 * registers of the mma.sync / wgmma m16 x k16 layout, each one (word >> 8s) & mask away. */
static uint32_t word_wn(const uint8_t *row, int t, int w) {
    uint32_t word = 0;
    for (int p = 0; p < 8; ++p)
        word |= (uint32_t)(row[32 * w + 16 * ((p >> 1) & 1) + 8 * (p & 1) + 2 * t + (p >> 2)] & 15) << (4 * p);
    return word;
}

void assay_cuda_int4_pack_wn(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    pack_stage_blocks(q, n, k, out, word_wn);
}

/* Layout (gemm_decode_tma_lab.cu, lab version 160: the integer wgmma m64nNk32 s8 with the weights as the register A
 * operand): the stage-by-stage block order of assay_cuda_int4_pack_wn, but word w of lane (g, t) serves k32 step w
 * of the group, and its byte b holds in its low nibble the two's-complement nibble of q - 8 of column 32w + 4t + b
 * and in its high nibble that of column 32w + 16 + 4t + b. So (word << 4) & 0xF0F0F0F0 and word & 0xF0F0F0F0 are
 * 16 (q - 8) as signed bytes of columns 4t + [0, 4) and 16 + 4t + [0, 4) of the step: A registers 0 and 2 (rows g)
 * or 1 and 3 (rows g + 8) of the s8 wgmma fragment, 3 instructions per 8 weights. */
static uint32_t word_wi8(const uint8_t *row, int t, int w) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
        word |= (uint32_t)(((row[32 * w + 4 * t + b] & 15) - 8) & 15) << (8 * b);
        word |= (uint32_t)(((row[32 * w + 16 + 4 * t + b] & 15) - 8) & 15) << (8 * b + 4);
    }
    return word;
}

void assay_cuda_int4_pack_wi8(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    pack_stage_blocks(q, n, k, out, word_wi8);
}

/* Layout (gemm_decode_tma_lab.cu, v26): for each 16-row tile rt and 128-column group gr, 1024 bytes at
 * (rt * (k/128) + gr) * 1024: two halves of 512 bytes (k16 steps 0-3 and 4-7 of the group), in which lane
 * (g, t) = 4g + t owns bytes [16*lane, 16*lane + 16), word j being step q = 4 * half + j. The word holds the
 * lane's wgmma A fragment of that step: register i = 0..3 is (row g, columns 2t, 2t+1), (row g + 8, the same),
 * (row g, columns 2t + 8, 2t + 9), (row g + 8, the same), its first value in nibble i and its second in nibble
 * i + 4 (so (word >> 4i) holds the pair at bits 0-3 and 16-19). Columns are relative to gr*128 + 16q. */
void assay_cuda_int4_pack_wg(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    int32_t ngroup = k / 128;
    for (int32_t rt = 0; rt < n / 16; ++rt)
        for (int32_t gr = 0; gr < ngroup; ++gr) {
            uint8_t *blk = out + ((size_t)rt * ngroup + gr) * 1024;
            for (int step = 0; step < 8; ++step)
                for (int lane = 0; lane < 32; ++lane) {
                    int g = lane >> 2, t = lane & 3;
                    uint32_t word = 0;
                    for (int i = 0; i < 4; ++i) {
                        size_t row = (size_t)rt * 16 + g + 8 * (i & 1);
                        size_t col = (size_t)gr * 128 + 16 * step + 2 * t + 8 * (i >> 1);
                        word |= (uint32_t)(q[row * k + col] & 15) << (4 * i);
                        word |= (uint32_t)(q[row * k + col + 1] & 15) << (4 * (i + 4));
                    }
                    put_le32(blk + (step >> 2) * 512 + lane * 16 + 4 * (step & 3), word);
                }
        }
}

/* Layout (gemm_decode_tma_lab.cu, v30 / v32 / v33): the blocks of assay_cuda_int4_pack (512 bytes at
 * (nt * (k/128) + gr) * 512, 16 bytes per lane), with the nibbles of each pair of 8-row tiles (2 rt, 2 rt + 1)
 * regrouped so that one 32-bit word holds the whole mma.sync A fragment (16 rows x 16 K) of one k16 step, in the
 * K order of the default kernel's X registers (lane t owns physical columns 32t .. 32t + 31 of the group).
 * Word j of lane (g, t) in tile 2 rt + h is step q = 4h + j = 2w + s; its register i = 0..3 is row
 * rt*16 + g + 8 * (i & 1), physical columns c, c + 1 with c = gr*128 + 32t + 8w + 4s + 2 * (i >> 1); the value of
 * column c sits in nibble i and that of c + 1 in nibble i + 4. So (word & 0x000F000F) and (word & 0x00F000F0)
 * are registers 0 and 1 as f16 mantissa bits (1024 + q and 1024 + 16 q after OR-ing 0x6400), and word >> 8
 * gives registers 2 and 3 the same way. */
void assay_cuda_int4_pack_wa(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    int32_t ngroup = k / 128;
    for (int32_t rt = 0; rt < n / 16; ++rt)
        for (int32_t gr = 0; gr < ngroup; ++gr)
            for (int h = 0; h < 2; ++h) {
                uint8_t *blk = out + ((size_t)(2 * rt + h) * ngroup + gr) * 512;
                for (int lane = 0; lane < 32; ++lane) {
                    int g = lane >> 2, t = lane & 3;
                    for (int j = 0; j < 4; ++j) {
                        int step = 4 * h + j, w = step >> 1, s = step & 1;
                        uint32_t word = 0;
                        for (int i = 0; i < 4; ++i) {
                            size_t row = (size_t)rt * 16 + g + 8 * (i & 1);
                            size_t col = (size_t)gr * 128 + 32 * t + 8 * w + 4 * s + 2 * (i >> 1);
                            word |= (uint32_t)(q[row * k + col] & 15) << (4 * i);
                            word |= (uint32_t)(q[row * k + col + 1] & 15) << (4 * (i + 4));
                        }
                        put_le32(blk + lane * 16 + 4 * j, word);
                    }
                }
            }
}

/* Layout for the integer-mma INT4 GEMM (gemm_decode_tma_lab.cu, lab versions 115-120): the blocks of
 * assay_cuda_int4_pack (pack_lane_blocks), but each code is stored as the two's-complement nibble of q - 8 and column
 * 8w + i sits in byte i & 3 of word w, low nibble for i < 4, high nibble for i >= 4. So word & 0xF0F0F0F0 holds
 * 16 (q - 8) of columns 4..7 as signed bytes and (word << 4) & 0xF0F0F0F0 the same of columns 0..3: the two A
 * registers (k 16 + 4t.. and 4t..) of an m16n8k32 integer mma, in 3 instructions per 8 weights. */
static uint32_t word_i8(const uint8_t *cols) {
    uint32_t word = 0;
    for (int i = 0; i < 8; ++i) word |= (uint32_t)(((cols[i] & 15) - 8) & 15) << (8 * (i & 3) + 4 * (i >> 2));
    return word;
}

void assay_cuda_int4_pack_i8(const uint8_t *q, int32_t n, int32_t k, uint8_t *out) {
    pack_lane_blocks(q, n, k, out, word_i8);
}
