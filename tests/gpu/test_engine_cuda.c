/* test_engine_cuda.c — the house model through the engine on --device cuda (run on a GPU machine by
 * scripts/gpu-engine-check.sh; CI builds it but has no GPU to run it on):
 *   - the reference prompt's logits (all 9 positions, bf16 compute) against transformers' fp32 logits
 *     (ref_logits.f32): the largest difference and the top-1 token of every position;
 *   - the greedy 32-token continuation of that prompt (printed for the comparison with transformers bf16 on the
 *     same GPU, which the script makes), and against reference.json's fp32 continuation;
 *   - batch invariance: 32 requests of different prompt lengths submitted at once (chunked prefill mixed with
 *     decodes) give, for at least their first 16 greedy tokens, the tokens each gives alone;
 *   - the same engine with an fp8 KV cache (static per-layer scales from --calculate-kv-scales) still follows the
 *     bf16 greedy continuation for its first 8 tokens.
 * Prints one JSON object (the script keeps it) and exits 1 when a check fails. argv[1]: the house model folder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/engine.h"
#include "assay/file.h"
#include "assay/tokenizer.h"

enum { N_REQ = 32, GEN = 24, SAME = 16, REF_GEN = 32 };

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static const char *model_dir;

static assay_engine *open_engine(assay_kv_dtype kv, int64_t calc) {
    assay_engine_args a;
    assay_engine_args_default(&a);
    a.model = model_dir;
    a.device = "cuda";
    a.kv_cache_dtype = kv;
    a.calculate_kv_scales = calc;
    a.max_model_len = 1024;
    a.max_num_seqs = 64;
    a.max_num_batched_tokens = 512;
    a.gpu_memory_utilization = 0.5;
    assay_engine *e = NULL;
    if (assay_engine_open(&e, &a) != ASSAY_OK) {
        fprintf(stderr, "engine: %s\n", assay_last_error());
        exit(1);
    }
    fprintf(stderr, "%s\n", assay_engine_describe(e));
    return e;
}

static assay_sampling_params greedy(int64_t n) {
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.temperature = 0;
    sp.max_tokens = n;
    sp.ignore_eos = 1;
    return sp;
}

/* Runs every request to the end; tokens of request id0 + k go to out[k]. */
static void drain(assay_engine *e, int32_t (*out)[GEN > REF_GEN ? GEN : REF_GEN], int64_t id0, int64_t n) {
    while (assay_engine_has_unfinished(e)) {
        const assay_request_output *o;
        int64_t no;
        if (assay_engine_step(e, &o, &no) != ASSAY_OK) {
            fprintf(stderr, "step: %s\n", assay_last_error());
            exit(1);
        }
        for (int64_t i = 0; i < no; i++) {
            int64_t k = o[i].id - id0;
            if (k < 0 || k >= n) continue;
            for (int64_t j = 0; j < o[i].n_generated && j < (GEN > REF_GEN ? GEN : REF_GEN); j++) out[k][j] = o[i].tokens[j];
        }
    }
}

