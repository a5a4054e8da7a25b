/* logits_file.h — baseline log-probabilities saved for KL-divergence checks (`assay perplexity --save-logits`,
 * read by `assay perplexity --kl-divergence-base` and `assay eval --tasks kld --kld-base FILE`).
 *
 *   assay_logits_file f;
 *   if (assay_logits_file_open(&f, "base.logits") != ASSAY_OK) ... assay_last_error()
 *   // f.h.n_vocab, f.h.n_ctx, f.h.score_all, f.tokens[0..f.h.n_tokens), f.h.n_scored rows
 *   double lp[V]; assay_logits_row_decode(assay_logits_file_row(&f, i), V, lp);
 *   assay_logits_file_close(&f);
 *
 * Layout (little-endian): the 40-byte header below, the text's token ids (int32 x n_tokens), then one row per
 * scored token in scoring order: float lo, float step, uint16 q[n_vocab] with log p = lo + step * q. lo is the
 * row's maximum log-probability minus 30 nats, so the 16 bits cover 30 nats in steps of 4.6e-4 nats and anything
 * less likely than e^-30 of the top token is clamped to the bottom (its probability is negligible in a KLD).
 * The token ids make a mismatched text or tokenizer detectable before any comparison is made.
 */
#ifndef ASSAY_LOGITS_FILE_H
#define ASSAY_LOGITS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "assay/file.h"
#include "assay/status.h"

#define ASSAY_LOGITS_MAGIC "ASKL"
#define ASSAY_LOGITS_VERSION 1u
#define ASSAY_LOGITS_RANGE 30.0f

typedef struct assay_logits_header {
    char magic[4];
    uint32_t version;
    uint32_t n_vocab;
    uint32_t n_ctx;     /* window in tokens */
    uint32_t score_all; /* 1: windows of n_ctx inputs, no BOS, every position scored (eval's kld/heldout windows);
                           0: llama.cpp's llama-perplexity chunks (BOS, second half scored) */
    uint32_t reserved;
    uint64_t n_tokens;  /* token ids stored after the header */
    uint64_t n_scored;  /* rows stored */
} assay_logits_header;
_Static_assert(sizeof(assay_logits_header) == 40, "logits file header");

/* Bytes of one stored row. */
size_t assay_logits_row_bytes(int64_t n_vocab);
/* Log-probabilities (a normalised row) -> one stored row of assay_logits_row_bytes(n) bytes. */
void assay_logits_row_encode(const double *lp, int64_t n, uint8_t *out);
void assay_logits_row_decode(const uint8_t *in, int64_t n, double *lp);

typedef struct assay_logits_file {
    assay_mapped_file map;
    assay_logits_header h;
    const int32_t *tokens; /* n_tokens ids (points into the mapping; 4-byte aligned: header is 40 bytes) */
    const uint8_t *rows;   /* n_scored rows */
} assay_logits_file;

/* Maps and validates (magic, version, exact size). Errors name the path. */
assay_status assay_logits_file_open(assay_logits_file *f, const char *path);
void assay_logits_file_close(assay_logits_file *f);
static inline const uint8_t *assay_logits_file_row(const assay_logits_file *f, int64_t i) {
    return f->rows + (size_t)i * assay_logits_row_bytes(f->h.n_vocab);
}

#endif
