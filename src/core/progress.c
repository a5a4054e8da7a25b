/* progress.c — terminal progress bars (see include/assay/progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "assay/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double assay_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void format_duration(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e7) snprintf(buf, n, "--:--");
    else if (s < 3600) snprintf(buf, n, "%02d:%02d", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, ((int)s / 60) % 60, (int)s % 60);
}

static void draw(assay_progress *p, int final) {
    double now = assay_now_seconds(), elapsed = now - p->start;
    double frac = p->total > 0 ? (double)p->done / (double)p->total : 0;
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    char eta[32], spent[32];
    format_duration(eta, sizeof eta, rate > 0 ? (double)(p->total - p->done) / rate : -1);
    format_duration(spent, sizeof spent, elapsed);
    if (p->mode == 1) {
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int filled = (int)(frac * WIDTH);
        for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[WIDTH] = 0;
        fprintf(stderr, "\r%s [%s] %3d%% %lld/%lld %s, %.1f %s/s, %s elapsed, ETA %s%s", p->label, bar,
                (int)(frac * 100), (long long)p->done, (long long)p->total, p->unit, rate, p->unit, spent,
                final ? "00:00" : eta, final ? "\n" : "  ");
    } else {
        fprintf(stderr, "%s: %3d%% %lld/%lld %s, %.1f %s/s, %s elapsed, ETA %s\n", p->label, (int)(frac * 100),
                (long long)p->done, (long long)p->total, p->unit, rate, p->unit, spent, final ? "00:00" : eta);
    }
    fflush(stderr);
    p->last_draw = now;
}

void assay_progress_begin(assay_progress *p, const char *label, int64_t total, const char *unit) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->unit = unit ? unit : "it";
    p->total = total;
    p->start = assay_now_seconds();
    const char *env = getenv("ASSAY_PROGRESS");
    if (env && strcmp(env, "0") == 0) p->mode = 0;
    else if (isatty(STDERR_FILENO)) p->mode = 1;
    else if (env && strcmp(env, "1") == 0) p->mode = 2;
    p->last_decile = -1;
}

void assay_progress_update(assay_progress *p, int64_t done) {
    p->done = done;
    if (p->mode == 1) {
        if (assay_now_seconds() - p->last_draw >= 0.1) draw(p, 0);
    } else if (p->mode == 2 && p->total > 0) {
        int decile = (int)(10 * done / p->total);
        if (decile != p->last_decile && decile < 10) {
            p->last_decile = decile;
            draw(p, 0);
        }
    }
}

void assay_progress_end(assay_progress *p) {
    if (p->mode) draw(p, 1);
    p->mode = 0;
}
