/* block_manager.c — see block_manager.h.
 *
 * Free blocks sit in one doubly linked queue (least recently freed at the head, taken first). A free block may
 * still carry a prefix hash: it stays findable until the allocator takes it for new content. The prefix cache
 * is an open-addressing table (linear probing, backward-shift deletion) from chained hash to block id; each
 * registered block keeps its 16 token ids so a hash collision can never hand out the wrong KV. */
#include "engine/block_manager.h"

#include <stdlib.h>
#include <string.h>

#define NO_BLOCK (-1)

struct assay_block_manager {
    int64_t n_blocks;
    int prefix_caching;
    int32_t *ref;          /* [n_blocks] tables holding the block */
    uint8_t *hashed;       /* [n_blocks] registered in the prefix cache */
    uint64_t *hash;        /* [n_blocks] its chained hash when hashed */
    int32_t *tokens;       /* [n_blocks][ASSAY_KV_BLOCK] its token ids when hashed */
    int32_t *prev, *next;  /* free queue links; NO_BLOCK ends */
    uint8_t *in_free;
    int32_t head, tail;
    int64_t n_free;
    int32_t *map;          /* [map_cap] block id or NO_BLOCK */
    int64_t map_cap;       /* power of two >= 2 n_blocks */
    int64_t queries, hits;
};

/* ---- the chained hash ------------------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* hash of (parent, the block's tokens); the first block's parent is a fixed seed */
static uint64_t chain_hash(uint64_t parent, const int32_t *tok) {
    uint64_t h = mix64(parent ^ 0x6a09e667f3bcc909ull);
    for (int i = 0; i < ASSAY_KV_BLOCK; i++) h = mix64(h ^ ((uint64_t)(uint32_t)tok[i] + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)));
    return h;
}
#define ROOT_HASH 0x243f6a8885a308d3ull

/* ---- prefix cache map ------------------------------------------------------------------------------------- */

static int64_t map_slot(const assay_block_manager *bm, uint64_t h) { return (int64_t)(h & (uint64_t)(bm->map_cap - 1)); }

static int32_t map_find(const assay_block_manager *bm, uint64_t h, const int32_t *tok) {
    for (int64_t i = map_slot(bm, h);; i = (i + 1) & (bm->map_cap - 1)) {
        int32_t b = bm->map[i];
        if (b == NO_BLOCK) return NO_BLOCK;
        if (bm->hash[b] == h && memcmp(bm->tokens + (size_t)b * ASSAY_KV_BLOCK, tok, ASSAY_KV_BLOCK * sizeof(int32_t)) == 0)
            return b;
    }
}

static int map_has(const assay_block_manager *bm, uint64_t h) {
    for (int64_t i = map_slot(bm, h);; i = (i + 1) & (bm->map_cap - 1)) {
        int32_t b = bm->map[i];
        if (b == NO_BLOCK) return 0;
        if (bm->hash[b] == h) return 1;
    }
}

static void map_insert(assay_block_manager *bm, int32_t b) {
    int64_t i = map_slot(bm, bm->hash[b]);
    while (bm->map[i] != NO_BLOCK) i = (i + 1) & (bm->map_cap - 1);
    bm->map[i] = b;
    bm->hashed[b] = 1;
}

/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
static void map_remove(assay_block_manager *bm, int32_t b) {
    int64_t mask = bm->map_cap - 1, i = map_slot(bm, bm->hash[b]);
    while (bm->map[i] != b) {
        ASSAY_ASSERT(bm->map[i] != NO_BLOCK);
        i = (i + 1) & mask;
    }
    for (int64_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        int32_t c = bm->map[j];
        if (c == NO_BLOCK) break;
        int64_t home = map_slot(bm, bm->hash[c]);
        /* c may move into the hole at i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            bm->map[i] = c;
            i = j;
        }
    }
    bm->map[i] = NO_BLOCK;
    bm->hashed[b] = 0;
}

/* ---- free queue ------------------------------------------------------------------------------------------- */

static void free_push_tail(assay_block_manager *bm, int32_t b) {
    bm->prev[b] = bm->tail;
    bm->next[b] = NO_BLOCK;
    if (bm->tail != NO_BLOCK) bm->next[bm->tail] = b;
    else bm->head = b;
    bm->tail = b;
    bm->in_free[b] = 1;
    bm->n_free++;
}

static void free_unlink(assay_block_manager *bm, int32_t b) {
    ASSAY_ASSERT(bm->in_free[b]);
    if (bm->prev[b] != NO_BLOCK) bm->next[bm->prev[b]] = bm->next[b];
    else bm->head = bm->next[b];
    if (bm->next[b] != NO_BLOCK) bm->prev[bm->next[b]] = bm->prev[b];
    else bm->tail = bm->prev[b];
    bm->in_free[b] = 0;
    bm->n_free--;
}

/* A block for new content: the least recently freed one, forgotten by the prefix cache. */
static int32_t take_fresh(assay_block_manager *bm) {
    int32_t b = bm->head;
    ASSAY_ASSERT(b != NO_BLOCK);
    free_unlink(bm, b);
    if (bm->hashed[b]) map_remove(bm, b);
    ASSAY_ASSERT(bm->ref[b] == 0);
    bm->ref[b] = 1;
    return b;
}

static void take_shared(assay_block_manager *bm, int32_t b) {
    if (bm->ref[b] == 0) free_unlink(bm, b);
    bm->ref[b]++;
}

static void release(assay_block_manager *bm, int32_t b) {
    ASSAY_ASSERT(bm->ref[b] > 0);
    if (--bm->ref[b] == 0) free_push_tail(bm, b);
}

/* ---- tables ----------------------------------------------------------------------------------------------- */

static void table_push(assay_block_table *t, int32_t b) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->ids = assay_xrealloc(t->ids, (size_t)t->cap * sizeof(int32_t));
    }
    t->ids[t->n++] = b;
}

