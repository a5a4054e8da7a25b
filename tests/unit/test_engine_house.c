/* test_engine_house.c — the engine (engine.h) on the house model, f32 KV, greedy:
 *   - batch invariance: 16 requests of different prompt lengths submitted at once (chunked prefill mixed with
 *     decodes under a small token budget) give the tokens each gives alone, logprobs within 1e-5;
 *   - preemption: with a KV pool too small for all of them, requests are preempted (counter) and recomputed, and
 *     every request still completes with the same tokens;
 *   - prefix caching: a request sharing a 256-token prefix with an earlier one hits 256 cached tokens (counter),
 *     computes only the rest, and returns the tokens and logprobs an engine without caching returns;
 *   - bad requests (prompt past max-model-len, max_tokens <= 0, an unknown token id, top_p outside (0, 1], an abort
 *     of an unknown id) are each a clear error, the other requests unaffected;
 *   - stop token ids, stop strings and abort end a request as they should;
 *   - after every scenario the block manager's free count is back to the whole pool (no block leaked).
 * The reference for "alone" is the engine itself with one request at a time; the forward pass itself is checked
 * against transformers by test_model_house. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/engine.h"
#include "assay/file.h"
#include "assay/tokenizer.h"
#include "check.h"

enum { N_REQ = 16, GEN = 12 };

typedef struct result {
    int32_t tok[64];
    float lp[64];
    int64_t n;
    assay_finish_reason finish;
    char text[1024];
} result;

static assay_tokens text_ids; /* heldout.txt's tokens: the prompts are slices of it */

static assay_engine *open_engine(int64_t batched_tokens, int64_t kv_bytes, int prefix_caching) {
    assay_engine_args a;
    assay_engine_args_default(&a);
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", check_shared_path("models/house"));
    a.model = dir;
    a.threads = 2;
    a.kv_cache_dtype = ASSAY_KV_F32;
    a.max_model_len = 1024;
    a.max_num_seqs = 32;
    a.max_num_batched_tokens = batched_tokens;
    a.kv_cache_memory = kv_bytes;
    a.enable_prefix_caching = prefix_caching;
    assay_engine *e = NULL;
    if (assay_engine_open(&e, &a) != ASSAY_OK) fprintf(stderr, "engine: %s\n", assay_last_error());
    return e;
}

static assay_sampling_params greedy(int64_t max_tokens) {
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.temperature = 0;
    sp.max_tokens = max_tokens;
    sp.ignore_eos = 1;
    sp.logprobs = 1;
    return sp;
}

/* Runs until every request finished, collecting outputs by id (ids are 0.. in submission order per engine). */
static void drain(assay_engine *e, result *res, int64_t id0, int64_t n) {
    while (assay_engine_has_unfinished(e)) {
        const assay_request_output *o;
        int64_t no;
        if (assay_engine_step(e, &o, &no) != ASSAY_OK) {
            fprintf(stderr, "step: %s\n", assay_last_error());
            CHECK(0);
            return;
        }
        for (int64_t i = 0; i < no; i++) {
            int64_t k = o[i].id - id0;
            if (k < 0 || k >= n) continue;
            result *r = &res[k];
            for (int64_t j = 0; j < o[i].n_new && r->n < 64; j++) {
                r->tok[r->n] = o[i].new_tokens[j];
                r->lp[r->n++] = o[i].new_logprobs ? o[i].new_logprobs[j] : NAN;
            }
            if (o[i].finish) {
                r->finish = o[i].finish;
                snprintf(r->text, sizeof r->text, "%.*s", (int)o[i].text_len, o[i].text);
            }
        }
    }
}

static int64_t prompt_len(int i) { return 9 + 37 * i % 211 + 3 * i; } /* 9 .. ~260, all different */
static const int32_t *prompt_of(int i) { return text_ids.ids + 1000 * i; }

static void compare(const char *what, const result *a, const result *b) {
    int same = 1;
    double dmax = 0;
    for (int i = 0; i < N_REQ; i++) {
        same &= a[i].n == b[i].n && a[i].finish == b[i].finish && memcmp(a[i].tok, b[i].tok, (size_t)a[i].n * 4) == 0;
        for (int64_t j = 0; j < a[i].n; j++) {
            /* a logprob is finite and <= 0; NaN would slip through fmax */
            same &= isfinite(a[i].lp[j]) && isfinite(b[i].lp[j]) && a[i].lp[j] <= 0;
            dmax = fmax(dmax, fabs(a[i].lp[j] - b[i].lp[j]));
        }
    }
    printf("%s: tokens %s, max |delta logprob| %.3g\n", what, same ? "identical" : "DIFFER", dmax);
    CHECK(same);
    CHECK(dmax <= 1e-5);
}

