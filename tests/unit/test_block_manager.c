/* test_block_manager.c — the KV block manager's semantics (block_manager.h): prefix hits on identical full
 * blocks only, the last prompt token always computed, cached free blocks revived, least recently freed evicted
 * first, copy-on-write of a forked partial block, NOMEM leaving everything unchanged, and under a random
 * workload the invariants (every ref count equals the tables holding the block; free + used = all blocks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/block_manager.h"
#include "check.h"

#define B ASSAY_KV_BLOCK

static void fill(int32_t *t, int64_t n, int32_t base) {
    for (int64_t i = 0; i < n; i++) t[i] = base + (int32_t)i;
}

static void test_prefix_hits(void) {
    assay_block_manager *bm = assay_block_manager_new(64, 1);
    int32_t p[10 * B];
    fill(p, 10 * B, 1000);
    assay_block_table a = {0}, b = {0}, c = {0};
    int64_t cached;
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 5 * B + 3, 5 * B + 3, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 0 && a.n == 6);
    /* nothing is shared before the blocks are computed */
    CHECK(assay_block_manager_allocate_prompt(bm, &b, p, 5 * B + 3, 5 * B + 3, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 0);
    assay_block_manager_free_table(bm, &b);
    assay_block_manager_commit(bm, &a, p, 5 * B + 3);
    CHECK(a.n_hashed == 5);
    /* same first 5 full blocks, then different tokens: 5 hits */
    int32_t q[8 * B];
    memcpy(q, p, sizeof q);
    q[5 * B + 1] = -7;
    CHECK(assay_block_manager_allocate_prompt(bm, &b, q, 8 * B, 8 * B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 5 * B);
    for (int i = 0; i < 5; i++) CHECK(b.ids[i] == a.ids[i] && assay_block_manager_ref_count(bm, a.ids[i]) == 2);
    CHECK(b.ids[5] != a.ids[5]);
    /* a token differing in block 2: hits stop at 2 */
    int32_t r[6 * B];
    memcpy(r, p, sizeof r);
    r[2 * B + 4] = -1;
    CHECK(assay_block_manager_allocate_prompt(bm, &c, r, 6 * B, 6 * B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 2 * B);
    assay_block_manager_free_table(bm, &c);
    /* a caller that needs the logits from position 2 B + 5 on: only 2 blocks may come from the cache */
    CHECK(assay_block_manager_allocate_prompt(bm, &c, p, 6 * B, 6 * B, 2 * B + 4, &cached) == ASSAY_OK);
    CHECK(cached == 2 * B);
    assay_block_manager_free_table(bm, &c);
    /* a prompt of exactly 5 cached blocks: its last token is recomputed, so 4 blocks hit */
    CHECK(assay_block_manager_allocate_prompt(bm, &c, p, 5 * B, 5 * B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 4 * B && c.n == 5 && c.ids[4] != a.ids[4]);
    assay_block_manager_free_table(bm, &c);
    assay_block_counters k;
    assay_block_manager_counters(bm, &k);
    CHECK(k.prefix_hits == 13 * B);
    assay_block_manager_free_table(bm, &a);
    assay_block_manager_free_table(bm, &b);
    CHECK(assay_block_manager_n_free(bm) == 64);
    /* freed blocks stay findable until reused */
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 6 * B, 6 * B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 5 * B);
    assay_block_manager_free_table(bm, &a);
    assay_block_manager_reset_prefix_cache(bm);
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 6 * B, 6 * B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 0);
    assay_block_manager_free_table(bm, &a);
    assay_block_manager_free(bm);
}

static void test_eviction_and_nomem(void) {
    assay_block_manager *bm = assay_block_manager_new(8, 1);
    int32_t p[4 * B], q[8 * B];
    fill(p, 4 * B, 0);
    fill(q, 8 * B, 5000);
    assay_block_table a = {0}, b = {0};
    int64_t cached;
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 4 * B, 4 * B, 1 << 30, &cached) == ASSAY_OK);
    assay_block_manager_commit(bm, &a, p, 4 * B);
    assay_block_manager_free_table(bm, &a);
    /* 8 blocks wanted, 8 free (4 of them cached): all taken, the cache forgets p */
    CHECK(assay_block_manager_allocate_prompt(bm, &b, q, 8 * B, 8 * B, 1 << 30, &cached) == ASSAY_OK && cached == 0);
    CHECK(assay_block_manager_n_free(bm) == 0);
    /* no room: NOMEM, the table stays empty */
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 2, 2, 1 << 30, &cached) == ASSAY_ERR_NOMEM && a.n == 0);
    CHECK(assay_block_manager_append(bm, &b, 8 * B + 1, NULL) == ASSAY_ERR_NOMEM && b.n == 8 && b.n_tokens == 8 * B);
    assay_block_manager_free_table(bm, &b);
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 4 * B, 4 * B, 1 << 30, &cached) == ASSAY_OK && cached == 0);
    assay_block_manager_free_table(bm, &a);
    /* least recently freed first, and a table's tail before its head: free x, then y (3 blocks each, 2 full and
     * cached) with 2 blocks never used; a 4-block prompt takes the 2 unused blocks, then x's tail and x's second
     * block, so x keeps 1 cached block and y keeps 2 (looked up without taking fresh blocks: n_alloc = the hits) */
    assay_block_manager *bm2 = assay_block_manager_new(8, 1);
    assay_block_table x = {0}, y = {0}, z = {0};
    int32_t px[2 * B + 1], py[2 * B + 1], pz[4 * B];
    fill(px, 2 * B + 1, 100);
    fill(py, 2 * B + 1, 300);
    fill(pz, 4 * B, 700);
    CHECK(assay_block_manager_allocate_prompt(bm2, &x, px, 2 * B + 1, 2 * B + 1, 1 << 30, &cached) == ASSAY_OK);
    CHECK(assay_block_manager_allocate_prompt(bm2, &y, py, 2 * B + 1, 2 * B + 1, 1 << 30, &cached) == ASSAY_OK);
    assay_block_manager_commit(bm2, &x, px, 2 * B + 1);
    assay_block_manager_commit(bm2, &y, py, 2 * B + 1);
    assay_block_manager_free_table(bm2, &x);
    assay_block_manager_free_table(bm2, &y);
    CHECK(assay_block_manager_allocate_prompt(bm2, &z, pz, 4 * B, 4 * B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(assay_block_manager_allocate_prompt(bm2, &y, py, 2 * B + 1, B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == 2 * B && y.n == 2);
    CHECK(assay_block_manager_allocate_prompt(bm2, &x, px, 2 * B + 1, B, 1 << 30, &cached) == ASSAY_OK);
    CHECK(cached == B && x.n == 1);
    assay_block_manager_free_table(bm2, &z);
    assay_block_manager_free_table(bm2, &x);
    assay_block_manager_free_table(bm2, &y);
    assay_block_manager_free(bm2);
    assay_block_manager_free(bm);
}

static void test_fork_cow(void) {
    assay_block_manager *bm = assay_block_manager_new(16, 1);
    int32_t p[2 * B + 5];
    fill(p, 2 * B + 5, 9);
    assay_block_table a = {0}, b = {0};
    int64_t cached;
    CHECK(assay_block_manager_allocate_prompt(bm, &a, p, 2 * B + 5, 2 * B + 5, 1 << 30, &cached) == ASSAY_OK);
    assay_block_manager_fork(bm, &a, &b);
    CHECK(assay_block_manager_ref_count(bm, a.ids[2]) == 2);
    CHECK(assay_block_manager_append_cost(bm, &b, 2 * B + 6) == 1);
    assay_block_copy cp;
    CHECK(assay_block_manager_append(bm, &b, 2 * B + 6, &cp) == ASSAY_OK);
    CHECK(cp.src == a.ids[2] && cp.dst == b.ids[2] && cp.dst != cp.src);
    CHECK(assay_block_manager_ref_count(bm, a.ids[2]) == 1 && assay_block_manager_ref_count(bm, a.ids[0]) == 2);
    /* a now owns its partial block alone: no copy */
    CHECK(assay_block_manager_append(bm, &a, 2 * B + 6, &cp) == ASSAY_OK && cp.src == -1);
    /* full shared blocks are never written: appending past them takes a new block, no copy */
    assay_block_table c = {0};
    assay_block_manager_fork(bm, &a, &c);
    CHECK(assay_block_manager_append(bm, &c, 3 * B, &cp) == ASSAY_OK && cp.src == a.ids[2]);
    assay_block_manager_free_table(bm, &a);
    assay_block_manager_free_table(bm, &b);
    assay_block_manager_free_table(bm, &c);
    CHECK(assay_block_manager_n_free(bm) == 16);
    assay_block_manager_free(bm);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* random allocate / commit / append / fork / free against the invariants */
static void test_random(void) {
    enum { NB = 40, NT = 12 };
    assay_block_manager *bm = assay_block_manager_new(NB, 1);
    assay_block_table t[NT];
    int32_t toks[NT][8 * B];
    memset(t, 0, sizeof t);
    int32_t prefixes[3][8 * B];
    for (int i = 0; i < 3; i++) fill(prefixes[i], 8 * B, 10000 * (i + 1));
    for (int it = 0; it < 20000; it++) {
        int i = (int)rnd(NT);
        int64_t cached;
        if (t[i].n == 0) {
            int64_t n = 1 + rnd(6 * B);
            memcpy(toks[i], prefixes[rnd(3)], sizeof toks[i]);
            if (rnd(2)) toks[i][rnd((uint32_t)n)] = -(int32_t)it;
            if (assay_block_manager_allocate_prompt(bm, &t[i], toks[i], n, n, 1 << 30, &cached) == ASSAY_OK) {
                CHECK(cached < n && cached % B == 0);
                if (rnd(2)) assay_block_manager_commit(bm, &t[i], toks[i], n);
            }
        } else {
            uint32_t op = rnd(4);
            if (op == 0) assay_block_manager_free_table(bm, &t[i]);
            else if (op == 1 && t[i].n_tokens < 8 * B) {
                assay_block_copy cp;
                int64_t n = t[i].n_tokens + 1;
                int64_t before = assay_block_manager_n_free(bm), cost = assay_block_manager_append_cost(bm, &t[i], n);
                if (assay_block_manager_append(bm, &t[i], n, &cp) == ASSAY_OK) {
                    CHECK(assay_block_manager_n_free(bm) == before - cost);
                    assay_block_manager_commit(bm, &t[i], toks[i], n);
                }
            } else if (op == 2) {
                int j = (int)rnd(NT);
                if (t[j].n == 0) {
                    assay_block_manager_fork(bm, &t[i], &t[j]);
                    memcpy(toks[j], toks[i], sizeof toks[i]);
                }
            }
        }
        int refs[NB] = {0};
        int64_t used = 0;
        for (int k = 0; k < NT; k++)
            for (int64_t s = 0; s < t[k].n; s++) refs[t[k].ids[s]]++;
        for (int b = 0; b < NB; b++) {
            if (assay_block_manager_ref_count(bm, b) != refs[b]) {
                fprintf(stderr, "iteration %d: block %d ref %d, held by %d tables\n", it, b,
                        assay_block_manager_ref_count(bm, b), refs[b]);
                CHECK(0);
                return;
            }
            used += refs[b] > 0;
        }
        CHECK(used + assay_block_manager_n_free(bm) == NB);
    }
    for (int k = 0; k < NT; k++) assay_block_manager_free_table(bm, &t[k]);
    CHECK(assay_block_manager_n_free(bm) == NB);
    assay_block_manager_free(bm);
}

int main(void) {
    test_prefix_hits();
    test_eviction_and_nomem();
    test_fork_cow();
    test_random();
    return check_finish("block_manager");
}
