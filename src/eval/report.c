/* report.c — the comparison as a terminal table, report.md and a self-contained report.html (inline CSS and SVG,
 * no scripts, no external resources, so it opens anywhere and can be attached to a ticket). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assay/compare.h"

/* Quality change in percent, signed so that negative is worse whatever the metric's direction. */
static double qchange(const assay_compare_row *r) { return -r->degradation; }

static void qinterval(const assay_compare_row *r, double *lo, double *hi) {
    if (isnan(r->rel_lo)) {
        *lo = *hi = NAN;
        return;
    }
    if (r->higher_is_better) *lo = 100 * r->rel_lo, *hi = 100 * r->rel_hi;
    else *lo = -100 * r->rel_hi, *hi = -100 * r->rel_lo;
}

static void fmt_value(char *buf, size_t n, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else if (fabs(v) >= 100) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%.4f", v);
}

/* The interval of the metric's own relative change (same sign as the change column). */
static void fmt_interval(char *buf, size_t n, const assay_compare_row *r) {
    if (isnan(r->rel_lo)) snprintf(buf, n, "unpaired");
    else snprintf(buf, n, "[%+.2f%%, %+.2f%%]", 100 * r->rel_lo, 100 * r->rel_hi);
}

static void fmt_p(char *buf, size_t n, double p) {
    if (isnan(p)) snprintf(buf, n, "-");
    else if (p < 1e-4) snprintf(buf, n, "<1e-4");
    else snprintf(buf, n, "%.4f", p);
}

static void verdict_text(const assay_compare_row *r, char *buf, size_t n) {
    if (isnan(r->base)) {
        snprintf(buf, n, "info");
        return;
    }
    char need[48] = "";
    if (r->verdict == ASSAY_VERDICT_INCONCLUSIVE && r->n_needed > 0) snprintf(need, sizeof need, ", n~%lld", (long long)r->n_needed);
    snprintf(buf, n, "%s%s%s%s%s%s", r->gating ? "" : "(", assay_verdict_name(r->verdict), need,
             r->within_noise ? ", within noise" : "", r->unpaired_interval ? ", unpaired" : "", r->gating ? "" : ")");
}

/* Which thresholds the row's degradation interval spans, as text ("0.50%", "0.50% and 1.50%"). */
static void spanned(const assay_comparison *c, const assay_compare_row *r, char *buf, size_t n) {
    int a = r->deg_lo < c->thresholds[0] && r->deg_hi >= c->thresholds[0];
    int b = r->deg_lo <= c->thresholds[1] && r->deg_hi > c->thresholds[1];
    if (a && b) snprintf(buf, n, "both thresholds (%.2f%% and %.2f%%)", c->thresholds[0], c->thresholds[1]);
    else snprintf(buf, n, "the %.2f%% threshold", b ? c->thresholds[1] : c->thresholds[0]);
}