assay_block_manager *assay_block_manager_new(int64_t n_blocks, int prefix_caching) {
    ASSAY_ASSERT(n_blocks > 0 && n_blocks < INT32_MAX / ASSAY_KV_BLOCK);
    assay_block_manager *bm = assay_xcalloc(1, sizeof *bm);
    bm->n_blocks = n_blocks;
    bm->prefix_caching = prefix_caching;
    bm->ref = assay_xcalloc((size_t)n_blocks, sizeof(int32_t));
    bm->hashed = assay_xcalloc((size_t)n_blocks, 1);
    bm->hash = assay_xcalloc((size_t)n_blocks, sizeof(uint64_t));
    bm->prev = assay_xmalloc((size_t)n_blocks * sizeof(int32_t));
    bm->next = assay_xmalloc((size_t)n_blocks * sizeof(int32_t));
    bm->in_free = assay_xcalloc((size_t)n_blocks, 1);
    bm->head = bm->tail = NO_BLOCK;
    for (int64_t b = 0; b < n_blocks; b++) free_push_tail(bm, (int32_t)b);
    if (prefix_caching) {
        bm->tokens = assay_xmalloc((size_t)n_blocks * ASSAY_KV_BLOCK * sizeof(int32_t));
        bm->map_cap = 16;
        while (bm->map_cap < 2 * n_blocks) bm->map_cap *= 2;
        bm->map = assay_xmalloc((size_t)bm->map_cap * sizeof(int32_t));
        for (int64_t i = 0; i < bm->map_cap; i++) bm->map[i] = NO_BLOCK;
    }
    return bm;
}

void assay_block_manager_free(assay_block_manager *bm) {
    if (!bm) return;
    free(bm->ref); free(bm->hashed); free(bm->hash); free(bm->tokens);
    free(bm->prev); free(bm->next); free(bm->in_free); free(bm->map);
    free(bm);
}

assay_status assay_block_manager_allocate_prompt(assay_block_manager *bm, assay_block_table *t, const int32_t *prompt,
                                                 int64_t n_prompt, int64_t n_alloc, int64_t max_cached, int64_t *n_cached) {
    ASSAY_ASSERT(t->n == 0 && n_prompt > 0 && n_alloc > 0 && n_alloc <= n_prompt);
    *n_cached = 0;
    /* the longest run of cached full blocks, stopping short of the prompt's last token */
    int64_t n_hit = 0, n_revive = 0;
    uint64_t h = ROOT_HASH;
    int32_t hits_small[64], *hits = hits_small;
    int64_t limit = max_cached < n_prompt - 1 ? max_cached : n_prompt - 1;
    int64_t max_lookup = bm->prefix_caching && limit > 0 ? limit / ASSAY_KV_BLOCK : 0;
    if (max_lookup > 64) hits = assay_xmalloc((size_t)max_lookup * sizeof(int32_t));
    for (int64_t i = 0; i < max_lookup; i++) {
        uint64_t hi = chain_hash(h, prompt + i * ASSAY_KV_BLOCK);
        int32_t b = map_find(bm, hi, prompt + i * ASSAY_KV_BLOCK);
        if (b == NO_BLOCK) break;
        hits[n_hit++] = b;
        n_revive += bm->ref[b] == 0;
        h = hi;
    }
    if (n_alloc < n_hit * ASSAY_KV_BLOCK) n_alloc = n_hit * ASSAY_KV_BLOCK;
    int64_t n_fresh = assay_blocks_for(n_alloc) - n_hit;
    if (n_fresh > bm->n_free - n_revive) {
        if (hits != hits_small) free(hits);
        return ASSAY_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n_hit; i++) {
        take_shared(bm, hits[i]);
        table_push(t, hits[i]);
    }
    for (int64_t i = 0; i < n_fresh; i++) table_push(t, take_fresh(bm));
    if (hits != hits_small) free(hits);
    t->n_tokens = n_alloc;
    t->n_hashed = n_hit;
    t->last_hash = h;
    *n_cached = n_hit * ASSAY_KV_BLOCK;
    if (bm->prefix_caching) {
        bm->queries += n_prompt;
        bm->hits += *n_cached;
    }
    return ASSAY_OK;
}

