/* threadpool.c — see threadpool.h. */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "assay/status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin briefly, then yield the core, then sleep: on an oversubscribed machine a pure spin would burn the
 * time slice the thread we wait for needs. */
#define SPIN_ITERS 2000
#define YIELD_ITERS 200

struct assay_threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint generation; /* bumped for each run: wakes the workers */
    atomic_int sleepers;    /* workers in (or entering) the condition wait */
    atomic_int stop;
    /* the current loop: fn and ctx stay valid while any of its tasks is claimed and not done */
    assay_task_fn fn;
    void *ctx;
    /* (n_tasks << 32) | next task: one word, so a claim (CAS) always names a task of the loop whose fn/ctx it sees */
    _Atomic uint64_t claim;
    atomic_llong done; /* tasks of the current loop finished */
};

typedef struct worker_arg {
    assay_threadpool *tp;
    int id;
} worker_arg;

/* Claims and runs tasks of whatever loop is current until none is left. A worker that wakes late (descheduled on a
 * busy machine) finds no task and goes back to waiting: the caller never waits for an idle worker, only for claimed
 * tasks to finish. */
static void run_tasks(assay_threadpool *tp, int id) {
    uint64_t cur = atomic_load_explicit(&tp->claim, memory_order_acquire);
    for (;;) {
        uint64_t next = cur & 0xffffffffu, n = cur >> 32;
        if (next >= n) break;
        if (!atomic_compare_exchange_weak_explicit(&tp->claim, &cur, cur + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        tp->fn(tp->ctx, (int64_t)next, id);
        atomic_fetch_add_explicit(&tp->done, 1, memory_order_release);
        cur = atomic_load_explicit(&tp->claim, memory_order_acquire);
    }
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    assay_threadpool *tp = wa->tp;
    int id = wa->id;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&tp->generation)) == seen && !atomic_load(&tp->stop)) {
            if (++spins < SPIN_ITERS) {
                CPU_RELAX();
                continue;
            }
            if (spins < SPIN_ITERS + YIELD_ITERS) {
                sched_yield();
                continue;
            }
            /* asleep: counted first, so that a run that bumps the generation after this check sees the count */
            pthread_mutex_lock(&tp->mu);
            atomic_fetch_add(&tp->sleepers, 1);
            while (atomic_load(&tp->generation) == seen && !atomic_load(&tp->stop)) pthread_cond_wait(&tp->cv, &tp->mu);
            atomic_fetch_sub(&tp->sleepers, 1);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = g;
        run_tasks(tp, id);
    }
}

assay_threadpool *assay_threadpool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    assay_threadpool *tp = assay_xcalloc(1, sizeof *tp);
    tp->n = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    tp->threads = assay_xcalloc((size_t)n_threads, sizeof(pthread_t));
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = assay_xmalloc(sizeof *wa);
        wa->tp = tp;
        wa->id = i;
        int rc = pthread_create(&tp->threads[i], NULL, worker_main, wa);
        ASSAY_ASSERT(rc == 0);
    }
    return tp;
}

void assay_threadpool_free(assay_threadpool *tp) {
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, 1);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n; i++) pthread_join(tp->threads[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->threads);
    free(tp);
}

int assay_threadpool_size(const assay_threadpool *tp) { return tp->n; }

void assay_threadpool_run(assay_threadpool *tp, assay_task_fn fn, void *ctx, int64_t n_tasks) {
    if (n_tasks <= 0) return;
    if (tp->n == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    ASSAY_ASSERT(n_tasks < ((int64_t)1 << 32));
    tp->fn = fn;
    tp->ctx = ctx;
    atomic_store_explicit(&tp->done, 0, memory_order_relaxed);
    atomic_store_explicit(&tp->claim, (uint64_t)n_tasks << 32, memory_order_release); /* publishes fn, ctx, done */
    atomic_fetch_add(&tp->generation, 1); /* spinning workers see this; sleeping ones need the broadcast */
    if (atomic_load(&tp->sleepers) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
    }
    run_tasks(tp, 0);
    for (int spins = 0; atomic_load_explicit(&tp->done, memory_order_acquire) < n_tasks; spins++) {
        if (spins < SPIN_ITERS) CPU_RELAX();
        else sched_yield();
    }
}
