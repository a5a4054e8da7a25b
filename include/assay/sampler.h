/* sampler.h — next-token sampling: temperature, top-k, top-p, min-p, with a seeded generator.
 *
 *   assay_sampler_params p = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 42};
 *   assay_sampler *sm = assay_sampler_new(&p, n_vocab);
 *   int32_t tok = assay_sampler_sample(sm, logits);     // same seed + same logits -> same tokens
 *   assay_sampler_free(sm);
 *
 * temp <= 0 is greedy (the first index of the largest logit). Otherwise the filters apply in the order
 * top-k, then softmax at the temperature, then top-p (smallest set whose probability reaches p), then min-p
 * (drop tokens below min_p * the top probability), and one token is drawn from the renormalized rest.
 * top_k <= 0, top_p >= 1 and min_p <= 0 disable their filter.
 */
#ifndef ASSAY_SAMPLER_H
#define ASSAY_SAMPLER_H

#include <stdint.h>

typedef struct assay_sampler_params {
    float temp;
    int top_k;
    float top_p;
    float min_p;
    uint64_t seed;
} assay_sampler_params;

typedef struct assay_sampler assay_sampler;

assay_sampler *assay_sampler_new(const assay_sampler_params *p, int64_t n_vocab);
void assay_sampler_free(assay_sampler *s);
int32_t assay_sampler_sample(assay_sampler *s, const float *logits);
/* The same draw with the parameters and generator state the caller keeps (the engine: one per request), using s only
 * for its scratch and vocabulary size. */
int32_t assay_sampler_sample_with(assay_sampler *s, const assay_sampler_params *p, uint64_t *state, const float *logits);
/* The first index of the largest value. */
int32_t assay_argmax(const float *x, int64_t n);

#endif