static void summary_line(const assay_comparison *c, assay_strbuf *out, int markdown, int with_smoke) {
    const char *b = markdown ? "**" : "";
    assay_strbuf_printf(out, "%sVerdict: %s%s", b, assay_verdict_name(c->verdict), b);
    if (c->worst_row >= 0) {
        const assay_compare_row *r = &c->rows[c->worst_row];
        assay_strbuf_printf(out, " — %s: %s %s, degradation %+.2f%%", c->verdict == ASSAY_VERDICT_SHIP ? "worst" : "decided by",
                            r->task, r->metric, r->degradation == 0 ? 0.0 : r->degradation); /* no "-0.00%" */
        if (!isnan(r->deg_lo))
            assay_strbuf_printf(out, ", %.0f%% %sinterval [%+.2f%%, %+.2f%%]", 100 * c->confidence,
                                r->unpaired_interval ? "unpaired " : "", r->deg_lo, r->deg_hi);
        char sp[96];
        switch (c->verdict) {
        case ASSAY_VERDICT_SHIP:
            assay_strbuf_printf(out, ": every gating interval rules out degradation of %.2f%% or more", c->thresholds[0]);
            break;
        case ASSAY_VERDICT_MONITOR:
            assay_strbuf_printf(out, ": within %.2f-%.2f%%, enable with quality monitoring by an LLM judge", c->thresholds[0],
                                c->thresholds[1]);
            break;
        case ASSAY_VERDICT_INVESTIGATE:
            assay_strbuf_printf(out, ": the interval rules out degradation of %.2f%% or less", c->thresholds[1]);
            break;
        case ASSAY_VERDICT_INCONCLUSIVE:
            if (isnan(r->deg_lo)) {
                assay_strbuf_puts(out, ": no interval (the files have neither per-sample records nor stderrs)");
                break;
            }
            spanned(c, r, sp, sizeof sp);
            assay_strbuf_printf(out, ": the interval spans %s, too few documents to decide", sp);
            if (c->n_needed > 0) {
                assay_strbuf_printf(out, "; about %lld documents per task would resolve it at the observed variance "
                                         "(this run: %lld", (long long)c->n_needed, (long long)r->n);
                if (r->n_task > 0 && r->n_task < c->n_needed)
                    assay_strbuf_printf(out, "; %s has only %lld", r->task,
                                        (long long)r->n_task);
                assay_strbuf_puts(out, ")");
            }
            break;
        }
    }
    assay_strbuf_printf(out, ". Thresholds: ship below %.2f%% degradation, ship with monitoring up to %.2f%%, investigate above, "
                             "decided on the %.0f%% intervals.\n",
                        c->thresholds[0], c->thresholds[1], 100 * c->confidence);
    if (c->limit > 0 && with_smoke)
        assay_strbuf_printf(out, "%sSmoke run%s: --limit %lld scored only the first %lld documents of each task; decide on full "
                                 "tasks (--limit 0).\n",
                            b, b, (long long)c->limit, (long long)c->limit);
}

void assay_compare_table(const assay_comparison *c, assay_strbuf *out) {
    assay_strbuf_printf(out, "%-16s %-30s %11s %11s %9s %22s %8s  %s\n", "task", "metric", "baseline", "candidate", "change",
                        "paired interval", "p", "verdict");
    for (int i = 0; i < c->n_rows; i++) {
        const assay_compare_row *r = &c->rows[i];
        char vb[32], vc[32], iv[48], p[16], v[64], ch[16];
        fmt_value(vb, sizeof vb, r->base);
        fmt_value(vc, sizeof vc, r->cand);
        fmt_interval(iv, sizeof iv, r);
        fmt_p(p, sizeof p, r->p_value);
        verdict_text(r, v, sizeof v);
        if (isnan(r->rel_delta)) snprintf(ch, sizeof ch, "-");
        else snprintf(ch, sizeof ch, "%+.2f%%", 100 * r->rel_delta);
        assay_strbuf_printf(out, "%-16s %-30s %11s %11s %9s %22s %8s  %s%s\n", r->task, r->metric, vb, vc, ch,
                            isnan(r->base) ? "" : iv, p, v, i == c->worst_row ? "  <- worst" : "");
    }
    assay_strbuf_puts(out, "\n");
    summary_line(c, out, 0, 1);
}

