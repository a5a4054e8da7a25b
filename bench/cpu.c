/* cpu.c (built as bench_cpu) — CPU speed of the engine and the memory-bandwidth ceiling it is judged against.
 *
 *   bench_cpu bw THREADS [MiB]                      streaming read of a MiB-sized buffer (default 1024) split over
 *                                                    THREADS threads: GB/s, median of 7 passes
 *   bench_cpu model PATH THREADS [-p 512] [-n 128] [-r 3]
 *       prefill: one batch of -p tokens into an empty cache (logits of the last token only); -p 0 skips it
 *       decode:  -n tokens one at a time from an empty cache (positions 0..n-1); -n 0 skips it
 *       like llama-bench's pp512 / tg128 tests, with the same warm-up (one full prompt, one decode token);
 *       tok/s is the median over -r repeats; tokens_total counts the warm-up too, so that tokens per
 *       CPU-second of the whole process compare with llama-bench run the same way; pp_cpu_tps / tg_cpu_tps: the
 *       median over repeats of tokens per CPU-second of the process (all its threads) in that repeat.
 *
 * Prints one JSON object per run on stdout (bench/bench_cpu.sh collects them). The read test touches every
 * 64-byte line once per pass with 256-bit loads summed into registers, which is what a decode step does with
 * the weights; a buffer the size of the model's weights gives the ceiling for that working set (it may sit in
 * the last-level cache), a 1 GiB buffer the DRAM ceiling. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/model.h"
#include "assay/progress.h"
#include "assay/status.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- bandwidth --------------------------------------------------------------------------------------------- */

typedef struct bw_arg {
    const uint8_t *p;
    size_t bytes;
    pthread_barrier_t *bar;
    int passes;
    double *sec; /* [passes], written by thread 0 */
    uint64_t sink;
} bw_arg;

__attribute__((target("avx2"))) static uint64_t read_sum(const uint8_t *p, size_t bytes) {
    typedef long long v4 __attribute__((vector_size(32)));
    v4 a = {0}, b = {0}, c = {0}, d = {0};
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
        v4 x0, x1, x2, x3;
        memcpy(&x0, p + i, 32);
        memcpy(&x1, p + i + 32, 32);
        memcpy(&x2, p + i + 64, 32);
        memcpy(&x3, p + i + 96, 32);
        a += x0;
        b += x1;
        c += x2;
        d += x3;
    }
    v4 s = a + b + c + d;
    return (uint64_t)(s[0] + s[1] + s[2] + s[3]);
}

static void *bw_thread(void *p) {
    bw_arg *a = p;
    for (int k = 0; k < a->passes; k++) {
        pthread_barrier_wait(a->bar);
        double t0 = assay_now_seconds();
        a->sink += read_sum(a->p, a->bytes);
        pthread_barrier_wait(a->bar);
        if (a->sec) a->sec[k] = assay_now_seconds() - t0;
    }
    return NULL;
}

static int run_bw(int threads, size_t mib) {
    size_t bytes = mib << 20;
    uint8_t *buf = aligned_alloc(64, bytes);
    if (!buf) return fprintf(stderr, "bench_cpu: out of memory\n"), 1;
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)(i * 131);
    enum { PASSES = 8 }; /* the first pass is a warm-up */
    double sec[PASSES];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    bw_arg *args = calloc((size_t)threads, sizeof *args);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    size_t per = bytes / (size_t)threads / 128 * 128;
    for (int t = 0; t < threads; t++) {
        args[t] = (bw_arg){buf + (size_t)t * per, per, &bar, PASSES, t == 0 ? sec : NULL, 0};
        if (t) pthread_create(&th[t], NULL, bw_thread, &args[t]);
    }
    bw_thread(&args[0]);
    uint64_t sink = args[0].sink;
    for (int t = 1; t < threads; t++) {
        pthread_join(th[t], NULL);
        sink += args[t].sink;
    }
    double med = median(sec + 1, PASSES - 1);
    printf("{\"kind\":\"bw\",\"threads\":%d,\"mib\":%zu,\"read_gbps\":%.3f,\"sink\":%llu}\n", threads, mib,
           (double)(per * (size_t)threads) / med / 1e9, (unsigned long long)(sink & 1));
    pthread_barrier_destroy(&bar);
    free(args);
    free(th);
    free(buf);
    return 0;
}

/* ---- model ------------------------------------------------------------------------------------------------- */

