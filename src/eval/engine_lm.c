/* engine_lm.c — the serving engine (engine.h) on a model and its tokenizer behind the assay_lm table, and the
 * engine-flag text used by eval and decide.
 *
 * score() is one scoring request (prompt_only, prompt logprobs from the first scored token, top-1 for the greedy
 * flag, the raw logits rows when asked): the engine computes the prompt in chunks and serves the positions before
 * the first scored token from its prefix cache when an earlier request had the same prefix (lm-eval's multiple
 * choice tasks score several endings after one context). generate() is one greedy request. Log-probabilities are
 * float32 log-softmax of the logits (accumulated in double), the quantity lm-eval takes from torch.log_softmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assay/engine.h"
#include "assay/eval.h"
#include "assay/model.h"
#include "assay/tokenizer.h"

typedef struct engine_lm {
    assay_lm lm;
    assay_model *model;
    assay_tokenizer *tok;
    assay_engine *engine;
    int64_t n_ctx;
    assay_session_options so; /* the KV-cache type it runs with, for assay_eval_lm_engine (the bench) */
    char name[256];
} engine_lm;

/* Runs the engine until request `id` finishes; `on_out` sees each of its outputs (nonzero: abort it). */
static assay_status run_request(engine_lm *e, int64_t id, int (*on_out)(void *, const assay_request_output *), void *user) {
    while (assay_engine_has_unfinished(e->engine)) {
        const assay_request_output *o;
        int64_t n;
        assay_status st = assay_engine_step(e->engine, &o, &n);
        if (st != ASSAY_OK) return st;
        for (int64_t i = 0; i < n; i++)
            if (o[i].id == id && on_out && on_out(user, &o[i]) && !o[i].finish) assay_engine_abort(e->engine, id);
    }
    return ASSAY_OK;
}

/* a dummy model's folder without tokenizer.json: token-id workloads (bench) only */
static assay_status no_tokenizer(const engine_lm *e) {
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s has no tokenizer.json: a --load-format dummy model without one runs "
                      "token-id workloads only (bench); put a tokenizer.json beside config.json for text", e->name);
}

static assay_status e_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int64_t *n) {
    engine_lm *e = ctx;
    if (!e->tok) return no_tokenizer(e);
    assay_tokens t = {0};
    assay_status st = assay_tokenizer_encode(e->tok, text, len, ASSAY_TOK_PARSE_SPECIAL | (add_special ? ASSAY_TOK_ADD_SPECIAL : 0), &t);
    if (st != ASSAY_OK) {
        assay_tokens_free(&t);
        return st;
    }
    *ids = t.ids ? t.ids : assay_xmalloc(sizeof(int32_t));
    *n = t.n;
    return ASSAY_OK;
}

static assay_status e_detokenize(void *ctx, const int32_t *ids, int64_t n, char **text, size_t *len) {
    engine_lm *e = ctx;
    if (!e->tok) return no_tokenizer(e);
    assay_strbuf b = {0};
    assay_status st = assay_tokenizer_decode(e->tok, ids, n, ASSAY_DETOK_SKIP_SPECIAL, &b);
    if (st != ASSAY_OK) {
        assay_strbuf_free(&b);
        return st;
    }
    if (!b.data) assay_strbuf_puts(&b, "");
    *text = b.data;
    *len = b.len;
    return ASSAY_OK;
}

typedef struct score_ctx {
    engine_lm *e;
    const int32_t *tokens;
    int64_t n, first;
    float *logprob;
    uint8_t *greedy;
    int done;
} score_ctx;

static int score_out(void *user, const assay_request_output *o) {
    score_ctx *c = user;
    if (!o->prompt_logprobs) return 0;
    for (int64_t t = c->first; t < c->n; t++) {
        c->logprob[t - c->first] = o->prompt_logprobs[t];
        c->greedy[t - c->first] = o->prompt_top[t].token == c->tokens[t];
    }
    c->done = 1;
    return 0;
}

static assay_status e_score(void *ctx, const int32_t *tokens, int64_t n, int64_t first, float *logprob, uint8_t *greedy,
                            float *logits) {
    engine_lm *e = ctx;
    if (n - 1 > e->n_ctx)
        return assay_fail(ASSAY_ERR_RANGE, "%lld tokens exceed the context of %lld", (long long)(n - 1), (long long)e->n_ctx);
    ASSAY_ASSERT(first >= 1 && first <= n);
    if (first == n) return ASSAY_OK; /* nothing to score */
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.prompt_only = 1;
    sp.prompt_logprobs = 1; /* the top-1 alternative says whether the token was the argmax */
    sp.prompt_logprobs_from = first;
    sp.prompt_logits = logits;
    int64_t id;
    assay_status st = assay_engine_add_request(e->engine, tokens, n, &sp, &id);
    score_ctx c = {e, tokens, n, first, logprob, greedy, 0};
    if (st == ASSAY_OK) st = run_request(e, id, score_out, &c);
    if (st == ASSAY_OK && !c.done) st = assay_fail(ASSAY_ERR_RANGE, "scoring request %lld ended without its logprobs", (long long)id);
    return st;
}