/* 1 when the next token written into t lands in a shared, partially filled last block */
static int needs_cow(const assay_block_manager *bm, const assay_block_table *t) {
    return t->n > 0 && t->n_tokens % ASSAY_KV_BLOCK != 0 && t->n_tokens > (t->n - 1) * ASSAY_KV_BLOCK &&
           bm->ref[t->ids[t->n - 1]] > 1;
}

int64_t assay_block_manager_append_cost(const assay_block_manager *bm, const assay_block_table *t, int64_t n_tokens) {
    if (n_tokens <= t->n_tokens) return 0;
    int64_t grow = assay_blocks_for(n_tokens) - t->n;
    return (grow > 0 ? grow : 0) + needs_cow(bm, t);
}

assay_status assay_block_manager_append(assay_block_manager *bm, assay_block_table *t, int64_t n_tokens,
                                        assay_block_copy *copy) {
    if (copy) copy->src = copy->dst = NO_BLOCK;
    if (n_tokens <= t->n_tokens) return ASSAY_OK;
    if (assay_block_manager_append_cost(bm, t, n_tokens) > bm->n_free) return ASSAY_ERR_NOMEM;
    if (needs_cow(bm, t)) {
        int32_t old = t->ids[t->n - 1], fresh = take_fresh(bm);
        ASSAY_ASSERT(copy != NULL);
        copy->src = old;
        copy->dst = fresh;
        release(bm, old);
        t->ids[t->n - 1] = fresh;
    }
    while (t->n < assay_blocks_for(n_tokens)) table_push(t, take_fresh(bm));
    t->n_tokens = n_tokens;
    return ASSAY_OK;
}

void assay_block_manager_commit(assay_block_manager *bm, assay_block_table *t, const int32_t *tokens, int64_t n_computed) {
    if (!bm->prefix_caching) return;
    while (t->n_hashed < t->n && (t->n_hashed + 1) * ASSAY_KV_BLOCK <= n_computed) {
        const int32_t *tok = tokens + t->n_hashed * ASSAY_KV_BLOCK;
        uint64_t h = chain_hash(t->last_hash, tok);
        int32_t b = t->ids[t->n_hashed];
        /* a block already registered (a hit, or shared by fork) keeps its entry; of two blocks computed with the
         * same content, the first registered serves later lookups and the other stays private */
        if (!bm->hashed[b] && !map_has(bm, h)) {
            bm->hash[b] = h;
            memcpy(bm->tokens + (size_t)b * ASSAY_KV_BLOCK, tok, ASSAY_KV_BLOCK * sizeof(int32_t));
            map_insert(bm, b);
        }
        t->last_hash = h;
        t->n_hashed++;
    }
}

void assay_block_manager_fork(assay_block_manager *bm, const assay_block_table *src, assay_block_table *dst) {
    ASSAY_ASSERT(dst->n == 0);
    for (int64_t i = 0; i < src->n; i++) {
        take_shared(bm, src->ids[i]);
        table_push(dst, src->ids[i]);
    }
    dst->n_tokens = src->n_tokens;
    dst->n_hashed = src->n_hashed;
    dst->last_hash = src->last_hash;
}

void assay_block_manager_free_table(assay_block_manager *bm, assay_block_table *t) {
    for (int64_t i = t->n - 1; i >= 0; i--) release(bm, t->ids[i]);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

void assay_block_manager_reset_prefix_cache(assay_block_manager *bm) {
    if (!bm->prefix_caching) return;
    for (int64_t b = 0; b < bm->n_blocks; b++)
        if (bm->hashed[b] && bm->ref[b] == 0) map_remove(bm, (int32_t)b);
}

int64_t assay_block_manager_n_free(const assay_block_manager *bm) { return bm->n_free; }

int assay_block_manager_ref_count(const assay_block_manager *bm, int32_t block) {
    ASSAY_ASSERT(block >= 0 && block < bm->n_blocks);
    return bm->ref[block];
}

void assay_block_manager_counters(const assay_block_manager *bm, assay_block_counters *out) {
    out->n_blocks = bm->n_blocks;
    out->n_free = bm->n_free;
    out->prefix_queries = bm->queries;
    out->prefix_hits = bm->hits;
}
