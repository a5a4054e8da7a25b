/* compare.c — paired statistics between two results files and the verdict (see include/assay/compare.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assay/compare.h"
#include "assay/file.h"
#include "assay/json.h"

/* ---- statistics ------------------------------------------------------------------------------------------- */

double assay_mcnemar_exact_p(int64_t b, int64_t c) {
    int64_t n = b + c, k = b < c ? b : c;
    if (n == 0) return 1.0;
    /* P[X <= k] for X ~ Binomial(n, 1/2), summed in log space so large n does not overflow */
    double lcdf = -INFINITY;
    for (int64_t i = 0; i <= k; i++) {
        double lt = lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - (double)n * log(2.0);
        double hi = lcdf > lt ? lcdf : lt, lo = lcdf > lt ? lt : lcdf;
        lcdf = hi + log1p(exp(lo - hi));
    }
    double p = 2.0 * exp(lcdf);
    return p > 1.0 ? 1.0 : p;
}

void assay_paired_mean_interval(const double *base, const double *cand, int64_t n, double z, double *mean_diff,
                                double *lo, double *hi) {
    double s = 0, v = 0;
    for (int64_t i = 0; i < n; i++) s += cand[i] - base[i];
    double m = n ? s / (double)n : NAN;
    for (int64_t i = 0; i < n; i++) {
        double d = cand[i] - base[i] - m;
        v += d * d;
    }
    double se = n > 1 ? sqrt(v / (double)(n - 1) / (double)n) : NAN;
    *mean_diff = m;
    *lo = m - z * se;
    *hi = m + z * se;
}

