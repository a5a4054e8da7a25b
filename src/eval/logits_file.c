/* logits_file.c — the saved-baseline log-probability format of logits_file.h: 16-bit rows over a 30-nat range. */
#include <math.h>
#include <string.h>

#include "assay/logits_file.h"

size_t assay_logits_row_bytes(int64_t n_vocab) { return 8 + 2 * (size_t)n_vocab; }

void assay_logits_row_encode(const double *lp, int64_t n, uint8_t *out) {
    double mx = lp[0];
    for (int64_t i = 1; i < n; i++) mx = lp[i] > mx ? lp[i] : mx;
    float lo = (float)(mx - ASSAY_LOGITS_RANGE), step = ASSAY_LOGITS_RANGE / 65535.0f;
    memcpy(out, &lo, 4);
    memcpy(out + 4, &step, 4);
    uint8_t *q = out + 8; /* stored byte-wise: a row starts at an 8 + 2k offset, fine for uint16 but kept portable */
    for (int64_t i = 0; i < n; i++) {
        double v = (lp[i] - lo) / step;
        uint16_t u = (uint16_t)(v <= 0 ? 0 : v >= 65535 ? 65535 : lrint(v));
        memcpy(q + 2 * i, &u, 2);
    }
}

void assay_logits_row_decode(const uint8_t *in, int64_t n, double *lp) {
    float lo, step;
    memcpy(&lo, in, 4);
    memcpy(&step, in + 4, 4);
    const uint8_t *q = in + 8;
    for (int64_t i = 0; i < n; i++) {
        uint16_t u;
        memcpy(&u, q + 2 * i, 2);
        lp[i] = lo + (double)step * u;
    }
}

void assay_logits_file_close(assay_logits_file *f) {
    if (f->map.data || f->map.path) assay_mapped_file_close(&f->map);
    memset(f, 0, sizeof *f);
}

assay_status assay_logits_file_open(assay_logits_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    assay_status st = assay_mapped_file_open(&f->map, path);
    if (st != ASSAY_OK) return st;
    if (f->map.size < sizeof f->h) goto not_ours;
    memcpy(&f->h, f->map.data, sizeof f->h);
    if (memcmp(f->h.magic, ASSAY_LOGITS_MAGIC, 4) != 0 || f->h.version != ASSAY_LOGITS_VERSION || f->h.n_vocab == 0)
        goto not_ours;
    /* overflow-safe size check: each factor is bounded by the file size first */
    if (f->h.n_tokens > f->map.size / 4 || f->h.n_scored > f->map.size / assay_logits_row_bytes(f->h.n_vocab)) goto truncated;
    size_t need = sizeof f->h + 4 * (size_t)f->h.n_tokens + (size_t)f->h.n_scored * assay_logits_row_bytes(f->h.n_vocab);
    if (f->map.size != need) {
        size_t have = f->map.size;
        assay_logits_file_close(f);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %zu bytes, expected %zu (truncated?)", path, have, need);
    }
    f->tokens = (const int32_t *)(f->map.data + sizeof f->h);
    f->rows = f->map.data + sizeof f->h + 4 * (size_t)f->h.n_tokens;
    return ASSAY_OK;
not_ours:
    assay_logits_file_close(f);
    return assay_fail(ASSAY_ERR_FORMAT, "%s: not a logits file from `assay perplexity --save-logits`", path);
truncated:
    assay_logits_file_close(f);
    return assay_fail(ASSAY_ERR_FORMAT, "%s: header promises more data than the file holds (truncated?)", path);
}
