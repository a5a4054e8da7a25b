/* imatrix.h — importance matrices in llama.cpp's GGUF imatrix format (llama-imatrix's default since its GGUF
 * output landed; the legacy .dat format is not written or read here).
 *
 *   assay_imatrix *im = assay_imatrix_new();
 *   assay_session_set_calib_hook(s, assay_imatrix_hook, im);        // every linear input adds Σx² per column
 *   ... run calibration chunks ...; assay_imatrix_end_chunk(im) after each
 *   assay_imatrix_write(im, "imatrix.gguf", "calib.txt", 512, 0);
 *   assay_imatrix_free(im);
 *
 *   assay_imatrix_load(&im, "imatrix.gguf");
 *   const float *w = assay_imatrix_get(im, "blk.0.ffn_down.weight", 1408);   // mean x² per column, or NULL
 *
 * File layout (what llama-quantize --imatrix reads): general.type = "imatrix", imatrix.datasets (array of
 * strings), imatrix.chunk_count and imatrix.chunk_size (u32); per weight two f32 tensors "<name>.in_sum2"
 * (ne {n_in, 1}: Σ over tokens of x²) and "<name>.counts" (ne {1, 1}: tokens seen), names sorted.
 * Only blk.* weights are collected, like llama-imatrix without --process-output.
 */
#ifndef ASSAY_IMATRIX_H
#define ASSAY_IMATRIX_H

#include <stdint.h>

#include "assay/status.h"

typedef struct assay_imatrix assay_imatrix;

assay_imatrix *assay_imatrix_new(void);
void assay_imatrix_free(assay_imatrix *im);

/* Adds n_tok rows of x [n_tok][n_in] for weight `name` (ignored unless it starts with "blk."). The signature is
 * model.h's calibration hook, so it can be installed directly. Aborts on a size change for one name (a bug). */
void assay_imatrix_hook(void *imatrix, const char *name, const float *x, int64_t n_tok, int64_t n_in);
void assay_imatrix_end_chunk(assay_imatrix *im);
int64_t assay_imatrix_count(const assay_imatrix *im); /* weights with data */
int assay_imatrix_chunks(const assay_imatrix *im);

assay_status assay_imatrix_write(const assay_imatrix *im, const char *path, const char *dataset, int chunk_size,
                                 int overwrite);
assay_status assay_imatrix_load(assay_imatrix **out, const char *path);
/* Mean x² per input column (in_sum2 / counts) for `name`, or NULL when absent or of another width. Columns
 * never seen (count 0) read as 1, as llama-quantize does. Valid until the next add or free. */
const float *assay_imatrix_get(const assay_imatrix *im, const char *name, int64_t n_in);
const char *assay_imatrix_dataset(const assay_imatrix *im); /* first dataset name or "" */

#endif
