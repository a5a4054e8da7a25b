/* q4g.c — packing GPTQ / AWQ int4 codes into assay's packed group-int4 rows (see q4g.h, quant_blocks.h). */
#include "quant/q4g.h"

#include <string.h>

#include "assay/status.h"

assay_type assay_q4g_type(int64_t group, int64_t n_in) {
    static const struct { int64_t elems; assay_type t; } sizes[] = {
        {128, ASSAY_TYPE_Q4G128}, {64, ASSAY_TYPE_Q4G64}, {32, ASSAY_TYPE_Q4G32}};
    for (int i = 0; i < 3; i++)
        if (group > 0 && n_in > 0 && group % sizes[i].elems == 0 && n_in % sizes[i].elems == 0) return sizes[i].t;
    return ASSAY_TYPE_COUNT;
}

void assay_q4g_pack(assay_type t, const uint8_t *q, const uint8_t *z, const uint16_t *d, int64_t n_out, int64_t n_in,
                    int64_t group, const int32_t *perm, void *dst) {
    const assay_type_info *ti = assay_type_get(t);
    ASSAY_ASSERT(ti && (t == ASSAY_TYPE_Q4G32 || t == ASSAY_TYPE_Q4G64 || t == ASSAY_TYPE_Q4G128));
    const int64_t B = ti->block_elems, nb = n_in / B, ng = (n_in + group - 1) / group;
    ASSAY_ASSERT(n_in % B == 0 && group % B == 0);
    uint8_t *p = dst;
    for (int64_t o = 0; o < n_out; o++) {
        const uint8_t *qr = q + o * n_in;
        for (int64_t b = 0; b < nb; b++, p += ti->block_bytes) {
            int64_t g = b * B / group;
            memcpy(p, &d[o * ng + g], 2);
            p[2] = z[o * ng + g];
            p[3] = 0;
            for (int64_t k = 0; k < B / 32; k++) {
                int64_t c0 = b * B + 32 * k;
                for (int j = 0; j < 16; j++) {
                    int64_t c = c0 + j, c2 = c0 + 16 + j;
                    uint8_t lo = qr[perm ? perm[c] : c], hi = qr[perm ? perm[c2] : c2];
                    ASSAY_ASSERT(lo < 16 && hi < 16);
                    p[4 + 16 * k + j] = (uint8_t)(lo | hi << 4);
                }
            }
        }
    }
}
