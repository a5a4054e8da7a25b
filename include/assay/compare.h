/* compare.h — paired statistics between two result files and the ship / monitor / investigate verdict, plus the
 * Markdown and self-contained HTML reports.
 *
 *   assay_compare_options o;
 *   assay_compare_options_default(&o);                 // thresholds 0.5% / 1.5%, 2000 bootstrap resamples
 *   assay_comparison *c;
 *   if (assay_compare_files("base.json", "cand.json", &o, &c) != ASSAY_OK) ... assay_last_error()
 *   assay_strbuf md = {0};
 *   assay_compare_markdown(c, &md);                  // the table, the verdict and why
 *   int code = assay_verdict_exit_code(c->verdict);  // 0 ship, 3 ship with monitoring, 4 investigate, 5 inconclusive
 *   assay_comparison_free(c);
 *
 * Every row pairs the two runs document by document (samples with the same doc_id):
 *   - mean metrics (acc, acc_norm, exact_match): the paired difference d_i = cand_i - base_i, its mean with a
 *     normal interval (sample std of d, ddof 1; for 0/1 outcomes Agresti and Min's adjusted interval, which stays
 *     open when few documents changed), and McNemar's exact two-sided test on the discordant pairs;
 *   - ratio metrics (word/byte/token perplexity, bits_per_byte, perplexity): a paired bootstrap over documents,
 *     resampling the same document indices for both runs, percentile interval of the relative change.
 * Degradation is the relative change in the bad direction (lower accuracy, higher perplexity), in percent. A
 * row's verdict comes from the interval of its degradation, not from the point estimate:
 *   - ship:                 the interval rules out degradation of the ship threshold (0.5%) or more;
 *   - investigate:          the interval rules out degradation up to the monitor threshold (1.5%);
 *   - ship with monitoring: the whole interval lies within [0.5%, 1.5%];
 *   - inconclusive:         anything else (the interval spans a threshold): too few documents to tell, and the row
 *                           says how many would resolve it at the variance observed.
 * Rows without per-sample records fall back to an unpaired interval from the files' stderrs (wider, so still a
 * valid basis); with neither they are inconclusive. "within noise" means the interval of the change includes zero.
 * The overall verdict is the worst over the gating metrics (each task's primary metric by default), in the order
 * ship < ship with monitoring < inconclusive < investigate.
 */
#ifndef ASSAY_COMPARE_H
#define ASSAY_COMPARE_H

#include <stdint.h>

#include "assay/status.h"
#include "assay/strbuf.h"

/* ---- statistics ------------------------------------------------------------------------------------------- */

/* McNemar's exact test: two-sided binomial p-value of b successes in b + c trials at p = 1/2,
 * min(1, 2 * P[X <= min(b, c)]). 1 when b + c == 0. */
double assay_mcnemar_exact_p(int64_t b, int64_t c);
/* Paired mean difference of cand - base with a two-sided normal interval at `z` (1.96 for 95%). */
void assay_paired_mean_interval(const double *base, const double *cand, int64_t n, double z, double *mean_diff,
                                double *lo, double *hi);
/* Paired difference of two binary outcomes (accuracies) with b documents right only for the base and c right only
 * for the candidate out of n: Agresti and Min's adjusted interval (half a document added to each cell of the 2x2
 * table). Unlike the plain normal interval it does not collapse to a point when no document changed (zero changes
 * in 20 documents are weak evidence, in 20,000 strong); for large n the two agree. */
void assay_paired_binary_interval(int64_t b, int64_t c, int64_t n, double z, double *lo, double *hi);
/* Paired bootstrap of the relative change of a ratio statistic f(sum num / sum den) between two runs:
 * f = exp(-x) (perplexity) when kind == 0, f = -x / ln 2 (bits per byte) when kind == 1. Resamples `iters`
 * times with a fixed seed; writes the point estimate and the [alpha/2, 1 - alpha/2] percentile interval of
 * f(cand)/f(base) - 1. */
void assay_paired_bootstrap_ratio(const double *num_b, const double *den_b, const double *num_c, const double *den_c,
                                  int64_t n, int kind, int iters, double alpha, uint64_t seed, double *rel,
                                  double *lo, double *hi);

/* ---- comparison -------------------------------------------------------------------------------------------- */

typedef enum assay_verdict {        /* in order of severity: the overall verdict is the worst row's */
    ASSAY_VERDICT_SHIP = 0,
    ASSAY_VERDICT_MONITOR = 1,       /* ship with monitoring */
    ASSAY_VERDICT_INCONCLUSIVE = 2,  /* the interval spans a threshold: evaluate more documents */
    ASSAY_VERDICT_INVESTIGATE = 3,
} assay_verdict;

/* "ship", "ship with monitoring", "inconclusive", "investigate" */
const char *assay_verdict_name(assay_verdict v);
int assay_verdict_exit_code(assay_verdict v);     /* 0, 3, 5, 4 */