static int run_model(const char *path, int threads, int n_prompt, int n_gen, int reps) {
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = threads;
    assay_model *m;
    if (assay_model_load(&m, path, &mo)) return fprintf(stderr, "bench_cpu: %s\n", assay_last_error()), 1;
    const assay_model_config *c = assay_model_get_config(m);
    assay_session_options so;
    assay_session_options_default(&so);
    so.n_ctx = n_prompt > n_gen ? n_prompt : n_gen;
    so.n_batch = n_prompt > 0 ? n_prompt : 1;
    assay_session *s;
    if (assay_session_open(&s, m, &so)) return fprintf(stderr, "bench_cpu: %s\n", assay_last_error()), 1;
    int n_max = n_prompt > n_gen ? n_prompt : n_gen;
    int32_t *tok = malloc((size_t)n_max * sizeof *tok), *pos = malloc((size_t)n_max * sizeof *pos);
    for (int i = 0; i < n_max; i++) {
        tok[i] = (int32_t)((1 + (int64_t)i * 7919) % c->n_vocab); /* fixed, spread over the vocabulary */
        pos[i] = i;
    }
    float *logits = malloc((size_t)c->n_vocab * sizeof(float));
    double *pp = calloc((size_t)reps + 1, sizeof(double)), *tg = calloc((size_t)reps + 1, sizeof(double));
    /* the same per CPU-second of the process (all threads): on a shared machine, less disturbed by other jobs */
    double *ppc = calloc((size_t)reps + 1, sizeof(double)), *tgc = calloc((size_t)reps + 1, sizeof(double));
    long long tokens = 0; /* every token run, warm-ups included (for tokens per CPU-second) */
    for (int r = 0; r <= reps; r++) { /* r == 0: warm-up like llama-bench's: a full prompt, one decode token */
        if (n_prompt > 0) {
            assay_session_seq_clear(s, 0);
            assay_batch b = {.n_tokens = n_prompt, .token = tok, .pos = pos};
            double t0 = assay_now_seconds(), c0 = cpu_seconds();
            if (assay_session_forward(s, &b, logits)) return fprintf(stderr, "bench_cpu: %s\n", assay_last_error()), 1;
            if (r) pp[r - 1] = n_prompt / (assay_now_seconds() - t0), ppc[r - 1] = n_prompt / (cpu_seconds() - c0);
            tokens += n_prompt;
        }
        if (n_gen > 0) {
            assay_session_seq_clear(s, 0);
            int n = r ? n_gen : 1;
            double t0 = assay_now_seconds(), c0 = cpu_seconds();
            for (int i = 0; i < n; i++) {
                assay_batch d = {.n_tokens = 1, .token = &tok[i], .pos = &pos[i]};
                if (assay_session_forward(s, &d, logits)) return fprintf(stderr, "bench_cpu: %s\n", assay_last_error()), 1;
            }
            if (r) tg[r - 1] = n / (assay_now_seconds() - t0), tgc[r - 1] = n / (cpu_seconds() - c0);
            tokens += n;
        }
    }
    printf("{\"kind\":\"model\",\"path\":\"%s\",\"threads\":%d,\"kernels\":\"%s\",\"weight_bytes\":%zu,"
           "\"n_prompt\":%d,\"n_gen\":%d,\"reps\":%d,\"tokens_total\":%lld,\"pp_tps\":%.3f,\"tg_tps\":%.3f,\"pp_all\":[",
           path, threads, assay_model_kernels(m), assay_model_weight_bytes(m), n_prompt, n_gen, reps, tokens,
           median(pp, reps), median(tg, reps));
    for (int r = 0; r < reps; r++) printf("%s%.3f", r ? "," : "", pp[r]);
    printf("],\"tg_all\":[");
    for (int r = 0; r < reps; r++) printf("%s%.3f", r ? "," : "", tg[r]);
    printf("],\"pp_cpu_tps\":%.3f,\"tg_cpu_tps\":%.3f}\n", median(ppc, reps), median(tgc, reps));
    free(pp);
    free(tg);
    free(ppc);
    free(tgc);
    free(logits);
    free(tok);
    free(pos);
    assay_session_close(s);
    assay_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "bw") == 0) return run_bw(atoi(argv[2]), argc > 3 ? (size_t)atol(argv[3]) : 1024);
    if (argc >= 4 && strcmp(argv[1], "model") == 0) {
        int p = 512, n = 128, r = 3;
        for (int i = 4; i + 1 < argc; i += 2) {
            if (strcmp(argv[i], "-p") == 0) p = atoi(argv[i + 1]);
            else if (strcmp(argv[i], "-n") == 0) n = atoi(argv[i + 1]);
            else if (strcmp(argv[i], "-r") == 0) r = atoi(argv[i + 1]);
            else return fprintf(stderr, "bench_cpu: unknown option %s\n", argv[i]), 2;
        }
        if (p < 0 || n < 0 || p + n < 1 || r < 1) return fprintf(stderr, "bench_cpu: -p/-n >= 0 (not both 0), -r >= 1\n"), 2;
        return run_model(argv[2], atoi(argv[3]), p, n, r);
    }
    fprintf(stderr, "usage: bench_cpu bw THREADS [MiB] | bench_cpu model PATH THREADS [-p N] [-n N] [-r N]\n");
    return 2;
}
