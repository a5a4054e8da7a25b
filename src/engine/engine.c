/* engine.c — the serving engine (engine.h): requests, the scheduler, the model runner's step preparation, sampling
 * and stop conditions.
 *
 * A request's tokens are its prompt followed by what it generated; `n_computed` of them are in its KV blocks. A
 * step computes some of the rest: a decode computes the one token sampled last, a prefill a chunk of the prompt
 * (or, after a preemption, of prompt + generated). When a step leaves n_computed == n_tokens, the logits of its
 * last token give the next token. */
#include "assay/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/backend.h"
#include "assay/model.h"
#include "assay/progress.h"
#include "assay/sampler.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "engine/block_manager.h"
#include "engine/kv_cache.h"

#define MAX_LOGPROBS 20
/* a request that wants prompt logprobs computes at most this many prompt tokens per step, so the logits rows of a
 * step stay PROMPT_LP_CHUNK x n_vocab floats whatever the prompt */
#define PROMPT_LP_CHUNK 256

typedef struct request {
    int64_t id;
    assay_sampling_params sp;
    int32_t *stop_ids;        /* copies of sp's arrays */
    char **stop;
    uint64_t rng;             /* sampler state, kept across preemption */
    int32_t *tokens;          /* prompt then generated [cap] */
    int64_t n_tokens, cap, n_prompt, n_computed, n_cached;
    assay_block_table table;
    /* outputs */
    float *logprobs;          /* [max_tokens] when sp.logprobs >= 0 */
    assay_top_logprob *top;   /* [max_tokens][sp.logprobs] */
    float *prompt_lp;         /* [n_prompt] when sp.prompt_logprobs >= 0 */
    assay_top_logprob *prompt_top;
    int prompt_lp_done;       /* prompt logprobs handed out (never again after a preemption) */
    char *text;
    size_t text_len, text_cap;
    assay_finish_reason finish;
    int32_t stop_token;
    int stop_index;
    int counted_prompt;
    int64_t sched_n;          /* tokens scheduled in the current step */
    double t_added, t_scheduled; /* monotonic seconds: add_request, first scheduled (0: not yet) */
    int news;                 /* this step gave it a token or its prompt logprobs */
    int emit_prompt_lp;       /* this step hands out the prompt logprobs */
} request;

/* a FIFO/list of request pointers */
typedef struct req_list {
    request **r;
    int64_t n, cap;
} req_list;

struct assay_engine {
    assay_engine_args a;
    assay_model *m;
    assay_tokenizer *tok;     /* NULL when opened on a model without one: no text, no stop strings, no EOS */
    int owns_model;
    assay_session *s;
    assay_block_manager *bm;
    assay_sampler *sampler;   /* scratch for sampling */
    int64_t n_vocab, max_model_len, n_batch;
    uint64_t rng;
    int64_t next_id;
    req_list waiting, running, finished; /* finished: reported by the step that ends or follows it */
    req_list done;                       /* reported: freed when the next step starts */
    req_list sched;                      /* this step's requests, in token order */
    /* the step descriptor's arrays [n_batch] and per-sequence arrays [max_num_seqs] */
    int32_t *tok_ids, *pos, *seq_of_tok;
    int64_t *slot;
    int8_t *want;
    int32_t *cu_seqlens, *seq_lens;
    const int32_t **tables;
    float *logits;                       /* [logits_rows][n_vocab]: the rows a step wants, grown on demand */
    int32_t *argmax;                     /* [logits_rows]: their argmax, for steps of greedy rows only */
    int64_t logits_rows;
    assay_request_output *outs;
    int64_t n_outs, outs_cap;
    assay_engine_counters c;
    char desc[1024];
};

void assay_engine_args_default(assay_engine_args *a) {
    memset(a, 0, sizeof *a);
    a->device = "cpu";
    a->kv_cache_dtype = ASSAY_KV_F16;
    a->max_num_seqs = 256;
    a->max_num_batched_tokens = 2048;
    a->enable_prefix_caching = 1;
    a->gpu_memory_utilization = 0.9;
    a->load_format = "auto";
}

void assay_engine_args_model_options(const assay_engine_args *a, assay_model_options *mo) {
    assay_model_options_default(mo);
    mo->n_threads = a->threads;
    mo->quantization = a->quantization;
    if (a->device) mo->device = a->device;
    if (a->load_format) mo->load_format = a->load_format;
    mo->seed = a->seed;
}

void assay_engine_args_format(const assay_engine_args *a, assay_strbuf *out) {
    assay_engine_args d;
    assay_engine_args_default(&d);
    const char *sep = "";
#define FLAG(...) (assay_strbuf_printf(out, "%s", sep), assay_strbuf_printf(out, __VA_ARGS__), sep = " ")
    if (a->device && strcmp(a->device, "cpu") != 0) FLAG("--device %s", a->device);
    if (a->quantization) FLAG("--quantization %s", a->quantization);
    if (a->load_format && strcmp(a->load_format, "auto") != 0) FLAG("--load-format %s", a->load_format);
    /* vLLM's name: fp8 is e4m3 */
    if (a->kv_cache_dtype != d.kv_cache_dtype)
        FLAG("--kv-cache-dtype %s", a->kv_cache_dtype == ASSAY_KV_FP8_E4M3 ? "fp8" : assay_kv_dtype_name(a->kv_cache_dtype));
    if (a->calculate_kv_scales > 0) {
        FLAG("--calculate-kv-scales");
        if (a->calculate_kv_scales != 1024) FLAG("--kv-scale-tokens %lld", (long long)a->calculate_kv_scales);
    }
    if (a->threads > 0) FLAG("--threads %d", a->threads);
    if (a->max_model_len > 0) FLAG("--max-model-len %lld", (long long)a->max_model_len);
    if (a->max_num_seqs != d.max_num_seqs) FLAG("--max-num-seqs %lld", (long long)a->max_num_seqs);
    if (a->max_num_batched_tokens != d.max_num_batched_tokens)
        FLAG("--max-num-batched-tokens %lld", (long long)a->max_num_batched_tokens);
    if (a->kv_cache_memory > 0) FLAG("--kv-cache-memory %lld", (long long)a->kv_cache_memory);
    if (a->num_gpu_blocks_override > 0) FLAG("--num-gpu-blocks-override %lld", (long long)a->num_gpu_blocks_override);
    if (!a->enable_prefix_caching) FLAG("--no-enable-prefix-caching");
    if (a->gpu_memory_utilization != d.gpu_memory_utilization) FLAG("--gpu-memory-utilization %g", a->gpu_memory_utilization);
    if (a->seed) FLAG("--seed %llu", (unsigned long long)a->seed);
#undef FLAG
    if (!out->data) assay_strbuf_puts(out, "");
}

