/* calib.h — run calibration text through the CPU engine and hand every linear layer's input to a callback
 * (importance matrices, GPTQ Hessians, AWQ / SmoothQuant activation statistics).
 *
 *   assay_calib_text text;
 *   assay_calib_text_load(&text, tok, "../shared/data/calibration", 1);   // a file or a directory of *.txt
 *   assay_calib_run(model, &text, 64, 512, assay_imatrix_hook, im, NULL, NULL);  // 64 chunks of 512 tokens
 *   assay_calib_text_free(&text);
 *
 * Chunks are consecutive windows of seq_len tokens from the start of the tokenized text (llama-imatrix's
 * convention), the first token of each replaced by BOS when the tokenizer adds one. A directory's files are read
 * in name order and joined with a blank line.
 */
#ifndef ASSAY_CALIB_H
#define ASSAY_CALIB_H

#include <stdint.h>

#include "assay/model.h"
#include "assay/status.h"
#include "assay/tokenizer.h"

typedef struct assay_calib_text {
    int32_t *ids;
    int64_t n;
    int32_t bos; /* -1: the tokenizer adds no BOS */
} assay_calib_text;

assay_status assay_calib_text_load(assay_calib_text *out, assay_tokenizer *tok, const char *path);
void assay_calib_text_free(assay_calib_text *t);

/* Keeps n_chunks windows of seq_len tokens spread evenly over the whole text (window c of the text's
 * n / seq_len aligned windows is number floor(c * (n / seq_len) / n_chunks)), in order, so that assay_calib_run's
 * consecutive chunks sample every part of a multi-file corpus; no-op when the text has no more windows than that. */
void assay_calib_text_spread(assay_calib_text *t, int64_t n_chunks, int64_t seq_len);

/* Called after each chunk (for imatrix chunk counts, progress); may be NULL. */
typedef void (*assay_calib_chunk_fn)(void *user, int64_t chunk);

/* Runs min(n_chunks, available) chunks; returns the number run in *done (may be NULL). Errors: the text holds
 * fewer than seq_len tokens, engine errors. */
assay_status assay_calib_run(assay_model *m, const assay_calib_text *text, int64_t n_chunks, int64_t seq_len,
                             assay_calib_fn fn, void *user, assay_calib_chunk_fn chunk_fn, int64_t *done);
/* The same, running only the first n_layers decoder layers (0: all), for passes that need only their inputs. */
assay_status assay_calib_run_layers(assay_model *m, const assay_calib_text *text, int64_t n_chunks, int64_t seq_len,
                                    int64_t n_layers, assay_calib_fn fn, void *user, assay_calib_chunk_fn chunk_fn,
                                    int64_t *done);

#endif