/* Documents needed for an interval of half-width `half` (measured on n documents, on the side facing the threshold)
 * to clear a threshold `gap` away from the point estimate, at the same per-document variance: the half-width
 * shrinks as 1/sqrt(n), so n' = ceil(n * (half / gap)^2). -1 when it cannot be estimated (gap or half not positive,
 * n unknown). */
int64_t assay_docs_to_resolve(int64_t n, double half, double gap);
/* The same for 0/1 outcomes under Agresti and Min's interval: the smallest n' >= n whose interval, with the changed
 * documents in the observed proportions (worse * n'/n, better * n'/n), lies entirely on the far side of `threshold`
 * (a degradation in %, the interval taken relative to base_mean). -1 when no n' up to 10^12 does. */
int64_t assay_binary_docs_to_resolve(int64_t worse, int64_t better, int64_t n, double base_mean, double z, double threshold,
                                     int below);

typedef struct assay_compare_options {
    double ship_below;       /* degradation % below which: ship (0.5) */
    double monitor_up_to;    /* degradation % up to which: ship with monitoring (1.5); above: investigate */
    int bootstrap_iters;     /* 2000 */
    double confidence;       /* 0.95 */
    uint64_t seed;
    int all_metrics_gate;    /* 1: every metric gates the verdict, not only each task's primary */
} assay_compare_options;

void assay_compare_options_default(assay_compare_options *o);

typedef struct assay_compare_row {
    char *task;
    char *metric;            /* "acc,none" */
    int higher_is_better;
    int gating;              /* counts for the overall verdict */
    int paired;              /* per-sample records were found and paired */
    int64_t n;               /* paired documents */
    double base, cand;       /* the files' own values */
    double rel_delta;        /* (cand - base) / base, from the files' values */
    double rel_lo, rel_hi;   /* interval of the relative change (NAN when there is none) */
    int unpaired_interval;   /* rel_lo/rel_hi come from the files' stderrs, not from paired samples */
    double degradation;      /* % in the bad direction (negative = improvement) */
    double deg_lo, deg_hi;   /* the interval of the degradation in % (NAN when there is none) */
    int64_t n_needed;        /* inconclusive rows: documents that would resolve it (-1: cannot be estimated); else 0 */
    int64_t n_task;          /* the task's documents before --limit ("n-samples" original; 0: not known) */
    double p_value;          /* McNemar for binary metrics, NAN otherwise */
    int binary;              /* paired 0/1 outcomes: */
    int64_t n_worse, n_better; /* documents right only for the baseline / only for the candidate */
    double base_mean;        /* the baseline's mean over the paired documents (the scale of the relative interval) */
    int within_noise;        /* the interval includes 0 */
    assay_verdict verdict;
    double base_tps, cand_tps; /* throughput of that task in tokens/s from the files' timings (0 if absent) */
} assay_compare_row;

typedef struct assay_comparison {
    assay_compare_row *rows;
    int n_rows;
    assay_verdict verdict;
    int worst_row;           /* index of the row that set the verdict, -1 if none gated */
    int64_t n_needed;        /* inconclusive: the most documents any inconclusive gating row needs (-1: unknown) */
    int64_t limit;           /* the runs' --limit (documents per task; 0: full runs): > 0 marks a smoke run */
    char *base_name, *cand_name; /* model names / args from the files */
    char *base_args, *cand_args;
    double thresholds[2];
    double confidence;
    /* throughput bench (decide fills these; 0 when not measured): the headline numbers are those of the largest
     * batch measured (bench_batch), every batch size measured is in the bench_* arrays (medians of repeats) */
    double base_prefill_tps, cand_prefill_tps, base_decode_tps, cand_decode_tps;
    int bench_batch, n_bench;
    int bench_batches[8];
    double bench_base_prefill[8], bench_cand_prefill[8], bench_base_decode[8], bench_cand_decode[8];
    int64_t bench_prompt, bench_gen;
    int bench_reps;
    double base_model_bytes, cand_model_bytes;
    char *throughput_note; /* why the throughput lines are not the formats' speed (a CPU emulating FP8/INT8 kernels), or NULL */
} assay_comparison;

/* Reads two results files (assay's or lm-eval's JSON; samples are optional but needed for intervals). */
assay_status assay_compare_files(const char *base_path, const char *cand_path, const assay_compare_options *o,
                                 assay_comparison **out);
/* Same, from text already in memory. */
assay_status assay_compare_texts(const char *base_json, size_t base_len, const char *cand_json, size_t cand_len,
                                 const assay_compare_options *o, assay_comparison **out);
void assay_comparison_free(assay_comparison *c);

/* The table for the terminal. */
void assay_compare_table(const assay_comparison *c, assay_strbuf *out);
/* report.md */
void assay_compare_markdown(const assay_comparison *c, assay_strbuf *out);
/* report.html: one self-contained page, inline CSS and SVG charts (quality deltas with their intervals and the
 * thresholds; quality against throughput), no scripts and no external resources. */
void assay_compare_html(const assay_comparison *c, assay_strbuf *out);

#endif