void assay_sampling_params_default(assay_sampling_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->top_k = -1;
    p->max_tokens = 16;
    p->logprobs = -1;
    p->prompt_logprobs = -1;
    p->prompt_logprobs_from = 1;
}

const char *assay_finish_reason_name(assay_finish_reason r) {
    static const char *const names[] = {[ASSAY_FINISH_NONE] = NULL, [ASSAY_FINISH_STOP] = "stop",
                                        [ASSAY_FINISH_LENGTH] = "length", [ASSAY_FINISH_ABORT] = "abort"};
    return (int)r >= 0 && r <= ASSAY_FINISH_ABORT ? names[r] : NULL;
}

/* ---- lists ------------------------------------------------------------------------------------------------ */

static void list_push(req_list *l, request *r) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->r = assay_xrealloc(l->r, (size_t)l->cap * sizeof *l->r);
    }
    l->r[l->n++] = r;
}

static void list_push_front(req_list *l, request *r) {
    list_push(l, r);
    memmove(l->r + 1, l->r, (size_t)(l->n - 1) * sizeof *l->r);
    l->r[0] = r;
}

static void list_remove_at(req_list *l, int64_t i) {
    memmove(l->r + i, l->r + i + 1, (size_t)(l->n - i - 1) * sizeof *l->r);
    l->n--;
}

static int64_t list_find(const req_list *l, const request *r) {
    for (int64_t i = 0; i < l->n; i++)
        if (l->r[i] == r) return i;
    return -1;
}

static void request_free(request *r) {
    if (!r) return;
    free(r->stop_ids);
    for (int i = 0; r->stop && i < r->sp.n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->tokens);
    free(r->logprobs);
    free(r->top);
    free(r->prompt_lp);
    free(r->prompt_top);
    free(r->text);
    free(r);
}

/* ---- open / close ----------------------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* vLLM's memory planning on a device backend: one forward pass of max-num-batched-tokens tokens (with as many logits
 * rows as max-num-seqs) measures the activation peak; of gpu_memory_utilization x the card, what the weights, the
 * runtime and that peak leave becomes the KV pool. Writes the plan's log lines to `out` and stderr. */
static assay_status plan_device_memory(assay_engine *e, const assay_session_options *so0, size_t block_bytes,
                                       int64_t *blocks, char *out, size_t cap) {
    const assay_engine_args *a = &e->a;
    const assay_model_config *c = assay_model_get_config(e->m);
    assay_backend *be = assay_model_backend(e->m);
    size_t free0, total, free1;
    be->ops->memory_info(be, &free0, &total);
    int64_t n = e->n_batch, nb = assay_blocks_for(n) + 1, rows = a->max_num_seqs < n ? a->max_num_seqs : n;
    assay_session_options so = *so0;
    so.kv_blocks = nb;
    so.kv_calc_tokens = 0;
    assay_session *s = NULL;
    assay_status st = assay_session_open(&s, e->m, &so);
    if (st) return assay_fail_context(st, "memory profile");
    int32_t *tok = assay_xcalloc((size_t)n, sizeof(int32_t)), *pos = assay_xmalloc((size_t)n * sizeof(int32_t));
    int32_t *seq = assay_xcalloc((size_t)n, sizeof(int32_t)), *table = assay_xmalloc((size_t)nb * sizeof(int32_t));
    int64_t *slot = assay_xmalloc((size_t)n * sizeof(int64_t));
    int8_t *want = assay_xcalloc((size_t)n, 1);
    for (int64_t t = 0; t < n; t++) {
        pos[t] = (int32_t)t;
        slot[t] = t;
        want[t] = t >= n - rows;
    }
    for (int64_t b = 0; b < nb; b++) table[b] = (int32_t)b;
    int32_t cu[2] = {0, (int32_t)n}, len = (int32_t)n;
    const int32_t *tables[1] = {table};
    assay_step step = {.n_tokens = n, .token = tok, .pos = pos, .seq_of_tok = seq, .slot = slot, .want_logits = want,
                       .n_logits = rows, .n_seqs = 1, .cu_seqlens_q = cu, .seq_lens = &len, .block_tables = tables};
    float *logits = assay_xmalloc((size_t)(rows * c->n_vocab) * sizeof(float));
    st = assay_session_run_step(s, &step, logits);
    be->ops->synchronize(be);
    be->ops->memory_info(be, &free1, &total);
    assay_session_close(s);
    free(tok); free(pos); free(seq); free(table); free(slot); free(want); free(logits);
    if (st) return assay_fail_context(st, "memory profile");
    size_t probe_kv = (size_t)nb * block_bytes;
    size_t peak = free0 > free1 + probe_kv ? free0 - free1 - probe_kv : 0; /* activations + scratch the pass grew */
    double limit = a->gpu_memory_utilization * (double)total, used = (double)(total - free0) + (double)peak;
    double kv_bytes = limit - used;
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    if (kv_bytes < (double)block_bytes)
        return assay_fail(ASSAY_ERR_NOMEM, "--gpu-memory-utilization %.2f of %.1f GiB leaves no room for the KV cache: "
                          "weights %.2f GiB, everything else in use %.2f GiB, activation peak %.2f GiB",
                          a->gpu_memory_utilization, (double)total / GiB, (double)be->weight_bytes / GiB,
                          (double)(total - free0 - be->weight_bytes) / GiB, (double)peak / GiB);
    *blocks = (int64_t)(kv_bytes / (double)block_bytes);
    int64_t tokens = *blocks * ASSAY_KV_BLOCK;
    snprintf(out, cap, "%s, %.1f GiB: weights %.2f GiB, other use %.2f GiB, activation peak %.2f GiB (%lld tokens); "
             "--gpu-memory-utilization %.2f leaves %.2f GiB of KV cache = %lld tokens; maximum concurrency for %lld "
             "tokens per request: %.2fx", assay_backend_cuda_device_name(be) ? assay_backend_cuda_device_name(be) : be->ops->name,
             (double)total / GiB, (double)be->weight_bytes / GiB, (double)(total - free0 - be->weight_bytes) / GiB,
             (double)peak / GiB, (long long)n, a->gpu_memory_utilization, (double)*blocks * (double)block_bytes / GiB,
             (long long)tokens, (long long)e->max_model_len, (double)tokens / (double)e->max_model_len);
    /* the lines vLLM prints, for users who grep for them */
    assay_note("Model loading took %.2f GiB of GPU memory (weights)", (double)be->weight_bytes / GiB);
    assay_note("Available KV cache memory: %.2f GiB", (double)*blocks * (double)block_bytes / GiB);
    assay_note("GPU KV cache size: %lld tokens", (long long)tokens);
    assay_note("Maximum concurrency for %lld tokens per request: %.2fx", (long long)e->max_model_len,
            (double)tokens / (double)e->max_model_len);
    return ASSAY_OK;
}