static void md_throughput(const assay_comparison *c, assay_strbuf *out) {
    if (c->base_decode_tps <= 0 && c->cand_decode_tps <= 0) return;
    assay_strbuf_puts(out, "\n## Throughput\n\n");
    if (c->n_bench > 0)
        assay_strbuf_printf(out, "Batched bench: %lld prompt tokens then %lld generated tokens per sequence, B sequences per batch, "
                                 "median of %d repeats (wall clock).\n\n", (long long)c->bench_prompt, (long long)c->bench_gen,
                            c->bench_reps);
    assay_strbuf_puts(out, "| | baseline | candidate | change |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < c->n_bench; i++) {
        double bp = c->bench_base_prefill[i], cp = c->bench_cand_prefill[i], bd = c->bench_base_decode[i], cd = c->bench_cand_decode[i];
        assay_strbuf_printf(out, "| prompt tok/s, batch %d | %.1f | %.1f | %+.1f%% |\n", c->bench_batches[i], bp, cp,
                            bp > 0 ? 100 * (cp / bp - 1) : NAN);
        assay_strbuf_printf(out, "| generation tok/s, batch %d | %.1f | %.1f | %+.1f%% |\n", c->bench_batches[i], bd, cd,
                            bd > 0 ? 100 * (cd / bd - 1) : NAN);
    }
    if (c->n_bench == 0) {
        assay_strbuf_printf(out, "| prefill tok/s | %.1f | %.1f | %+.1f%% |\n", c->base_prefill_tps, c->cand_prefill_tps,
                            c->base_prefill_tps > 0 ? 100 * (c->cand_prefill_tps / c->base_prefill_tps - 1) : NAN);
        assay_strbuf_printf(out, "| decode tok/s | %.1f | %.1f | %+.1f%% |\n", c->base_decode_tps, c->cand_decode_tps,
                            c->base_decode_tps > 0 ? 100 * (c->cand_decode_tps / c->base_decode_tps - 1) : NAN);
    }
    if (c->base_model_bytes > 0)
        assay_strbuf_printf(out, "| weights MiB | %.1f | %.1f | %+.1f%% |\n", c->base_model_bytes / 1048576.0,
                            c->cand_model_bytes / 1048576.0, 100 * (c->cand_model_bytes / c->base_model_bytes - 1));
    if (c->throughput_note) assay_strbuf_printf(out, "\n%s\n", c->throughput_note);
}

void assay_compare_markdown(const assay_comparison *c, assay_strbuf *out) {
    assay_strbuf_puts(out, "# assay decision report\n\n");
    assay_strbuf_printf(out, "- baseline: `%s` %s\n- candidate: `%s` %s\n\n", c->base_name, c->base_args, c->cand_name,
                        c->cand_args);
    summary_line(c, out, 1, 1);
    assay_strbuf_printf(out, "\n## Quality (paired, %.0f%% intervals of the relative change)\n\n", 100 * c->confidence);
    assay_strbuf_puts(out, "| task | metric | baseline | candidate | change | paired interval | n | McNemar p | verdict |\n"
                           "|---|---|---:|---:|---:|---|---:|---:|---|\n");
    for (int i = 0; i < c->n_rows; i++) {
        const assay_compare_row *r = &c->rows[i];
        char vb[32], vc[32], iv[48], p[16], v[64];
        fmt_value(vb, sizeof vb, r->base);
        fmt_value(vc, sizeof vc, r->cand);
        fmt_interval(iv, sizeof iv, r);
        fmt_p(p, sizeof p, r->p_value);
        verdict_text(r, v, sizeof v);
        assay_strbuf_printf(out, "| %s | `%s` | %s | %s | ", r->task, r->metric, vb, vc);
        if (isnan(r->rel_delta)) assay_strbuf_puts(out, "- | - ");
        else assay_strbuf_printf(out, "%+.2f%% | %s ", 100 * r->rel_delta, iv);
        assay_strbuf_printf(out, "| %lld | %s | %s%s |\n", (long long)r->n, p, v, i == c->worst_row ? " (worst)" : "");
    }
    md_throughput(c, out);
    assay_strbuf_puts(out, "\nRows in parentheses are shown but do not gate the verdict (each task's primary metric gates;"
                           " `assay compare --all-metrics` gates on all). A verdict follows from the interval of the degradation: ship when it"
                           " lies below the ship threshold, investigate when it lies above the monitor threshold, ship with monitoring"
                           " when it lies between them, otherwise inconclusive, with n~N the documents per task that would resolve it"
                           " at the observed variance. \"within noise\": the interval includes no change, so the delta is not"
                           " distinguishable from sampling noise at this sample size; \"unpaired\": the interval comes from the files'"
                           " stderrs (no per-sample records).\n");
}

