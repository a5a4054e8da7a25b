/* test_compare.c — the paired statistics and the verdict of `assay compare`.
 * Expected values are computed, not invented:
 *   - McNemar exact p-values: 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c) evaluated in exact rational arithmetic
 *     (Python fractions + math.comb; equal to scipy.stats.binomtest(b, b+c, 0.5).pvalue);
 *   - identical result files: every delta is exactly zero; perplexity intervals are zero, accuracy intervals are
 *     Agresti-Min's +-z / (n + 2) (no changed document is weak evidence at small n): "ship" only for large n;
 *   - synthetic pairs with a known shift: the interval covers the true shift in about the nominal share of
 *     repeated experiments (accuracy pairs and perplexity documents drawn from known distributions);
 *   - verdicts from intervals: synthetic per-document values whose paired interval clearly clears each threshold
 *     give ship, ship with monitoring and investigate; a 20-document binary sample (a smoke run) whose interval spans
 *     the thresholds is inconclusive, with the documents needed computed here from the paired SD by the formula
 *     n = (z * s_d * 100 / (|mean_base| * gap))^2; files without samples fall back to their stderrs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assay/compare.h"
#include "check.h"

static uint64_t rng_state = 42;
static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) { /* Box-Muller */
    double u = urand(), v = urand();
    return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static void test_mcnemar(void) {
    CHECK_NEAR(assay_mcnemar_exact_p(10, 3), 0.09228515625, 1e-12);
    CHECK_NEAR(assay_mcnemar_exact_p(3, 10), 0.09228515625, 1e-12);
    CHECK_NEAR(assay_mcnemar_exact_p(25, 10), 0.01667384780012071, 1e-12);
    CHECK_NEAR(assay_mcnemar_exact_p(1000, 900), 0.02310884510890107, 1e-10);
    CHECK_NEAR(assay_mcnemar_exact_p(7, 7), 1.0, 0);
    CHECK_NEAR(assay_mcnemar_exact_p(0, 5), 0.0625, 1e-15);
    CHECK_NEAR(assay_mcnemar_exact_p(0, 0), 1.0, 0);
}

/* A results file with one task: `acc,none` per document, or wikitext-style loglikelihood/words/bytes. */
static char *acc_file(const char *task, const double *acc, int64_t n) {
    assay_strbuf b = {0};
    double m = 0;
    for (int64_t i = 0; i < n; i++) m += acc[i];
    m /= (double)n;
    assay_strbuf_printf(&b, "{\"results\": {\"%s\": {\"alias\": \"%s\", \"acc,none\": %.17g, \"acc_stderr,none\": 0.01}}, "
                            "\"higher_is_better\": {\"%s\": {\"acc\": true}}, \"samples\": {\"%s\": [",
                        task, task, m, task, task);
    for (int64_t i = 0; i < n; i++) assay_strbuf_printf(&b, "%s{\"doc_id\": %lld, \"acc,none\": %.17g}", i ? "," : "", (long long)i, acc[i]);
    assay_strbuf_puts(&b, "]}}");
    return b.data;
}

static char *ppl_file(const double *ll, const double *words, int64_t n) {
    assay_strbuf b = {0};
    double sl = 0, sw = 0;
    for (int64_t i = 0; i < n; i++) sl += ll[i], sw += words[i];
    assay_strbuf_printf(&b, "{\"results\": {\"wikitext\": {\"word_perplexity,none\": %.17g, \"word_perplexity_stderr,none\": \"N/A\"}}, "
                            "\"samples\": {\"wikitext\": [",
                        exp(-sl / sw));
    for (int64_t i = 0; i < n; i++)
        assay_strbuf_printf(&b, "%s{\"doc_id\": %lld, \"loglikelihood\": %.17g, \"words\": %g, \"bytes\": %g, \"tokens\": %g}", i ? "," : "",
                            (long long)i, ll[i], words[i], 5 * words[i], 1.3 * words[i]);
    assay_strbuf_puts(&b, "]}}");
    return b.data;
}