void assay_paired_binary_interval(int64_t b, int64_t c, int64_t n, double z, double *lo, double *hi) {
    if (n <= 0) {
        *lo = *hi = NAN;
        return;
    }
    /* Agresti & Min (2005): half a document added to each cell of the paired 2x2 table */
    double bb = (double)b + 0.5, cc = (double)c + 0.5, nn = (double)n + 2;
    double d = (cc - bb) / nn, var = ((bb + cc) - (cc - bb) * (cc - bb) / nn) / (nn * nn);
    double h = z * sqrt(var > 0 ? var : 0);
    *lo = d - h;
    *hi = d + h;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double ratio_stat(double num, double den, int kind) {
    return kind == 0 ? exp(-num / den) : -num / den / log(2.0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void assay_paired_bootstrap_ratio(const double *num_b, const double *den_b, const double *num_c, const double *den_c,
                                  int64_t n, int kind, int iters, double alpha, uint64_t seed, double *rel,
                                  double *lo, double *hi) {
    double nb = 0, db = 0, nc = 0, dc = 0;
    for (int64_t i = 0; i < n; i++) nb += num_b[i], db += den_b[i], nc += num_c[i], dc += den_c[i];
    *rel = ratio_stat(nc, dc, kind) / ratio_stat(nb, db, kind) - 1.0;
    if (n < 2 || iters < 10) {
        *lo = *hi = NAN;
        return;
    }
    double *stats = assay_xmalloc(sizeof(double) * (size_t)iters);
    uint64_t s = seed;
    for (int it = 0; it < iters; it++) {
        nb = db = nc = dc = 0;
        for (int64_t k = 0; k < n; k++) {
            /* the same document index for both runs: that is what makes the bootstrap paired */
            int64_t i = (int64_t)(((unsigned __int128)splitmix64(&s) * (uint64_t)n) >> 64);
            nb += num_b[i], db += den_b[i], nc += num_c[i], dc += den_c[i];
        }
        stats[it] = ratio_stat(nc, dc, kind) / ratio_stat(nb, db, kind) - 1.0;
    }
    qsort(stats, (size_t)iters, sizeof(double), cmp_double);
    int64_t ilo = (int64_t)floor(alpha / 2 * (double)(iters - 1)), ihi = (int64_t)ceil((1 - alpha / 2) * (double)(iters - 1));
    *lo = stats[ilo];
    *hi = stats[ihi];
    free(stats);
}

/* ---- comparison -------------------------------------------------------------------------------------------- */

const char *assay_verdict_name(assay_verdict v) {
    switch (v) {
    case ASSAY_VERDICT_SHIP: return "ship";
    case ASSAY_VERDICT_MONITOR: return "ship with monitoring";
    case ASSAY_VERDICT_INCONCLUSIVE: return "inconclusive";
    case ASSAY_VERDICT_INVESTIGATE: return "investigate";
    }
    return "?";
}

int assay_verdict_exit_code(assay_verdict v) {
    switch (v) {
    case ASSAY_VERDICT_SHIP: return 0;
    case ASSAY_VERDICT_MONITOR: return 3;
    case ASSAY_VERDICT_INVESTIGATE: return 4;
    case ASSAY_VERDICT_INCONCLUSIVE: return 5;
    }
    return 1;
}

/* Agresti-Min interval of the degradation in % at n documents with the changed ones in the given proportions. */
static void binary_degradation(double worse, double better, double n, double base_mean, double z, double *lo, double *hi) {
    double bb = worse + 0.5, cc = better + 0.5, nn = n + 2;
    double d = (cc - bb) / nn, var = ((bb + cc) - (cc - bb) * (cc - bb) / nn) / (nn * nn);
    double h = z * sqrt(var > 0 ? var : 0);
    *lo = -100 * (d + h) / fabs(base_mean);
    *hi = -100 * (d - h) / fabs(base_mean);
}

int64_t assay_binary_docs_to_resolve(int64_t worse, int64_t better, int64_t n, double base_mean, double z, double threshold,
                                     int below) {
    if (n <= 0 || base_mean == 0) return -1;
    double fw = (double)worse / (double)n, fb = (double)better / (double)n;
    /* cleared at m documents: the interval lies below (or above) the threshold */
#define CLEARED(m) (binary_degradation(fw * (m), fb * (m), (m), base_mean, z, &lo, &hi), below ? hi < threshold : lo > threshold)
    double lo, hi, a = (double)n, b = 1e12;
    if (CLEARED(a)) return n;
    if (!CLEARED(b)) return -1;
    while (b - a > 0.5) { /* cleared is monotone in m once the point estimate lies on the far side */
        double mid = floor((a + b) / 2);
        if (mid <= a) break;
        if (CLEARED(mid)) b = mid;
        else a = mid;
    }
#undef CLEARED
    return (int64_t)b;
}

int64_t assay_docs_to_resolve(int64_t n, double half, double gap) {
    if (n <= 0 || !(half > 0) || !(gap > 0) || !isfinite(half)) return -1;
    double need = ceil((double)n * (half / gap) * (half / gap));
    return need > 1e15 ? -1 : (int64_t)need;
}

void assay_compare_options_default(assay_compare_options *o) {
    o->ship_below = 0.5;
    o->monitor_up_to = 1.5;
    o->bootstrap_iters = 2000;
    o->confidence = 0.95;
    o->seed = 1234;
    o->all_metrics_gate = 0;
}

/* Each task's primary metrics: the ones its benchmark is quoted by. */
static int is_primary(const char *task, const char *metric) {
    static const struct {
        const char *task, *metric;
    } table[] = {
        {"hellaswag", "acc_norm,none"}, {"arc_challenge", "acc_norm,none"}, {"arc_easy", "acc_norm,none"},
        {"piqa", "acc_norm,none"}, {"mmlu", "acc,none"}, {"gsm8k", "exact_match,strict-match"},
        {"gsm8k", "exact_match,flexible-extract"}, {"wikitext", "word_perplexity,none"},
        {"heldout", "perplexity,none"}, {"text", "perplexity,none"},
    };
    int known = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].task, task) != 0) continue;
        known = 1;
        if (strcmp(table[i].metric, metric) == 0) return 1;
    }
    return known ? 0 : -1; /* -1: task not in the table (its first metric gates) */
}

static int default_higher_is_better(const char *metric) {
    return !(strstr(metric, "perplexity") || strstr(metric, "bits_per") || strstr(metric, "kld") ||
             strstr(metric, "ppl_ratio"));
}

