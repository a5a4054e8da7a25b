/* cmd_dashboard.c — `assay dashboard --prometheus URL [--range 1h] [--step 15s] [--end T] [-o page.html | --serve PORT]`:
 * throughput and judged quality on one time axis, from a Prometheus server's HTTP API (/api/v1/query_range):
 *   throughput      sum(rate(vllm:generation_tokens_total[W]))
 *   judged quality  sum(rate(assay:judge_score_sum[W])) / sum(rate(assay:judge_score_count[W]))
 *   configuration   assay:engine_config_info (its labels: quantization, kv_cache_dtype, calculate_kv_scales, device)
 * W is --rate-window (default 5m). Each change of the configuration is a vertical mark labelled with what changed
 * ("quantization None -> fp8"), and a table gives each configuration's stretch with its mean throughput and score.
 * The page is one self-contained HTML file with inline SVG: no script, no font or style from the network. With
 * --serve the page is rebuilt from fresh queries on each GET /. Every Prometheus call has a connect timeout and a
 * total timeout (--timeout); an unreachable server, an HTTP error or a query error is a one-line error, exit 1. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/json.h"
#include "assay/status.h"
#include "assay/strbuf.h"
#include "cli.h"
#include "commands.h"

typedef struct series {
    char *labels; /* "k=v, k=v" (the config series), else NULL */
    double *t, *v;
    int n;
} series;

typedef struct dash_query {
    const char *prom;
    double start, end, step, timeout_s;
    const char *window;
} dash_query;

/* ---- Prometheus ---------------------------------------------------------------------------------------------- */

static size_t collect(char *p, size_t size, size_t n, void *ud) {
    assay_strbuf *b = ud;
    if (b->len + size * n > ((size_t)256 << 20)) return 0;
    assay_strbuf_append(b, p, size * n);
    return size * n;
}

/* The matrix a range query returns, as series (values that are not finite are left out). */
static assay_status query_range(const dash_query *q, const char *expr, int with_labels, series **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    CURL *h = curl_easy_init();
    if (!h) return assay_fail(ASSAY_ERR_IO, "cannot start an HTTP client");
    char *esc = curl_easy_escape(h, expr, 0);
    size_t n = strlen(q->prom);
    while (n > 0 && q->prom[n - 1] == '/') n--;
    assay_strbuf url = {0}, body = {0};
    assay_strbuf_append(&url, q->prom, n);
    assay_strbuf_printf(&url, "/api/v1/query_range?query=%s&start=%.3f&end=%.3f&step=%g", esc, q->start, q->end, q->step);
    curl_free(esc);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    long ms = (long)(q->timeout_s * 1000);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    CURLcode code = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    assay_status st = ASSAY_OK;
    assay_json_doc *doc = NULL;
    if (code != CURLE_OK) {
        st = assay_fail(ASSAY_ERR_IO, "cannot query Prometheus at %.*s: %s", (int)n, q->prom, curl_easy_strerror(code));
        goto done;
    }
    if (!body.data || assay_json_parse(body.data, body.len, &doc) != ASSAY_OK) {
        st = assay_fail(ASSAY_ERR_FORMAT, "Prometheus at %.*s answered HTTP %ld with no JSON: is this a Prometheus server?",
                        (int)n, q->prom, status);
        goto done;
    }
    const assay_json *root = assay_json_root(doc);
    if (strcmp(assay_json_string(assay_json_get(root, "status"), ""), "success") != 0) {
        st = assay_fail(ASSAY_ERR_FORMAT, "Prometheus refused the query %s (HTTP %ld): %s", expr, status,
                        assay_json_string(assay_json_get(root, "error"), "no error message"));
        goto done;
    }
    const assay_json *res = assay_json_get(assay_json_get(root, "data"), "result");
    int count = assay_json_is(res, ASSAY_JSON_ARRAY) ? (int)res->count : 0;
    series *ss = calloc((size_t)(count ? count : 1), sizeof *ss);
    int k = 0;
    for (const assay_json *r = count ? res->first : NULL; r; r = r->next, k++) {
        series *s = &ss[k];
        const assay_json *vals = assay_json_get(r, "values");
        int nv = assay_json_is(vals, ASSAY_JSON_ARRAY) ? (int)vals->count : 0;
        s->t = malloc((size_t)(nv ? nv : 1) * sizeof *s->t);
        s->v = malloc((size_t)(nv ? nv : 1) * sizeof *s->v);
        for (const assay_json *p = nv ? vals->first : NULL; p; p = p->next) {
            double t = assay_json_number(assay_json_at(p, 0), NAN);
            const char *vs = assay_json_string(assay_json_at(p, 1), NULL);
            double v = vs ? strtod(vs, NULL) : NAN;
            if (!isfinite(t) || !isfinite(v)) continue;
            s->t[s->n] = t;
            s->v[s->n++] = v;
        }
        if (with_labels) {
            assay_strbuf lb = {0};
            static const char *keys[] = {"quantization", "kv_cache_dtype", "calculate_kv_scales", "device"};
            const assay_json *m = assay_json_get(r, "metric");
            for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
                const char *v = assay_json_string(assay_json_get(m, keys[i]), NULL);
                if (v) assay_strbuf_printf(&lb, "%s%s=%s", lb.len ? ", " : "", keys[i], v);
            }
            s->labels = lb.data ? lb.data : strdup("");
        }
    }
    *out = ss;
    *n_out = count;
