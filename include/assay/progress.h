/* progress.h — progress bars with rate and ETA on stderr for every long loop.
 *
 *   assay_progress bar;
 *   assay_progress_begin(&bar, "perplexity", n_chunks, "chunk");
 *   for (i = 0; i < n_chunks; i++) { ...; assay_progress_update(&bar, i + 1); }
 *   assay_progress_end(&bar);
 *
 * On a terminal: one line redrawn in place, at most 10 times a second, so updating every step is cheap. When stderr
 * is a file or a pipe: one line every ASSAY_PROGRESS_INTERVAL seconds (default 10) while the work lasts, and a last
 * line at the end if any was printed, so short work stays silent and long work shows it is alive.
 * ASSAY_PROGRESS=1 prints a line per 10% instead; ASSAY_PROGRESS=0 silences it. Lines are prefixed like every note
 * (assay_note: "assay quantize: ...").
 */
#ifndef ASSAY_PROGRESS_H
#define ASSAY_PROGRESS_H

#include <stdint.h>

typedef struct assay_progress {
    const char *label;
    const char *unit;
    int64_t total, done;
    double start, last_draw;
    int mode; /* 0 off, 1 terminal (redraw in place), 2 a log line per 10%, 3 a log line per interval */
    int last_decile;
    double interval; /* mode 3: seconds between lines */
    int lines;       /* log lines printed so far */
    int64_t drawn;   /* `done` when a line was last printed */
} assay_progress;

void assay_progress_begin(assay_progress *p, const char *label, int64_t total, const char *unit);
void assay_progress_update(assay_progress *p, int64_t done);
void assay_progress_end(assay_progress *p);

/* Monotonic seconds, for timings everywhere. */
double assay_now_seconds(void);

#endif