/* ---- HTML ------------------------------------------------------------------------------------------------- */

static void esc(assay_strbuf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': assay_strbuf_puts(b, "&lt;"); break;
        case '>': assay_strbuf_puts(b, "&gt;"); break;
        case '&': assay_strbuf_puts(b, "&amp;"); break;
        case '"': assay_strbuf_puts(b, "&quot;"); break;
        default: assay_strbuf_putc(b, *s);
        }
    }
}

static const char *verdict_color(assay_verdict v) {
    switch (v) {
    case ASSAY_VERDICT_SHIP: return "#1a7f37";
    case ASSAY_VERDICT_MONITOR: return "#b58100";
    case ASSAY_VERDICT_INCONCLUSIVE: return "#6e7781";
    case ASSAY_VERDICT_INVESTIGATE: return "#cf222e";
    }
    return "#24292f";
}

/* Quality change per gating-or-not row with its interval, over bands for the thresholds. */
static void svg_deltas(const assay_comparison *c, assay_strbuf *b) {
    int n = 0;
    double lo_all = -c->thresholds[1] * 1.6, hi_all = c->thresholds[0] * 2;
    for (int i = 0; i < c->n_rows; i++) {
        const assay_compare_row *r = &c->rows[i];
        if (isnan(r->base) || isnan(r->degradation)) continue;
        double lo, hi, q = qchange(r);
        qinterval(r, &lo, &hi);
        lo_all = fmin(lo_all, isnan(lo) ? q : fmin(lo, q));
        hi_all = fmax(hi_all, isnan(hi) ? q : fmax(hi, q));
        n++;
    }
    if (n == 0) {
        assay_strbuf_puts(b, "<p>No comparable quality metrics.</p>\n");
        return;
    }
    double pad = 0.08 * (hi_all - lo_all);
    lo_all -= pad;
    hi_all += pad;
    const int W = 860, left = 290, right = 30, row_h = 26, top = 30;
    int H = top + n * row_h + 40;
    double sx = (double)(W - left - right) / (hi_all - lo_all);
#define X(v) (left + ((v) - lo_all) * sx)
    assay_strbuf_printf(b, "<svg role=\"img\" aria-label=\"quality change per metric\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n", W, H, W, H);
    double t0 = -c->thresholds[0], t1 = -c->thresholds[1];
    double xa = X(lo_all), xb = X(fmax(t1, lo_all)), xc = X(fmax(t0, lo_all)), xd = X(hi_all);
    assay_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#ffebe9\"><title>investigate: degradation above %.2f%%</title></rect>\n",
                        xa, top - 6, xb - xa, n * row_h + 6, c->thresholds[1]);
    assay_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#fff8c5\"><title>ship with monitoring</title></rect>\n",
                        xb, top - 6, xc - xb, n * row_h + 6);
    assay_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#dafbe1\"><title>ship: degradation below %.2f%%</title></rect>\n",
                        xc, top - 6, xd - xc, n * row_h + 6, c->thresholds[0]);
    assay_strbuf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#57606a\" stroke-dasharray=\"3 3\"/>\n", X(0.0),
                        X(0.0), top - 6, top + n * row_h);
    /* axis ticks */
    double span = hi_all - lo_all, step = pow(10, floor(log10(span / 5)));
    if (span / step > 10) step *= 2;
    if (span / step > 10) step *= 2.5;
    for (double t = ceil(lo_all / step) * step; t <= hi_all; t += step) {
        assay_strbuf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", X(t), X(t), top + n * row_h,
                            top + n * row_h + 5);
        assay_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" fill=\"#57606a\">%+.3g%%</text>\n", X(t),
                            top + n * row_h + 18, fabs(t) < 1e-12 ? 0.0 : t);
    }
    assay_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" fill=\"#24292f\">quality change (%%, negative = worse), %.0f%% paired interval</text>\n",
                        left + (W - left - right) / 2, H - 4, 100 * c->confidence);
    int k = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const assay_compare_row *r = &c->rows[i];
        if (isnan(r->base) || isnan(r->degradation)) continue;
        double y = top + k * row_h + row_h / 2.0, lo, hi, q = qchange(r);
        qinterval(r, &lo, &hi);
        assay_strbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\" fill=\"#24292f\"%s>", left - 8, y + 4,
                            r->gating ? " font-weight=\"bold\"" : "");
        esc(b, r->task);
        assay_strbuf_puts(b, " ");
        esc(b, r->metric);
        assay_strbuf_puts(b, "</text>\n");
        const char *col = verdict_color(r->verdict);
        if (!isnan(lo)) {
            assay_strbuf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>", X(lo), X(hi), y, y, col);
            assay_strbuf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>", X(lo), X(lo), y - 5, y + 5, col);
            assay_strbuf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>", X(hi), X(hi), y - 5, y + 5, col);
        }
        assay_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>", X(q), y, col);
        esc(b, r->task);
        assay_strbuf_printf(b, " %s: %+.3f%%", r->metric, q);
        if (!isnan(lo)) assay_strbuf_printf(b, " [%+.3f%%, %+.3f%%]", lo, hi);
        assay_strbuf_puts(b, "</title></circle>\n");
        k++;
    }
    assay_strbuf_puts(b, "</svg>\n");
