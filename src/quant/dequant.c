/* dequant.c — reference dequantizers, one per block type, in one table indexed by assay_type.
 * Written from the block layouts (quant_blocks.h); plain C, no SIMD: this is what kernels are checked against. */
#include "assay/dequant.h"

#include "quant/quant_blocks.h"

static void dq_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

static void dq_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = assay_half_to_float(s[i]);
}

static void dq_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = assay_bf16_to_float(s[i]);
}

static void dq_q4_0(const void *src, float *dst, int64_t n) {
    const assay_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK; i++, dst += ASSAY_QK) {
        float d = assay_half_to_float(b[i].d);
        for (int j = 0; j < 16; j++) { /* low nibbles are elements 0..15, high nibbles 16..31 */
            dst[j] = d * ((b[i].qs[j] & 0xf) - 8);
            dst[j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void dq_q4_1(const void *src, float *dst, int64_t n) {
    const assay_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK; i++, dst += ASSAY_QK) {
        float d = assay_half_to_float(b[i].d), m = assay_half_to_float(b[i].m);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (b[i].qs[j] & 0xf) + m;
            dst[j + 16] = d * (b[i].qs[j] >> 4) + m;
        }
    }
}

static void dq_q5_0(const void *src, float *dst, int64_t n) {
    const assay_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK; i++, dst += ASSAY_QK) {
        float d = assay_half_to_float(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4); /* bit j is the 5th bit of element j */
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            dst[j] = d * (((b[i].qs[j] & 0xf) | (h0 << 4)) - 16);
            dst[j + 16] = d * (((b[i].qs[j] >> 4) | (h1 << 4)) - 16);
        }
    }
}

static void dq_q5_1(const void *src, float *dst, int64_t n) {
    const assay_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK; i++, dst += ASSAY_QK) {
        float d = assay_half_to_float(b[i].d), m = assay_half_to_float(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            dst[j] = d * ((b[i].qs[j] & 0xf) | (h0 << 4)) + m;
            dst[j + 16] = d * ((b[i].qs[j] >> 4) | (h1 << 4)) + m;
        }
    }
}

static void dq_q8_0(const void *src, float *dst, int64_t n) {
    const assay_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK; i++, dst += ASSAY_QK) {
        float d = assay_half_to_float(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = d * b[i].qs[j];
    }
}

static void dq_q8_1(const void *src, float *dst, int64_t n) {
    const assay_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK; i++, dst += ASSAY_QK) {
        float d = assay_half_to_float(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = d * b[i].qs[j];
    }
}

/* Q2_K: 16 sub-blocks of 16; each scale byte holds a 4-bit scale (low) and 4-bit min (high).
 * Element order: for each half (128), 4 shifts x 2 groups of 16 drawn from 32 bytes of qs. */