static int64_t submit(assay_engine *e, const int32_t *ids, int64_t n, assay_sampling_params *sp) {
    int64_t id = -1;
    if (assay_engine_add_request(e, ids, n, sp, &id) != ASSAY_OK) {
        fprintf(stderr, "add_request: %s\n", assay_last_error());
        exit(1);
    }
    return id;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_engine_cuda HOUSE_MODEL_DIR\n");
        return 2;
    }
    model_dir = argv[1];
    char path[4096];
    static const int32_t prompt[] = {501, 672, 440, 776, 357, 263, 1519, 281, 399};
    enum { NP = 9, V = 8192 };
    assay_engine *e = open_engine(ASSAY_KV_BF16, 0);

    /* 1. prompt logits against transformers fp32, and the greedy continuation */
    float *logits = calloc((size_t)NP * V, sizeof(float)), *ref = malloc((size_t)NP * V * sizeof(float));
    snprintf(path, sizeof path, "%s/ref_logits.f32", model_dir);
    FILE *f = fopen(path, "rb");
    if (!f || fread(ref, sizeof(float), (size_t)NP * V, f) != (size_t)NP * V) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    fclose(f);
    assay_sampling_params sp = greedy(REF_GEN);
    sp.prompt_logprobs = 0;
    sp.prompt_logprobs_from = 1;
    sp.prompt_logits = logits; /* rows 0..7: the logits at positions 0..7 (they predict tokens 1..8) */
    int32_t gen[1][GEN > REF_GEN ? GEN : REF_GEN];
    memset(gen, 0xff, sizeof gen);
    int64_t id0 = submit(e, prompt, NP, &sp);
    drain(e, gen, id0, 1);
    /* positions 0..7 (the last position's logits pick the first generated token: the greedy ids check them) */
    double max_diff = 0, max_ref = 0;
    int top1_same = 0;
    for (int p = 0; p < NP - 1; p++) {
        const float *a = logits + (size_t)p * V, *b = ref + (size_t)p * V;
        int ia = 0, ib = 0;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)a[v] - b[v]);
            if (d > max_diff) max_diff = d;
            if (fabs(b[v]) > max_ref) max_ref = fabs(b[v]);
            if (a[v] > a[ia]) ia = v;
            if (b[v] > b[ib]) ib = v;
        }
        top1_same += ia == ib;
    }
    EXPECT(top1_same == NP - 1, "top-1 token differs from transformers fp32 at %d of %d positions", NP - 1 - top1_same, NP - 1);
    EXPECT(max_diff < 0.05 * max_ref, "logits differ from transformers fp32 by %.4f (max |logit| %.2f)", max_diff, max_ref);

    /* reference.json's fp32 greedy ids */
    snprintf(path, sizeof path, "%s/reference.json", model_dir);
    char *js = NULL;
    size_t jn = 0;
    int ref_greedy[REF_GEN], n_ref = 0;
    if (assay_read_file(path, &js, &jn) == ASSAY_OK) {
        const char *k = strstr(js, "\"greedy_ids\"");
        if (k && (k = strchr(k, '['))) {
            k++;
            while (n_ref < REF_GEN && *k && *k != ']') {
                char *end;
                long v = strtol(k, &end, 10);
                if (end == k) { k++; continue; }
                ref_greedy[n_ref++] = (int)v;
                k = end;
            }
        }
        free(js);
    }
    int same_fp32 = 0;
    while (same_fp32 < n_ref && same_fp32 < REF_GEN && gen[0][same_fp32] == ref_greedy[same_fp32]) same_fp32++;

    /* 2. batch invariance */
    assay_tokenizer *tok = NULL;
    char *text = NULL;
    size_t tn = 0;
    snprintf(path, sizeof path, "%s/heldout.txt", model_dir);
    if (assay_tokenizer_load(&tok, model_dir) != ASSAY_OK || assay_read_file(path, &text, &tn) != ASSAY_OK) {
        fprintf(stderr, "%s\n", assay_last_error());
        return 1;
    }
    assay_tokens ids = {0};
    if (assay_tokenizer_encode(tok, text, tn < 60000 ? tn : 60000, 0, &ids) != ASSAY_OK) {
        fprintf(stderr, "%s\n", assay_last_error());
        return 1;
    }
    static int32_t together[N_REQ][GEN > REF_GEN ? GEN : REF_GEN], alone[N_REQ][GEN > REF_GEN ? GEN : REF_GEN];
    int64_t off[N_REQ], len[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        len[i] = 7 + (i * 37) % 300;
        off[i] = (int64_t)i * 331 % (ids.n - 400);
    }
    assay_sampling_params g = greedy(GEN);
    int64_t first = -1;
    for (int i = 0; i < N_REQ; i++) {
        int64_t id = submit(e, ids.ids + off[i], len[i], &g);
        if (i == 0) first = id;
    }
    drain(e, together, first, N_REQ);
    for (int i = 0; i < N_REQ; i++) {
        int64_t id = submit(e, ids.ids + off[i], len[i], &g);
        drain(e, alone + i, id, 1);
    }
    int n_same = 0, min_prefix = GEN;
    for (int i = 0; i < N_REQ; i++) {
        int p = 0;
        while (p < GEN && together[i][p] == alone[i][p]) p++;
        if (p < min_prefix) min_prefix = p;
        n_same += p >= SAME;
        if (p < GEN) /* where a request left its solo tokens: a short prefix with a long prompt points at attention */
            fprintf(stderr, "request %d (prompt %lld tokens): first difference at generated token %d: %d together, %d alone\n",
                    i, (long long)len[i], p, together[i][p], alone[i][p]);
    }
    EXPECT(n_same == N_REQ, "%d of %d requests differ from their run alone within the first %d tokens (shortest common "
           "prefix %d)", N_REQ - n_same, N_REQ, SAME, min_prefix);
    assay_engine_close(e);

    /* 3. fp8 KV with calculated static scales: the decode kernel's fp8 path */
    e = open_engine(ASSAY_KV_FP8_E4M3, 256);
    int32_t gen8[1][GEN > REF_GEN ? GEN : REF_GEN];
    memset(gen8, 0xff, sizeof gen8);
    assay_sampling_params s8 = greedy(REF_GEN);
    int64_t id8 = submit(e, prompt, NP, &s8);
    drain(e, gen8, id8, 1);
    int same_fp8 = 0;
    while (same_fp8 < REF_GEN && gen8[0][same_fp8] == gen[0][same_fp8]) same_fp8++;
    EXPECT(same_fp8 >= 8, "fp8 KV greedy follows bf16 KV for only %d tokens", same_fp8);
    assay_engine_close(e);

    printf("{\"logits_max_abs_diff_vs_fp32\": %.6f, \"logits_max_abs_ref\": %.4f, \"top1_same\": %d, \"positions\": %d, ",
           max_diff, max_ref, top1_same, NP - 1);
    printf("\"greedy_ids\": [");
    for (int j = 0; j < REF_GEN; j++) printf("%s%d", j ? ", " : "", gen[0][j]);
    printf("], \"greedy_same_as_fp32_reference\": %d, \"batch_requests\": %d, \"batch_same_first_%d\": %d, "
           "\"batch_shortest_common_prefix\": %d, \"fp8_kv_greedy_same_prefix\": %d, \"failures\": %d}\n",
           same_fp32, N_REQ, SAME, n_same, min_prefix, same_fp8, failures);
    assay_tokens_free(&ids);
    assay_tokenizer_free(tok);
    free(text);
    free(logits);
    free(ref);
    return failures ? 1 : 0;
}