static void test_batch_and_preemption(void) {
    static result alone[N_REQ], batched[N_REQ], squeezed[N_REQ];
    assay_engine *e = open_engine(96, 0, 0);
    CHECK(e != NULL);
    if (!e) return;
    int64_t free0 = assay_engine_kv_blocks_free(e), id;
    for (int i = 0; i < N_REQ; i++) {
        assay_sampling_params sp = greedy(GEN);
        CHECK_OK(assay_engine_add_request(e, prompt_of(i), prompt_len(i), &sp, &id));
        drain(e, &alone[i], id, 1);
        CHECK(alone[i].n == GEN && alone[i].finish == ASSAY_FINISH_LENGTH);
    }
    int64_t id0 = -1;
    for (int i = 0; i < N_REQ; i++) {
        assay_sampling_params sp = greedy(GEN);
        CHECK_OK(assay_engine_add_request(e, prompt_of(i), prompt_len(i), &sp, &id));
        if (i == 0) id0 = id;
    }
    drain(e, batched, id0, N_REQ);
    assay_engine_counters c;
    assay_engine_counters_get(e, &c);
    printf("%d requests one by one, then at once: %lld steps in all (token budget 96); request 15's first logprob %.6f\n",
           N_REQ, (long long)c.steps, batched[15].lp[0]);
    compare("16 requests at once vs each alone", batched, alone);
    CHECK(assay_engine_kv_blocks_free(e) == free0);
    assay_engine_close(e);

    /* a pool of 40 blocks (640 tokens) for 16 requests needing ~2400 tokens: preemption by recompute */
    assay_engine *p = open_engine(96, 40 * 7 * 2 * 2 * 16 * 64 * 4, 0); /* 40 blocks x 7 layers x K,V x 2 heads x 16 x 64 x f32 */
    CHECK(p != NULL);
    if (!p) return;
    CHECK(assay_engine_kv_blocks_free(p) == 40);
    for (int i = 0; i < N_REQ; i++) {
        assay_sampling_params sp = greedy(GEN);
        CHECK_OK(assay_engine_add_request(p, prompt_of(i), prompt_len(i), &sp, &id));
        if (i == 0) id0 = id;
    }
    drain(p, squeezed, id0, N_REQ);
    assay_engine_counters_get(p, &c);
    printf("40-block pool: %lld preemptions, %lld steps\n", (long long)c.preemptions, (long long)c.steps);
    CHECK(c.preemptions > 0);
    compare("16 requests in a pool too small (preempted and recomputed) vs each alone", squeezed, alone);
    CHECK(assay_engine_kv_blocks_free(p) == 40);
    CHECK(c.generation_tokens == N_REQ * GEN);
    assay_engine_close(p);

    /* a request that outgrows the whole pool (2 blocks = 32 positions) ends with "length" instead of preempting
     * itself forever: 20 prompt tokens, positions 0..31 computed, 13 tokens generated */
    p = open_engine(96, 2 * 7 * 2 * 2 * 16 * 64 * 4, 0);
    if (!p) return;
    result r1[1] = {0};
    assay_sampling_params sp = greedy(50);
    CHECK_OK(assay_engine_add_request(p, prompt_of(1), 20, &sp, &id));
    drain(p, r1, id, 1);
    printf("a request outgrowing a 2-block pool: %lld tokens generated, finish %s\n", (long long)r1->n,
           assay_finish_reason_name(r1->finish));
    CHECK(r1->finish == ASSAY_FINISH_LENGTH && r1->n == 13);
    CHECK(assay_engine_kv_blocks_free(p) == 2);
    assay_engine_close(p);
}

