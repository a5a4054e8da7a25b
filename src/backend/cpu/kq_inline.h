/* kq_inline.h — k-quant x Q8_K dot products through an unpacked super-block, as static inline code so the
 * scalar build and the AVX2 build (compiled with -mavx2) each get their own copy; in the AVX2 build the
 * compiler vectorizes the 16-element integer loops.
 *
 * A super-block unpacks to 256 small integers q and per-16 (scale, min): x[l] = scale[l/16] * q[l] - min[l/16].
 * Then dot(x, a) = a.d * sum_g (scale[g] * sum_{l in g} q[l] * a.q[l] - min[g] * a.bsums[g]).
 */
#ifndef ASSAY_KQ_INLINE_H
#define ASSAY_KQ_INLINE_H

#include <stdint.h>

#include "quant/quant_blocks.h"

typedef struct kq_unpacked {
    int8_t q[256];
    float scale[16], min[16];
} kq_unpacked;

static inline void kq_unpack_q2_K(const assay_block_q2_K *b, kq_unpacked *u) {
    float d = assay_half_to_float(b->d), dmin = assay_half_to_float(b->dmin);
    const uint8_t *q = b->qs;
    int is = 0, o = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int g = 0; g < 2; g++, is++) {
                u->scale[is] = d * (b->scales[is] & 0xf);
                u->min[is] = dmin * (b->scales[is] >> 4);
                for (int l = 0; l < 16; l++) u->q[o++] = (int8_t)((q[g * 16 + l] >> shift) & 3);
            }
}

static inline void kq_unpack_q3_K(const assay_block_q3_K *b, kq_unpacked *u) {
    float d = assay_half_to_float(b->d);
    const uint8_t *s = b->scales, *q = b->qs, *hm = b->hmask;
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
        int hi = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        u->scale[j] = d * ((lo | (hi << 4)) - 32);
        u->min[j] = 0;
    }
    uint8_t m = 1;
    int o = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2, m <<= 1)
            for (int k = 0; k < 32; k++) u->q[o++] = (int8_t)(((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
}

static inline void kq_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static inline void kq_unpack_q4_K(const assay_block_q4_K *b, kq_unpacked *u) {
    float d = assay_half_to_float(b->d), dmin = assay_half_to_float(b->dmin);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        kq_scale_min(j, b->scales, &sc, &mn);
        u->scale[2 * j] = u->scale[2 * j + 1] = d * sc;
        u->min[2 * j] = u->min[2 * j + 1] = dmin * mn;
    }
    const uint8_t *q = b->qs;
    for (int j = 0; j < 4; j++, q += 32)
        for (int l = 0; l < 32; l++) {
            u->q[64 * j + l] = (int8_t)(q[l] & 0xf);
            u->q[64 * j + 32 + l] = (int8_t)(q[l] >> 4);
        }
}

static inline void kq_unpack_q5_K(const assay_block_q5_K *b, kq_unpacked *u) {
    float d = assay_half_to_float(b->d), dmin = assay_half_to_float(b->dmin);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        kq_scale_min(j, b->scales, &sc, &mn);
        u->scale[2 * j] = u->scale[2 * j + 1] = d * sc;
        u->min[2 * j] = u->min[2 * j + 1] = dmin * mn;
    }
    const uint8_t *q = b->qs, *qh = b->qh;
    for (int j = 0; j < 4; j++, q += 32)
        for (int l = 0; l < 32; l++) {
            u->q[64 * j + l] = (int8_t)((q[l] & 0xf) | (((qh[l] >> (2 * j)) & 1) << 4));
            u->q[64 * j + 32 + l] = (int8_t)((q[l] >> 4) | (((qh[l] >> (2 * j + 1)) & 1) << 4));
        }
}

static inline void kq_unpack_q6_K(const assay_block_q6_K *b, kq_unpacked *u) {
    float d = assay_half_to_float(b->d);
    for (int j = 0; j < 16; j++) {
        u->scale[j] = d * b->scales[j];
        u->min[j] = 0;
    }
    const uint8_t *ql = b->ql, *qh = b->qh;
    for (int half = 0; half < 2; half++, ql += 64, qh += 32) {
        int8_t *o = u->q + 128 * half;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

static inline float kq_dot_unpacked(const kq_unpacked *u, const assay_block_q8_K *a) {
    float sum = 0;
    for (int g = 0; g < 16; g++) {
        int32_t isum = 0;
        for (int l = 0; l < 16; l++) isum += (int32_t)u->q[16 * g + l] * a->qs[16 * g + l];
        sum += u->scale[g] * (float)isum - u->min[g] * (float)a->bsums[g];
    }
    return sum * a->d;
}

#define KQ_DEFINE_VEC_DOT(fn, T, unpack)                                                           \
    static void fn(int64_t n, float *s, const void *w, const void *x) {                            \
        const T *b = w;                                                                            \
        const assay_block_q8_K *a = x;                                                             \
        float sum = 0;                                                                             \
        kq_unpacked u;                                                                             \
        for (int64_t i = 0; i < n / 256; i++) {                                                    \
            unpack(&b[i], &u);                                                                     \
            sum += kq_dot_unpacked(&u, &a[i]);                                                     \
        }                                                                                          \
        *s = sum;                                                                                  \
    }

#endif