done:
    assay_json_doc_free(doc);
    assay_strbuf_free(&url);
    assay_strbuf_free(&body);
    return st;
}

static void series_free(series *s, int n) {
    for (int i = 0; i < n; i++) {
        free(s[i].labels);
        free(s[i].t);
        free(s[i].v);
    }
    free(s);
}

/* ---- configuration changes ----------------------------------------------------------------------------------- */

typedef struct stretch {
    double t0, t1;  /* from the first to the last sample with this configuration */
    const char *labels;
    char *change;   /* what changed from the stretch before ("quantization None -> fp8"), NULL for the first */
} stretch;

/* The value of "key" in "k=v, k=v" labels, into out. */
static void label_value(const char *labels, const char *key, char *out, size_t cap) {
    out[0] = 0;
    size_t kl = strlen(key);
    for (const char *p = labels; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1, *e = strstr(v, ", ");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= cap) n = cap - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return;
        }
        p = strstr(p, ", ");
        if (p) p += 2;
    }
}

static char *describe_change(const char *from, const char *to) {
    static const char *keys[] = {"quantization", "kv_cache_dtype", "calculate_kv_scales", "device"};
    assay_strbuf b = {0};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char a[128], c[128];
        label_value(from, keys[i], a, sizeof a);
        label_value(to, keys[i], c, sizeof c);
        if (strcmp(a, c) != 0) assay_strbuf_printf(&b, "%s%s %s -> %s", b.len ? ", " : "", keys[i], a[0] ? a : "(none)", c[0] ? c : "(none)");
    }
    return b.data ? b.data : strdup("restarted with the same configuration");
}

/* Orders the configuration series' samples in time and cuts them into stretches of one configuration. */
static int config_stretches(const series *cs, int n_cs, stretch **out) {
    int total = 0;
    for (int i = 0; i < n_cs; i++) total += cs[i].n;
    typedef struct {
        double t;
        int s;
    } ev;
    ev *e = malloc((size_t)(total ? total : 1) * sizeof *e);
    int k = 0;
    for (int i = 0; i < n_cs; i++)
        for (int j = 0; j < cs[i].n; j++) e[k++] = (ev){cs[i].t[j], i};
    /* insertion sort by time: a few thousand points at most */
    for (int i = 1; i < k; i++) {
        ev x = e[i];
        int j = i - 1;
        while (j >= 0 && (e[j].t > x.t || (e[j].t == x.t && e[j].s > x.s))) e[j + 1] = e[j], j--;
        e[j + 1] = x;
    }
    stretch *st = calloc((size_t)(k ? k : 1), sizeof *st);
    int n = 0;
    for (int i = 0; i < k; i++) {
        const char *lab = cs[e[i].s].labels;
        if (n && strcmp(st[n - 1].labels, lab) == 0) {
            st[n - 1].t1 = e[i].t;
            continue;
        }
        if (n && e[i].t == st[n - 1].t1) continue; /* two configurations at one instant: keep the first */
        st[n].t0 = st[n].t1 = e[i].t;
        st[n].labels = lab;
        st[n].change = n ? describe_change(st[n - 1].labels, lab) : NULL;
        n++;
    }
    free(e);
    *out = st;
    return n;
}

/* ---- the page ------------------------------------------------------------------------------------------------ */

static void html_text(assay_strbuf *b, const char *s) {
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

static void utc(double t, const char *fmt, char *out, size_t cap) {
    time_t tt = (time_t)floor(t);
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, cap, fmt, &tm);
}

