/* progress.c — terminal progress bars (see include/assay/progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "assay/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "assay/status.h"

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

/* "assay quantize: " or "assay quantize: calibrate: " (the label when it is not the command's own name) */
static void format_prefix(const assay_progress *p, char *buf, size_t n) {
    const char *cmd = assay_log_command();
    if (!cmd) snprintf(buf, n, "%s:", p->label);
    else if (strcmp(cmd, p->label) == 0) snprintf(buf, n, "assay %s:", cmd);
    else snprintf(buf, n, "assay %s: %s:", cmd, p->label);
}

static void draw(assay_progress *p, int final) {
    double now = assay_now_seconds(), elapsed = now - p->start;
    double frac = p->total > 0 ? (double)p->done / (double)p->total : 0;
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    char units[40];
    snprintf(units, sizeof units, "%s%s", p->unit, p->total == 1 ? "" : "s");
    char eta[32], spent[32];
    format_duration(eta, sizeof eta, rate > 0 ? (double)(p->total - p->done) / rate : -1);
    format_duration(spent, sizeof spent, elapsed);
    char prefix[160];
    format_prefix(p, prefix, sizeof prefix);
    if (p->mode == 1) {
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int filled = (int)(frac * WIDTH);
        for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[WIDTH] = 0;
        fprintf(stderr, "\r%s [%s] %3d%% %lld/%lld %s, %.1f %s/s, %s elapsed, ETA %s%s", prefix, bar,
                (int)(frac * 100), (long long)p->done, (long long)p->total, units, rate, p->unit, spent,
                final ? "00:00" : eta, final ? "\n" : "  ");
    } else {
        fprintf(stderr, "%s %3d%% %lld/%lld %s, %.1f %s/s, %s elapsed, ETA %s\n", prefix, (int)(frac * 100),
                (long long)p->done, (long long)p->total, units, rate, p->unit, spent, final ? "00:00" : eta);
    }
    fflush(stderr);
    p->last_draw = now;
    p->drawn = p->done;
    if (p->mode >= 2) p->lines++;
}

void assay_progress_begin(assay_progress *p, const char *label, int64_t total, const char *unit) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->unit = unit ? unit : "it";
    p->total = total;
    p->start = assay_now_seconds();
    p->last_draw = p->start;
    const char *env = getenv("ASSAY_PROGRESS");
    if (env && strcmp(env, "0") == 0) p->mode = 0;
    else if (isatty(STDERR_FILENO)) p->mode = 1;
    else if (env && strcmp(env, "1") == 0) p->mode = 2;
    else p->mode = 3;
    const char *iv = getenv("ASSAY_PROGRESS_INTERVAL");
    p->interval = iv && atof(iv) > 0 ? atof(iv) : 10.0;
    p->last_decile = -1;
}

void assay_progress_update(assay_progress *p, int64_t done) {
    p->done = done;
    if (p->mode == 1) {
        if (assay_now_seconds() - p->last_draw >= 0.1) draw(p, 0);
    } else if (p->mode == 3) {
        if (assay_now_seconds() - p->last_draw >= p->interval) draw(p, 0);
    } else if (p->mode == 2 && p->total > 0) {
        int decile = (int)(10 * done / p->total);
        if (decile != p->last_decile && decile < 10) {
            p->last_decile = decile;
            draw(p, 0);
        }
    }
}

void assay_progress_end(assay_progress *p) {
    if (p->mode == 1 || (p->mode >= 2 && (p->mode == 2 || p->lines > 0) && p->drawn != p->done)) draw(p, 1);
    p->mode = 0;
}