static void test_prefix_caching(void) {
    /* A = 256-token prefix + 40 tokens; B = the same prefix + 25 other tokens */
    static int32_t a_ids[296], b_ids[281];
    memcpy(a_ids, text_ids.ids + 500, 256 * 4);
    memcpy(b_ids, text_ids.ids + 500, 256 * 4);
    memcpy(a_ids + 256, text_ids.ids + 9000, 40 * 4);
    memcpy(b_ids + 256, text_ids.ids + 12000, 25 * 4);
    result ra[1] = {0}, rb[1] = {0}, rb_ref[1] = {0};
    int64_t id;
    assay_engine *e = open_engine(512, 0, 1);
    assay_engine *ref = open_engine(512, 0, 0);
    CHECK(e && ref);
    if (!e || !ref) return;
    int64_t free0 = assay_engine_kv_blocks_free(e);
    assay_sampling_params sp = greedy(GEN);
    CHECK_OK(assay_engine_add_request(e, a_ids, 296, &sp, &id));
    drain(e, ra, id, 1);
    assay_engine_counters c0, c1;
    assay_engine_counters_get(e, &c0);
    CHECK_OK(assay_engine_add_request(e, b_ids, 281, &sp, &id));
    int64_t cached = -1;
    while (assay_engine_has_unfinished(e)) {
        const assay_request_output *o;
        int64_t no;
        CHECK_OK(assay_engine_step(e, &o, &no));
        for (int64_t i = 0; i < no; i++) {
            cached = o[i].n_cached;
            for (int64_t j = 0; j < o[i].n_new; j++) {
                rb->tok[rb->n] = o[i].new_tokens[j];
                rb->lp[rb->n++] = o[i].new_logprobs[j];
            }
        }
    }
    assay_engine_counters_get(e, &c1);
    printf("prefix caching: B reused %lld cached tokens; hits %lld of %lld queried tokens\n", (long long)cached,
           (long long)(c1.prefix_cache_hits - c0.prefix_cache_hits), (long long)(c1.prefix_cache_queries - c0.prefix_cache_queries));
    CHECK(cached == 256);
    CHECK(c1.prefix_cache_hits - c0.prefix_cache_hits == 256);
    CHECK_OK(assay_engine_add_request(ref, b_ids, 281, &sp, &id));
    drain(ref, rb_ref, id, 1);
    int same = rb->n == rb_ref->n && memcmp(rb->tok, rb_ref->tok, (size_t)rb->n * 4) == 0;
    double d = 0;
    for (int64_t j = 0; j < rb->n; j++) {
        same &= isfinite(rb->lp[j]) && isfinite(rb_ref->lp[j]);
        d = fmax(d, fabs(rb->lp[j] - rb_ref->lp[j]));
    }
    printf("prefix caching: tokens %s, max |delta logprob| %.3g against an engine without caching\n",
           same ? "identical" : "DIFFER", d);
    CHECK(same && rb->n == GEN);
    CHECK(d <= 1e-5);
    CHECK(assay_engine_kv_blocks_free(e) == free0);
    assay_engine_close(e);
    assay_engine_close(ref);
}

