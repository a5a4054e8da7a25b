/* weight_type.c — the one layout table of tensor element types (see include/assay/weight_type.h).
 *
 * Block sizes follow ggml's block structs (ggml-common.h) and gguf-py's GGML_QUANT_SIZES; each entry is written
 * as the sum of its fields so that a reader can check it against the struct it describes. The quantized block
 * structs themselves live with their kernels in src/quant, which static_assert their sizes against this table.
 */
#include "assay/weight_type.h"

#include <strings.h>

#define QK_K 256 /* super-block size of the k-quants, IQ and TQ types */

static const assay_type_info type_table[ASSAY_TYPE_COUNT] = {
    [ASSAY_TYPE_F32] = {"f32", 1, 4, 0},
    [ASSAY_TYPE_F16] = {"f16", 1, 2, 0},
    /* legacy quants: 32 elements, an f16 scale (+ f16 min for _1), packed nibbles (+ 32 high bits for q5) */
    [ASSAY_TYPE_Q4_0] = {"q4_0", 32, 2 + 16, 1},
    [ASSAY_TYPE_Q4_1] = {"q4_1", 32, 2 + 2 + 16, 1},
    [ASSAY_TYPE_Q5_0] = {"q5_0", 32, 2 + 4 + 16, 1},
    [ASSAY_TYPE_Q5_1] = {"q5_1", 32, 2 + 2 + 4 + 16, 1},
    [ASSAY_TYPE_Q8_0] = {"q8_0", 32, 2 + 32, 1},
    /* q8_1: f16 d and f16 s = d * sum(qs), 36 bytes as in ggml's block_q8_1. gguf-py's table still says 40
     * (the older f32 d/s layout); ggml's gguf reader sizes tensors with ggml's own table, so 36 is what a file
     * holds. In practice q8_1 is only a dot-product operand and never appears in files. */
    [ASSAY_TYPE_Q8_1] = {"q8_1", 32, 2 + 2 + 32, 1},
    /* k-quants: 256-element super-blocks */
    [ASSAY_TYPE_Q2_K] = {"q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2, 1},
    [ASSAY_TYPE_Q3_K] = {"q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, 1},
    [ASSAY_TYPE_Q4_K] = {"q4_K", QK_K, 2 + 2 + 12 + QK_K / 2, 1},
    [ASSAY_TYPE_Q5_K] = {"q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, 1},
    [ASSAY_TYPE_Q6_K] = {"q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, 1},
    [ASSAY_TYPE_Q8_K] = {"q8_K", QK_K, 4 + QK_K + (QK_K / 16) * 2, 1}, /* f32 d, i8 qs, i16 bsums */
    /* i-quants */
    [ASSAY_TYPE_IQ2_XXS] = {"iq2_xxs", QK_K, 2 + (QK_K / 8) * 2, 1},
    [ASSAY_TYPE_IQ2_XS] = {"iq2_xs", QK_K, 2 + (QK_K / 8) * 2 + QK_K / 32, 1},
    [ASSAY_TYPE_IQ3_XXS] = {"iq3_xxs", QK_K, 2 + 3 * (QK_K / 8), 1},
    [ASSAY_TYPE_IQ1_S] = {"iq1_s", QK_K, 2 + QK_K / 8 + (QK_K / 32) * 2, 1},
    [ASSAY_TYPE_IQ4_NL] = {"iq4_nl", 32, 2 + 16, 1},
    [ASSAY_TYPE_IQ3_S] = {"iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + 4, 1},
    [ASSAY_TYPE_IQ2_S] = {"iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 32, 1},
    [ASSAY_TYPE_IQ4_XS] = {"iq4_xs", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2, 1},
    [ASSAY_TYPE_I8] = {"i8", 1, 1, 0},
    [ASSAY_TYPE_I16] = {"i16", 1, 2, 0},
    [ASSAY_TYPE_I32] = {"i32", 1, 4, 0},
    [ASSAY_TYPE_I64] = {"i64", 1, 8, 0},
    [ASSAY_TYPE_F64] = {"f64", 1, 8, 0},
    [ASSAY_TYPE_IQ1_M] = {"iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, 1}, /* scale lives in the scales bits */
    [ASSAY_TYPE_BF16] = {"bf16", 1, 2, 0},
    /* ternary: 1.6875 and 2.0625 bits per weight */
    [ASSAY_TYPE_TQ1_0] = {"tq1_0", QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2, 1},
    [ASSAY_TYPE_TQ2_0] = {"tq2_0", QK_K, QK_K / 4 + 2, 1},
    /* OCP microscaling FP4: one E8M0 scale per 32 E2M1 values */
    [ASSAY_TYPE_MXFP4] = {"mxfp4", 32, 1 + 16, 1},
    /* NVFP4: 64 E2M1 values with four UE4M3 scales, one per 16 */
    [ASSAY_TYPE_NVFP4] = {"nvfp4", 64, 4 + 32, 1},
    /* 1-bit: an f16 scale and one sign bit per element */
    [ASSAY_TYPE_Q1_0] = {"q1_0", 128, 2 + 128 / 8, 1},

    [ASSAY_TYPE_F8_E4M3] = {"F8_E4M3", 1, 1, 0},
    [ASSAY_TYPE_F8_E5M2] = {"F8_E5M2", 1, 1, 0},
    [ASSAY_TYPE_U8] = {"U8", 1, 1, 0},
    /* packed group int4 (quant_blocks.h assay_block_q4g*): f16 scale, u8 zero, u8 pad, group/2 bytes of nibbles;
     * 5.0, 4.5 and 4.25 bits per weight */
    [ASSAY_TYPE_Q4G32] = {"q4g32", 32, 2 + 1 + 1 + 32 / 2, 1},
    [ASSAY_TYPE_Q4G64] = {"q4g64", 64, 2 + 1 + 1 + 64 / 2, 1},
    [ASSAY_TYPE_Q4G128] = {"q4g128", 128, 2 + 1 + 1 + 128 / 2, 1},
};

const assay_type_info *assay_type_get(assay_type type) {
    if ((int)type < 0 || (int)type >= ASSAY_TYPE_COUNT) return NULL;
    const assay_type_info *ti = &type_table[type];
    return ti->name ? ti : NULL;
}

const char *assay_type_name(assay_type type) {
    const assay_type_info *ti = assay_type_get(type);
    return ti ? ti->name : "unknown";
}

int assay_type_row_ok(assay_type type, int64_t n) {
    const assay_type_info *ti = assay_type_get(type);
    return ti && n >= 0 && n % ti->block_elems == 0;
}

size_t assay_type_row_bytes(assay_type type, int64_t n) {
    ASSAY_ASSERT(assay_type_row_ok(type, n));
    const assay_type_info *ti = assay_type_get(type);
    return (size_t)(n / ti->block_elems) * ti->block_bytes;
}

assay_status assay_type_from_name(const char *name, assay_type *out) {
    for (int t = 0; t < ASSAY_TYPE_COUNT; t++) {
        if (type_table[t].name && strcasecmp(type_table[t].name, name) == 0) {
            *out = (assay_type)t;
            return ASSAY_OK;
        }
    }
    return assay_fail(ASSAY_ERR_ARG, "unknown tensor type '%s'", name);
}
