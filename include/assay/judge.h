/* judge.h — the offline parts of an LLM-as-judge comparison (`assay judge`): the domain samples, the rubric
 * prompt, reading a score out of the judge's reply, and the paired statistics and verdict over the scores. The
 * HTTP side (candidates and judge behind OpenAI-compatible APIs) lives in the CLI.
 *
 *   assay_judge_sample *s; int64_t n;
 *   if (assay_judge_read_samples("domain.jsonl", &s, &n) != ASSAY_OK) ... assay_last_error()
 *   char *msg = assay_judge_render(assay_judge_default_template(), s[0].prompt, s[0].expected, answer);
 *   int score = assay_judge_parse_score(reply, strlen(reply));   // 1..5, or 0: not a score
 *   assay_judge_options o; assay_judge_options_default(&o);
 *   assay_judge_summary sum;
 *   assay_judge_summarize(base_scores, cand_scores, n_pairs, &o, &sum);
 *   printf("%s\n", assay_judge_verdict_name(sum.verdict));
 *   assay_judge_samples_free(s, n);
 *
 * The verdict puts the workflow's thresholds (degradation below 0.5%: ship; up to 1.5%: ship with an LLM judge
 * monitoring quality; above: investigate) on the judge's 1-5 scale: degradation is the drop of the mean score
 * relative to the baseline mean's height above the floor of the scale,
 *     degradation % = 100 (mean_base - mean_cand) / (mean_base - 1),
 * i.e. the relative change of the score mapped onto [0, 1] by (s - 1) / 4, as accuracy's relative change is taken.
 * With a baseline mean of 4.2 the thresholds are 0.016 and 0.048 points. The decision is made on the paired
 * bootstrap interval of the mean difference, not on the point estimate, with the rules of `assay compare`
 * (compare.h):
 *   ship                  the interval lies below ship_below;
 *   ship with monitoring  it lies within [ship_below, monitor_up_to];
 *   investigate           it lies above monitor_up_to;
 *   inconclusive          it spans a threshold: samples_needed says about how many pairs would move it off the
 *                         threshold nearest the estimate, at the observed spread (normal approximation).
 * A baseline that scored 1 everywhere cannot be degraded: ship.
 */
#ifndef ASSAY_JUDGE_H
#define ASSAY_JUDGE_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/wilcoxon.h"

/* ---- samples ---------------------------------------------------------------------------------------------- */

typedef struct assay_judge_sample {
    char *id;       /* the line's "id" (string or number as written), else NULL */
    char *prompt;
    char *expected;
    int64_t line;   /* 1-based line number in the file */
} assay_judge_sample;

/* A JSONL file, one object a line; blank lines are skipped. The prompt is read from the first present of
 * "prompt", "question", "input", "query", "instruction"; the expected answer from "expected", "expected_answer",
 * "expected_output", "expectedOutput", "reference", "reference_answer", "answer", "ideal", "target", "output".
 * A line that is not an object, or lacks either string, is an error naming the line; so is a file without
 * samples. */
assay_status assay_judge_read_samples(const char *path, assay_judge_sample **out, int64_t *n);
/* The same from text in memory (`name` appears in errors). */
assay_status assay_judge_parse_samples(const char *text, size_t len, const char *name, assay_judge_sample **out, int64_t *n);
void assay_judge_samples_free(assay_judge_sample *s, int64_t n);

/* ---- the rubric prompt -------------------------------------------------------------------------------------- */

/* The workflow's rubric: the question, the expected answer and the answer to grade; 1-5 for accuracy and
 * completeness; the number only. */
const char *assay_judge_default_template(void);
/* Placeholders: {prompt} (or {question}), {expected} (or {reference}, {expected_answer}), {answer} (or
 * {response}, {candidate_answer}); {{ and }} stand for literal braces; any other {name} is kept as written.
 * Fails unless the template has an answer placeholder. *has_expected tells whether it uses the expected answer
 * (a reference-free rubric need not); may be NULL. */
assay_status assay_judge_check_template(const char *tmpl, int *has_expected);
char *assay_judge_render(const char *tmpl, const char *prompt, const char *expected, const char *answer);

/* ---- the judge's reply -------------------------------------------------------------------------------------- */

/* The score 1-5 a reply gives, or 0 when it gives none or is ambiguous. <think>...</think> blocks are ignored.
 * In order: the reply is a lone digit (markdown and quotes around it allowed); a labelled score ("Score: 4",
 * "rating is 3", "**Grade:** 5"; the last one counts); "4/5" or "4 out of 5" (the last one); lines that hold a
 * lone digit, all the same; the only integer in the reply (scale mentions such as "1-5" or "1 to 5" set aside).
 * Decimals ("4.5"), numbers outside 1-5 and replies with several candidate scores are not scores. */
int assay_judge_parse_score(const char *reply, size_t len);

/* ---- statistics and verdict --------------------------------------------------------------------------------- */

/* Paired bootstrap of mean(cand - base): `iters` resamples of the pair indices (seeded: the same every run),
 * percentile interval at `confidence`. NaN bounds when n < 2 or iters < 10. */
void assay_paired_bootstrap_mean(const double *base, const double *cand, int64_t n, int iters, double confidence,
                                 uint64_t seed, double *lo, double *hi);

typedef enum assay_judge_verdict {
    ASSAY_JUDGE_SHIP = 0,
    ASSAY_JUDGE_MONITOR = 1,
    ASSAY_JUDGE_INVESTIGATE = 2,
    ASSAY_JUDGE_INCONCLUSIVE = 3,
} assay_judge_verdict;

const char *assay_judge_verdict_name(assay_judge_verdict v); /* "ship", "ship with monitoring", "investigate", "inconclusive" */
int assay_judge_verdict_exit_code(assay_judge_verdict v);    /* 0, 3, 4, 5 */

typedef struct assay_judge_options {
    double ship_below;    /* degradation % (0.5) */
    double monitor_up_to; /* degradation % (1.5) */
    int bootstrap_iters;  /* 2000 */
    double confidence;    /* 0.95 */
    uint64_t seed;        /* 1234 */
} assay_judge_options;

void assay_judge_options_default(assay_judge_options *o);

typedef struct assay_judge_summary {
    int64_t n;                    /* scored pairs */
    double mean_base, mean_cand;  /* over the pairs */
    double mean_diff, sd_diff;    /* cand - base; sample standard deviation (ddof 1) */
    double diff_lo, diff_hi;      /* bootstrap interval of mean_diff */
    double ship_points, monitor_points; /* the thresholds in points of degradation (mean_base - mean_cand) */
    double degradation, degradation_lo, degradation_hi; /* %, NaN when mean_base is 1 (nothing to lose) */
    assay_wilcoxon wilcoxon;      /* on (cand, base) */
    assay_judge_verdict verdict;
    int64_t samples_needed;       /* inconclusive: pairs that would settle it at the observed spread; -1 otherwise or
                                     when no count would (the estimate sits on the threshold) */
} assay_judge_summary;

void assay_judge_summarize(const double *base, const double *cand, int64_t n, const assay_judge_options *o,
                           assay_judge_summary *s);

#endif
