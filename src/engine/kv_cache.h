/* kv_cache.h — the paged KV cache of a session: per layer, one pool of blocks (ASSAY_KV_BLOCK tokens each,
 * layout in backend.h); per sequence, a block table mapping its logical blocks to pool blocks. Blocks are taken
 * from a free list as a sequence grows and returned when it is cleared, so sequences of different lengths share
 * one pool (what a server needs). All memory is allocated at open. */
#ifndef ASSAY_KV_CACHE_H
#define ASSAY_KV_CACHE_H

#include "assay/backend.h"

typedef struct assay_kv_cache {
    assay_backend *be;
    assay_kv_geom geom;
    int64_t n_layer, n_blocks, max_blocks_per_seq;
    assay_kv_layer *layers;   /* [n_layer] */
    int n_seq;
    int32_t **tables;         /* [n_seq][max_blocks_per_seq] */
    int64_t *seq_blocks;      /* blocks held by each sequence */
    int32_t *free_list;
    int64_t n_free;
} assay_kv_cache;

assay_status assay_kv_cache_init(assay_kv_cache *kv, assay_backend *be, const assay_kv_geom *g, int64_t n_layer,
                                 int n_seq, int64_t n_ctx);
void assay_kv_cache_free(assay_kv_cache *kv);
/* Makes sure positions 0..pos of `seq` have blocks. ASSAY_ERR_RANGE when the position is past n_ctx or the pool is empty. */
assay_status assay_kv_cache_reserve(assay_kv_cache *kv, int seq, int64_t pos);
void assay_kv_cache_seq_clear(assay_kv_cache *kv, int seq);
assay_kv_seq_view assay_kv_cache_view(const assay_kv_cache *kv, int seq);

#endif