/* The members of a group, recursively, from "group_subtasks". */
static void collect_members(const assay_json *subtasks, const char *name, const char ***out, int *n, int depth) {
    const assay_json *list = assay_json_get(subtasks, name);
    if (!list || depth > 8) {
        *out = assay_xrealloc(*out, sizeof(char *) * (size_t)(*n + 1));
        (*out)[(*n)++] = name;
        return;
    }
    for (const assay_json *e = list->first; e; e = e->next)
        if (e->type == ASSAY_JSON_STRING) collect_members(subtasks, e->str, out, n, depth + 1);
}

static int is_member(const assay_json *subtasks, const char *name) {
    for (const assay_json *g = subtasks ? subtasks->first : NULL; g; g = g->next)
        for (const assay_json *e = g->first; e; e = e->next)
            if (e->type == ASSAY_JSON_STRING && strcmp(e->str, name) == 0) return 1;
    return 0;
}

typedef struct paired {
    double *b, *c, *bd, *cd; /* values (or numerators) and denominators */
    int64_t n;
} paired;

static const assay_json *find_doc(const assay_json *arr, int64_t doc_id, const assay_json **hint) {
    /* samples are written in doc order, so the next element is almost always the one */
    const assay_json *h = *hint ? (*hint)->next : NULL;
    if (h && assay_json_int(assay_json_get(h, "doc_id"), -1) == doc_id) return *hint = h;
    for (const assay_json *e = arr->first; e; e = e->next)
        if (assay_json_int(assay_json_get(e, "doc_id"), -1) == doc_id) return *hint = e;
    return NULL;
}

/* Pairs the samples of `tasks` in both files on doc_id: field `num` (and `den` when not NULL). */
static void pair_samples(const assay_json *sb, const assay_json *sc, const char **tasks, int n_tasks, const char *num,
                         const char *den, paired *p) {
    memset(p, 0, sizeof *p);
    int64_t cap = 0;
    for (int t = 0; t < n_tasks; t++) {
        const assay_json *ab = assay_json_get(sb, tasks[t]), *ac = assay_json_get(sc, tasks[t]);
        if (!assay_json_is(ab, ASSAY_JSON_ARRAY) || !assay_json_is(ac, ASSAY_JSON_ARRAY)) continue;
        const assay_json *hint = NULL;
        for (const assay_json *eb = ab->first; eb; eb = eb->next) {
            int64_t id = assay_json_int(assay_json_get(eb, "doc_id"), -1);
            const assay_json *ec = find_doc(ac, id, &hint);
            const assay_json *vb = assay_json_get(eb, num), *vc = ec ? assay_json_get(ec, num) : NULL;
            if (!assay_json_is(vb, ASSAY_JSON_NUMBER) || !assay_json_is(vc, ASSAY_JSON_NUMBER)) continue;
            if (p->n == cap) {
                cap = cap ? 2 * cap : 256;
                p->b = assay_xrealloc(p->b, sizeof(double) * (size_t)cap);
                p->c = assay_xrealloc(p->c, sizeof(double) * (size_t)cap);
                p->bd = assay_xrealloc(p->bd, sizeof(double) * (size_t)cap);
                p->cd = assay_xrealloc(p->cd, sizeof(double) * (size_t)cap);
            }
            p->b[p->n] = vb->num;
            p->c[p->n] = vc->num;
            p->bd[p->n] = den ? assay_json_number(assay_json_get(eb, den), NAN) : 1;
            p->cd[p->n] = den ? assay_json_number(assay_json_get(ec, den), NAN) : 1;
            if (den && (isnan(p->bd[p->n]) || isnan(p->cd[p->n]))) continue;
            p->n++;
        }
    }
}

static void paired_free(paired *p) {
    free(p->b);
    free(p->c);
    free(p->bd);
    free(p->cd);
}

/* Ratio metrics: which sample fields make them, and how. */
static int ratio_fields(const char *metric, const char **den, int *kind) {
    *kind = 0;
    if (strncmp(metric, "word_perplexity,", 16) == 0) *den = "words";
    else if (strncmp(metric, "byte_perplexity,", 16) == 0) *den = "bytes";
    else if (strncmp(metric, "bits_per_byte,", 14) == 0) *den = "bytes", *kind = 1;
    else if (strncmp(metric, "token_perplexity,", 17) == 0 || strncmp(metric, "perplexity,", 11) == 0) *den = "tokens";
    else if (strncmp(metric, "bits_per_token,", 15) == 0) *den = "tokens", *kind = 1;
    else return 0;
    return 1;
}