#undef X
}

/* Quality retention (100 = baseline; the mean over gating metrics of 100 - degradation) against throughput. */
static void svg_tradeoff(const assay_comparison *c, assay_strbuf *b) {
    double xb = c->base_decode_tps, xc = c->cand_decode_tps;
    char xlabel_buf[96];
    snprintf(xlabel_buf, sizeof xlabel_buf, "generation throughput, batch %d (tokens/s)", c->bench_batch > 0 ? c->bench_batch : 1);
    const char *xlabel = xlabel_buf;
    if (xb <= 0 || xc <= 0) { /* fall back to the eval's own scoring speed */
        double sb = 0, sc = 0;
        int n = 0;
        for (int i = 0; i < c->n_rows; i++)
            if (c->rows[i].base_tps > 0 && c->rows[i].cand_tps > 0) sb += c->rows[i].base_tps, sc += c->rows[i].cand_tps, n++;
        if (n) xb = sb / n, xc = sc / n, xlabel = "eval scoring throughput (tokens/s)";
    }
    double q = 0;
    int nq = 0;
    for (int i = 0; i < c->n_rows; i++)
        if (c->rows[i].gating && !isnan(c->rows[i].degradation)) q += 100 - c->rows[i].degradation, nq++;
    if (xb <= 0 || xc <= 0 || nq == 0) {
        assay_strbuf_puts(b, "<p class=\"note\">Throughput was not measured for both configurations, so there is no trade-off chart.</p>\n");
        return;
    }
    q /= nq;
    const int W = 560, H = 340, L = 70, R = 30, T = 20, B = 50;
    double x0 = fmin(xb, xc) * 0.8, x1 = fmax(xb, xc) * 1.2;
    double y0 = fmin(100, q) - fmax(1.0, fabs(100 - q) * 0.6), y1 = fmax(100, q) + fmax(1.0, fabs(100 - q) * 0.6);
#define PX(v) (L + ((v) - x0) / (x1 - x0) * (W - L - R))
#define PY(v) (T + (y1 - (v)) / (y1 - y0) * (H - T - B))
    assay_strbuf_printf(b, "<svg role=\"img\" aria-label=\"quality against throughput\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n", W, H, W, H);
    assay_strbuf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f6f8fa\" stroke=\"#d0d7de\"/>\n", L, T, W - L - R, H - T - B);
    double ship = 100 - c->thresholds[0], mon = 100 - c->thresholds[1];
    if (ship > y0 && ship < y1)
        assay_strbuf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#1a7f37\" stroke-dasharray=\"4 3\"><title>ship threshold</title></line>\n", L, W - R, PY(ship), PY(ship));
    if (mon > y0 && mon < y1)
        assay_strbuf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#cf222e\" stroke-dasharray=\"4 3\"><title>investigate threshold</title></line>\n", L, W - R, PY(mon), PY(mon));
    for (int i = 0; i <= 4; i++) {
        double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
        assay_strbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" fill=\"#57606a\">%.*f</text>", PX(xv), H - B + 16, xv >= 100 ? 0 : 1, xv);
        assay_strbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"#57606a\">%.4g</text>\n", L - 6, PY(yv) + 4, yv);
    }
    assay_strbuf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n", L + (W - L - R) / 2, H - 12, xlabel);
    assay_strbuf_printf(b, "<text x=\"16\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">quality retained (%%)</text>\n", T + (H - T - B) / 2, T + (H - T - B) / 2);
    assay_strbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#8c959f\" stroke-width=\"1.5\"/>\n", PX(xb), PY(100.0), PX(xc), PY(q));
    assay_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"#0969da\"><title>baseline: %.1f tok/s, 100%%</title></circle>", PX(xb), PY(100.0), xb);
    assay_strbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">baseline</text>\n", PX(xb) + 10, PY(100.0) - 8);
    assay_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"%s\"><title>candidate: %.1f tok/s, %.2f%%</title></circle>", PX(xc), PY(q), verdict_color(c->verdict), xc, q);
    assay_strbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">candidate</text>\n", PX(xc) + 10, PY(q) + 16);
    assay_strbuf_puts(b, "</svg>\n");
