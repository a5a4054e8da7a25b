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

/* a before b in cmp_desc's order: larger logit, then lower index */
static inline int before(const float *logits, int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

/* Quickselect: moves the k largest of idx[0..n) (by cmp_desc's order) to the front, in no particular order. */
static void select_top(int32_t *idx, int64_t n, int64_t k, const float *logits) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int32_t pv = idx[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (before(logits, idx[i], pv)) i++;
            while (before(logits, pv, idx[j])) j--;
            if (i <= j) {
                int32_t t = idx[i];
                idx[i++] = idx[j];
                idx[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* The candidates are ordered (by logit, then index) only as far as the filters need: top-k selects its k without
 * sorting the rest, min-p keeps those whose weight reaches min_p x the top one's, and top-p needs only the set above a
 * weight threshold whose mass reaches p; only that set is sorted. With no filter the draw walks the vocabulary in
 * index order. So a draw costs a few passes over the logits, not a sort of the vocabulary. */
int32_t assay_sampler_sample_with(assay_sampler *s, const assay_sampler_params *p, uint64_t *state, const float *logits) {
    if (p->temp <= 0) return assay_argmax(logits, s->n_vocab);
    int64_t n = s->n_vocab;
    int32_t *idx = s->idx;
    float *prob = s->prob;
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)i;
    if (p->top_k > 0 && p->top_k < n) {
        select_top(idx, n, p->top_k, logits);
        n = p->top_k;
    }
    float mx = logits[idx[0]];
    for (int64_t i = 1; i < n; i++) mx = logits[idx[i]] > mx ? logits[idx[i]] : mx;
    /* weights of the candidates (in idx order) and their sum */
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        prob[i] = expf((logits[idx[i]] - mx) / p->temp);
        sum += prob[i];
    }
    int use_p = p->top_p > 0 && p->top_p < 1, use_min = p->min_p > 0;
    if (use_p || use_min) {
        /* a set that holds the kept prefix: the weights >= min_p x the top one (the top weight is 1), or, for top-p
         * alone, the weights above a threshold lowered until the set's mass reaches top_p */
        float lim = use_min ? p->min_p : 0.1f;
        int64_t m;
        for (;;) {
            m = 0;
            double mass = 0;
            for (int64_t i = 0; i < n; i++)
                if (prob[i] >= lim) mass += prob[i], m++;
            if (use_min || mass / sum >= p->top_p || lim == 0) break;
            lim = lim > 1e-30f ? lim * 0.1f : 0; /* a pass costs a compare per token: small steps, small sets */
        }
        /* move the set to the front (weights along), sort it by logit then index */
        int64_t w = 0;
        for (int64_t i = 0; i < n; i++)
            if (prob[i] >= lim) {
                int32_t ti = idx[w];
                float tp = prob[w];
                idx[w] = idx[i];
                prob[w] = prob[i];
                idx[i] = ti;
                prob[i] = tp;
                w++;
            }
        qsort_r(idx, (size_t)m, sizeof(int32_t), cmp_desc, (void *)logits);
        for (int64_t i = 0; i < m; i++) prob[i] = expf((logits[idx[i]] - mx) / p->temp);
        n = m;
        if (use_p) {
            double c = 0;
            for (int64_t i = 0; i < n; i++) {
                c += prob[i] / sum;
                if (c >= p->top_p) {
                    n = i + 1;
                    break;
                }
            }
        }
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += prob[i];
    double u = (double)(splitmix64(state) >> 11) / 9007199254740992.0 * total;
    double c = 0;
    for (int64_t i = 0; i < n; i++) {
        c += prob[i];
        if (u < c) return idx[i];
    }
    return idx[n - 1];
}