/* The engine's half of opening: the checks, the KV pool sized, the buffers; e->m (and e->tok, may be NULL) are set. */
static assay_status engine_setup(assay_engine *e) {
    const assay_engine_args *a = &e->a;
    const assay_model_config *c = assay_model_get_config(e->m);
    e->n_vocab = c->n_vocab;
    int64_t train = c->n_ctx_train > 0 ? c->n_ctx_train : 4096;
    if (a->max_model_len > 0 && c->n_ctx_train > 0 && a->max_model_len > c->n_ctx_train)
        return assay_fail(ASSAY_ERR_ARG, "--max-model-len %lld is longer than the model's context of %lld tokens",
                          (long long)a->max_model_len, (long long)c->n_ctx_train);
    e->max_model_len = a->max_model_len > 0 ? a->max_model_len : (train < 4096 ? train : 4096);
    e->n_batch = a->max_num_batched_tokens;
    assay_session_options so;
    assay_session_options_default(&so);
    assay_backend *be = assay_model_backend(e->m);
    assay_kv_dtype kvt = a->kv_cache_dtype;
    if (!be->host_memory && kvt == ASSAY_KV_F16) kvt = ASSAY_KV_BF16; /* the GPU's 16-bit cache is the model's bf16 */
    if (!be->host_memory && kvt == ASSAY_KV_F32)
        return assay_fail(ASSAY_ERR_ARG, "--kv-cache-dtype f32 is a CPU cache; on --device %s: bf16, fp8, fp8_e5m2 or int8",
                          be->ops->name);
    so.kv_dtype = kvt;
    so.kv_calc_tokens = a->calculate_kv_scales;
    so.n_ctx = e->max_model_len;
    so.n_seq = 0;
    so.n_batch = e->n_batch;
    /* the KV pool: the bytes asked for, or room for every sequence at full length, capped */
    assay_kv_geom g = {kvt, c->n_head_kv, c->head_dim};
    size_t block_bytes = assay_kv_cache_block_bytes(&g, c->n_layer);
    int64_t blocks = 0;
    const char *how;
    char plan[400] = "";
    assay_status st;
    if (a->num_gpu_blocks_override > 0) {
        blocks = a->num_gpu_blocks_override;
        how = "--num-gpu-blocks-override";
    } else if (a->kv_cache_memory <= 0 && be->ops->memory_info) {
        if ((st = plan_device_memory(e, &so, block_bytes, &blocks, plan, sizeof plan))) return st;
        how = plan;
    } else if (a->kv_cache_memory > 0) {
        blocks = a->kv_cache_memory / (int64_t)block_bytes;
        how = "--kv-cache-memory";
    } else {
        blocks = a->max_num_seqs * assay_blocks_for(e->max_model_len);
        int64_t cap = (int64_t)(((size_t)4 << 30) / block_bytes);
        if (blocks > cap) blocks = cap;
        how = "max-num-seqs x max-model-len, at most 4 GiB";
    }
    if (blocks < 1)
        return assay_fail(ASSAY_ERR_ARG, "--kv-cache-memory %lld bytes holds no KV block (one block of %d tokens takes %zu "
                          "bytes)", (long long)a->kv_cache_memory, ASSAY_KV_BLOCK, block_bytes);
    so.kv_blocks = blocks;
    if ((st = assay_session_open(&e->s, e->m, &so))) return st;
    e->bm = assay_block_manager_new(blocks, a->enable_prefix_caching);
    e->sampler = assay_sampler_new(&(assay_sampler_params){0}, e->n_vocab);
    int64_t B = e->n_batch, S = a->max_num_seqs;
    e->tok_ids = assay_xmalloc((size_t)B * sizeof(int32_t));
    e->pos = assay_xmalloc((size_t)B * sizeof(int32_t));
    e->seq_of_tok = assay_xmalloc((size_t)B * sizeof(int32_t));
    e->slot = assay_xmalloc((size_t)B * sizeof(int64_t));
    e->want = assay_xmalloc((size_t)B);
    e->cu_seqlens = assay_xmalloc((size_t)(S + 1) * sizeof(int32_t));
    e->seq_lens = assay_xmalloc((size_t)S * sizeof(int32_t));
    e->tables = assay_xmalloc((size_t)S * sizeof(int32_t *));
    /* logits rows: one per scheduled request, more only for prompt logprobs; grown on demand */
    e->logits_rows = S < B ? S : B;
    e->logits = assay_xmalloc((size_t)(e->logits_rows * e->n_vocab) * sizeof(float));
    e->argmax = assay_xmalloc((size_t)e->logits_rows * sizeof(int32_t));
    snprintf(e->desc, sizeof e->desc,
             "KV pool %lld blocks of %d tokens (%.1f MiB, %s; %lld tokens = %.1f x max-model-len %lld), prefix caching "
             "%s; %s", (long long)blocks, ASSAY_KV_BLOCK, (double)blocks * (double)block_bytes / 1048576.0, how,
             (long long)(blocks * ASSAY_KV_BLOCK), (double)(blocks * ASSAY_KV_BLOCK) / (double)e->max_model_len,
             (long long)e->max_model_len, a->enable_prefix_caching ? "on" : "off", assay_session_kv_scales_desc(e->s));
    return ASSAY_OK;
}