static void add_row(assay_comparison *c, assay_compare_row *r) {
    c->rows = assay_xrealloc(c->rows, sizeof *c->rows * (size_t)(c->n_rows + 1));
    c->rows[c->n_rows++] = *r;
}

static double task_tps(const assay_json *root, const char *task) {
    return assay_json_number(assay_json_get(assay_json_get(assay_json_get(assay_json_get(root, "assay"), "timings"), task),
                                            "tokens_per_second"),
                             0);
}

static char *dup_or_empty(const char *s) { return assay_xstrdup(s ? s : ""); }

/* A row without per-sample records: an interval of the difference from the two files' own stderrs, as if the runs
 * were independent (var(c - b) = se_b^2 + se_c^2). Pairing only narrows it (the runs share their documents), so a
 * decision made on it stands. The document count comes from "n-samples". */
static void unpaired_interval(const assay_json *rb, const assay_json *rc, const assay_json *tb, const assay_json *tc,
                              const char *task, const char *metric, double z, assay_compare_row *r) {
    char se_key[160];
    const char *comma = strchr(metric, ',');
    if (comma) snprintf(se_key, sizeof se_key, "%.*s_stderr%s", (int)(comma - metric), metric, comma);
    else snprintf(se_key, sizeof se_key, "%s_stderr", metric);
    const assay_json *sb = assay_json_get(tb, se_key), *sc = assay_json_get(tc, se_key);
    if (!assay_json_is(sb, ASSAY_JSON_NUMBER) || !assay_json_is(sc, ASSAY_JSON_NUMBER) || r->base == 0) return;
    double half = z * sqrt(sb->num * sb->num + sc->num * sc->num) / fabs(r->base);
    double rel = (r->cand - r->base) / fabs(r->base);
    r->rel_lo = rel - half;
    r->rel_hi = rel + half;
    r->unpaired_interval = 1;
    int64_t nb = assay_json_int(assay_json_get(assay_json_get(assay_json_get(rb, "n-samples"), task), "effective"), -1);
    int64_t nc = assay_json_int(assay_json_get(assay_json_get(assay_json_get(rc, "n-samples"), task), "effective"), -1);
    r->n = nb > 0 && nc > 0 ? (nb < nc ? nb : nc) : 0;
}

/* The row's verdict from the interval of its degradation (compare.h). 1e-9 percentage points absorb rounding, so an
 * interval ending at 0.591 vs 0.600 counts as reaching exactly 1.5%. */
static void decide_row(assay_compare_row *r, const assay_compare_options *o, double z) {
    const double eps = 1e-9, ship = o->ship_below, mon = o->monitor_up_to;
    r->deg_lo = r->deg_hi = NAN;
    r->n_needed = 0;
    if (!isnan(r->rel_lo) && !isnan(r->rel_hi)) {
        if (r->higher_is_better) r->deg_lo = -100 * r->rel_hi, r->deg_hi = -100 * r->rel_lo;
        else r->deg_lo = 100 * r->rel_lo, r->deg_hi = 100 * r->rel_hi;
    }
    if (isnan(r->degradation) || (r->base == 0 && isnan(r->deg_lo))) { /* a baseline of zero: no relative change */
        r->verdict = r->base == r->cand ? ASSAY_VERDICT_SHIP : ASSAY_VERDICT_INVESTIGATE;
        return;
    }
    if (isnan(r->deg_lo)) { /* no interval at all: nothing to decide on */
        r->verdict = ASSAY_VERDICT_INCONCLUSIVE;
        r->n_needed = -1;
        return;
    }
    if (r->deg_hi < ship - eps) r->verdict = ASSAY_VERDICT_SHIP;
    else if (r->deg_lo > mon + eps) r->verdict = ASSAY_VERDICT_INVESTIGATE;
    else if (r->deg_lo >= ship - eps && r->deg_hi <= mon + eps) r->verdict = ASSAY_VERDICT_MONITOR;
    else {
        r->verdict = ASSAY_VERDICT_INCONCLUSIVE;
        /* How many documents would resolve it. For a mean metric the interval's half-width is
         *     h = z * s_d / (sqrt(n) * |mean_base|) * 100   (percent; s_d the SD of the paired per-document differences)
         * and it must shrink below the gap g = |D - T| between the degradation D and the nearest threshold T, so at the
         * observed s_d the documents needed are
         *     n' = (z * s_d * 100 / (|mean_base| * g))^2 = n * (h / g)^2.
         * The second form holds for the bootstrap (perplexity) and unpaired intervals too, whose width also falls as
         * 1/sqrt(n); h is taken on the side of the interval that faces T. For 0/1 outcomes the variance is Agresti and
         * Min's, with the changed documents in their observed proportions: the same condition solved for n'
         * (assay_binary_docs_to_resolve), which also covers samples where no document changed (the plain formula
         * would take their zero variance at face value). Clearing the nearest threshold decides the row: below both
         * it ships, between them the farther threshold is cleared as well, above both it is investigated. */
        double D = r->degradation;
        double t = fabs(D - ship) <= fabs(D - mon) ? ship : mon;
        if (r->binary)
            r->n_needed = assay_binary_docs_to_resolve(r->n_worse, r->n_better, r->n, r->base_mean, z, t, D < t);
        else {
            double half = D < t ? r->deg_hi - D : D - r->deg_lo;
            r->n_needed = assay_docs_to_resolve(r->n, half, fabs(D - t));
        }
    }
}

