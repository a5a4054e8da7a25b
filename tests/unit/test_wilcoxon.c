/* test_wilcoxon.c — the Wilcoxon signed-rank test against values worked out by hand and values that
 * scipy.stats.wilcoxon(x, y) (defaults: zero_method "wilcox", no correction, method "auto"; scipy 1.17) gives on
 * the same inputs. Hand-worked:
 *   d = 1..5: r+ = 15 is the largest of 2^5 equally likely sums, p = 2/32;
 *   d = 1..5, -6: r- = 6; 14 of the 64 subsets of {1..6} sum to <= 6, p = 2 * 14/64;
 *   d = 1, 1, 2, 0: the zero is dropped, the tied ones rank 1.5, r+ = 6 is reached by 1 of 8 sign patterns,
 *   p = 2/8 (scipy: a permutation test over the 16 flips of the four differences, the same ratio).
 * The tests in tests/py (test_wilcoxon_scipy.py) sweep hundreds more cases against scipy itself. */
#include <math.h>
#include <stdint.h>

#include "assay/wilcoxon.h"
#include "check.h"

static void one(const double *x, const double *y, int64_t n, double stat, double p, assay_wilcoxon_method m) {
    assay_wilcoxon w;
    assay_wilcoxon_signed_rank(x, y, n, &w);
    CHECK(w.method == m);
    CHECK_NEAR(w.statistic, stat, 1e-12);
    CHECK_NEAR(w.p_value, p, 1e-12 * p);
    CHECK_NEAR(w.r_plus + w.r_minus, (double)(n - w.n_zero) * (double)(n - w.n_zero + 1) / 2, 1e-9);
}

int main(void) {
    /* hand-worked */
    const double d5[] = {1, 2, 3, 4, 5}, d6[] = {1, 2, 3, 4, 5, -6}, d4[] = {1, 1, 2, 0};
    one(d5, NULL, 5, 0, 0.0625, ASSAY_WILCOXON_EXACT);
    one(d6, NULL, 6, 6, 0.4375, ASSAY_WILCOXON_EXACT);
    one(d4, NULL, 4, 0, 0.25, ASSAY_WILCOXON_PERMUTATION);

    /* exact, no ties: n 12 and n 30 */
    const double d12[] = {3, -1, 4, -5, 9, 2, -6, 8, -7, 10, 11, -12};
    one(d12, NULL, 12, 31, 0.5693359375, ASSAY_WILCOXON_EXACT);
    double d30[30];
    for (int i = 0; i < 30; i++) d30[i] = (i + 1) * (((i * i / 3) % 2) ? -1 : 1);
    one(d30, NULL, 30, 225, 0.8871948085725307, ASSAY_WILCOXON_EXACT);

    /* judge-like scores with ties and zeros: permutation up to n 13, the normal approximation from n 14 */
    const double x10[] = {4, 3, 5, 2, 4, 4, 3, 5, 1, 4}, y10[] = {3, 3, 4, 4, 2, 5, 3, 4, 2, 2};
    one(x10, y10, 10, 13, 0.6171875, ASSAY_WILCOXON_PERMUTATION);
    const double x14[] = {1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5}, y14[] = {2, 1, 3, 3, 2, 4, 3, 5, 4, 1, 5, 4, 3, 1};
    one(x14, y14, 13, 18, 0.408203125, ASSAY_WILCOXON_PERMUTATION);
    one(x14, y14, 14, 18, 0.16370597983289548, ASSAY_WILCOXON_NORMAL);

    /* n 20 with one zero difference: the normal approximation (zeros rule the exact distribution out) */
    double x20[20], y20[20];
    for (int i = 0; i < 20; i++) x20[i] = (double)(i * i % 37) + i * 0.01, y20[i] = (double)((i * 11) % 23);
    one(x20, y20, 20, 44, 0.040135536373545506, ASSAY_WILCOXON_NORMAL);

    /* n 51 without ties: past 50 scipy switches to the normal approximation */
    double d51[51];
    for (int i = 0; i < 51; i++) d51[i] = (i + 1) * (i % 3 ? 1 : -1);
    one(d51, NULL, 51, 425, 0.02568873999366418, ASSAY_WILCOXON_NORMAL);

    /* edges: nothing; every difference zero (small: p 1; large: nothing to test, NaN as scipy) */
    assay_wilcoxon w;
    assay_wilcoxon_signed_rank(NULL, NULL, 0, &w);
    CHECK(isnan(w.p_value) && isnan(w.statistic));
    const double same[20] = {0};
    assay_wilcoxon_signed_rank(same, same, 5, &w);
    CHECK(w.method == ASSAY_WILCOXON_PERMUTATION && w.p_value == 1 && w.statistic == 0 && w.n_zero == 5);
    assay_wilcoxon_signed_rank(same, same, 20, &w);
    CHECK(w.method == ASSAY_WILCOXON_NORMAL && isnan(w.p_value) && w.n_zero == 20);

    /* the order of the samples does not change a two-sided test */
    assay_wilcoxon a, b;
    assay_wilcoxon_signed_rank(x20, y20, 20, &a);
    assay_wilcoxon_signed_rank(y20, x20, 20, &b);
    CHECK(a.p_value == b.p_value && a.r_plus == b.r_minus && a.z == -b.z);
    return check_finish("wilcoxon");
}