static assay_status check_args(const assay_engine_args *a) {
    if (a->max_num_seqs <= 0 || a->max_num_batched_tokens <= 0 || a->max_model_len < 0 || a->kv_cache_memory < 0 ||
        a->num_gpu_blocks_override < 0)
        return assay_fail(ASSAY_ERR_ARG, "--max-num-seqs and --max-num-batched-tokens must be positive, --max-model-len "
                                         "and --kv-cache-memory not negative");
    if (!(a->gpu_memory_utilization > 0 && a->gpu_memory_utilization <= 1))
        return assay_fail(ASSAY_ERR_ARG, "--gpu-memory-utilization must be in (0, 1], got %g", a->gpu_memory_utilization);
    if ((int)a->kv_cache_dtype < 0 || a->kv_cache_dtype >= ASSAY_KV_DTYPE_COUNT)
        return assay_fail(ASSAY_ERR_ARG, "bad KV cache dtype");
    return ASSAY_OK;
}

assay_status assay_engine_open(assay_engine **out, const assay_engine_args *args) {
    *out = NULL;
    if (!args->model) return assay_fail(ASSAY_ERR_ARG, "no model given");
    assay_status st = check_args(args);
    if (st) return st;
    assay_engine *e = assay_xcalloc(1, sizeof *e);
    e->a = *args;
    if (!e->a.device) e->a.device = "cpu";
    e->rng = args->seed;
    e->owns_model = 1;
    assay_model_options mo;
    assay_engine_args_model_options(&e->a, &mo);
    st = assay_model_load(&e->m, e->a.model, &mo);
    /* a dummy model's folder may hold config.json alone: then no tokenizer, and requests come as token ids */
    if (st == ASSAY_OK && !(assay_model_is_dummy(e->m) && !assay_model_file_tokenizer_json(assay_model_get_file(e->m))))
        st = assay_tokenizer_load(&e->tok, e->a.model);
    if (st == ASSAY_OK) st = engine_setup(e);
    if (st) {
        assay_engine_close(e);
        return st;
    }
    *out = e;
    return ASSAY_OK;
}

assay_status assay_engine_open_model(assay_engine **out, assay_model *m, assay_tokenizer *tok, const assay_engine_args *args) {
    *out = NULL;
    assay_status st = check_args(args);
    if (st) return st;
    assay_engine *e = assay_xcalloc(1, sizeof *e);
    e->a = *args;
    e->rng = args->seed;
    e->m = m;
    e->tok = tok;
    if ((st = engine_setup(e))) {
        assay_engine_close(e);
        return st;
    }
    *out = e;
    return ASSAY_OK;
}

void assay_engine_close(assay_engine *e) {
    if (!e) return;
    req_list *lists[] = {&e->waiting, &e->running, &e->finished, &e->done};
    for (int k = 0; k < 4; k++) {
        for (int64_t i = 0; i < lists[k]->n; i++) {
            if (e->bm) assay_block_manager_free_table(e->bm, &lists[k]->r[i]->table);
            request_free(lists[k]->r[i]);
        }
        free(lists[k]->r);
    }
    free(e->sched.r);
    assay_block_manager_free(e->bm);
    assay_sampler_free(e->sampler);
    assay_session_close(e->s);
    if (e->owns_model) {
        assay_tokenizer_free(e->tok);
        assay_model_free(e->m);
    }
    free(e->tok_ids); free(e->pos); free(e->seq_of_tok); free(e->slot); free(e->want);
    free(e->cu_seqlens); free(e->seq_lens); free(e->tables); free(e->logits); free(e->argmax); free(e->outs);
    free(e);
}

assay_model *assay_engine_model(assay_engine *e) { return e->m; }
assay_tokenizer *assay_engine_tokenizer(assay_engine *e) { return e->tok; }
int64_t assay_engine_max_model_len(const assay_engine *e) { return e->max_model_len; }
const assay_engine_args *assay_engine_get_args(const assay_engine *e) { return &e->a; }
assay_session *assay_engine_runner(assay_engine *e) { return e->s; }
const char *assay_engine_describe(const assay_engine *e) { return e->desc; }

/* ---- requests --------------------------------------------------------------------------------------------- */