static assay_status compare_docs(const assay_json *rb, const assay_json *rc, const assay_compare_options *o,
                                 assay_comparison **out) {
    const assay_json *resb = assay_json_get(rb, "results"), *resc = assay_json_get(rc, "results");
    if (!assay_json_is(resb, ASSAY_JSON_OBJECT) || !assay_json_is(resc, ASSAY_JSON_OBJECT))
        return assay_fail(ASSAY_ERR_FORMAT, "not an lm-eval results file: no \"results\" object");
    if (!(o->ship_below >= 0 && o->monitor_up_to >= o->ship_below))
        return assay_fail(ASSAY_ERR_ARG, "thresholds must satisfy 0 <= ship (%g) <= monitor (%g)", o->ship_below, o->monitor_up_to);
    const assay_json *subtasks = assay_json_get(rb, "group_subtasks"), *sb = assay_json_get(rb, "samples"),
                     *sc = assay_json_get(rc, "samples"), *hib = assay_json_get(rb, "higher_is_better");
    assay_comparison *c = assay_xcalloc(1, sizeof *c);
    c->base_name = dup_or_empty(assay_json_string(assay_json_get(rb, "model_name"), NULL));
    c->cand_name = dup_or_empty(assay_json_string(assay_json_get(rc, "model_name"), NULL));
    c->base_args = dup_or_empty(assay_json_string(assay_json_get(assay_json_get(rb, "config"), "model_args"), NULL));
    c->cand_args = dup_or_empty(assay_json_string(assay_json_get(assay_json_get(rc, "config"), "model_args"), NULL));
    c->thresholds[0] = o->ship_below;
    c->thresholds[1] = o->monitor_up_to;
    c->confidence = o->confidence;
    c->worst_row = -1;
    double z = 1.959963984540054; /* 95% */
    if (o->confidence > 0 && o->confidence < 1) {
        /* inverse normal by bisection on erfc: precise enough for an interval half-width */
        double lo = 0, hi = 10, target = 1 - o->confidence;
        for (int i = 0; i < 100; i++) {
            double mid = (lo + hi) / 2;
            if (erfc(mid / sqrt(2.0)) > target) lo = mid;
            else hi = mid;
        }
        z = (lo + hi) / 2;
    }
    for (const assay_json *tb = resb->first; tb; tb = tb->next) {
        const char *task = tb->key;
        const assay_json *tc = assay_json_get(resc, task);
        if (!tc || is_member(subtasks, task)) continue;
        int first_metric = 1;
        for (const assay_json *m = tb->first; m; m = m->next) {
            if (m->type != ASSAY_JSON_NUMBER || strstr(m->key, "_stderr")) continue;
            const assay_json *mc = assay_json_get(tc, m->key);
            if (!assay_json_is(mc, ASSAY_JSON_NUMBER)) continue;
            assay_compare_row r;
            memset(&r, 0, sizeof r);
            r.task = assay_xstrdup(task);
            r.metric = assay_xstrdup(m->key);
            char name[128];
            const char *comma = strchr(m->key, ',');
            snprintf(name, sizeof name, "%.*s", (int)(comma ? comma - m->key : (long)strlen(m->key)), m->key);
            r.higher_is_better = assay_json_bool(assay_json_get(assay_json_get(hib, task), name), default_higher_is_better(name));
            int prim = is_primary(task, m->key);
            r.gating = o->all_metrics_gate || prim == 1 || (prim == -1 && first_metric);
            first_metric = 0;
            r.base = m->num;
            r.cand = mc->num;
            r.rel_delta = r.base == r.cand ? 0 : r.base != 0 ? (r.cand - r.base) / fabs(r.base) : NAN;
            r.rel_lo = r.rel_hi = NAN;
            r.p_value = NAN;
            r.n_task = assay_json_int(assay_json_get(assay_json_get(assay_json_get(rb, "n-samples"), task), "original"), 0);
            r.base_tps = task_tps(rb, task);
            r.cand_tps = task_tps(rc, task);
            const char **members = NULL;
            int n_members = 0;
            collect_members(subtasks, task, &members, &n_members, 0);
            const char *den = NULL;
            int kind = 0;
            paired p;
            if (ratio_fields(m->key, &den, &kind)) {
                pair_samples(sb, sc, members, n_members, "loglikelihood", den, &p);
                if (p.n > 0) {
                    double rel, lo, hi;
                    assay_paired_bootstrap_ratio(p.b, p.bd, p.c, p.cd, p.n, kind, o->bootstrap_iters, 1 - o->confidence,
                                                 o->seed, &rel, &lo, &hi);
                    r.paired = 1;
                    r.n = p.n;
                    r.rel_lo = lo;
                    r.rel_hi = hi;
                }
            } else {
                pair_samples(sb, sc, members, n_members, m->key, NULL, &p);
                if (p.n > 0) {
                    double md, lo, hi, mb = 0;
                    for (int64_t i = 0; i < p.n; i++) mb += p.b[i];
                    mb /= (double)p.n;
                    int binary = 1;
                    int64_t nb = 0, nc = 0;
                    for (int64_t i = 0; i < p.n && binary; i++) {
                        binary = (p.b[i] == 0 || p.b[i] == 1) && (p.c[i] == 0 || p.c[i] == 1);
                        nb += p.b[i] == 1 && p.c[i] == 0;
                        nc += p.b[i] == 0 && p.c[i] == 1;
                    }
                    if (binary) assay_paired_binary_interval(nb, nc, p.n, z, &lo, &hi);
                    else assay_paired_mean_interval(p.b, p.c, p.n, z, &md, &lo, &hi);
                    r.paired = 1;
                    r.n = p.n;
                    r.binary = binary;
                    r.n_worse = r.higher_is_better ? nb : nc;
                    r.n_better = r.higher_is_better ? nc : nb;
                    r.base_mean = mb;
                    if (mb != 0) {
                        r.rel_lo = lo / fabs(mb);
                        r.rel_hi = hi / fabs(mb);
                    }
                    if (binary) r.p_value = assay_mcnemar_exact_p(nb, nc);
                }
            }
            paired_free(&p);
            free(members);
            if (!r.paired) unpaired_interval(rb, rc, tb, tc, task, m->key, z, &r);
            double bad = r.higher_is_better ? -r.rel_delta : r.rel_delta;
            r.degradation = 100.0 * bad;
            r.within_noise = !isnan(r.rel_lo) && r.rel_lo <= 0 && r.rel_hi >= 0;
            decide_row(&r, o, z);
            add_row(c, &r);
        }
    }
    /* information only: the candidate's KL divergence against the baseline, when it was measured */
    const assay_json *kld = assay_json_get(resc, "kld");
    if (kld && !assay_json_get(resb, "kld")) {
        for (const assay_json *m = kld->first; m; m = m->next) {
            if (m->type != ASSAY_JSON_NUMBER || strstr(m->key, "_stderr")) continue;
            assay_compare_row r;
            memset(&r, 0, sizeof r);
            r.task = assay_xstrdup("kld");
            r.metric = assay_xstrdup(m->key);
            r.base = NAN;
            r.cand = m->num;
            r.rel_delta = r.rel_lo = r.rel_hi = r.p_value = r.degradation = r.deg_lo = r.deg_hi = NAN;
            add_row(c, &r);
        }
    }
    int any = 0;
    for (int i = 0; i < c->n_rows; i++) any |= c->rows[i].gating;
    if (!any)
        for (int i = 0; i < c->n_rows; i++) c->rows[i].gating = !isnan(c->rows[i].base);
    double worst = -INFINITY;
    assay_verdict wv = ASSAY_VERDICT_SHIP;
    for (int i = 0; i < c->n_rows; i++) {
        const assay_compare_row *r = &c->rows[i];
        if (!r->gating) continue;
        /* the worst verdict; among equals the largest degradation, or for inconclusive rows the most documents needed */
        double d = r->verdict == ASSAY_VERDICT_INCONCLUSIVE ? (r->n_needed < 0 ? INFINITY : (double)r->n_needed)
                   : isnan(r->degradation)                  ? INFINITY
                                                            : r->degradation;
        if (c->worst_row < 0 || r->verdict > wv || (r->verdict == wv && d > worst)) {
            wv = r->verdict;
            worst = d;
            c->worst_row = i;
        }
    }
    c->verdict = wv;
    c->n_needed = 0;
    for (int i = 0; i < c->n_rows && wv == ASSAY_VERDICT_INCONCLUSIVE; i++) {
        const assay_compare_row *r = &c->rows[i];
        if (!r->gating || r->verdict != ASSAY_VERDICT_INCONCLUSIVE) continue;
        if (r->n_needed < 0) {
            c->n_needed = -1;
            break;
        }
        if (r->n_needed > c->n_needed) c->n_needed = r->n_needed;
    }
    /* a smoke run: either file was made with --limit */
    int64_t lb = assay_json_int(assay_json_get(assay_json_get(rb, "config"), "limit"), 0);
    int64_t lc = assay_json_int(assay_json_get(assay_json_get(rc, "config"), "limit"), 0);
    c->limit = lb > lc ? lb : lc;
    if (c->n_rows == 0) {
        assay_comparison_free(c);
        return assay_fail(ASSAY_ERR_ARG, "the two files have no task and metric in common");
    }
    *out = c;
    return ASSAY_OK;
}

