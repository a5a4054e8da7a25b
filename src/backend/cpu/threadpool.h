/* threadpool.h — a fixed set of worker threads that run one parallel loop at a time.
 *
 *   assay_threadpool *tp = assay_threadpool_new(4);
 *   assay_threadpool_run(tp, fn, ctx, n_tasks);   // fn(ctx, task, thread) for task in [0, n_tasks); caller helps
 *   assay_threadpool_free(tp);
 *
 * Workers spin briefly before sleeping, since a decode step issues hundreds of small loops and a condition
 * variable wake-up per loop would cost more than the work. Tasks are claimed one at a time from an atomic word
 * that holds the loop's task count and next task; the caller returns once every task has finished, without waiting
 * for workers that woke too late to claim one (on a machine with more runnable threads than cores).
 */
#ifndef ASSAY_THREADPOOL_H
#define ASSAY_THREADPOOL_H

#include <stdint.h>

typedef void (*assay_task_fn)(void *ctx, int64_t task, int thread);
typedef struct assay_threadpool assay_threadpool;

assay_threadpool *assay_threadpool_new(int n_threads); /* n_threads includes the caller */
void assay_threadpool_free(assay_threadpool *tp);
int assay_threadpool_size(const assay_threadpool *tp);
void assay_threadpool_run(assay_threadpool *tp, assay_task_fn fn, void *ctx, int64_t n_tasks);

#endif