assay_status assay_engine_add_request(assay_engine *e, const int32_t *prompt, int64_t n_prompt,
                                      const assay_sampling_params *sp_in, int64_t *id) {
    assay_sampling_params sp;
    if (sp_in) sp = *sp_in;
    else assay_sampling_params_default(&sp);
    if (n_prompt <= 0) return assay_fail(ASSAY_ERR_ARG, "the prompt is empty");
    if (sp.prompt_only) {
        /* the last token is only a target: positions 0 .. n_prompt - 2 are computed */
        sp.max_tokens = 1; /* unused; keeps the buffers' arithmetic simple */
        if (n_prompt < 2) return assay_fail(ASSAY_ERR_ARG, "scoring needs a prompt of at least 2 tokens");
        if (n_prompt - 1 > e->max_model_len)
            return assay_fail(ASSAY_ERR_RANGE, "scoring %lld tokens runs %lld positions; the maximum model length is %lld",
                              (long long)n_prompt, (long long)(n_prompt - 1), (long long)e->max_model_len);
    } else if (n_prompt >= e->max_model_len)
        return assay_fail(ASSAY_ERR_RANGE, "the prompt has %lld tokens; the maximum model length is %lld (prompt + at "
                          "least one generated token must fit)", (long long)n_prompt, (long long)e->max_model_len);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return assay_fail(ASSAY_ERR_RANGE, "prompt token %lld is %d, outside the vocabulary of %lld", (long long)i,
                              prompt[i], (long long)e->n_vocab);
    if (sp.max_tokens <= 0) return assay_fail(ASSAY_ERR_ARG, "max_tokens must be at least 1, got %lld", (long long)sp.max_tokens);
    if (sp.min_tokens < 0) return assay_fail(ASSAY_ERR_ARG, "min_tokens must not be negative");
    if (!(sp.temperature >= 0)) return assay_fail(ASSAY_ERR_ARG, "temperature must be >= 0, got %g", sp.temperature);
    if (!(sp.top_p > 0 && sp.top_p <= 1)) return assay_fail(ASSAY_ERR_ARG, "top_p must be in (0, 1], got %g", sp.top_p);
    if (sp.top_k < -1) return assay_fail(ASSAY_ERR_ARG, "top_k must be -1 (off) or positive, got %d", sp.top_k);
    if (!(sp.min_p >= 0 && sp.min_p <= 1)) return assay_fail(ASSAY_ERR_ARG, "min_p must be in [0, 1], got %g", sp.min_p);
    if ((sp.prompt_logprobs >= 0 || sp.prompt_logits) && !(sp.prompt_logprobs_from >= 1 && sp.prompt_logprobs_from <= n_prompt))
        return assay_fail(ASSAY_ERR_ARG, "prompt_logprobs_from must be in [1, %lld], got %lld", (long long)n_prompt,
                          (long long)sp.prompt_logprobs_from);
    if (sp.prompt_logits && sp.prompt_logprobs < 0) sp.prompt_logprobs = 0;
    if (sp.logprobs > MAX_LOGPROBS || sp.prompt_logprobs > MAX_LOGPROBS)
        return assay_fail(ASSAY_ERR_ARG, "logprobs and prompt_logprobs may ask for at most %d alternatives", MAX_LOGPROBS);
    for (int i = 0; i < sp.n_stop_token_ids; i++)
        if (sp.stop_token_ids[i] < 0 || sp.stop_token_ids[i] >= e->n_vocab)
            return assay_fail(ASSAY_ERR_RANGE, "stop token id %d is outside the vocabulary of %lld", sp.stop_token_ids[i],
                              (long long)e->n_vocab);
    for (int i = 0; i < sp.n_stop; i++)
        if (!sp.stop[i] || !sp.stop[i][0]) return assay_fail(ASSAY_ERR_ARG, "stop strings must not be empty");
    if (sp.n_stop > 0 && !e->tok) return assay_fail(ASSAY_ERR_ARG, "stop strings need the model's tokenizer");
    int64_t most = n_prompt + sp.max_tokens < e->max_model_len ? n_prompt + sp.max_tokens : e->max_model_len;
    if (most < n_prompt + 1) most = n_prompt + 1;
    assay_block_counters bc;
    assay_block_manager_counters(e->bm, &bc);
    int64_t computed = sp.prompt_only ? n_prompt - 1 : n_prompt; /* positions whose KV the prompt writes */
    if (assay_blocks_for(computed) > bc.n_blocks)
        return assay_fail(ASSAY_ERR_RANGE, "the prompt of %lld tokens needs %lld KV blocks; the pool has %lld (raise "
                          "--kv-cache-memory)", (long long)n_prompt, (long long)assay_blocks_for(computed),
                          (long long)bc.n_blocks);
    request *r = assay_xcalloc(1, sizeof *r);
    r->id = e->next_id++;
    r->sp = sp;
    if (sp.n_stop_token_ids > 0) {
        r->stop_ids = assay_xmalloc((size_t)sp.n_stop_token_ids * sizeof(int32_t));
        memcpy(r->stop_ids, sp.stop_token_ids, (size_t)sp.n_stop_token_ids * sizeof(int32_t));
    }
    r->sp.stop_token_ids = r->stop_ids;
    if (sp.n_stop > 0) {
        r->stop = assay_xcalloc((size_t)sp.n_stop, sizeof(char *));
        for (int i = 0; i < sp.n_stop; i++) r->stop[i] = assay_xstrdup(sp.stop[i]);
    }
    r->sp.stop = (const char *const *)r->stop;
    r->rng = sp.has_seed ? sp.seed : splitmix(&e->rng);
    r->cap = most;
    r->tokens = assay_xmalloc((size_t)r->cap * sizeof(int32_t));
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof(int32_t));
    r->n_tokens = r->n_prompt = n_prompt;
    if (sp.prompt_only) r->n_tokens = n_prompt - 1; /* what gets computed */
    if (sp.logprobs >= 0) {
        r->logprobs = assay_xmalloc((size_t)sp.max_tokens * sizeof(float));
        if (sp.logprobs > 0) r->top = assay_xmalloc((size_t)(sp.max_tokens * sp.logprobs) * sizeof(assay_top_logprob));
    }
    if (sp.prompt_logprobs >= 0) {
        r->prompt_lp = assay_xmalloc((size_t)n_prompt * sizeof(float));
        for (int64_t i = 0; i < sp.prompt_logprobs_from; i++) r->prompt_lp[i] = NAN;
        if (sp.prompt_logprobs > 0)
            r->prompt_top = assay_xcalloc((size_t)(n_prompt * sp.prompt_logprobs), sizeof(assay_top_logprob));
    }
    r->stop_token = -1;
    r->stop_index = -1;
    r->t_added = assay_now_seconds();
    list_push(&e->waiting, r);
    *id = r->id;
    return ASSAY_OK;
}

