/* wilcoxon.h — the Wilcoxon signed-rank test on paired samples, two-sided, with the choices that
 * scipy.stats.wilcoxon(x, y) makes by default (zero_method="wilcox", correction=False, method="auto"):
 *
 *   assay_wilcoxon w;
 *   assay_wilcoxon_signed_rank(cand, base, n, &w);   // differences d = x - y
 *   printf("W = %g, p = %.4g (%s)\n", w.statistic, w.p_value, assay_wilcoxon_method_name(w.method));
 *
 * - Pairs with d == 0 are dropped before ranking (Wilcoxon's own treatment of zeros); the others are ranked by
 *   |d| with tied values given their average rank. r+ and r- are the rank sums of the positive and negative
 *   differences; the reported statistic is min(r+, r-).
 * - The method follows scipy's "auto", decided on n, the number of pairs given (zeros included):
 *   n <= 50 without ties and without zeros: the exact null distribution of r+ (every sign pattern of the ranks
 *   1..n equally likely);
 *   n <= 13 with ties or zeros: the permutation distribution over all 2^n sign flips of the differences, which is
 *   exact too (scipy runs permutation_test there, enumerating every flip since 2^13 < its 9999 resamples);
 *   otherwise the normal approximation: z = (r+ - m(m+1)/4) / sqrt((m(m+1)(2m+1) - sum(t^3 - t)/2) / 24), where
 *   m counts the non-zero differences and t runs over the sizes of the groups of tied |d|; no continuity
 *   correction. In the exact cases p = min(1, 2 min(P[R+ <= r+], P[R+ >= r+])), otherwise p = 2 (1 - Phi(|z|)).
 * - n == 0 gives NaN for the statistic and p; a normal approximation with nothing left after the zeros gives
 *   p = NaN as scipy does (no non-zero difference: nothing to test).
 */
#ifndef ASSAY_WILCOXON_H
#define ASSAY_WILCOXON_H

#include <stdint.h>

typedef enum assay_wilcoxon_method {
    ASSAY_WILCOXON_EXACT,       /* exact distribution of r+ (no ties, no zeros, n <= 50) */
    ASSAY_WILCOXON_PERMUTATION, /* all 2^n sign flips (ties or zeros, n <= 13) */
    ASSAY_WILCOXON_NORMAL,      /* normal approximation with the tie correction, zeros dropped */
} assay_wilcoxon_method;

typedef struct assay_wilcoxon {
    int64_t n;         /* pairs given */
    int64_t n_zero;    /* pairs whose difference is 0 (dropped) */
    int has_ties;      /* some non-zero |d| values are equal */
    double r_plus, r_minus;
    double statistic;  /* min(r+, r-), the value scipy reports for the two-sided test */
    double z;          /* the normal approximation's z for r+ (NaN unless method is NORMAL) */
    double p_value;    /* two-sided */
    assay_wilcoxon_method method;
} assay_wilcoxon;

/* d_i = x_i - y_i (y may be NULL: then d = x). */
void assay_wilcoxon_signed_rank(const double *x, const double *y, int64_t n, assay_wilcoxon *out);
const char *assay_wilcoxon_method_name(assay_wilcoxon_method m); /* "exact", "permutation", "normal" */

#endif