static assay_comparison *compare(const char *a, const char *b, const assay_compare_options *o) {
    assay_comparison *c = NULL;
    CHECK_OK(assay_compare_texts(a, strlen(a), b, strlen(b), o, &c));
    return c;
}

static void test_identical(void) {
    assay_compare_options o;
    assay_compare_options_default(&o);
    enum { N = 500 };
    double acc[N], ll[N], w[N];
    for (int i = 0; i < N; i++) {
        acc[i] = urand() < 0.6;
        w[i] = 50 + (int)(urand() * 500);
        ll[i] = -w[i] * (3 + urand());
    }
    char *fa = acc_file("hellaswag", acc, N), *fp = ppl_file(ll, w, N);
    assay_comparison *c = compare(fa, fa, &o);
    if (c) {
        /* no document changed: no change, but 500 unchanged documents do not rule out 0.5% (Agresti-Min: the
         * interval is +-z / (N + 2) around zero, about +-0.65% of an accuracy of 0.6) */
        double mb = 0;
        for (int i = 0; i < N; i++) mb += acc[i] / N;
        CHECK(c->n_rows == 1 && c->rows[0].paired && c->rows[0].n == N);
        CHECK(c->rows[0].rel_delta == 0 && c->rows[0].rel_lo == -c->rows[0].rel_hi);
        CHECK_NEAR(c->rows[0].rel_hi, 1.959963984540054 / (N + 2) / mb, 1e-12);
        CHECK(c->rows[0].p_value == 1.0 && c->rows[0].within_noise);
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE && c->n_needed > N);
        assay_comparison_free(c);
    }
    /* 20,000 unchanged documents do: ship */
    enum { BIG = 20000 };
    static double big[BIG];
    for (int i = 0; i < BIG; i++) big[i] = (i * 7919) % 10 < 6; /* no draws: the later tests keep their numbers */
    char *fbig = acc_file("hellaswag", big, BIG);
    c = compare(fbig, fbig, &o);
    if (c) {
        CHECK(c->rows[0].rel_delta == 0 && c->rows[0].deg_hi < 0.5);
        CHECK(c->verdict == ASSAY_VERDICT_SHIP && assay_verdict_exit_code(c->verdict) == 0);
        assay_comparison_free(c);
    }
    free(fbig);
    c = compare(fp, fp, &o);
    if (c) {
        CHECK(c->n_rows == 1 && c->rows[0].paired && !c->rows[0].higher_is_better);
        CHECK(c->rows[0].rel_delta == 0 && fabs(c->rows[0].rel_lo) < 1e-15 && fabs(c->rows[0].rel_hi) < 1e-15);
        CHECK(c->verdict == ASSAY_VERDICT_SHIP);
        assay_comparison_free(c);
    }
    free(fa);
    free(fp);
}

/* Accuracy pairs with a known true shift: each document is right for the baseline with p = 0.6; the candidate
 * flips a right answer to wrong with probability 0.06 and a wrong one to right with 0.04, so
 * E[cand - base] = 0.4 * 0.04 - 0.6 * 0.06 = -0.02 exactly. The relative interval is relative to the sample's
 * baseline mean; the check is on the absolute interval, rel * baseline mean. */