static request *find_live(assay_engine *e, int64_t id) {
    req_list *lists[] = {&e->waiting, &e->running};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < lists[k]->n; i++)
            if (lists[k]->r[i]->id == id) return lists[k]->r[i];
    return NULL;
}

/* Takes r out of its list, frees its blocks and queues it for the final report. */
static void finish(assay_engine *e, request *r, assay_finish_reason why) {
    r->finish = why;
    assay_block_manager_free_table(e->bm, &r->table);
    req_list *lists[] = {&e->waiting, &e->running};
    for (int k = 0; k < 2; k++) {
        int64_t i = list_find(lists[k], r);
        if (i >= 0) list_remove_at(lists[k], i);
    }
    list_push(&e->finished, r);
    e->c.requests_finished++;
}

assay_status assay_engine_abort(assay_engine *e, int64_t id) {
    request *r = find_live(e, id);
    if (!r) return assay_fail(ASSAY_ERR_ARG, "no running or waiting request has id %lld", (long long)id);
    finish(e, r, ASSAY_FINISH_ABORT);
    return ASSAY_OK;
}

int assay_engine_has_unfinished(const assay_engine *e) { return e->waiting.n + e->running.n > 0; }
void assay_engine_reset_prefix_cache(assay_engine *e) { assay_block_manager_reset_prefix_cache(e->bm); }
int64_t assay_engine_kv_blocks_free(const assay_engine *e) { return assay_block_manager_n_free(e->bm); }

void assay_engine_counters_get(const assay_engine *e, assay_engine_counters *c) {
    *c = e->c;
    assay_block_counters bc;
    assay_block_manager_counters(e->bm, &bc);
    c->n_running = e->running.n;
    c->n_waiting = e->waiting.n;
    c->kv_blocks = bc.n_blocks;
    c->kv_blocks_free = bc.n_free;
    /* blocks in use = held by some request (cached free blocks are reusable, so they count as free) */
    c->kv_usage = bc.n_blocks > 0 ? 1.0 - (double)bc.n_free / (double)bc.n_blocks : 0;
    c->prefix_cache_queries = bc.prefix_queries;
    c->prefix_cache_hits = bc.prefix_hits;
}

/* ---- the scheduler ---------------------------------------------------------------------------------------- */

/* the prompt positions a request computes: all but a scoring request's last (a target only) */
static int64_t prompt_end(const request *r) { return r->sp.prompt_only ? r->n_prompt - 1 : r->n_prompt; }

/* the request still needs logits rows of prompt positions */
static int wants_prompt_rows(const request *r) { return r->prompt_lp && !r->prompt_lp_done; }

/* Recompute preemption: blocks back to the pool, to the front of the waiting queue, sampler state kept. */
static void preempt(assay_engine *e, request *r) {
    assay_block_manager_free_table(e->bm, &r->table);
    r->n_computed = 0;
    r->n_cached = 0;
    list_remove_at(&e->running, list_find(&e->running, r));
    list_push_front(&e->waiting, r);
    e->c.preemptions++;
}

/* Fills e->sched with this step's requests (each with sched_n tokens) and their blocks; copies: CoW pairs. */
static void schedule(assay_engine *e) {
    e->sched.n = 0;
    int64_t budget = e->n_batch;
    int preempted = 0;
    /* running requests first, in arrival order; a request that cannot get its blocks preempts the latest one */
    for (int64_t i = 0; i < e->running.n && budget > 0; i++) {
        request *r = e->running.r[i];
        int64_t n = r->n_tokens - r->n_computed;
        if (n > budget) n = budget;
        if (wants_prompt_rows(r) && n > PROMPT_LP_CHUNK) n = PROMPT_LP_CHUNK;
        int ok = 0;
        while (!ok) {
            assay_block_copy cp;
            if (assay_block_manager_append(e->bm, &r->table, r->n_computed + n, &cp) == ASSAY_OK) {
                if (cp.src >= 0) assay_session_copy_block(e->s, cp.src, cp.dst);
                ok = 1;
                break;
            }
            request *victim = e->running.r[e->running.n - 1];
            if (victim == r && e->running.n == 1) {
                /* alone and still out of blocks: the whole pool cannot hold this request any longer */
                finish(e, r, ASSAY_FINISH_LENGTH);
                break;
            }
            preempt(e, victim);
            preempted = 1;
            if (victim == r) break;
        }
        if (!ok) break; /* r itself went back to waiting (or finished): it was the last running request */
        r->sched_n = n;
        list_push(&e->sched, r);
        budget -= n;
    }
    /* then waiting requests, oldest first, unless this step had to preempt (the pool is short) */
    while (!preempted && budget > 0 && e->waiting.n > 0 && e->running.n < e->a.max_num_seqs) {
        request *r = e->waiting.r[0];
        int64_t cached = 0;
        int64_t want = r->n_tokens < budget ? r->n_tokens : budget;
        /* positions whose logits the request needs cannot come from the cache */
        int64_t max_cached = wants_prompt_rows(r) ? r->sp.prompt_logprobs_from - 1 : r->n_tokens;
        if (assay_block_manager_allocate_prompt(e->bm, &r->table, r->tokens, r->n_tokens, want, max_cached, &cached) != ASSAY_OK)
            break;
        int64_t n = r->n_tokens - cached;
        if (n > budget) n = budget;
        if (wants_prompt_rows(r) && n > PROMPT_LP_CHUNK) n = PROMPT_LP_CHUNK;
        if (assay_block_manager_append(e->bm, &r->table, cached + n, NULL) != ASSAY_OK) {
            assay_block_manager_free_table(e->bm, &r->table);
            break;
        }
        r->n_computed = cached;
        r->n_cached = cached;
        if (r->t_scheduled == 0) r->t_scheduled = assay_now_seconds();
        list_remove_at(&e->waiting, 0);
        list_push(&e->running, r);
        r->sched_n = n;
        list_push(&e->sched, r);
        budget -= n;
    }
}

