/* wilcoxon.c — the Wilcoxon signed-rank test (see include/assay/wilcoxon.h). Ranks are kept doubled, so that
 * average ranks of ties (multiples of 1/2) are integers and the exact distributions are counted exactly. */
#include <math.h>
#include <stdlib.h>

#include "assay/status.h"
#include "assay/wilcoxon.h"

const char *assay_wilcoxon_method_name(assay_wilcoxon_method m) {
    switch (m) {
    case ASSAY_WILCOXON_EXACT: return "exact";
    case ASSAY_WILCOXON_PERMUTATION: return "permutation";
    case ASSAY_WILCOXON_NORMAL: return "normal";
    }
    return "?";
}

typedef struct signed_abs {
    double a; /* |d| */
    int positive;
} signed_abs;

static int cmp_abs(const void *p, const void *q) {
    double x = ((const signed_abs *)p)->a, y = ((const signed_abs *)q)->a;
    return (x > y) - (x < y);
}

/* Two-sided p of the observed doubled rank sum r2 under "each rank's sign is + or - with probability 1/2":
 * the number of sign patterns with each doubled sum, counted by dynamic programming over the ranks. Counts stay
 * below 2^51 for m <= 50, so doubles hold them exactly. */
static double exact_p(const int64_t *rank2, int64_t m, int64_t r2) {
    int64_t total = 0;
    for (int64_t i = 0; i < m; i++) total += rank2[i];
    double *count = assay_xcalloc((size_t)total + 1, sizeof *count);
    count[0] = 1;
    int64_t reach = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t s = reach; s >= 0; s--)
            if (count[s] != 0) count[s + rank2[i]] += count[s];
        reach += rank2[i];
    }
    double le = 0, ge = 0, all = ldexp(1.0, (int)m);
    for (int64_t s = 0; s <= total; s++) {
        if (s <= r2) le += count[s];
        if (s >= r2) ge += count[s];
    }
    free(count);
    double p = 2 * fmin(le / all, ge / all);
    return p > 1 ? 1 : p;
}

void assay_wilcoxon_signed_rank(const double *x, const double *y, int64_t n, assay_wilcoxon *w) {
    w->n = n;
    w->n_zero = 0;
    w->has_ties = 0;
    w->r_plus = w->r_minus = w->statistic = w->z = w->p_value = NAN;
    w->method = ASSAY_WILCOXON_NORMAL;
    if (n <= 0) return;

    signed_abs *v = assay_xmalloc((size_t)n * sizeof *v);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = y ? x[i] - y[i] : x[i];
        if (d == 0) {
            w->n_zero++;
            continue;
        }
        v[m].a = fabs(d);
        v[m].positive = d > 0;
        m++;
    }
    qsort(v, (size_t)m, sizeof *v, cmp_abs);

    /* average ranks, doubled: a run of equal |d| at sorted positions i..j (0-based) shares rank (i + j + 2) / 2 */
    int64_t *rank2 = assay_xmalloc((size_t)(m + 1) * sizeof *rank2);
    int64_t r2_plus = 0, r2_minus = 0;
    double tie_term = 0; /* sum over tie groups of t^3 - t */
    for (int64_t i = 0; i < m;) {
        int64_t j = i;
        while (j + 1 < m && v[j + 1].a == v[i].a) j++;
        int64_t t = j - i + 1;
        if (t > 1) {
            w->has_ties = 1;
            tie_term += (double)t * (double)t * (double)t - (double)t;
        }
        for (int64_t k = i; k <= j; k++) {
            rank2[k] = i + j + 2;
            if (v[k].positive) r2_plus += rank2[k];
            else r2_minus += rank2[k];
        }
        i = j + 1;
    }
    w->r_plus = (double)r2_plus / 2;
    w->r_minus = (double)r2_minus / 2;
    w->statistic = fmin(w->r_plus, w->r_minus);

    if (n <= 50 && !w->has_ties && w->n_zero == 0) {
        w->method = ASSAY_WILCOXON_EXACT;
        w->p_value = exact_p(rank2, m, r2_plus);
    } else if (n <= 13) {
        /* the zeros' flips change nothing: each pattern of the others is counted 2^n_zero times, which cancels */
        w->method = ASSAY_WILCOXON_PERMUTATION;
        w->p_value = exact_p(rank2, m, r2_plus);
    } else {
        double mm = (double)m;
        double mean = mm * (mm + 1) / 4;
        double se = sqrt((mm * (mm + 1) * (2 * mm + 1) - tie_term / 2) / 24);
        w->method = ASSAY_WILCOXON_NORMAL;
        if (se > 0) {
            w->z = (w->r_plus - mean) / se;
            w->p_value = erfc(fabs(w->z) / sqrt(2.0));
        }
    }
    free(rank2);
    free(v);
}
