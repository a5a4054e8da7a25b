/* kv_cache.c — see kv_cache.h. */
#include "engine/kv_cache.h"

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
    int scaled = g->dtype == ASSAY_KV_FP8_E4M3 || g->dtype == ASSAY_KV_FP8_E5M2 || g->dtype == ASSAY_KV_INT8;
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