#undef PX
#undef PY
}

void assay_compare_html(const assay_comparison *c, assay_strbuf *b) {
    assay_strbuf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>assay decision report</title>\n"
                         "<style>body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:960px;color:#24292f;padding:0 1em}"
                         "table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #d0d7de;padding:4px 8px}"
                         "th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}"
                         ".verdict{font-size:1.3em;padding:.6em 1em;border-radius:6px;color:#fff;display:inline-block}"
                         ".note{color:#57606a;font-size:13px}code{font-size:12px}"
                         ".smoke{background:#fff8c5;border:1px solid #d4a72c;padding:.5em 1em;border-radius:6px}</style></head><body>\n");
    assay_strbuf_puts(b, "<h1>assay decision report</h1>\n<p>baseline: <code>");
    esc(b, c->base_name);
    assay_strbuf_puts(b, "</code> ");
    esc(b, c->base_args);
    assay_strbuf_puts(b, "<br>candidate: <code>");
    esc(b, c->cand_name);
    assay_strbuf_puts(b, "</code> ");
    esc(b, c->cand_args);
    assay_strbuf_printf(b, "</p>\n<div class=\"verdict\" style=\"background:%s\">", verdict_color(c->verdict));
    assay_strbuf s = {0};
    summary_line(c, &s, 0, 0);
    esc(b, s.data);
    assay_strbuf_free(&s);
    assay_strbuf_printf(b, "</div>\n<p class=\"verdict-code\">Exit code %d: %s.</p>\n", assay_verdict_exit_code(c->verdict),
                        assay_verdict_name(c->verdict));
    if (c->limit > 0)
        assay_strbuf_printf(b, "<p class=\"smoke\"><strong>Smoke run</strong>: --limit %lld scored only the first %lld documents of "
                               "each task. Decide on full tasks (--limit 0).</p>\n",
                            (long long)c->limit, (long long)c->limit);
    assay_strbuf_puts(b, "<h2>Quality change per metric</h2>\n");
    svg_deltas(c, b);
    assay_strbuf_puts(b, "<h2>Quality against throughput</h2>\n");
    svg_tradeoff(c, b);
    assay_strbuf_printf(b, "<h2>All metrics</h2>\n<table><tr><th>task</th><th>metric</th><th>baseline</th><th>candidate</th><th>change</th><th>%.0f%% paired interval</th><th>n</th><th>McNemar p</th><th>verdict</th></tr>\n",
                        100 * c->confidence);
    for (int i = 0; i < c->n_rows; i++) {
        const assay_compare_row *r = &c->rows[i];
        char vb[32], vc[32], iv[48], p[16], v[64];
        fmt_value(vb, sizeof vb, r->base);
        fmt_value(vc, sizeof vc, r->cand);
        fmt_interval(iv, sizeof iv, r);
        fmt_p(p, sizeof p, r->p_value);
        verdict_text(r, v, sizeof v);
        assay_strbuf_puts(b, "<tr><td>");
        esc(b, r->task);
        assay_strbuf_puts(b, "</td><td><code>");
        esc(b, r->metric);
        assay_strbuf_printf(b, "</code></td><td class=\"n\">%s</td><td class=\"n\">%s</td>", vb, vc);
        if (isnan(r->rel_delta)) assay_strbuf_puts(b, "<td>-</td><td>-</td>");
        else assay_strbuf_printf(b, "<td class=\"n\">%+.2f%%</td><td>%s</td>", 100 * r->rel_delta, iv);
        assay_strbuf_printf(b, "<td class=\"n\">%lld</td><td class=\"n\">%s</td><td style=\"color:%s\">%s</td></tr>\n", (long long)r->n, p,
                            isnan(r->base) ? "#57606a" : verdict_color(r->verdict), v);
    }
    assay_strbuf_puts(b, "</table>\n");
    if (c->base_decode_tps > 0 || c->cand_decode_tps > 0) {
        assay_strbuf_puts(b, "<h2>Throughput</h2>\n<table><tr><th></th><th>baseline</th><th>candidate</th></tr>");
        for (int i = 0; i < c->n_bench; i++)
            assay_strbuf_printf(b, "<tr><td>prompt tok/s, batch %d</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>"
                                   "<tr><td>generation tok/s, batch %d</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>",
                                c->bench_batches[i], c->bench_base_prefill[i], c->bench_cand_prefill[i], c->bench_batches[i],
                                c->bench_base_decode[i], c->bench_cand_decode[i]);
        if (c->n_bench == 0)
            assay_strbuf_printf(b, "<tr><td>prefill tok/s</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>"
                                   "<tr><td>decode tok/s</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>",
                                c->base_prefill_tps, c->cand_prefill_tps, c->base_decode_tps, c->cand_decode_tps);
        if (c->base_model_bytes > 0)
            assay_strbuf_printf(b, "<tr><td>weights MiB</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td></tr>",
                                c->base_model_bytes / 1048576.0, c->cand_model_bytes / 1048576.0);
        assay_strbuf_puts(b, "</table>\n");
        if (c->throughput_note) {
            assay_strbuf_puts(b, "<p class=\"note\">");
            esc(b, c->throughput_note);
            assay_strbuf_puts(b, "</p>\n");
        }
    }
    assay_strbuf_puts(b, "<p class=\"note\">Bold rows gate the verdict (each task's primary metric). Intervals pair the two runs"
                         " document by document: McNemar's exact test and a normal interval of the paired difference for accuracies,"
                         " a paired bootstrap over documents for perplexities. A verdict follows from the interval of the degradation, not"
                         " from the point estimate: ship when the interval lies below the ship threshold, investigate when it lies"
                         " above the monitor threshold, ship with monitoring when it lies between them, otherwise inconclusive, with"
                         " n~N the documents per task that would resolve it at the observed variance."
                         " \"within noise\" means the interval includes no change."
                         "</p>\n</body></html>\n");
}
