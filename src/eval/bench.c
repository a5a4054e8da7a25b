/* bench.c — batched prefill/decode throughput of the engine (bench.h). */
#include <stdlib.h>
#include <string.h>

#include "assay/bench.h"
#include "assay/engine.h"
#include "assay/progress.h"

void assay_bench_options_default(assay_bench_options *o) {
    memset(o, 0, sizeof *o);
    o->n_batches = 2;
    o->batches[0] = 1;
    o->batches[1] = 4;
    o->n_prompt = 256;
    o->n_gen = 32;
    o->reps = 3;
    o->top_p = 1;
}

assay_status assay_bench_parse_batches(const char *text, assay_bench_options *o) {
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 256 || (*end && *end != ',') || n == ASSAY_BENCH_MAX_POINTS)
            return assay_fail(ASSAY_ERR_ARG, "batch sizes: want up to %d integers in 1..256 separated by commas, got '%s'",
                              ASSAY_BENCH_MAX_POINTS, text);
        o->batches[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) return assay_fail(ASSAY_ERR_ARG, "batch sizes: empty list");
    o->n_batches = n;
    return ASSAY_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Steps the engine until every request has its first token (prefill) or until all finished (decode). */
static assay_status run_until(assay_engine *e, int64_t id0, int B, int64_t *got_first, int all_done) {
    for (;;) {
        if (all_done ? !assay_engine_has_unfinished(e) : *got_first == B) return ASSAY_OK;
        const assay_request_output *o;
        int64_t n;
        assay_status st = assay_engine_step(e, &o, &n);
        if (st) return st;
        for (int64_t i = 0; i < n; i++)
            if (o[i].n_new > 0 && o[i].n_generated == 1 && o[i].id >= id0) ++*got_first;
    }
}

/* One batch size: reps x (B requests of n_prompt tokens submitted at once, each generating n_gen + 1 tokens). */
static assay_status bench_point(assay_model *m, const assay_session_options *base_so, int B, const assay_bench_options *o,
                                assay_bench_point *pt) {
    const int64_t V = assay_model_get_config(m)->n_vocab, P = o->n_prompt, G = o->n_gen;
    assay_engine_args a;
    assay_engine_args_default(&a);
    a.kv_cache_dtype = base_so->kv_dtype;
    a.calculate_kv_scales = base_so->kv_calc_tokens;
    a.max_model_len = P + G + 1;
    a.max_num_seqs = B;
    a.max_num_batched_tokens = base_so->n_batch > 0 ? base_so->n_batch : 512;
    a.enable_prefix_caching = 0; /* every repeat computes its prompts */
    /* exactly the pool the bench fills (B sequences at full length, the warm-up request beside them): no memory
     * planning, which on a GPU would find the card already given to the KV pool of the engine that `m` came with */
    const int64_t per_seq = (P + G + 1 + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK;
    a.num_gpu_blocks_override = (int64_t)B * per_seq + 2;
    assay_engine *e = NULL;
    assay_status st = assay_engine_open_model(&e, m, NULL, &a);
    if (st != ASSAY_OK) return assay_fail_context(st, "bench: an engine of %d sequences x %lld positions", B, (long long)a.max_model_len);
    int64_t nt = (int64_t)B * P;
    int32_t *tok = assay_xmalloc(sizeof(int32_t) * (size_t)nt);
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < P; i++) tok[(int64_t)b * P + i] = (int32_t)(1 + (i * 7919 + (int64_t)b * 104729) % (V - 1));
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.temperature = o->temp; /* 0: greedy, the argmax of each row, as the decode of a generation does */
    sp.top_k = o->top_k;
    sp.top_p = o->top_p > 0 ? o->top_p : 1;
    sp.min_p = o->min_p;
    sp.ignore_eos = 1;
    double *pre = assay_xmalloc(sizeof(double) * (size_t)o->reps), *dec = assay_xmalloc(sizeof(double) * (size_t)o->reps);
    int64_t id = 0, first = 0;
    /* warm-up: page the weights in, size the buffers */
    sp.max_tokens = 1;
    st = assay_engine_add_request(e, tok, P < 16 ? P : 16, &sp, &id);
    if (st == ASSAY_OK) st = run_until(e, id, 1, &first, 1);
    /* n_gen + 1 tokens: the prefill's step samples the first, then n_gen decode steps of B tokens */
    sp.max_tokens = G + 1;
    for (int r = 0; r < o->reps && st == ASSAY_OK; r++) {
        int64_t id0 = -1;
        for (int b = 0; b < B && st == ASSAY_OK; b++) {
            st = assay_engine_add_request(e, tok + (int64_t)b * P, P, &sp, &id);
            if (b == 0) id0 = id;
        }
        first = 0;
        double t0 = assay_now_seconds();
        if (st == ASSAY_OK) st = run_until(e, id0, B, &first, 0);
        double t1 = assay_now_seconds();
        if (st == ASSAY_OK) st = run_until(e, id0, B, &first, 1);
        double t2 = assay_now_seconds();
        pre[r] = t1 - t0;
        dec[r] = t2 - t1;
    }
    if (st == ASSAY_OK) {
        pt->batch = B;
        pt->prefill_s = median(pre, o->reps); /* sorted ascending: [0] fastest */
        pt->decode_s = median(dec, o->reps);
        pt->prefill_tps = (double)nt / pt->prefill_s;
        pt->decode_tps = (double)(B * G) / pt->decode_s;
        pt->prefill_tps_max = (double)nt / pre[0];
        pt->prefill_tps_min = (double)nt / pre[o->reps - 1];
        pt->decode_tps_max = (double)(B * G) / dec[0];
        pt->decode_tps_min = (double)(B * G) / dec[o->reps - 1];
    }
    free(pre), free(dec), free(tok);
    assay_engine_close(e);
    return st;
}