static void test_accuracy_coverage(void) {
    assay_compare_options o;
    assay_compare_options_default(&o);
    enum { N = 1500, TRIALS = 200 };
    static double b[N], cnd[N];
    int covered = 0, covered_am = 0;
    for (int t = 0; t < TRIALS; t++) {
        double mb = 0;
        for (int i = 0; i < N; i++) {
            b[i] = urand() < 0.6;
            double u = urand();
            cnd[i] = b[i] == 1 ? (u < 0.06 ? 0 : 1) : (u < 0.04 ? 1 : 0);
            mb += b[i];
        }
        mb /= N;
        double md, lo, hi, alo, ahi;
        assay_paired_mean_interval(b, cnd, N, 1.959963984540054, &md, &lo, &hi);
        covered += lo <= -0.02 && -0.02 <= hi;
        int64_t nb = 0, nc = 0;
        for (int i = 0; i < N; i++) nb += b[i] == 1 && cnd[i] == 0, nc += b[i] == 0 && cnd[i] == 1;
        assay_paired_binary_interval(nb, nc, N, 1.959963984540054, &alo, &ahi);
        covered_am += alo <= -0.02 && -0.02 <= ahi;
        if (t == 0) { /* the same numbers through the file path: 0/1 values take the adjusted interval */
            char *fa = acc_file("arc_challenge", b, N), *fc = acc_file("arc_challenge", cnd, N);
            assay_comparison *c = compare(fa, fc, &o);
            if (c) {
                /* Agresti-Min by hand: b' = b + 1/2, c' = c + 1/2, n' = n + 2 */
                double bb = nb + 0.5, cc = nc + 0.5, nn = N + 2.0, d = (cc - bb) / nn;
                double h = 1.959963984540054 * sqrt(((bb + cc) - (cc - bb) * (cc - bb) / nn) / (nn * nn));
                CHECK_NEAR(c->rows[0].rel_lo * mb, d - h, 1e-12);
                CHECK_NEAR(c->rows[0].rel_hi * mb, d + h, 1e-12);
                CHECK_NEAR(alo, d - h, 1e-15);
                CHECK(fabs((ahi - alo) - (hi - lo)) < 0.01 * (hi - lo)); /* at n = 1500 the two intervals agree */
                CHECK_NEAR(c->rows[0].p_value, assay_mcnemar_exact_p(nb, nc), 1e-15);
                assay_comparison_free(c);
            }
            free(fa);
            free(fc);
        }
    }
    /* 95% nominal: the count is Binomial(200, 0.95) (sd ~3), so 180..200 is > 5 sd wide on the low side */
    CHECK(covered >= 180 && covered_am >= 180);
    printf("accuracy interval covered the true shift in %d/%d trials (Agresti-Min: %d)\n", covered, TRIALS, covered_am);
}

/* Perplexity documents with a known relative shift: the candidate's log-likelihood per word is the baseline's
 * minus delta plus zero-mean noise, so its word perplexity is exp(delta) times the baseline's up to the noise.
 * Without noise the bootstrap interval collapses onto the exact shift. */
static void test_ppl_coverage(void) {
    enum { N = 60, TRIALS = 60 };
    double lb[N], lc[N], w[N];
    const double delta = 0.01; /* true relative change exp(0.01) - 1 = +1.005% perplexity */
    double truth = exp(delta) - 1;
    for (int i = 0; i < N; i++) {
        w[i] = 100 + (int)(urand() * 900);
        lb[i] = -w[i] * (2.5 + 0.5 * urand());
        lc[i] = lb[i] - delta * w[i];
    }
    double rel, lo, hi;
    assay_paired_bootstrap_ratio(lb, w, lc, w, N, 0, 500, 0.05, 7, &rel, &lo, &hi);
    CHECK_NEAR(rel, truth, 1e-12);
    CHECK_NEAR(lo, truth, 1e-12);
    CHECK_NEAR(hi, truth, 1e-12);
    int covered = 0;
    for (int t = 0; t < TRIALS; t++) {
        /* the noise has mean zero per word in expectation over documents, so the true shift stays exp(delta)-1 */
        for (int i = 0; i < N; i++) {
            w[i] = 100 + (int)(urand() * 900);
            lb[i] = -w[i] * (2.5 + 0.5 * urand());
            lc[i] = lb[i] - delta * w[i] + 0.02 * w[i] * nrand();
        }
        assay_paired_bootstrap_ratio(lb, w, lc, w, N, 0, 1000, 0.05, (uint64_t)t + 1, &rel, &lo, &hi);
        covered += lo <= truth && truth <= hi;
    }
    CHECK(covered >= TRIALS * 85 / 100);
    printf("bootstrap interval covered the true shift in %d/%d trials\n", covered, TRIALS);
    /* through files: candidate perplexity 1% higher -> degradation ~1%: ship with monitoring */
    for (int i = 0; i < N; i++) lc[i] = lb[i] - delta * w[i];
    char *fb = ppl_file(lb, w, N), *fc = ppl_file(lc, w, N);
    assay_compare_options o;
    assay_compare_options_default(&o);
    assay_comparison *c = compare(fb, fc, &o);
    if (c) {
        CHECK_NEAR(c->rows[0].degradation, 100 * truth, 1e-6);
        CHECK(c->verdict == ASSAY_VERDICT_MONITOR && !c->rows[0].within_noise);
        assay_comparison_free(c);
    }
    free(fb);
    free(fc);
}

