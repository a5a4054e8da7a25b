/* bench.c — batched prefill/decode throughput of the engine (bench.h). */
#include <stdlib.h>
#include <string.h>

#include "assay/bench.h"
#include "assay/progress.h"

void assay_bench_options_default(assay_bench_options *o) {
    memset(o, 0, sizeof *o);
    o->n_batches = 2;
    o->batches[0] = 1;
    o->batches[1] = 4;
    o->n_prompt = 256;
    o->n_gen = 32;
    o->reps = 3;
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

/* One batch size: reps x (prefill of B prompts, then n_gen decode steps of B tokens). */
static assay_status bench_point(assay_model *m, const assay_session_options *base_so, int B, const assay_bench_options *o,
                                assay_bench_point *pt) {
    const int64_t V = assay_model_get_config(m)->n_vocab, P = o->n_prompt, G = o->n_gen;
    assay_session_options so = *base_so;
    so.n_seq = B;
    so.n_ctx = P + G + 1;
    if (so.n_batch < 512) so.n_batch = 512;
    assay_session *s = NULL;
    assay_status st = assay_session_open(&s, m, &so);
    if (st != ASSAY_OK) return assay_fail_context(st, "bench: a session of %d sequences x %lld positions", B, (long long)so.n_ctx);
    int64_t nt = (int64_t)B * P;
    int32_t *tok = assay_xmalloc(sizeof(int32_t) * (size_t)nt), *pos = assay_xmalloc(sizeof(int32_t) * (size_t)nt);
    int32_t *seq = assay_xmalloc(sizeof(int32_t) * (size_t)nt);
    int8_t *want = assay_xcalloc((size_t)nt, 1);
    float *logits = assay_xmalloc(sizeof(float) * (size_t)(B * V));
    int32_t *next = assay_xmalloc(sizeof(int32_t) * (size_t)B), *npos = assay_xmalloc(sizeof(int32_t) * (size_t)B);
    int32_t *nseq = assay_xmalloc(sizeof(int32_t) * (size_t)B);
    int8_t *nwant = assay_xmalloc((size_t)B);
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < P; i++) {
            int64_t k = (int64_t)b * P + i;
            tok[k] = (int32_t)(1 + (i * 7919 + (int64_t)b * 104729) % (V - 1));
            pos[k] = (int32_t)i;
            seq[k] = b;
            want[k] = i == P - 1;
        }
    double *pre = assay_xmalloc(sizeof(double) * (size_t)o->reps), *dec = assay_xmalloc(sizeof(double) * (size_t)o->reps);
    /* warm-up: page the weights in, size the session's buffers */
    {
        int64_t w = P < 16 ? P : 16;
        assay_batch wb = {w, tok, pos, seq, NULL};
        st = assay_session_forward(s, &wb, logits);
        assay_session_seq_clear(s, 0);
    }
    for (int r = 0; r < o->reps && st == ASSAY_OK; r++) {
        double t0 = assay_now_seconds();
        assay_batch pb = {nt, tok, pos, seq, want};
        st = assay_session_forward(s, &pb, logits);
        double t1 = assay_now_seconds();
        for (int64_t g = 0; g < G && st == ASSAY_OK; g++) {
            for (int b = 0; b < B; b++) { /* greedy pick of each sequence's row, as generation does */
                const float *row = logits + (int64_t)b * V;
                int32_t best = 0;
                for (int64_t v = 1; v < V; v++)
                    if (row[v] > row[best]) best = (int32_t)v;
                next[b] = best;
                npos[b] = (int32_t)(P + g);
                nseq[b] = b;
                nwant[b] = 1;
            }
            assay_batch db = {B, next, npos, nseq, nwant};
            st = assay_session_forward(s, &db, logits);
        }
        double t2 = assay_now_seconds();
        for (int b = 0; b < B; b++) assay_session_seq_clear(s, b);
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
    free(pre), free(dec), free(tok), free(pos), free(seq), free(want), free(logits);
    free(next), free(npos), free(nseq), free(nwant);
    assay_session_close(s);
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