assay_status assay_compare_texts(const char *base_json, size_t base_len, const char *cand_json, size_t cand_len,
                                 const assay_compare_options *o, assay_comparison **out) {
    assay_json_doc *db = NULL, *dc = NULL;
    assay_status st = assay_json_parse(base_json, base_len, &db);
    if (st != ASSAY_OK) return assay_fail_context(st, "baseline results");
    st = assay_json_parse(cand_json, cand_len, &dc);
    if (st != ASSAY_OK) {
        assay_json_doc_free(db);
        return assay_fail_context(st, "candidate results");
    }
    st = compare_docs(assay_json_root(db), assay_json_root(dc), o, out);
    assay_json_doc_free(db);
    assay_json_doc_free(dc);
    return st;
}

assay_status assay_compare_files(const char *base_path, const char *cand_path, const assay_compare_options *o,
                                 assay_comparison **out) {
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    assay_status st = assay_read_file(base_path, &a, &na);
    if (st == ASSAY_OK) st = assay_read_file(cand_path, &b, &nb);
    if (st == ASSAY_OK) {
        st = assay_compare_texts(a, na, b, nb, o, out);
        if (st != ASSAY_OK) st = assay_fail_context(st, "%s vs %s", base_path, cand_path);
    }
    free(a);
    free(b);
    return st;
}

void assay_comparison_free(assay_comparison *c) {
    if (!c) return;
    for (int i = 0; i < c->n_rows; i++) {
        free(c->rows[i].task);
        free(c->rows[i].metric);
    }
    free(c->rows);
    free(c->base_name);
    free(c->cand_name);
    free(c->base_args);
    free(c->cand_args);
    free(c->throughput_note);
    free(c);
}