/* ---- the step --------------------------------------------------------------------------------------------- */

/* log-sum-exp of a logits row (in double: logprobs are compared to 1e-5 across batch shapes) */
static double row_lse(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - m);
    return m + log(sum);
}

/* the k largest entries as logprobs, most likely first (ties: lower token id first) */
static void top_logprobs(const float *x, int64_t n, int k, double lse, assay_top_logprob *out) {
    int have = 0;
    for (int64_t i = 0; i < n; i++) {
        if (have == k && x[i] <= x[out[k - 1].token]) continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && x[out[j - 1].token] < x[i]) {
            out[j] = out[j - 1];
            j--;
        }
        out[j].token = (int32_t)i;
    }
    for (int j = 0; j < have; j++) out[j].logprob = (float)(x[out[j].token] - lse);
}

static void text_append(request *r, const char *b, size_t len) {
    if (r->text_len + len + 1 > r->text_cap) {
        r->text_cap = (r->text_len + len + 1) * 2;
        r->text = assay_xrealloc(r->text, r->text_cap);
    }
    memcpy(r->text + r->text_len, b, len);
    r->text_len += len;
    r->text[r->text_len] = 0;
}

/* A stop string in the text (only where the newest bytes can complete one): cut the text before it. */
static int stop_string_hit(request *r, size_t new_bytes) {
    for (int i = 0; i < r->sp.n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        size_t from = r->text_len > new_bytes + sl ? r->text_len - new_bytes - sl + 1 : 0;
        if (r->text_len < sl) continue;
        const char *hit = memmem(r->text + from, r->text_len - from, r->stop[i], sl);
        if (hit) {
            r->text_len = (size_t)(hit - r->text);
            r->text[r->text_len] = 0;
            r->stop_index = i;
            return 1;
        }
    }
    return 0;
}

/* Appends a sampled token and applies the stop conditions in vLLM's order. */
static void accept_token(assay_engine *e, request *r, int32_t tok) {
    r->tokens[r->n_tokens++] = tok;
    int64_t n_gen = r->n_tokens - r->n_prompt;
    int may_stop = n_gen > r->sp.min_tokens;
    assay_finish_reason why = ASSAY_FINISH_NONE;
    int is_stop_id = 0;
    for (int i = 0; i < r->sp.n_stop_token_ids; i++) is_stop_id |= r->stop_ids[i] == tok;
    if (may_stop && ((!r->sp.ignore_eos && e->tok && assay_tokenizer_is_eog(e->tok, tok)) || is_stop_id)) {
        why = ASSAY_FINISH_STOP;
        r->stop_token = tok;
    } else {
        size_t len = 0;
        const char *b = !e->tok || assay_tokenizer_token_type(e->tok, tok) == ASSAY_TOKEN_CONTROL
                            ? NULL
                            : assay_tokenizer_token_bytes(e->tok, tok, &len);
        if (b && len) text_append(r, b, len);
        if (may_stop && r->sp.n_stop > 0 && stop_string_hit(r, len)) why = ASSAY_FINISH_STOP;
    }
    if (why == ASSAY_FINISH_NONE && (n_gen >= r->sp.max_tokens || r->n_tokens >= e->max_model_len)) why = ASSAY_FINISH_LENGTH;
    e->c.generation_tokens++;
    if (why != ASSAY_FINISH_NONE) finish(e, r, why);
}

static void grow_logits(assay_engine *e, int64_t rows) {
    if (rows <= e->logits_rows) return;
    e->logits_rows = rows;
    free(e->logits);
    e->logits = assay_xmalloc((size_t)(rows * e->n_vocab) * sizeof(float));
    free(e->argmax);
    e->argmax = assay_xmalloc((size_t)rows * sizeof(int32_t));
}

static void push_output(assay_engine *e, request *r, int new_token) {
    if (e->n_outs == e->outs_cap) {
        e->outs_cap = e->outs_cap ? 2 * e->outs_cap : 64;
        e->outs = assay_xrealloc(e->outs, (size_t)e->outs_cap * sizeof *e->outs);
    }
    assay_request_output *o = &e->outs[e->n_outs++];
    memset(o, 0, sizeof *o);
    int64_t n_gen = r->n_tokens > r->n_prompt ? r->n_tokens - r->n_prompt : 0;
    o->id = r->id;
    o->n_new = new_token ? 1 : 0;
    if (new_token) {
        o->new_tokens = r->tokens + r->n_tokens - 1;
        if (r->logprobs) o->new_logprobs = r->logprobs + n_gen - 1;
        if (r->top) {
            o->new_top = r->top + (n_gen - 1) * r->sp.logprobs;
            o->n_top = r->sp.logprobs;
        }
    }
    if (r->emit_prompt_lp) {
        o->prompt_logprobs = r->prompt_lp;
        o->prompt_top = r->prompt_top;
        o->n_prompt_top = r->sp.prompt_logprobs > 0 ? r->sp.prompt_logprobs : 0;
    }
    o->tokens = r->tokens + r->n_prompt;
    o->n_generated = n_gen;
    o->n_prompt = r->n_prompt;
    o->n_cached = r->n_cached;
    o->queue_time = r->t_scheduled > 0 ? r->t_scheduled - r->t_added : -1;
    o->text = r->text ? r->text : "";
    o->text_len = r->text_len;
    o->finish = r->finish;
    o->stop_token = r->stop_token;
    o->stop_index = r->stop_index;
}

