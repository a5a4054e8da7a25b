/* kv_cache.c — see kv_cache.h. */
#include "engine/kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

assay_status assay_kv_cache_init(assay_kv_cache *kv, assay_backend *be, const assay_kv_geom *g, int64_t n_layer,
                                 int n_seq, int64_t n_ctx) {
    memset(kv, 0, sizeof *kv);
    kv->be = be;
    kv->geom = *g;
    kv->n_layer = n_layer;
    kv->n_seq = n_seq;
    kv->max_blocks_per_seq = (n_ctx + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK;
    kv->n_blocks = kv->max_blocks_per_seq * n_seq;
    size_t slots = (size_t)kv->n_blocks * (size_t)g->n_head_kv * ASSAY_KV_BLOCK;
    size_t bytes = slots * (size_t)g->head_dim * assay_kv_dtype_size(g->dtype);
    int scaled = assay_kv_dtype_scaled(g->dtype);
    kv->layers = assay_xcalloc((size_t)n_layer, sizeof *kv->layers);
    for (int64_t l = 0; l < n_layer; l++) {
        assay_kv_layer *L = &kv->layers[l];
        L->k = be->ops->alloc(be, bytes);
        L->v = be->ops->alloc(be, bytes);
        if (scaled) {
            L->k_scale = be->ops->alloc(be, slots * sizeof(float));
            L->v_scale = be->ops->alloc(be, slots * sizeof(float));
        }
        if (!L->k || !L->v || (scaled && (!L->k_scale || !L->v_scale))) {
            assay_kv_cache_free(kv);
            return assay_fail(ASSAY_ERR_NOMEM, "KV cache: cannot allocate %zu bytes per layer (%lld layers)", 2 * bytes,
                              (long long)n_layer);
        }
    }
    kv->tables = assay_xcalloc((size_t)n_seq, sizeof *kv->tables);
    for (int s = 0; s < n_seq; s++) kv->tables[s] = assay_xcalloc((size_t)kv->max_blocks_per_seq, sizeof(int32_t));
    kv->seq_blocks = assay_xcalloc((size_t)n_seq, sizeof(int64_t));
    kv->free_list = assay_xmalloc((size_t)kv->n_blocks * sizeof(int32_t));
    for (int64_t i = 0; i < kv->n_blocks; i++) kv->free_list[i] = (int32_t)(kv->n_blocks - 1 - i);
    kv->n_free = kv->n_blocks;
    return ASSAY_OK;
}

void assay_kv_cache_free(assay_kv_cache *kv) {
    if (kv->layers)
        for (int64_t l = 0; l < kv->n_layer; l++) {
            assay_kv_layer *L = &kv->layers[l];
            kv->be->ops->free(kv->be, L->k);
            kv->be->ops->free(kv->be, L->v);
            if (L->k_scale) kv->be->ops->free(kv->be, L->k_scale);
            if (L->v_scale) kv->be->ops->free(kv->be, L->v_scale);
        }
    free(kv->layers);
    if (kv->tables)
        for (int s = 0; s < kv->n_seq; s++) free(kv->tables[s]);
    free(kv->tables);
    free(kv->seq_blocks);
    free(kv->free_list);
    free(kv->calc.seen);
    free(kv->calc.k_amax);
    free(kv->calc.v_amax);
    memset(kv, 0, sizeof *kv);
}

assay_status assay_kv_cache_reserve(assay_kv_cache *kv, int seq, int64_t pos) {
    ASSAY_ASSERT(seq >= 0 && seq < kv->n_seq);
    int64_t need = pos / ASSAY_KV_BLOCK + 1;
    if (pos < 0 || need > kv->max_blocks_per_seq)
        return assay_fail(ASSAY_ERR_RANGE, "position %lld is outside the context of %lld tokens", (long long)pos,
                          (long long)(kv->max_blocks_per_seq * ASSAY_KV_BLOCK));
    while (kv->seq_blocks[seq] < need) {
        if (kv->n_free == 0) return assay_fail(ASSAY_ERR_RANGE, "KV cache is full");
        kv->tables[seq][kv->seq_blocks[seq]++] = kv->free_list[--kv->n_free];
    }
    return ASSAY_OK;
}

void assay_kv_cache_seq_clear(assay_kv_cache *kv, int seq) {
    ASSAY_ASSERT(seq >= 0 && seq < kv->n_seq);
    while (kv->seq_blocks[seq] > 0) kv->free_list[kv->n_free++] = kv->tables[seq][--kv->seq_blocks[seq]];
}

assay_kv_seq_view assay_kv_cache_view(const assay_kv_cache *kv, int seq) {
    assay_kv_seq_view v = {kv->tables[seq], kv->seq_blocks[seq]};
    return v;
}

int assay_kv_dtype_scaled(assay_kv_dtype t) {
    return t == ASSAY_KV_FP8_E4M3 || t == ASSAY_KV_FP8_E5M2 || t == ASSAY_KV_INT8;
}

float assay_kv_dtype_qmax(assay_kv_dtype t) {
    ASSAY_ASSERT(assay_kv_dtype_scaled(t));
    return t == ASSAY_KV_INT8 ? 127.0f : t == ASSAY_KV_FP8_E4M3 ? 448.0f : 57344.0f;
}

void assay_kv_cache_set_static(assay_kv_cache *kv, int64_t layer, float k_scale, float v_scale) {
    ASSAY_ASSERT(layer >= 0 && layer < kv->n_layer && k_scale > 0 && v_scale > 0);
    kv->layers[layer].k_static = k_scale;
    kv->layers[layer].v_static = v_scale;
}

void assay_kv_cache_calc_begin(assay_kv_cache *kv, int64_t target_tokens) {
    ASSAY_ASSERT(target_tokens > 0 && assay_kv_dtype_scaled(kv->geom.dtype));
    assay_kv_scale_calc *c = &kv->calc;
    c->target = target_tokens;
    c->paused = 0;
    c->seen = assay_xcalloc((size_t)kv->n_layer, sizeof *c->seen);
    c->k_amax = assay_xcalloc((size_t)kv->n_layer, sizeof *c->k_amax);
    c->v_amax = assay_xcalloc((size_t)kv->n_layer, sizeof *c->v_amax);
    for (int64_t l = 0; l < kv->n_layer; l++) kv->layers[l].k_static = kv->layers[l].v_static = 0;
}

void assay_kv_cache_calc_pause(assay_kv_cache *kv, int paused) { kv->calc.paused = paused; }

int assay_kv_cache_calc_frozen(const assay_kv_cache *kv) {
    if (kv->calc.target <= 0) return 0;
    for (int64_t l = 0; l < kv->n_layer; l++)
        if (kv->calc.seen[l] < kv->calc.target) return 0;
    return 1;
}

static float rows_amax(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

void assay_kv_cache_observe(assay_kv_cache *kv, int64_t layer, const float *k, const float *v, int64_t n_tok) {
    assay_kv_scale_calc *c = &kv->calc;
    if (c->target <= 0 || c->seen[layer] >= c->target) return; /* off, or frozen: the static scale stays */
    assay_kv_layer *L = &kv->layers[layer];
    if (c->paused) {
        /* warm-up traffic: stored with per-slot dynamic scales, never counted; the scales set so far come back
         * on the next real batch (they live in the running max) */
        L->k_static = L->v_static = 0;
        return;
    }
    int64_t kvd = kv->geom.n_head_kv * kv->geom.head_dim;
    int64_t take = c->target - c->seen[layer];
    if (take > n_tok) take = n_tok;
    /* only the first `take` rows calibrate; the rest of the batch (past the target) is written with the frozen
     * scale like any later token */
    c->k_amax[layer] = fmaxf(c->k_amax[layer], rows_amax(k, take * kvd));
    c->v_amax[layer] = fmaxf(c->v_amax[layer], rows_amax(v, take * kvd));
    c->seen[layer] += take;
    float qmax = assay_kv_dtype_qmax(kv->geom.dtype);
    /* an all-zero start (nothing seen yet above 0) keeps dynamic slots rather than a zero scale */
    float ks = c->k_amax[layer] / qmax, vs = c->v_amax[layer] / qmax;
    L->k_static = ks > 0 ? ks : 0;
    L->v_static = vs > 0 ? vs : 0;
}
