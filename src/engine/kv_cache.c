/* kv_cache.c — see kv_cache.h. */
#include "engine/kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t assay_kv_cache_block_bytes(const assay_kv_geom *g, int64_t n_layer) {
    /* the engine keeps a scale per slot for the scaled types (kv_type.h) */
    return assay_kv_token_bytes(g->dtype, g->n_head_kv, g->head_dim, 1) * ASSAY_KV_BLOCK * (size_t)n_layer;
}

assay_status assay_kv_cache_init(assay_kv_cache *kv, assay_backend *be, const assay_kv_geom *g, int64_t n_layer,
                                 int64_t n_blocks) {
    memset(kv, 0, sizeof *kv);
    ASSAY_ASSERT(n_blocks > 0 && n_layer > 0);
    kv->be = be;
    kv->geom = *g;
    kv->n_layer = n_layer;
    kv->n_blocks = n_blocks;
    size_t slots = (size_t)n_blocks * (size_t)g->n_head_kv * ASSAY_KV_BLOCK;
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
            return assay_fail(ASSAY_ERR_NOMEM, "KV cache: cannot allocate %lld blocks of %d tokens (%.1f MiB over %lld layers)",
                              (long long)n_blocks, ASSAY_KV_BLOCK,
                              (double)assay_kv_cache_block_bytes(g, n_layer) * (double)n_blocks / 1048576.0, (long long)n_layer);
        }
    }
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
    free(kv->calc.seen);
    free(kv->calc.k_amax);
    free(kv->calc.v_amax);
    memset(kv, 0, sizeof *kv);
}

void assay_kv_cache_set_static(assay_kv_cache *kv, int64_t layer, float k_scale, float v_scale) {
    ASSAY_ASSERT(layer >= 0 && layer < kv->n_layer && k_scale > 0 && v_scale > 0);
    kv->layers[layer].k_static = k_scale;
    kv->layers[layer].v_static = v_scale;
    kv->layers[layer].static_uniform = 1; /* set before anything is written */
}

void assay_kv_cache_calc_begin(assay_kv_cache *kv, int64_t target_tokens) {
    ASSAY_ASSERT(target_tokens > 0 && assay_kv_dtype_scaled(kv->geom.dtype));
    assay_kv_scale_calc *c = &kv->calc;
    c->target = target_tokens;
    c->paused = 0;
    c->seen = assay_xcalloc((size_t)kv->n_layer, sizeof *c->seen);
    c->k_amax = assay_xcalloc((size_t)kv->n_layer, sizeof *c->k_amax);
    c->v_amax = assay_xcalloc((size_t)kv->n_layer, sizeof *c->v_amax);
    for (int64_t l = 0; l < kv->n_layer; l++) {
        kv->layers[l].k_static = kv->layers[l].v_static = 0;
        kv->layers[l].static_uniform = 0;
    }
}

void assay_kv_cache_calc_pause(assay_kv_cache *kv, int paused) { kv->calc.paused = paused; }

int assay_kv_cache_calc_frozen(const assay_kv_cache *kv) {
    if (kv->calc.target <= 0) return 0;
    for (int64_t l = 0; l < kv->n_layer; l++)
        if (kv->calc.seen[l] < kv->calc.target) return 0;
    return 1;
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
    c->k_amax[layer] = fmaxf(c->k_amax[layer], kv->be->ops->absmax(kv->be, k, take * kvd));
    c->v_amax[layer] = fmaxf(c->v_amax[layer], kv->be->ops->absmax(kv->be, v, take * kvd));
    c->seen[layer] += take;
    float qmax = assay_kv_dtype_qmax(kv->geom.dtype);
    /* an all-zero start (nothing seen yet above 0) keeps dynamic slots rather than a zero scale */
    float ks = c->k_amax[layer] / qmax, vs = c->v_amax[layer] / qmax;
    L->k_static = ks > 0 ? ks : 0;
    L->v_static = vs > 0 ? vs : 0;
    if (c->seen[layer] >= c->target && L->k_static > 0 && L->v_static > 0) {
        /* frozen: what was written while the scales grew is re-encoded with the final ones (a backend that always
         * decodes with per-slot scales needs nothing), so from now on one scale per layer decodes the layer */
        if (kv->be->ops->kv_requantize) kv->be->ops->kv_requantize(kv->be, L, &kv->geom, kv->n_blocks);
        L->static_uniform = 1;
    }
}