assay_status assay_engine_step(assay_engine *e, const assay_request_output **outs, int64_t *n_outs) {
    *outs = NULL;
    *n_outs = 0;
    e->n_outs = 0;
    for (int64_t i = 0; i < e->done.n; i++) request_free(e->done.r[i]);
    e->done.n = 0;
    schedule(e);
    /* the step descriptor: each scheduled request's tokens contiguous, in position order */
    int64_t nt = 0, n_logits = 0, V = e->n_vocab;
    int greedy = 0;
    for (int64_t i = 0; i < e->sched.n; i++) {
        request *r = e->sched.r[i];
        r->news = r->emit_prompt_lp = 0;
        e->cu_seqlens[i] = (int32_t)nt;
        for (int64_t j = 0; j < r->sched_n; j++, nt++) {
            int64_t p = r->n_computed + j;
            e->tok_ids[nt] = r->tokens[p];
            e->pos[nt] = (int32_t)p;
            e->seq_of_tok[nt] = (int32_t)i;
            e->slot[nt] = (int64_t)r->table.ids[p / ASSAY_KV_BLOCK] * ASSAY_KV_BLOCK + p % ASSAY_KV_BLOCK;
            int completes = p == r->n_tokens - 1 && !r->sp.prompt_only;
            int prompt_lp = wants_prompt_rows(r) && p >= r->sp.prompt_logprobs_from - 1 && p < r->n_prompt - 1;
            e->want[nt] = (int8_t)(completes || prompt_lp);
            n_logits += e->want[nt];
        }
        e->seq_lens[i] = (int32_t)(r->n_computed + r->sched_n);
        e->tables[i] = r->table.ids;
    }
    e->cu_seqlens[e->sched.n] = (int32_t)nt;
    if (nt > 0) {
        grow_logits(e, n_logits);
        assay_step step = {.n_tokens = nt, .token = e->tok_ids, .pos = e->pos, .seq_of_tok = e->seq_of_tok,
                           .slot = e->slot, .want_logits = e->want, .n_logits = n_logits, .n_seqs = e->sched.n,
                           .cu_seqlens_q = e->cu_seqlens, .seq_lens = e->seq_lens, .block_tables = e->tables};
        /* every wanted row picks a greedy token and reports no logprobs: only the argmax is needed (on a GPU it
         * runs there, and the logits stay on the device) */
        greedy = n_logits > 0;
        for (int64_t i = 0; i < e->sched.n && greedy; i++) {
            request *r = e->sched.r[i];
            greedy = r->sp.temperature <= 0 && !r->logprobs && !wants_prompt_rows(r) && !r->sp.prompt_only;
        }
        assay_status st = greedy ? assay_session_run_step_argmax(e->s, &step, e->argmax)
                                 : assay_session_run_step(e->s, &step, e->logits);
        if (st) return st; /* the scheduled requests stay as they were; the caller decides */
        e->c.steps++;
    }
    /* sampling and bookkeeping, request by request, the logits rows in token order */
    int64_t row = 0;
    for (int64_t i = 0; i < e->sched.n; i++) {
        request *r = e->sched.r[i];
        int32_t next = -1;
        for (int64_t j = 0; j < r->sched_n; j++) {
            int64_t t = e->cu_seqlens[i] + j, p = r->n_computed + j;
            if (!e->want[t]) continue;
            if (greedy) {
                next = e->argmax[row++];
                continue;
            }
            const float *lg = e->logits + row++ * V;
            if (p == r->n_tokens - 1 && !r->sp.prompt_only) {
                assay_sampler_params spar = {r->sp.temperature, r->sp.top_k > 0 ? r->sp.top_k : 0, r->sp.top_p, r->sp.min_p, 0};
                next = assay_sampler_sample_with(e->sampler, &spar, &r->rng, lg);
                if (r->logprobs) {
                    double lse = row_lse(lg, V);
                    int64_t g = r->n_tokens - r->n_prompt;
                    r->logprobs[g] = (float)(lg[next] - lse);
                    if (r->top) top_logprobs(lg, V, r->sp.logprobs, lse, r->top + g * r->sp.logprobs);
                }
            } else { /* a prompt position: the logprob of the prompt's next token */
                double lse = row_lse(lg, V);
                r->prompt_lp[p + 1] = (float)(lg[r->tokens[p + 1]] - lse);
                if (r->sp.prompt_logits)
                    memcpy(r->sp.prompt_logits + (p + 1 - r->sp.prompt_logprobs_from) * V, lg, (size_t)V * sizeof(float));
                if (r->prompt_top) top_logprobs(lg, V, r->sp.prompt_logprobs, lse, r->prompt_top + (p + 1) * r->sp.prompt_logprobs);
            }
        }
        r->n_computed += r->sched_n;
        assay_block_manager_commit(e->bm, &r->table, r->tokens, r->n_computed);
        if (r->prompt_lp && !r->prompt_lp_done && r->n_computed >= prompt_end(r)) {
            r->prompt_lp_done = 1;
            r->emit_prompt_lp = 1;
            r->news = 1;
        }
        if (r->sp.prompt_only && r->n_computed >= prompt_end(r)) {
            r->news = 1;
            e->c.prompt_tokens += r->n_prompt;
            finish(e, r, ASSAY_FINISH_LENGTH);
        }
        if (next >= 0) {
            if (!r->counted_prompt) {
                e->c.prompt_tokens += r->n_prompt;
                r->counted_prompt = 1;
            }
            r->news = 2;
            accept_token(e, r, next);
        }
    }
    for (int64_t i = 0; i < e->sched.n; i++) {
        request *r = e->sched.r[i];
        if (r->news) push_output(e, r, r->news == 2);
    }
    /* the finished ones: those of this step are reported above; aborted ones (between steps) here */
    for (int64_t i = 0; i < e->finished.n; i++) {
        request *r = e->finished.r[i];
        if (list_find(&e->sched, r) < 0) push_output(e, r, 0);
        list_push(&e->done, r);
    }
    e->finished.n = 0;
    e->sched.n = 0;
    *outs = e->outs;
    *n_outs = e->n_outs;
    return ASSAY_OK;
}
