/* kv_cache.h — the KV pool: per layer, n_blocks blocks of ASSAY_KV_BLOCK tokens in backend memory (layout in
 * backend.h), plus the per-layer scales of the 8-bit dtypes. It knows nothing of sequences: which blocks a
 * sequence holds is the block manager's bookkeeping (block_manager.h), and the model runner turns that into slot
 * numbers in each step descriptor. Sized in blocks (or bytes: assay_kv_cache_block_bytes) and allocated once. */
#ifndef ASSAY_KV_CACHE_H
#define ASSAY_KV_CACHE_H

#include "assay/backend.h"

/* --calculate-kv-scales: per-layer k/v scales derived from the keys and values of real traffic.
 *
 * Semantics (vLLM's feature, minus the failure modes that got it removed there):
 *   - a running max of |K| (post-RoPE, as stored) and |V| per layer over the first `target` tokens the layer
 *     stores while the calibration is armed; scale = running max / the format's max (448 for E4M3);
 *   - tokens stored while `paused` (a warm-up or probe pass) never enter the max, and are written with their own
 *     dynamic per-slot scale, so they are still stored correctly;
 *   - the scale only grows: each batch widens the max before its tokens are written, so a token written before
 *     the scale is final uses a scale >= its own absmax and is never clamped; tokens already in the cache keep the
 *     (smaller, finer) per-slot scale they were written with — the cache keeps one scale per slot, so nothing has
 *     to be re-quantized when the max grows;
 *   - after `target` tokens the scale is frozen: later tokens use it and saturate past it, like a checkpoint's
 *     static k_scale/v_scale. */
typedef struct assay_kv_scale_calc {
    int64_t target;  /* tokens to observe per layer; 0: feature off */
    int paused;      /* nonzero: tokens stored now are not real traffic (warm-up) */
    int64_t *seen;   /* [n_layer] real tokens observed so far (<= target) */
    float *k_amax, *v_amax; /* [n_layer] running max |K|, |V| */
} assay_kv_scale_calc;

typedef struct assay_kv_cache {
    assay_backend *be;
    assay_kv_geom geom;
    int64_t n_layer, n_blocks;
    assay_kv_layer *layers;   /* [n_layer] */
    assay_kv_scale_calc calc;
} assay_kv_cache;

/* Bytes one block takes over all layers (K, V and, for scaled dtypes, their per-slot scales). */
size_t assay_kv_cache_block_bytes(const assay_kv_geom *g, int64_t n_layer);
assay_status assay_kv_cache_init(assay_kv_cache *kv, assay_backend *be, const assay_kv_geom *g, int64_t n_layer,
                                 int64_t n_blocks);
void assay_kv_cache_free(assay_kv_cache *kv);
/* Static per-layer scales (dequant multipliers, > 0) for every token this layer stores from now on. */
void assay_kv_cache_set_static(assay_kv_cache *kv, int64_t layer, float k_scale, float v_scale);
/* Arms --calculate-kv-scales over the first `target_tokens` (> 0) real tokens; scaled dtypes only. */
void assay_kv_cache_calc_begin(assay_kv_cache *kv, int64_t target_tokens);
void assay_kv_cache_calc_pause(assay_kv_cache *kv, int paused);
/* 1 once every layer has observed `target` tokens (the scales are final). */
int assay_kv_cache_calc_frozen(const assay_kv_cache *kv);
/* Called with a layer's K and V rows ([n_tok][n_head_kv*head_dim] floats, what kv_store will write) right before
 * kv_store: while calibrating (armed, not paused, not frozen) it widens the running max with the first rows up
 * to the target and sets the layer's static scales to max/qmax; while paused and not frozen it clears them, so
 * the warm-up tokens get dynamic per-slot scales. Nothing to do otherwise. */
void assay_kv_cache_observe(assay_kv_cache *kv, int64_t layer, const float *k, const float *v, int64_t n_tok);

#endif