assay_status assay_bench_model(assay_model *m, const assay_session_options *so, const assay_bench_options *o,
                               assay_bench_result *out) {
    memset(out, 0, sizeof *out);
    if (o->n_prompt < 1 || o->n_gen < 1 || o->reps < 1 || o->n_batches < 1 || o->n_batches > ASSAY_BENCH_MAX_POINTS)
        return assay_fail(ASSAY_ERR_ARG, "bench: need prompt >= 1, gen >= 1, repeats >= 1 and 1..%d batch sizes",
                          ASSAY_BENCH_MAX_POINTS);
    out->n_prompt = o->n_prompt;
    out->n_gen = o->n_gen;
    out->reps = o->reps;
    for (int i = 0; i < o->n_batches; i++) {
        assay_status st = bench_point(m, so, o->batches[i], o, &out->points[i]);
        if (st != ASSAY_OK) return st;
        out->n_points = i + 1;
    }
    return ASSAY_OK;
}

void assay_bench_result_json(const assay_bench_result *r, assay_strbuf *b) {
    assay_strbuf_printf(b, "{\"n_prompt\": %lld, \"n_gen\": %lld, \"reps\": %d, \"points\": [", (long long)r->n_prompt,
                        (long long)r->n_gen, r->reps);
    for (int i = 0; i < r->n_points; i++) {
        const assay_bench_point *p = &r->points[i];
        assay_strbuf_printf(b, "%s{\"batch\": %d", i ? ", " : "", p->batch);
        const char *keys[] = {"prefill_tps", "decode_tps", "prefill_s", "decode_s", "prefill_tps_min", "prefill_tps_max",
                              "decode_tps_min", "decode_tps_max"};
        double vals[] = {p->prefill_tps, p->decode_tps, p->prefill_s, p->decode_s, p->prefill_tps_min, p->prefill_tps_max,
                         p->decode_tps_min, p->decode_tps_max};
        for (int k = 0; k < 8; k++) {
            assay_strbuf_printf(b, ", \"%s\": ", keys[k]);
            assay_strbuf_json_number(b, vals[k]);
        }
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "]}");
}
