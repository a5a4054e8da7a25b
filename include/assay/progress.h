/* progress.h — progress bars with rate and ETA on stderr for every long loop.
 *
 *   assay_progress bar;
 *   assay_progress_begin(&bar, "perplexity", n_chunks, "chunk");
 *   for (i = 0; i < n_chunks; i++) { ...; assay_progress_update(&bar, i + 1); }
 *   assay_progress_end(&bar);
 *
 * Drawn only when stderr is a terminal, or when ASSAY_PROGRESS=1 (then one line per 10% for logs);
 * ASSAY_PROGRESS=0 silences it. Redraws at most 10 times a second, so updating every step is cheap.
 */
#ifndef ASSAY_PROGRESS_H
#define ASSAY_PROGRESS_H

#include <stdint.h>

typedef struct assay_progress {
    const char *label;
    const char *unit;
    int64_t total, done;
    double start, last_draw;
    int mode; /* 0 off, 1 terminal (redraw in place), 2 log lines */
    int last_decile;
} assay_progress;

void assay_progress_begin(assay_progress *p, const char *label, int64_t total, const char *unit);
void assay_progress_update(assay_progress *p, int64_t done);
void assay_progress_end(assay_progress *p);

/* Monotonic seconds, for timings everywhere. */
double assay_now_seconds(void);

#endif