/* A "nice" tick spacing (1, 2, 5 x 10^k) for about `want` ticks over span. */
static double nice_step(double span, int want) {
    double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static double time_step(double span) {
    static const double steps[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (span / steps[i] <= 8) return steps[i];
    return 86400 * ceil(span / 86400 / 8);
}

enum { W = 1000, HGT = 420, ML = 70, MR = 70, MT = 30, MB = 50 };

/* One series as an SVG path (gaps where no sample came for more than 1.5 steps); returns the points drawn. */
static int svg_path(assay_strbuf *b, const series *s, double t0, double t1, double y0, double y1, double step,
                    const char *cls, const char *name) {
    assay_strbuf d = {0};
    int pts = 0;
    for (int i = 0; i < s->n; i++) {
        double x = ML + (s->t[i] - t0) / (t1 - t0) * (W - ML - MR);
        double y = MT + (1 - (s->v[i] - y0) / (y1 - y0)) * (HGT - MT - MB);
        int gap = i == 0 || s->t[i] - s->t[i - 1] > 1.5 * step;
        assay_strbuf_printf(&d, "%s%.1f %.1f ", gap ? "M" : "L", x, y);
        pts++;
    }
    /* a lone sample still shows: a dot at each point when there are few */
    assay_strbuf_printf(b, "<path class=\"%s\" data-series=\"%s\" data-points=\"%d\" d=\"%s\"/>\n", cls, name, pts,
                        d.data ? d.data : "");
    if (pts && pts < 40)
        for (int i = 0; i < s->n; i++)
            assay_strbuf_printf(b, "<circle class=\"%s-dot\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>\n", cls,
                                ML + (s->t[i] - t0) / (t1 - t0) * (W - ML - MR),
                                MT + (1 - (s->v[i] - y0) / (y1 - y0)) * (HGT - MT - MB));
    assay_strbuf_free(&d);
    return pts;
}

static double mean_between(const series *s, double a, double b) {
    double sum = 0;
    int n = 0;
    for (int i = 0; s && i < s->n; i++)
        if (s->t[i] >= a && s->t[i] <= b) sum += s->v[i], n++;
    return n ? sum / n : NAN;
}

static assay_status build_page(const dash_query *q, assay_strbuf *page, char *summary, size_t summary_cap) {
    assay_strbuf e1 = {0}, e2 = {0};
    assay_strbuf_printf(&e1, "sum(rate(vllm:generation_tokens_total[%s]))", q->window);
    assay_strbuf_printf(&e2, "sum(rate(assay:judge_score_sum[%s])) / sum(rate(assay:judge_score_count[%s]))", q->window, q->window);
    series *tp = NULL, *js = NULL, *cs = NULL;
    int n_tp = 0, n_js = 0, n_cs = 0;
    assay_status st = query_range(q, e1.data, 0, &tp, &n_tp);
    if (!st) st = query_range(q, e2.data, 0, &js, &n_js);
    if (!st) st = query_range(q, "assay:engine_config_info", 1, &cs, &n_cs);
    if (st) goto done;
    const series *T = n_tp ? &tp[0] : NULL, *J = n_js ? &js[0] : NULL;
    stretch *str = NULL;
    int n_str = config_stretches(cs, n_cs, &str);

    double t0 = q->start, t1 = q->end;
    double ymax = 0;
    for (int i = 0; T && i < T->n; i++) ymax = fmax(ymax, T->v[i]);
    double ystep = nice_step(ymax > 0 ? ymax : 1, 5), ytop = ystep * ceil((ymax > 0 ? ymax * 1.05 : 1) / ystep);
    char a[64], b[64];
    utc(t0, "%Y-%m-%d %H:%M:%S", a, sizeof a);
    utc(t1, "%Y-%m-%d %H:%M:%S", b, sizeof b);

    assay_strbuf *p = page;
    assay_strbuf_puts(p, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>assay: throughput and "
                         "judged quality</title>\n<style>\n"
                         "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1040px}\n"
                         "h1{font-size:20px;margin:0 0 4px} .sub{color:#666;font-size:13px;margin-bottom:12px}\n"
                         "svg{background:#fff;border:1px solid #ddd} .grid{stroke:#eee} .axis{stroke:#888}\n"
                         "svg text{font-size:11px;fill:#444} .tp{fill:none;stroke:#1f77b4;stroke-width:2}\n"
                         ".tp-dot{fill:#1f77b4} .js{fill:none;stroke:#d62728;stroke-width:2} .js-dot{fill:#d62728}\n"
                         ".mark line{stroke:#2ca02c;stroke-width:1.5;stroke-dasharray:5 4} .mark text{fill:#2ca02c;font-weight:600}\n"
                         "table{border-collapse:collapse;font-size:13px;margin-top:16px} td,th{border:1px solid #ddd;padding:4px 8px;text-align:left}\n"
                         ".legend span{display:inline-block;margin-right:18px;font-size:13px} .sw{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:6px}\n"
                         ".warn{color:#a15c00;font-size:13px}\n"
                         "</style></head><body>\n<h1>Throughput and judged quality</h1>\n<div class=\"sub\">Prometheus ");
    html_text(p, q->prom);
    assay_strbuf_printf(p, " &middot; %s to %s UTC &middot; step %gs &middot; rate window %s</div>\n", a, b, q->step, q->window);
    assay_strbuf_puts(p, "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#1f77b4\"></i>generation throughput "
                         "(tokens/s, left axis)</span><span><i class=\"sw\" style=\"background:#d62728\"></i>mean judge score "
                         "(1-5, right axis)</span><span><i class=\"sw\" style=\"background:#2ca02c\"></i>engine configuration "
                         "changed</span></div>\n");
    assay_strbuf_printf(p, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                           "role=\"img\" aria-label=\"throughput and judge score over time\">\n", W, HGT, W, HGT);
    /* grid and axes */
    for (double y = 0; y <= ytop + 1e-9; y += ystep) {
        double py = MT + (1 - y / ytop) * (HGT - MT - MB);
        assay_strbuf_printf(p, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" "
                               "text-anchor=\"end\">%g</text>\n", ML, W - MR, py, py, ML - 6, py + 4, y);
    }
    for (int s = 1; s <= 5; s++) {
        double py = MT + (1 - (s - 1) / 4.0) * (HGT - MT - MB);
        assay_strbuf_printf(p, "<text x=\"%d\" y=\"%.1f\" style=\"fill:#d62728\">%d</text>\n", W - MR + 6, py + 4, s);
    }
    double ts = time_step(t1 - t0);
    for (double t = ceil(t0 / ts) * ts; t <= t1; t += ts) {
        double px = ML + (t - t0) / (t1 - t0) * (W - ML - MR);
        char lab[32];
        utc(t, ts >= 60 ? "%H:%M" : "%H:%M:%S", lab, sizeof lab);
        assay_strbuf_printf(p, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" "
                               "text-anchor=\"middle\">%s</text>\n", px, px, MT, HGT - MB, px, HGT - MB + 16, lab);
    }
    assay_strbuf_printf(p, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n", ML, W - MR, HGT - MB, HGT - MB);
    assay_strbuf_printf(p, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (UTC)</text>\n", (ML + W - MR) / 2, HGT - 10);
    assay_strbuf_printf(p, "<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">tokens/s</text>\n", (MT + HGT - MB) / 2);
    assay_strbuf_printf(p, "<text transform=\"translate(%d %d) rotate(90)\" text-anchor=\"middle\" style=\"fill:#d62728\">"
                           "judge score</text>\n", W - 16, (MT + HGT - MB) / 2);
    /* the configuration marks */
    for (int i = 1; i < n_str; i++) {
        double px = ML + (str[i].t0 - t0) / (t1 - t0) * (W - ML - MR);
        char when[32];
        utc(str[i].t0, "%H:%M:%S", when, sizeof when);
        assay_strbuf_printf(p, "<g class=\"mark config-change\" data-time=\"%.3f\" data-change=\"", str[i].t0);
        html_text(p, str[i].change);
        assay_strbuf_printf(p, "\"><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" "
                               "text-anchor=\"%s\">%s ", px, px, MT, HGT - MB, px + (px > W / 2 ? -4 : 4), MT + 12 + 14 * ((i - 1) % 3),
                            px > W / 2 ? "end" : "start", when);
        html_text(p, str[i].change);
        assay_strbuf_puts(p, "</text></g>\n");
    }
    int pts_tp = T ? svg_path(p, T, t0, t1, 0, ytop, q->step, "tp", "throughput") : 0;
    int pts_js = J ? svg_path(p, J, t0, t1, 1, 5, q->step, "js", "judge_score") : 0;
    assay_strbuf_puts(p, "</svg>\n");
    if (!pts_tp)
        assay_strbuf_puts(p, "<p class=\"warn\">No throughput samples in this range: is Prometheus scraping the server's "
                             "/metrics (vllm:generation_tokens_total)?</p>\n");
    if (!pts_js)
        assay_strbuf_puts(p, "<p class=\"warn\">No judge scores in this range: start the server with --judge-url (and a "
                             "--judge-sample-rate above 0) to judge live answers.</p>\n");
    if (!n_str)
        assay_strbuf_puts(p, "<p class=\"warn\">No assay:engine_config_info samples in this range: configuration changes "
                             "cannot be marked.</p>\n");
    /* each configuration's stretch */
    if (n_str) {
        assay_strbuf_puts(p, "<table><tr><th>from (UTC)</th><th>to (UTC)</th><th>engine configuration</th><th>change</th>"
                             "<th>mean tokens/s</th><th>mean judge score</th></tr>\n");
        for (int i = 0; i < n_str; i++) {
            char f[32], t[32];
            utc(str[i].t0, "%H:%M:%S", f, sizeof f);
            utc(str[i].t1, "%H:%M:%S", t, sizeof t);
            double mt = mean_between(T, str[i].t0, str[i].t1), mj = mean_between(J, str[i].t0, str[i].t1);
            assay_strbuf_printf(p, "<tr class=\"stretch\"><td>%s</td><td>%s</td><td>", f, t);
            html_text(p, str[i].labels);
            assay_strbuf_puts(p, "</td><td>");
            html_text(p, str[i].change ? str[i].change : "-");
            assay_strbuf_puts(p, "</td><td>");
            if (isfinite(mt)) assay_strbuf_printf(p, "%.1f", mt);
            else assay_strbuf_puts(p, "-");
            assay_strbuf_puts(p, "</td><td>");
            if (isfinite(mj)) assay_strbuf_printf(p, "%.2f", mj);
            else assay_strbuf_puts(p, "-");
            assay_strbuf_puts(p, "</td></tr>\n");
        }
        assay_strbuf_puts(p, "</table>\n");
    }
    assay_strbuf_puts(p, "<p class=\"sub\">Queries: ");
    html_text(p, e1.data);
    assay_strbuf_puts(p, " &middot; ");
    html_text(p, e2.data);
    assay_strbuf_puts(p, " &middot; assay:engine_config_info. After enabling FP8, expect throughput up and the judge "
                         "score within about 0.1 points; a drop of more than 0.3 points that stays needs a look.</p>\n"
                         "</body></html>\n");
    snprintf(summary, summary_cap, "%d throughput points, %d judge-score points, %d configuration change%s", pts_tp, pts_js,
             n_str > 1 ? n_str - 1 : 0, n_str == 2 ? "" : "s");
    for (int i = 0; i < n_str; i++) free(str[i].change);
    free(str);
done:
    series_free(tp, n_tp);
    series_free(js, n_js);
    series_free(cs, n_cs);
    assay_strbuf_free(&e1);
    assay_strbuf_free(&e2);
    return st;
}

/* ---- --serve ------------------------------------------------------------------------------------------------- */

typedef struct serve_ctx {
    dash_query q;
    double range;
} serve_ctx;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    serve_ctx *c = cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) return MHD_NO;
    assay_strbuf page = {0};
    unsigned status = 200;
    const char *type = "text/html; charset=utf-8";
    if (strcmp(url, "/") != 0) {
        status = 404;
        type = "text/plain";
        assay_strbuf_puts(&page, "not found: the dashboard is at /\n");
    } else {
        dash_query q = c->q;
        q.end = (double)time(NULL);
        q.start = q.end - c->range;
        char summary[256];
        if (build_page(&q, &page, summary, sizeof summary) != ASSAY_OK) {
            status = 502;
            type = "text/plain; charset=utf-8";
            assay_strbuf_clear(&page);
            assay_strbuf_printf(&page, "%s\n", assay_last_error());
        }
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(page.len, page.data ? page.data : "", MHD_RESPMEM_MUST_COPY);
    assay_strbuf_free(&page);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(con, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- the command --------------------------------------------------------------------------------------------- */

/* "90", "90s", "5m", "1h", "2d" -> seconds; <= 0 when not one. */
static double parse_duration(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    if (!*end || strcmp(end, "s") == 0) return v;
    if (strcmp(end, "m") == 0) return v * 60;
    if (strcmp(end, "h") == 0) return v * 3600;
    if (strcmp(end, "d") == 0) return v * 86400;
    return -1;
}

int assay_cmd_dashboard(int argc, char **argv) {
    const char *prom = NULL, *range_s = "1h", *step_s = "15s", *window = "5m", *out = NULL;
    double end = 0, timeout = 10;
    int64_t port = -1;
    const cli_option opts[] = {
        {NULL, "--prometheus", CLI_STRING, &prom, "URL", "the Prometheus server (http://host:9090), required"},
        {NULL, "--range", CLI_STRING, &range_s, "D", "how far back the chart goes: 90s, 30m, 1h, 2d (default 1h)"},
        {NULL, "--step", CLI_STRING, &step_s, "D", "one point per step (default 15s)"},
        {NULL, "--rate-window", CLI_STRING, &window, "D", "the window of rate() (default 5m)"},
        {NULL, "--end", CLI_FLOAT, &end, "T", "the chart's end, Unix seconds (default: now)", CLI_AT_LEAST(0)},
        {NULL, "--timeout", CLI_FLOAT, &timeout, "S", "seconds each Prometheus query may take (default 10)", CLI_IN_OPEN_CLOSED(0, 600)},
        {"-o", "--output", CLI_STRING, &out, "FILE", "write the page here (- for standard output)"},
        {NULL, "--serve", CLI_INT, &port, "PORT", "serve the page on 127.0.0.1:PORT, fresh on each load (until SIGINT)", CLI_IN(0, 65535)},
        {0}};
    const cli_spec spec = {"dashboard", "--prometheus URL [--range 1h] [--step 15s] (-o page.html | --serve PORT)",
                           "throughput and judged quality on one time axis, from Prometheus, as one HTML page", opts, 0, 0};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    cli_args_free(&args);
    double range = parse_duration(range_s), step = parse_duration(step_s);
    if (!prom) return cli_usage_error(&spec, "--prometheus URL is required");
    if (strncmp(prom, "http://", 7) != 0 && strncmp(prom, "https://", 8) != 0)
        return cli_usage_error(&spec, "--prometheus must be an http:// or https:// URL, got '%s'", prom);
    if (range <= 0) return cli_usage_error(&spec, "--range '%s' is not a duration (90s, 30m, 1h, 2d)", range_s);
    if (step <= 0) return cli_usage_error(&spec, "--step '%s' is not a duration (15s, 1m)", step_s);
    if (parse_duration(window) <= 0) return cli_usage_error(&spec, "--rate-window '%s' is not a duration (1m, 5m)", window);
    if (range / step > 11000) return cli_usage_error(&spec, "--range / --step is %.0f points: Prometheus answers at most 11000", range / step);
    if (!out && port < 0) return cli_usage_error(&spec, "say where the page goes: -o FILE or --serve PORT");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        assay_fail(ASSAY_ERR_IO, "cannot initialise libcurl");
        return cli_report_error("dashboard");
    }
    dash_query q = {prom, 0, 0, step, timeout, window};
    q.end = end > 0 ? end : (double)time(NULL);
    q.start = q.end - range;
    int exit_code = CLI_EXIT_OK;
    if (out) {
        assay_strbuf page = {0};
        char summary[256];
        FILE *f = NULL;
        if (build_page(&q, &page, summary, sizeof summary) != ASSAY_OK) exit_code = cli_report_error("dashboard");
        else if (!(f = fopen(out, "w")) || fwrite(page.data, 1, page.len, f) != page.len || fclose(f) != 0) {
            if (f) fclose(f);
            assay_fail(ASSAY_ERR_IO, "cannot write %s", out);
            exit_code = cli_report_error("dashboard");
        } else
            fprintf(stderr, "assay dashboard: %s: %s\n", out, summary);
        assay_strbuf_free(&page);
    }
    if (exit_code == CLI_EXIT_OK && port >= 0) {
        sigset_t sigs;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
        serve_ctx c = {q, range};
        struct sockaddr_in a4;
        memset(&a4, 0, sizeof a4);
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
                                                (uint16_t)port, NULL, NULL, on_request, &c, MHD_OPTION_SOCK_ADDR, &a4,
                                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
        if (!d) {
            assay_fail(ASSAY_ERR_IO, "cannot listen on 127.0.0.1:%lld", (long long)port);
            exit_code = cli_report_error("dashboard");
        } else {
            const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
            fprintf(stderr, "assay dashboard: http://127.0.0.1:%d/ (the last %s from %s, fresh on each load)\n",
                    info ? info->port : (int)port, range_s, prom);
            int sig;
            sigwait(&sigs, &sig);
            MHD_stop_daemon(d);
        }
    }
    curl_global_cleanup();
    return exit_code;
}