static void dq_q2_K(const void *src, float *dst, int64_t n) {
    const assay_block_q2_K *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK_K; i++) {
        float d = assay_half_to_float(b[i].d), dmin = assay_half_to_float(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int g = 0; g < 2; g++) {
                    uint8_t sc = b[i].scales[is++];
                    float dl = d * (sc & 0xf), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * ((q[g * 16 + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* The 12 scale bytes of Q3_K hold 16 signed 6-bit scales (offset 32): low 4 bits in bytes 0..7, high 2 bits in 8..11. */
static void q3_K_scales(const uint8_t *s, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
        int hi = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

static void dq_q3_K(const void *src, float *dst, int64_t n) {
    const assay_block_q3_K *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK_K; i++) {
        float d = assay_half_to_float(b[i].d);
        int8_t sc[16];
        q3_K_scales(b[i].scales, sc);
        const uint8_t *q = b[i].qs, *hm = b[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int g = 0; g < 2; g++) {
                    float dl = d * sc[is++];
                    for (int l = 0; l < 16; l++) {
                        int k = g * 16 + l;
                        /* a clear high bit means subtract 4: values -4..3 */
                        *dst++ = dl * ((int)((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

/* Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scale and min packed into 12 bytes. */
static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void dq_q4_K(const void *src, float *dst, int64_t n) {
    const assay_block_q4_K *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK_K; i++) {
        float d = assay_half_to_float(b[i].d), dmin = assay_half_to_float(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < 8; j += 2, q += 32) { /* 32 bytes: low nibbles sub-block j, high nibbles j+1 */
            uint8_t s0, m0, s1, m1;
            k4_scale_min(j, b[i].scales, &s0, &m0);
            k4_scale_min(j + 1, b[i].scales, &s1, &m1);
            for (int l = 0; l < 32; l++) *dst++ = d * s0 * (q[l] & 0xf) - dmin * m0;
            for (int l = 0; l < 32; l++) *dst++ = d * s1 * (q[l] >> 4) - dmin * m1;
        }
    }
}

static void dq_q5_K(const void *src, float *dst, int64_t n) {
    const assay_block_q5_K *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK_K; i++) {
        float d = assay_half_to_float(b[i].d), dmin = assay_half_to_float(b[i].dmin);
        const uint8_t *q = b[i].qs, *qh = b[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, q += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t s0, m0, s1, m1;
            k4_scale_min(j, b[i].scales, &s0, &m0);
            k4_scale_min(j + 1, b[i].scales, &s1, &m1);
            for (int l = 0; l < 32; l++) *dst++ = d * s0 * ((q[l] & 0xf) + ((qh[l] & u1) ? 16 : 0)) - dmin * m0;
            for (int l = 0; l < 32; l++) *dst++ = d * s1 * ((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - dmin * m1;
        }
    }
}

static void dq_q6_K(const void *src, float *dst, int64_t n) {
    const assay_block_q6_K *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK_K; i++) {
        float d = assay_half_to_float(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * sc[is] * q1;
                dst[l + 32] = d * sc[is + 2] * q2;
                dst[l + 64] = d * sc[is + 4] * q3;
                dst[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

static void dq_q8_K(const void *src, float *dst, int64_t n) {
    const assay_block_q8_K *b = src;
    for (int64_t i = 0; i < n / ASSAY_QK_K; i++)
        for (int j = 0; j < ASSAY_QK_K; j++) *dst++ = b[i].d * b[i].qs[j];
}

/* Packed group int4: d * (q - z) in f32, the very expression the GPTQ / AWQ f32 unpackers (int_quant.c) evaluate, so a
 * repacked weight reads back bit for bit. Blocks of g elements: 4 header bytes, then 32-element sub-blocks. */
static void dq_q4g(int64_t g, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    const size_t bb = 4 + (size_t)g / 2;
    for (int64_t i = 0; i < n / g; i++, p += bb) {
        uint16_t dh;
        memcpy(&dh, p, 2);
        float d = assay_half_to_float(dh);
        int z = p[2];
        for (int64_t k = 0; k < g / 32; k++, dst += 32) {
            const uint8_t *qs = p + 4 + 16 * k;
            for (int j = 0; j < 16; j++) {
                dst[j] = d * (float)((qs[j] & 0xf) - z);
                dst[j + 16] = d * (float)((qs[j] >> 4) - z);
            }
        }
    }
}
static void dq_q4g32(const void *src, float *dst, int64_t n) { dq_q4g(32, src, dst, n); }
static void dq_q4g64(const void *src, float *dst, int64_t n) { dq_q4g(64, src, dst, n); }
static void dq_q4g128(const void *src, float *dst, int64_t n) { dq_q4g(128, src, dst, n); }

static const assay_dequant_row_fn dequant_table[ASSAY_TYPE_COUNT] = {
    [ASSAY_TYPE_F32] = dq_f32,   [ASSAY_TYPE_F16] = dq_f16,   [ASSAY_TYPE_BF16] = dq_bf16,
    [ASSAY_TYPE_Q4_0] = dq_q4_0, [ASSAY_TYPE_Q4_1] = dq_q4_1, [ASSAY_TYPE_Q5_0] = dq_q5_0,
    [ASSAY_TYPE_Q5_1] = dq_q5_1, [ASSAY_TYPE_Q8_0] = dq_q8_0, [ASSAY_TYPE_Q8_1] = dq_q8_1,
    [ASSAY_TYPE_Q2_K] = dq_q2_K, [ASSAY_TYPE_Q3_K] = dq_q3_K, [ASSAY_TYPE_Q4_K] = dq_q4_K,
    [ASSAY_TYPE_Q5_K] = dq_q5_K, [ASSAY_TYPE_Q6_K] = dq_q6_K, [ASSAY_TYPE_Q8_K] = dq_q8_K,
    [ASSAY_TYPE_Q4G32] = dq_q4g32, [ASSAY_TYPE_Q4G64] = dq_q4g64, [ASSAY_TYPE_Q4G128] = dq_q4g128,
};

static int64_t dequant_block_elems(assay_type t) {
    switch (t) {
    case ASSAY_TYPE_F32: case ASSAY_TYPE_F16: case ASSAY_TYPE_BF16: return 1;
    case ASSAY_TYPE_Q2_K: case ASSAY_TYPE_Q3_K: case ASSAY_TYPE_Q4_K: case ASSAY_TYPE_Q5_K: case ASSAY_TYPE_Q6_K:
    case ASSAY_TYPE_Q8_K: return ASSAY_QK_K;
    case ASSAY_TYPE_Q4G32: case ASSAY_TYPE_Q4G64: case ASSAY_TYPE_Q4G128: return assay_type_get(t)->block_elems;
    default: return ASSAY_QK;
    }
}

assay_dequant_row_fn assay_dequant_row_get(assay_type type) {
    if ((int)type < 0 || (int)type >= ASSAY_TYPE_COUNT) return NULL;
    return dequant_table[type];
}

assay_status assay_dequantize(assay_type type, const void *src, float *dst, int64_t n) {
    assay_dequant_row_fn f = assay_dequant_row_get(type);
    if (!f) return assay_fail(ASSAY_ERR_UNSUPPORTED, "no dequantizer for weight type %d", (int)type);
    if (n % dequant_block_elems(type)) return assay_fail(ASSAY_ERR_ARG, "%lld elements is not a whole number of blocks",
                                                      (long long)n);
    f(src, dst, n);
    return ASSAY_OK;
}
