/* test_threadpool.c — the CPU backend's thread pool runs every task of every loop exactly once, and the loop has
 * finished (every task's writes visible) when assay_threadpool_run returns: 20000 loops back to back with task counts
 * from 0 to 200 and alternating functions and contexts, on pools of 1, 2, 3 and 8 threads (8: more threads than this
 * machine may have cores, so workers are descheduled mid-loop and wake up late, after their loop has ended). Each
 * task adds its loop's tag to its own slot; after each loop every slot of the loop holds the tag once, and the slots
 * past it are untouched. Every 500th loop comes after a pause long enough for the workers to fall asleep. */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/cpu/threadpool.h"
#include "check.h"

enum { MAX_TASKS = 200, LOOPS = 20000 };

typedef struct loop_ctx {
    _Atomic int64_t slot[MAX_TASKS + 1];
    int64_t tag;
    atomic_int bad_thread;
    int n_threads;
} loop_ctx;

static void add_tag(void *p, int64_t task, int thread) {
    loop_ctx *c = p;
    if (thread < 0 || thread >= c->n_threads) atomic_store(&c->bad_thread, 1);
    atomic_fetch_add_explicit(&c->slot[task], c->tag, memory_order_relaxed);
}

static void add_twice_tag(void *p, int64_t task, int thread) { /* another function: 2 tags */
    loop_ctx *c = p;
    if (thread < 0 || thread >= c->n_threads) atomic_store(&c->bad_thread, 1);
    atomic_fetch_add_explicit(&c->slot[task], 2 * c->tag, memory_order_relaxed);
}

int main(void) {
    static const int pools[] = {1, 2, 3, 8};
    static loop_ctx ctx[2];
    uint64_t rng = 12345;
    for (size_t pi = 0; pi < sizeof pools / sizeof pools[0]; pi++) {
        assay_threadpool *tp = assay_threadpool_new(pools[pi]);
        CHECK(assay_threadpool_size(tp) == pools[pi]);
        int64_t wrong = 0;
        for (int k = 0; k < 2; k++) {
            ctx[k].n_threads = pools[pi];
            atomic_store(&ctx[k].bad_thread, 0);
        }
        for (int loop = 0; loop < LOOPS; loop++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int64_t n = (int64_t)((rng >> 33) % (MAX_TASKS + 1));
            loop_ctx *c = &ctx[loop & 1];
            int twice = (loop >> 1) & 1;
            c->tag = loop + 1;
            if (loop % 500 == 0) usleep(3000); /* the workers go to sleep: this loop wakes them */
            for (int64_t t = 0; t <= MAX_TASKS; t++) atomic_store(&c->slot[t], 0);
            assay_threadpool_run(tp, twice ? add_twice_tag : add_tag, c, n);
            for (int64_t t = 0; t <= MAX_TASKS; t++) {
                int64_t want = t < n ? (twice ? 2 : 1) * c->tag : 0;
                wrong += atomic_load(&c->slot[t]) != want;
            }
        }
        printf("pool of %d threads: %d loops, %lld wrong slots\n", pools[pi], LOOPS, (long long)wrong);
        CHECK(wrong == 0);
        CHECK(!atomic_load(&ctx[0].bad_thread) && !atomic_load(&ctx[1].bad_thread));
        assay_threadpool_free(tp);
    }
    return check_finish("threadpool");
}