/* Per-document scores with a known relative degradation and little noise: the paired interval is narrow enough to
 * clear the thresholds, so each verdict must come out. Scores are continuous (like a judge's or a partial-credit
 * metric); the paired-mean path is the same as for accuracies. */
static void test_verdicts_clear(void) {
    assay_compare_options o;
    assay_compare_options_default(&o);
    enum { N = 2000 };
    static double b[N], c1[N];
    struct {
        double delta; /* relative degradation */
        assay_verdict want;
    } cases[] = {{0.001, ASSAY_VERDICT_SHIP},        {-0.01, ASSAY_VERDICT_SHIP}, {0.01, ASSAY_VERDICT_MONITOR},
                 {0.03, ASSAY_VERDICT_INVESTIGATE}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int i = 0; i < N; i++) {
            b[i] = 0.4 + 0.4 * urand();
            c1[i] = b[i] * (1 - cases[k].delta) + 0.002 * nrand();
        }
        char *fb = acc_file("piqa", b, N), *fc = acc_file("piqa", c1, N);
        assay_comparison *c = compare(fb, fc, &o);
        if (c) {
            const assay_compare_row *r = &c->rows[0];
            CHECK(c->verdict == cases[k].want);
            static const int codes[] = {0, 3, 5, 4}; /* ship, monitor, inconclusive, investigate */
            CHECK(assay_verdict_exit_code(c->verdict) == codes[cases[k].want]);
            CHECK(r->deg_hi - r->deg_lo < 0.1); /* a narrow interval: the verdict is not a near thing */
            CHECK(r->deg_lo <= r->degradation && r->degradation <= r->deg_hi);
            CHECK(fabs(r->degradation - 100 * cases[k].delta) < 0.1);
            CHECK(c->n_needed == 0 && r->n_needed == 0 && c->limit == 0);
            assay_strbuf md = {0};
            assay_compare_markdown(c, &md);
            char want[64];
            snprintf(want, sizeof want, "**Verdict: %s**", assay_verdict_name(cases[k].want));
            CHECK(strstr(md.data, want) != NULL && strstr(md.data, "Smoke run") == NULL);
            assay_strbuf_free(&md);
            assay_comparison_free(c);
        }
        free(fb);
        free(fc);
    }
    /* custom thresholds move the boundaries: 1% is "ship" below 1.2% */
    o.ship_below = 1.2;
    o.monitor_up_to = 3;
    for (int i = 0; i < N; i++) {
        b[i] = 0.4 + 0.4 * urand();
        c1[i] = b[i] * 0.99 + 0.002 * nrand();
    }
    char *fb = acc_file("piqa", b, N), *fc = acc_file("piqa", c1, N);
    assay_comparison *c = compare(fb, fc, &o);
    if (c) {
        CHECK(c->verdict == ASSAY_VERDICT_SHIP);
        assay_strbuf md = {0}, html = {0};
        assay_compare_markdown(c, &md);
        assay_compare_html(c, &html);
        CHECK(strstr(md.data, "Verdict: ship") != NULL);
        CHECK(strstr(html.data, "<svg") != NULL && strstr(html.data, "<script") == NULL);
        assay_strbuf_free(&md);
        assay_strbuf_free(&html);
        assay_comparison_free(c);
    }
    free(fb);
    free(fc);
}