typedef struct gen_ctx {
    assay_lm_token_fn on_token;
    void *user;
} gen_ctx;

static int gen_out(void *user, const assay_request_output *o) {
    gen_ctx *g = user;
    for (int64_t j = 0; j < o->n_new; j++)
        if (g->on_token(g->user, o->new_tokens[j])) return 1;
    return 0;
}

static assay_status e_generate(void *ctx, const int32_t *prompt, int64_t n, int64_t max_new, assay_lm_token_fn on_token,
                               void *user) {
    engine_lm *e = ctx;
    if (n < 1) return assay_fail(ASSAY_ERR_ARG, "generation needs a prompt of at least one token");
    if (n >= e->n_ctx) return assay_fail(ASSAY_ERR_RANGE, "a prompt of %lld tokens leaves no room in the context of %lld", (long long)n, (long long)e->n_ctx);
    if (max_new < 1) return ASSAY_OK;
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.temperature = 0;
    sp.max_tokens = max_new; /* the request also ends at EOS (on_token sees it) or at the context's end */
    int64_t id;
    assay_status st = assay_engine_add_request(e->engine, prompt, n, &sp, &id);
    gen_ctx g = {on_token, user};
    if (st == ASSAY_OK) st = run_request(e, id, gen_out, &g);
    return st;
}

void assay_eval_lm_close(assay_lm *lm) {
    if (!lm) return;
    engine_lm *e = (engine_lm *)lm;
    assay_engine_close(e->engine);
    if (e->tok) assay_tokenizer_free(e->tok);
    if (e->model) assay_model_free(e->model);
    free(e);
}

assay_status assay_eval_lm_open(const char *model, const assay_engine_args *args, assay_lm **out) {
    *out = NULL;
    assay_session_options so;
    assay_session_options_default(&so);
    so.kv_dtype = args->kv_cache_dtype;
    so.kv_calc_tokens = args->calculate_kv_scales;
    engine_lm *e = assay_xcalloc(1, sizeof *e);
    const char *base = strrchr(model, '/');
    snprintf(e->name, sizeof e->name, "%s", base && base[1] ? base + 1 : model);
    assay_model_options mo;
    assay_engine_args_model_options(args, &mo); /* --quantization: on the fly, as vLLM's (model.h) */
    assay_status st = assay_model_load(&e->model, model, &mo);
    /* a dummy model without tokenizer.json opens for token ids (engine.h) */
    if (st == ASSAY_OK && !(assay_model_is_dummy(e->model) && !assay_model_file_tokenizer_json(assay_model_get_file(e->model))))
        st = assay_tokenizer_load(&e->tok, model);
    if (st != ASSAY_OK) {
        assay_eval_lm_close(&e->lm);
        return assay_fail_context(st, "%s", model);
    }
    const assay_model_config *c = assay_model_get_config(e->model);
    /* lm-eval's HF max_length is the model's max positions; the engine's sessions hold at most 4096 */
    int64_t max_len = args->max_model_len > 0 ? args->max_model_len : (c->n_ctx_train > 0 ? c->n_ctx_train : 2048);
    if (!args->max_model_len && max_len > 4096) max_len = 4096;
    so.n_ctx = max_len;
    /* one request at a time (the assay_lm calls are sequential); prefix caching shares the contexts of scored
     * continuations */
    assay_engine_args ea = *args;
    ea.max_model_len = max_len;
    ea.max_num_batched_tokens = 512;
    /* the pool holds two full-length requests, so the cached blocks of the previous request survive the next one */
    ea.max_num_seqs = 2;
    st = assay_engine_open_model(&e->engine, e->model, e->tok, &ea);
    if (st != ASSAY_OK) {
        assay_eval_lm_close(&e->lm);
        return assay_fail_context(st, "%s: an engine of %lld positions", model, (long long)max_len);
    }
    e->n_ctx = max_len;
    e->so = so;
    int64_t V = c->n_vocab;
    int32_t bos = e->tok ? assay_tokenizer_bos(e->tok) : (int32_t)c->bos_id;
    int32_t eos = e->tok ? assay_tokenizer_eos(e->tok) : (int32_t)c->eos_id;
    e->lm = (assay_lm){e, e->name, V, e->n_ctx, bos >= 0 ? bos : eos, eos, e_tokenize, e_detokenize, e_score, e_generate,
                       NULL, NULL, 1};
    *out = &e->lm;
    return ASSAY_OK;
}

void assay_eval_lm_engine(const assay_lm *lm, assay_model **model, assay_session_options *so) {
    const engine_lm *e = (const engine_lm *)lm;
    *model = e->model;
    *so = e->so;
}
