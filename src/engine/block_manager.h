/* block_manager.h — host-side bookkeeping of the paged KV cache: which physical blocks each sequence holds,
 * reference counts, and automatic prefix caching. It owns no KV memory (the backend's KV pool does); it hands
 * out block ids, and the model runner turns them into slot numbers (block * ASSAY_KV_BLOCK + offset).
 *
 *   assay_block_manager *bm = assay_block_manager_new(n_blocks, 1);        // 1: prefix caching on
 *   assay_block_table t = {0};
 *   int64_t cached;                                                       // prompt tokens whose KV is reused
 *   if (assay_block_manager_allocate_prompt(bm, &t, prompt, n_prompt, n_prompt, n_prompt, &cached) != ASSAY_OK) ...;  // full: wait
 *   ... run the model on prompt[cached..] ...
 *   assay_block_manager_commit(bm, &t, prompt, n_prompt);                 // full computed blocks become shareable
 *   assay_block_manager_append(bm, &t, n_prompt + 1, &copy);              // room for one more token
 *   assay_block_manager_free_table(bm, &t);
 *
 * Semantics follow vLLM's:
 *   - a block is shared by every table that holds it (ref_count); it returns to the free queue at ref_count 0;
 *   - prefix caching: a FULL block that has been computed gets a chained hash (hash of the previous block's
 *     hash and its 16 token ids), so two prompts with the same first k blocks map to the same k physical blocks;
 *     a freed block keeps its hash and contents until the allocator reuses it (least recently freed first), so a
 *     later request can still hit it ("cached free" blocks);
 *   - a prompt never takes all of its tokens from the cache: its last token is always computed, because the
 *     step needs that token's logits; lookups stop at n_prompt - 1 tokens;
 *   - a partial block is never found by hash; it is shared only by fork (parallel sampling), and the first
 *     append to a shared partial block copies it first (copy-on-write): append returns the copy to make.
 * Counters use vLLM's meaning: queries and hits in tokens, usage as the fraction of blocks in use. */
#ifndef ASSAY_ENGINE_BLOCK_MANAGER_H
#define ASSAY_ENGINE_BLOCK_MANAGER_H

#include <stdint.h>

#include "assay/backend.h"
#include "assay/status.h"

typedef struct assay_block_manager assay_block_manager;

/* One sequence's logical -> physical block map; grows as the sequence does. */
typedef struct assay_block_table {
    int32_t *ids;
    int64_t n, cap;
    int64_t n_tokens; /* tokens the blocks have room reserved for (allocate / append set it) */
    int64_t n_hashed; /* leading blocks that are full, computed and registered in the prefix cache */
    uint64_t last_hash; /* chained hash of block n_hashed - 1 */
} assay_block_table;

/* A block to copy before the step that writes into dst (copy-on-write of a shared partial block). */
typedef struct assay_block_copy {
    int32_t src, dst;
} assay_block_copy;

typedef struct assay_block_counters {
    int64_t n_blocks, n_free;            /* n_free counts cached free blocks too (they are reusable) */
    int64_t prefix_queries, prefix_hits; /* prompt tokens looked up / found, since creation */
} assay_block_counters;

assay_block_manager *assay_block_manager_new(int64_t n_blocks, int prefix_caching);
void assay_block_manager_free(assay_block_manager *bm);

/* Blocks needed to hold n_tokens tokens. */
static inline int64_t assay_blocks_for(int64_t n_tokens) { return (n_tokens + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK; }

/* Gives an empty table the blocks for the first `n_alloc` tokens of a prompt of n_prompt tokens: the longest
 * cached prefix of full blocks (at most min(n_prompt - 1, max_cached) tokens: a caller that needs the logits of
 * earlier positions lowers max_cached), then fresh blocks. *n_cached: tokens whose KV is already in the cache.
 * Counts one query of n_prompt tokens. ASSAY_ERR_NOMEM (no message set, the table left empty) when the free blocks
 * do not suffice: the caller waits or preempts. */
assay_status assay_block_manager_allocate_prompt(assay_block_manager *bm, assay_block_table *t, const int32_t *prompt,
                                                 int64_t n_prompt, int64_t n_alloc, int64_t max_cached, int64_t *n_cached);
/* Makes room for tokens up to n_tokens (total) in a table: fresh blocks at the end; when the current last block
 * is shared and partially filled and must receive tokens, it is replaced by a private copy and *copy (when not
 * NULL) says which block to copy (src = dst = -1 when nothing to copy). ASSAY_ERR_NOMEM (no message, nothing
 * changed) when the free blocks do not suffice. */
assay_status assay_block_manager_append(assay_block_manager *bm, assay_block_table *t, int64_t n_tokens,
                                        assay_block_copy *copy);
/* Free blocks the append of n_tokens (total) into t would take (including a copy-on-write block). */
int64_t assay_block_manager_append_cost(const assay_block_manager *bm, const assay_block_table *t, int64_t n_tokens);
/* Registers in the prefix cache the full blocks of t whose n_computed first tokens (`tokens`) are now in the
 * cache. No-op when prefix caching is off. */
void assay_block_manager_commit(assay_block_manager *bm, assay_block_table *t, const int32_t *tokens, int64_t n_computed);
/* A new table sharing every block of src (ref counts + 1): parallel sampling's fork. */
void assay_block_manager_fork(assay_block_manager *bm, const assay_block_table *src, assay_block_table *dst);
/* Releases every block of t (last block first, so a prompt's leading blocks stay cached longest) and empties it. */
void assay_block_manager_free_table(assay_block_manager *bm, assay_block_table *t);
/* Drops every cached free block from the prefix cache (vLLM's reset_prefix_cache). */
void assay_block_manager_reset_prefix_cache(assay_block_manager *bm);

int64_t assay_block_manager_n_free(const assay_block_manager *bm);
int assay_block_manager_ref_count(const assay_block_manager *bm, int32_t block);
void assay_block_manager_counters(const assay_block_manager *bm, assay_block_counters *out);

#endif