/* The documents that resolve a 0/1 row, by brute force: the first m >= n at which Agresti and Min's interval, with
 * the changed documents in their observed proportions (worse * m / n, better * m / n), clears threshold T. */
static int64_t am_needed(double worse, double better, int64_t n, double mb, double T, int below) {
    for (int64_t m = n; m < 50000000; m++) {
        double bb = worse * m / n + 0.5, cc = better * m / n + 0.5, nn = m + 2.0, d = (cc - bb) / nn;
        double h = 1.959963984540054 * sqrt(((bb + cc) - (cc - bb) * (cc - bb) / nn) / (nn * nn));
        double lo = -100 * (d + h) / mb, hi = -100 * (d - h) / mb;
        if (below ? hi < T : lo > T) return m;
    }
    return -1;
}

/* Binary accuracies whose interval spans a threshold: inconclusive, with the documents that would resolve it. */
static void test_inconclusive(void) {
    assay_compare_options o;
    assay_compare_options_default(&o);
    /* a smoke run's piqa: 20 documents, 9 right for the baseline; the candidate loses 3 and gains 2 (8 right) */
    double b[20], c1[20];
    for (int i = 0; i < 20; i++) b[i] = c1[i] = i < 9;
    c1[0] = c1[1] = c1[2] = 0;
    c1[10] = c1[11] = 1;
    double mb = 9.0 / 20, md = 0;
    for (int i = 0; i < 20; i++) md += (c1[i] - b[i]) / 20;
    /* 0/1 outcomes: Agresti-Min's interval (3 lost, 2 gained) as degradation in % of the baseline's 0.45; the point
     * estimate is 11.11%, so the nearest threshold is 1.5%, and the interval has to clear it from above */
    double z = 1.959963984540054, D = -100 * md / mb;
    double want_n = (double)am_needed(3, 2, 20, mb, 1.5, 0);
    (void)z;
    char *fb = acc_file("piqa", b, 20), *fc = acc_file("piqa", c1, 20);
    /* the files say --limit 20 */
    char *lb = malloc(strlen(fb) + 64), *lc = malloc(strlen(fc) + 64);
    sprintf(lb, "{\"config\": {\"limit\": 20}, %s", fb + 1);
    sprintf(lc, "{\"config\": {\"limit\": 20}, %s", fc + 1);
    assay_comparison *c = compare(lb, lc, &o);
    if (c) {
        const assay_compare_row *r = &c->rows[0];
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE && assay_verdict_exit_code(c->verdict) == 5);
        CHECK_NEAR(r->degradation, D, 1e-9);
        CHECK(r->deg_lo < 0 && r->deg_hi > 1.5 && r->within_noise);
        CHECK(r->n_needed == (int64_t)want_n && c->n_needed == r->n_needed);
        printf("smoke piqa: degradation %.2f%% [%.2f%%, %.2f%%], %lld documents would resolve it\n", r->degradation, r->deg_lo,
               r->deg_hi, (long long)r->n_needed);
        CHECK(c->limit == 20);
        assay_strbuf t = {0}, md_ = {0}, html = {0};
        assay_compare_table(c, &t);
        assay_compare_markdown(c, &md_);
        assay_compare_html(c, &html);
        char want[64];
        snprintf(want, sizeof want, "about %lld documents per task", (long long)want_n);
        CHECK(strstr(t.data, "Verdict: inconclusive") != NULL && strstr(t.data, want) != NULL);
        CHECK(strstr(t.data, "Smoke run: --limit 20") != NULL && strstr(md_.data, "Smoke run") != NULL);
        CHECK(strstr(html.data, "Smoke run") != NULL && strstr(html.data, "Exit code 5: inconclusive") != NULL);
        assay_strbuf_free(&t);
        assay_strbuf_free(&md_);
        assay_strbuf_free(&html);
        assay_comparison_free(c);
    }
    free(fb);
    free(fc);
    free(lb);
    free(lc);
    /* a point estimate below 0.5% whose interval reaches past it is not "ship": 2 of 600 right answers lost out of
     * 1000 documents is 0.33%, but the interval's upper end is about 0.79% */
    enum { N = 1000 };
    static double b2[N], c2[N];
    for (int i = 0; i < N; i++) b2[i] = c2[i] = i < 600;
    c2[0] = c2[1] = 0;
    fb = acc_file("piqa", b2, N);
    fc = acc_file("piqa", c2, N);
    c = compare(fb, fc, &o);
    if (c) {
        const assay_compare_row *r = &c->rows[0];
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE);
        CHECK(r->deg_lo < 0.5 && r->deg_hi > 0.5 && r->n_needed > N);
        /* the nearest threshold is 0.5%, to be cleared from below */
        CHECK(r->n_needed == am_needed(2, 0, N, 0.6, 0.5, 1));
        /* the plain n * (h / gap)^2 would take the half-document pseudo-counts at their weight in 1000 documents */
        double h = r->deg_hi - r->degradation, gap = 0.5 - r->degradation;
        printf("2 of 600 lost in 1000: %lld documents would resolve it (n * (h / gap)^2: %.0f)\n", (long long)r->n_needed,
               N * (h / gap) * (h / gap));
        assay_comparison_free(c);
    }
    free(fb);
    free(fc);
    /* no document changed in 20 (a smoke run's hellaswag at acc_norm 0.2): zero observed variance is not taken at
     * face value; the interval is +-z / (m + 2) / 0.2 and clears 0.5% once m + 2 > z * 100 / (0.2 * 0.5) */
    double b4[20];
    for (int i = 0; i < 20; i++) b4[i] = i < 4;
    fb = acc_file("hellaswag", b4, 20);
    c = compare(fb, fb, &o);
    if (c) {
        const assay_compare_row *r = &c->rows[0];
        int64_t closed = (int64_t)floor(1.959963984540054 * 100 / (0.2 * 0.5) - 2) + 1;
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE && r->n_needed == closed && closed == am_needed(0, 0, 20, 0.2, 0.5, 1));
        printf("20 unchanged documents at 0.2: %lld documents would resolve it\n", (long long)r->n_needed);
        assay_comparison_free(c);
    }
    free(fb);
    /* continuous scores: the half-width is z * s_d / sqrt(n) relative to the baseline's mean, so the documents needed
     * are n' = (z * s_d * 100 / (|mean_base| * gap))^2 with s_d the SD of the per-document differences */
    enum { M = 200 };
    static double b3[M], c3[M];
    for (int i = 0; i < M; i++) {
        b3[i] = 0.4 + 0.4 * urand();
        c3[i] = b3[i] * 0.99 + 0.03 * nrand();
    }
    double m3 = 0, d3 = 0, s3 = 0;
    for (int i = 0; i < M; i++) m3 += b3[i] / M, d3 += (c3[i] - b3[i]) / M;
    for (int i = 0; i < M; i++) s3 += (c3[i] - b3[i] - d3) * (c3[i] - b3[i] - d3);
    double sd3 = sqrt(s3 / (M - 1)), D3 = -100 * d3 / m3;
    double T3 = fabs(D3 - 0.5) <= fabs(D3 - 1.5) ? 0.5 : 1.5;
    fb = acc_file("piqa", b3, M);
    fc = acc_file("piqa", c3, M);
    c = compare(fb, fc, &o);
    if (c) {
        const assay_compare_row *r = &c->rows[0];
        double want3 = ceil(pow(z * sd3 * 100 / (m3 * fabs(D3 - T3)), 2));
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE);
        /* the same number up to the rounding of the two routes (file means vs. paired mean) */
        CHECK(llabs(r->n_needed - (int64_t)want3) <= 1);
        printf("continuous: degradation %.3f%% [%.3f%%, %.3f%%], %lld documents would resolve it (by the SD formula: %.0f)\n",
               r->degradation, r->deg_lo, r->deg_hi, (long long)r->n_needed, want3);
        assay_comparison_free(c);
    }
    free(fb);
    free(fc);
    CHECK(assay_docs_to_resolve(100, 2.0, 1.0) == 400);
    CHECK(assay_docs_to_resolve(100, 1.0, 0.0) == -1 && assay_docs_to_resolve(0, 1.0, 1.0) == -1);
}

