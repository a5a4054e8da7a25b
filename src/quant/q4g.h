/* q4g.h — packing group-quantized int4 weights (GPTQ / AWQ codes, zeros and fp16 scales) into assay's packed
 * ASSAY_TYPE_Q4G32/64/128 rows (block layout in quant_blocks.h), which the CPU kernels multiply without unpacking.
 *
 *   assay_type t = assay_q4g_type(128, n_in);            // ASSAY_TYPE_COUNT: no packed type fits
 *   void *rows = assay_xmalloc(assay_type_row_bytes(t, n_in) * n_out);
 *   assay_q4g_pack(t, q, z, d, n_out, n_in, 128, perm, rows);
 *
 * Not a public header: the checkpoint loaders (src/model/model_ckpt.c) and the tests use it.
 */
#ifndef ASSAY_Q4G_H
#define ASSAY_Q4G_H

#include <stdint.h>

#include "assay/weight_type.h"

/* The packed type for groups of `group` inputs in rows of n_in: the largest block of 128, 64 or 32 elements that
 * divides both (a group of 256 or a whole row becomes several blocks carrying the same scale and zero).
 * ASSAY_TYPE_COUNT when none does (group or n_in not a multiple of 32). */
assay_type assay_q4g_type(int64_t group, int64_t n_in);

/* Packs n_out rows. q: [n_out][n_in] codes 0..15, in the checkpoint's column order; z: [n_out][n_groups] zero points
 * 0..16; d: [n_out][n_groups] fp16 scales (bits). perm NULL: column c of the packed row is column c of q, in group
 * c / group; else packed column c is q's column perm[c] (act-order: perm sorts the columns by group, so packed
 * column c is again in group c / group). */
void assay_q4g_pack(assay_type t, const uint8_t *q, const uint8_t *z, const uint16_t *d, int64_t n_out, int64_t n_in,
                    int64_t group, const int32_t *perm, void *dst);

#endif