static void test_bad_requests_and_stops(void) {
    assay_engine *e = open_engine(128, 0, 1);
    CHECK(e != NULL);
    if (!e) return;
    int64_t free0 = assay_engine_kv_blocks_free(e), good, id = -1;
    assay_sampling_params sp = greedy(GEN);
    result rgood[1] = {0}, ralone[1] = {0};
    CHECK_OK(assay_engine_add_request(e, prompt_of(3), 50, &sp, &good));
    /* each bad request: an error with a message, nothing queued */
    CHECK(assay_engine_add_request(e, text_ids.ids, 1024, &sp, &id) == ASSAY_ERR_RANGE);
    printf("too long: %s\n", assay_last_error());
    CHECK(strstr(assay_last_error(), "1024") != NULL);
    assay_sampling_params bad = sp;
    bad.max_tokens = 0;
    CHECK(assay_engine_add_request(e, prompt_of(1), 10, &bad, &id) == ASSAY_ERR_ARG);
    bad.max_tokens = -3;
    CHECK(assay_engine_add_request(e, prompt_of(1), 10, &bad, &id) == ASSAY_ERR_ARG);
    int32_t unk[3] = {5, 8192, 7};
    CHECK(assay_engine_add_request(e, unk, 3, &sp, &id) == ASSAY_ERR_RANGE);
    printf("unknown token: %s\n", assay_last_error());
    unk[1] = -1;
    CHECK(assay_engine_add_request(e, unk, 3, &sp, &id) == ASSAY_ERR_RANGE);
    bad = sp;
    bad.top_p = 0;
    CHECK(assay_engine_add_request(e, prompt_of(1), 10, &bad, &id) == ASSAY_ERR_ARG);
    bad.top_p = 1.5f;
    CHECK(assay_engine_add_request(e, prompt_of(1), 10, &bad, &id) == ASSAY_ERR_ARG);
    printf("top_p: %s\n", assay_last_error());
    CHECK(assay_engine_add_request(e, NULL, 0, &sp, &id) == ASSAY_ERR_ARG);
    CHECK(assay_engine_abort(e, 987654) == ASSAY_ERR_ARG);
    printf("abort: %s\n", assay_last_error());
    drain(e, rgood, good, 1);
    CHECK(rgood->n == GEN && rgood->finish == ASSAY_FINISH_LENGTH);
    assay_engine *ref = open_engine(128, 0, 0);
    if (ref) {
        CHECK_OK(assay_engine_add_request(ref, prompt_of(3), 50, &sp, &id));
        drain(ref, ralone, id, 1);
        CHECK(ralone->n == rgood->n && memcmp(ralone->tok, rgood->tok, (size_t)rgood->n * 4) == 0);
        assay_engine_close(ref);
    }

    /* stop token id: the 5th greedy token stops the request; it is the last token, and finish is "stop" */
    assay_sampling_params st = sp;
    st.stop_token_ids = &rgood->tok[4];
    st.n_stop_token_ids = 1;
    result rs[1] = {0};
    CHECK_OK(assay_engine_add_request(e, prompt_of(3), 50, &st, &id));
    drain(e, rs, id, 1);
    int64_t first = 0;
    while (rgood->tok[first] != rgood->tok[4]) first++;
    CHECK(rs->finish == ASSAY_FINISH_STOP && rs->n == first + 1 && rs->tok[first] == rgood->tok[4]);
    /* stop string: the text of tokens 3..4 stops it; the returned text ends before it */
    assay_tokenizer *tok = assay_engine_tokenizer(e);
    char full[1024] = "", stop[256] = "";
    size_t len;
    for (int64_t j = 0; j < rgood->n; j++) {
        const char *b = assay_tokenizer_token_bytes(tok, rgood->tok[j], &len);
        strncat(full, b, len);
        if (j == 3 || j == 4) strncat(stop, b, len);
    }
    const char *stops[1] = {stop};
    st = sp;
    st.stop = stops;
    st.n_stop = 1;
    memset(rs, 0, sizeof rs);
    CHECK_OK(assay_engine_add_request(e, prompt_of(3), 50, &st, &id));
    drain(e, rs, id, 1);
    const char *at = strstr(full, stop);
    printf("stop string \"%s\": text \"%s\"\n", stop, rs->text);
    CHECK(rs->finish == ASSAY_FINISH_STOP && at && strlen(rs->text) == (size_t)(at - full) &&
          strncmp(rs->text, full, strlen(rs->text)) == 0);
    /* abort of a running request: reported once with finish "abort", blocks back */
    CHECK_OK(assay_engine_add_request(e, prompt_of(5), 100, &sp, &id));
    const assay_request_output *o;
    int64_t no;
    CHECK_OK(assay_engine_step(e, &o, &no));
    CHECK_OK(assay_engine_abort(e, id));
    CHECK(assay_engine_abort(e, id) == ASSAY_ERR_ARG);
    CHECK_OK(assay_engine_step(e, &o, &no));
    CHECK(no == 1 && o[0].id == id && o[0].finish == ASSAY_FINISH_ABORT);
    CHECK(!assay_engine_has_unfinished(e));
    CHECK(assay_engine_kv_blocks_free(e) == free0);
    assay_engine_close(e);
}

static void test_bad_args(void) {
    assay_engine_args a;
    assay_engine_args_default(&a);
    a.model = check_shared_path("models/house");
    a.device = "cuda";
    assay_engine *e = NULL;
    if (assay_engine_open(&e, &a) == ASSAY_OK) { /* a build with the CUDA backend on a machine with a GPU */
        printf("--device cuda: opened\n");
        assay_engine_close(e);
        e = NULL;
    } else { /* no CUDA backend in this build, or no GPU: one line that says which */
        CHECK(e == NULL);
        printf("--device cuda: %s\n", assay_last_error());
        CHECK(strchr(assay_last_error(), '\n') == NULL);
    }
    a.device = "tpu";
    CHECK(assay_engine_open(&e, &a) == ASSAY_ERR_ARG);
    a.device = "cpu";
    a.max_model_len = 100000;
    CHECK(assay_engine_open(&e, &a) == ASSAY_ERR_ARG);
    printf("--max-model-len: %s\n", assay_last_error());
}

int main(void) {
    assay_engine *e = open_engine(64, 0, 0);
    if (!e) return check_finish("engine_house");
    char *text = NULL;
    size_t n = 0;
    CHECK_OK(assay_read_file(check_shared_path("models/house/heldout.txt"), &text, &n));
    CHECK_OK(assay_tokenizer_encode(assay_engine_tokenizer(e), text, n, 0, &text_ids));
    free(text);
    assay_engine_close(e);
    CHECK(text_ids.n > 20000);
    test_bad_args();
    test_batch_and_preemption();
    test_prefix_caching();
    test_bad_requests_and_stops();
    assay_tokens_free(&text_ids);
    return check_finish("engine_house");
}