/* Files without per-sample records: the unpaired interval from their stderrs decides, or nothing does. */
static void test_unpaired(void) {
    assay_compare_options o;
    assay_compare_options_default(&o);
    const char *x = "{\"results\": {\"piqa\": {\"acc,none\": 0.6, \"acc_stderr,none\": 0.001}}, \"n-samples\": {\"piqa\": {\"original\": 5000, \"effective\": 5000}}}",
               *y = "{\"results\": {\"piqa\": {\"acc,none\": 0.594, \"acc_stderr,none\": 0.001}}, \"n-samples\": {\"piqa\": {\"original\": 5000, \"effective\": 5000}}}",
               *w = "{\"results\": {\"piqa\": {\"acc,none\": 0.59, \"acc_stderr,none\": 0.003}}, \"n-samples\": {\"piqa\": {\"original\": 5000, \"effective\": 5000}}}",
               *bare = "{\"results\": {\"piqa\": {\"acc,none\": 0.594}}}";
    assay_comparison *c = compare(x, y, &o);
    if (c) { /* 1% +- 1.96 * sqrt(2) * 0.001 / 0.6 = 0.46%: [0.54%, 1.46%] */
        CHECK(c->verdict == ASSAY_VERDICT_MONITOR && c->rows[0].unpaired_interval && !c->rows[0].paired);
        CHECK_NEAR(c->rows[0].deg_hi - c->rows[0].deg_lo, 2 * 100 * 1.959963984540054 * sqrt(2e-6) / 0.6, 1e-9);
        assay_comparison_free(c);
    }
    c = compare(x, w, &o);
    if (c) { /* 1.67% +- 1.03%: inconclusive; the half-width shrinks with the 5000 documents the files name */
        const assay_compare_row *r = &c->rows[0];
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE && r->n == 5000);
        double h = r->degradation - r->deg_lo, gap = r->degradation - 1.5;
        CHECK(r->n_needed == (int64_t)ceil(5000 * (h / gap) * (h / gap)));
        assay_comparison_free(c);
    }
    c = compare(x, bare, &o);
    if (c) {
        CHECK(c->verdict == ASSAY_VERDICT_INCONCLUSIVE && c->n_needed == -1 && isnan(c->rows[0].deg_lo));
        assay_comparison_free(c);
    }
    /* files without anything in common are an error, not a silent "ship" */
    const char *p = "{\"results\": {\"a\": {\"acc,none\": 0.5}}}", *q = "{\"results\": {\"b\": {\"acc,none\": 0.5}}}";
    assay_comparison *none = NULL;
    CHECK(assay_compare_texts(p, strlen(p), q, strlen(q), &o, &none) == ASSAY_ERR_ARG && none == NULL);
}

int main(void) {
    test_mcnemar();
    test_identical();
    test_accuracy_coverage();
    test_ppl_coverage();
    test_verdicts_clear();
    test_inconclusive();
    test_unpaired();
    return check_finish("compare");
}
