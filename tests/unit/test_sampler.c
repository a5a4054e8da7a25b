/* test_sampler.c — sampling semantics against their definitions: greedy = first argmax; top-k 1 = greedy at any
 * temperature; drawn frequencies match softmax(logits / T) (chi-square, 20000 draws, p ~ 1e-6 false-alarm bound);
 * top-p keeps the smallest prefix reaching p; min-p drops tokens below min_p x top probability; same seed, same
 * sequence. */
#include <stdlib.h>

#include "assay/sampler.h"
#include "check.h"

int main(void) {
    const float lg[6] = {1.0f, 3.0f, 3.0f, 0.5f, 2.0f, -1.0f};
    CHECK(assay_argmax(lg, 6) == 1);
    assay_sampler_params g = {0, 40, 0.95f, 0.05f, 1};
    assay_sampler *s = assay_sampler_new(&g, 6);
    CHECK(assay_sampler_sample(s, lg) == 1);
    assay_sampler_free(s);

    assay_sampler_params k1 = {2.0f, 1, 1.0f, 0.0f, 3};
    s = assay_sampler_new(&k1, 6);
    int ok = 1;
    for (int i = 0; i < 200; i++) ok &= assay_sampler_sample(s, lg) == 1; /* ties broken by lower index */
    CHECK(ok);
    assay_sampler_free(s);

    /* full distribution at T = 0.7 */
    assay_sampler_params full = {0.7f, 0, 1.0f, 0.0f, 42};
    s = assay_sampler_new(&full, 6);
    double p[6], z = 0;
    for (int i = 0; i < 6; i++) z += p[i] = exp(lg[i] / 0.7);
    int cnt[6] = {0};
    const int N = 20000;
    for (int i = 0; i < N; i++) cnt[assay_sampler_sample(s, lg)]++;
    double chi = 0;
    for (int i = 0; i < 6; i++) {
        double e = N * p[i] / z;
        chi += (cnt[i] - e) * (cnt[i] - e) / e;
    }
    printf("chi-square (5 dof) = %.2f\n", chi);
    CHECK(chi < 35.9); /* P(chi2_5 > 35.9) ~ 1e-6 */
    assay_sampler_free(s);

    /* top-p 0.5 at T = 1: probabilities sorted 3,3,2,1,0.5,-1 -> first two hold ~0.70 > 0.5 but the first alone
     * holds ~0.35 < 0.5, so exactly tokens 1 and 2 remain */
    assay_sampler_params tp = {1.0f, 0, 0.5f, 0.0f, 5};
    s = assay_sampler_new(&tp, 6);
    ok = 1;
    for (int i = 0; i < 500; i++) {
        int t = assay_sampler_sample(s, lg);
        ok &= t == 1 || t == 2;
    }
    CHECK(ok);
    assay_sampler_free(s);

    /* min-p 0.3: p(4)/p(1) = e^-1 = 0.37 stays, p(0)/p(1) = e^-2 = 0.135 goes */
    assay_sampler_params mp = {1.0f, 0, 1.0f, 0.3f, 9};
    s = assay_sampler_new(&mp, 6);
    int seen4 = 0;
    ok = 1;
    for (int i = 0; i < 2000; i++) {
        int t = assay_sampler_sample(s, lg);
        ok &= t == 1 || t == 2 || t == 4;
        seen4 += t == 4;
    }
    CHECK(ok && seen4 > 0);
    assay_sampler_free(s);

    /* reproducible */
    assay_sampler *a = assay_sampler_new(&full, 6), *b = assay_sampler_new(&full, 6);
    ok = 1;
    for (int i = 0; i < 1000; i++) ok &= assay_sampler_sample(a, lg) == assay_sampler_sample(b, lg);
    CHECK(ok);
    assay_sampler_free(a);
    assay_sampler_free(b);
    return check_finish("sampler");
}
