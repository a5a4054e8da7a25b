/* sampler.c — see sampler.h. All buffers are allocated once per sampler; sampling allocates nothing. */
#include "assay/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "assay/status.h"

struct assay_sampler {
    assay_sampler_params p;
    int64_t n_vocab;
    uint64_t state;
    int32_t *idx;
    float *prob;
};

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

assay_sampler *assay_sampler_new(const assay_sampler_params *p, int64_t n_vocab) {
    assay_sampler *s = assay_xcalloc(1, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    s->state = p->seed;
    s->idx = assay_xmalloc((size_t)n_vocab * sizeof(int32_t));
    s->prob = assay_xmalloc((size_t)n_vocab * sizeof(float));
    return s;
}

void assay_sampler_free(assay_sampler *s) {
    if (!s) return;
    free(s->idx);
    free(s->prob);
    free(s);
}

int32_t assay_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* by logit, then by index: a total order, so reproducible; qsort_r keeps samplers independent across threads */
static int cmp_desc(const void *a, const void *b, void *ctx) {
    const float *sort_logits = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (sort_logits[i] > sort_logits[j]) return -1;
    if (sort_logits[i] < sort_logits[j]) return 1;
    return i < j ? -1 : i > j;
}

int32_t assay_sampler_sample(assay_sampler *s, const float *logits) {
    return assay_sampler_sample_with(s, &s->p, &s->state, logits);
}

int32_t assay_sampler_sample_with(assay_sampler *s, const assay_sampler_params *p, uint64_t *state, const float *logits) {
    if (p->temp <= 0) return assay_argmax(logits, s->n_vocab);
    int64_t n = s->n_vocab;
    for (int64_t i = 0; i < n; i++) s->idx[i] = (int32_t)i;
    /* Sorting every candidate is simple and fast enough for one token at a time (vocabularies up to ~256k). */
    qsort_r(s->idx, (size_t)n, sizeof(int32_t), cmp_desc, (void *)logits);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    float mx = logits[s->idx[0]];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        s->prob[i] = expf((logits[s->idx[i]] - mx) / p->temp);
        sum += s->prob[i];
    }
    for (int64_t i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
    if (p->top_p > 0 && p->top_p < 1) {
        double c = 0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            c += s->prob[i];
            if (c >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0) {
        float lim = p->min_p * s->prob[0];
        int64_t keep = 1;
        while (keep < n && s->prob[keep] >= lim) keep++;
        n = keep;
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += s->prob[i];
    double u = (double)(splitmix64(state) >> 11) / 9007199254740992.0 * total;
    double c = 0;
    for (int64_t i = 0; i < n; i++) {
        c += s->prob[i];
        if (u < c) return s->idx[i];
    }
    return s->idx[n - 1];
}
