/* engine.h — the serving engine: requests in, tokens out, continuous batching of many requests over one model.
 *
 *   assay_engine_args a; assay_engine_args_default(&a); a.model = "model.gguf";
 *   assay_engine *e;
 *   if (assay_engine_open(&e, &a) != ASSAY_OK) { fprintf(stderr, "%s\n", assay_last_error()); ... }
 *   assay_sampling_params sp; assay_sampling_params_default(&sp); sp.temperature = 0; sp.max_tokens = 32;
 *   int64_t id;
 *   if (assay_engine_add_request(e, prompt, n_prompt, &sp, &id) != ASSAY_OK) ...;   // a bad request: its own error
 *   while (assay_engine_has_unfinished(e)) {
 *       const assay_request_output *out; int64_t n_out;
 *       assay_engine_step(e, &out, &n_out);                 // one forward pass over every scheduled request
 *       for (int64_t i = 0; i < n_out; i++) ... out[i].new_tokens, out[i].finish ...
 *   }
 *   assay_engine_close(e);
 *
 * The layers (DESIGN.md section 4): the scheduler picks, each step, which requests run and how many of their tokens
 * (vLLM's unified scheduling: running requests first, a token budget of max_num_batched_tokens shared by decodes
 * and prefill chunks, then waiting requests while the budget, max_num_seqs and the KV blocks allow); the block
 * manager (src/engine/block_manager.h) gives every request its KV blocks, with automatic prefix caching; the model
 * runner turns the scheduled requests into one step descriptor (backend.h's assay_step) and runs the model once.
 * When a running request needs a block and none is free, the most recently arrived running request is preempted:
 * its blocks are freed and it goes back to the front of the waiting queue, to be recomputed (prompt + the tokens
 * it generated so far) when blocks free up; its sampler state is kept, so it produces the same tokens as if it had
 * never been preempted.
 * Sampling follows vLLM's SamplingParams (names and defaults); logprobs are those of the model's distribution
 * (log softmax of the raw logits, before temperature and filters), as vLLM returns by default. */
#ifndef ASSAY_ENGINE_H
#define ASSAY_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "assay/kv_type.h"
#include "assay/status.h"

typedef struct assay_model assay_model;
typedef struct assay_tokenizer assay_tokenizer;
typedef struct assay_engine assay_engine;

/* The engine flags every command shares (run, serve, eval, bench, perplexity, decide), with vLLM's names. */
typedef struct assay_engine_args {
    const char *model;                /* a .gguf file or a Hugging Face directory */
    const char *device;               /* "cpu" (default) or "cuda" */
    int threads;                      /* CPU threads; <= 0: every core */
    const char *quantization;         /* NULL: as stored; "fp8": on-the-fly FP8 (model.h) */
    assay_kv_dtype kv_cache_dtype;    /* default f16 */
    int64_t calculate_kv_scales;      /* > 0: --calculate-kv-scales over this many tokens */
    int64_t max_model_len;            /* positions per request; 0: the model's training context, at most 4096 */
    int64_t max_num_seqs;             /* requests running at once (default 256) */
    int64_t max_num_batched_tokens;   /* tokens per step (default 2048) */
    int64_t kv_cache_memory;          /* KV pool bytes; 0: max_num_seqs x max_model_len tokens, at most 4 GiB */
    int64_t num_gpu_blocks_override;  /* KV pool in blocks of 16 tokens (vLLM's flag), before the two above; 0: off */
    int enable_prefix_caching;        /* default 1 */
    double gpu_memory_utilization;    /* --device cuda: fraction of the card (default 0.9) */
    uint64_t seed;                    /* seeds the generators of requests that bring no seed (default 0), and a dummy
                                       * load's weights */
    const char *load_format;          /* "auto" (default): the model's weights; "dummy": seeded random weights of the
                                       * shape config.json describes (model.h), for speed measurements; a folder
                                       * without tokenizer.json then opens with no tokenizer (token ids only) */
} assay_engine_args;

void assay_engine_args_default(assay_engine_args *a);
struct assay_model_options;
/* The model-loading half of the flags (threads, quantization, device, load format, seed) as model options, for
 * commands that load the model themselves. */
void assay_engine_args_model_options(const assay_engine_args *a, struct assay_model_options *mo);
struct assay_strbuf;
/* The flags that differ from the defaults, as a command line would give them ("--kv-cache-dtype fp8 --threads 1"),
 * for results' model_args and reports; the model is not included. */
void assay_engine_args_format(const assay_engine_args *a, struct assay_strbuf *out);

typedef struct assay_sampling_params {
    float temperature;        /* 0: greedy (default 1) */
    float top_p;              /* in (0, 1]; 1: off (default) */
    int top_k;                /* 0 or -1: off (default -1) */
    float min_p;              /* in [0, 1]; 0: off (default) */
    int has_seed;             /* 1: seed below; 0: one from the engine's generator */
    uint64_t seed;
    int64_t max_tokens;       /* > 0 (default 16) */
    int64_t min_tokens;       /* EOS and stop tokens do not end the request before this many tokens (default 0) */
    int ignore_eos;
    const int32_t *stop_token_ids;
    int n_stop_token_ids;
    const char *const *stop;  /* stop strings: generation ends when the text contains one; it is not returned */
    int n_stop;
    int logprobs;             /* -1: none (default); n >= 0: each generated token's logprob and the top n (<= 20) */
    int prompt_logprobs;      /* -1: none (default); n >= 0: each prompt token's logprob and the top n (<= 20) */
    /* In-process scoring (eval, perplexity), beyond vLLM's parameters: */
    int64_t prompt_logprobs_from; /* first prompt position whose logprob (and logits) is wanted (default 1); the
                                   * prefix cache may serve the positions before it */
    float *prompt_logits;     /* NULL, or [n_prompt - from][n_vocab]: receives the raw logits that predict prompt
                               * tokens from.. as they are computed (complete when the prompt logprobs come out) */
    int prompt_only;          /* 1: compute the prompt, generate nothing (finish "length"; max_tokens is ignored and
                               * the prompt may fill max_model_len) */
} assay_sampling_params;

void assay_sampling_params_default(assay_sampling_params *p);

typedef enum assay_finish_reason {
    ASSAY_FINISH_NONE = 0, /* still running */
    ASSAY_FINISH_STOP,     /* EOS, a stop token or a stop string */
    ASSAY_FINISH_LENGTH,   /* max_tokens, max_model_len, or the whole KV pool could not hold it any longer */
    ASSAY_FINISH_ABORT,    /* assay_engine_abort */
} assay_finish_reason;

const char *assay_finish_reason_name(assay_finish_reason r); /* NULL, "stop", "length", "abort" (OpenAI's words) */

typedef struct assay_top_logprob {
    int32_t token;
    float logprob;
} assay_top_logprob;

/* One request's news from a step. Pointers stay valid until the next step or close. */
typedef struct assay_request_output {
    int64_t id;
    int64_t n_new;                  /* tokens generated by this step (0 or 1) */
    const int32_t *new_tokens;      /* [n_new] */
    const float *new_logprobs;      /* [n_new] when logprobs >= 0, else NULL */
    const assay_top_logprob *new_top; /* [n_new][n_top]: the top alternatives, most likely first */
    int n_top;
    /* prompt logprobs, once, in the step that finishes the prompt: [n_prompt]; entries before prompt_logprobs_from
     * (entry 0 always: no context) are NaN */
    const float *prompt_logprobs;
    const assay_top_logprob *prompt_top; /* [n_prompt][n_prompt_top] (row 0 unused) */
    int n_prompt_top;
    const int32_t *tokens;          /* every generated token so far [n_generated] */
    int64_t n_generated, n_prompt, n_cached; /* n_cached: prompt tokens whose KV came from the prefix cache */
    double queue_time;              /* seconds from add_request to the step that first scheduled it (vLLM's queue
                                     * time: the WAITING phase); -1 when it was never scheduled (aborted waiting) */
    const char *text;               /* the generated text so far (stop strings cut off), text_len bytes */
    size_t text_len;
    assay_finish_reason finish;
    int32_t stop_token;             /* the token that stopped it (EOS or a stop token id), else -1 */
    int stop_index;                 /* the stop string that stopped it, else -1 */
} assay_request_output;

/* Counters a server exports (vLLM's metric names in comments). */
typedef struct assay_engine_counters {
    int64_t n_running, n_waiting;           /* vllm:num_requests_running / _waiting */
    int64_t kv_blocks, kv_blocks_free;      /* vllm:kv_cache_usage_perc = 1 - free / blocks */
    double kv_usage;
    int64_t prefix_cache_queries, prefix_cache_hits; /* tokens; vllm:prefix_cache_queries / _hits */
    int64_t preemptions;                    /* vllm:num_preemptions */
    int64_t prompt_tokens, generation_tokens; /* vllm:prompt_tokens / vllm:generation_tokens */
    int64_t requests_finished, steps;
} assay_engine_counters;

/* Loads args->model and its tokenizer (a dummy load without tokenizer.json: none, as assay_engine_open_model with
 * NULL), then opens the engine on them. */
assay_status assay_engine_open(assay_engine **out, const assay_engine_args *a);
/* An engine over a model loaded by the caller (and its tokenizer, or NULL: no text, stop strings or EOS), which stay
 * the caller's; args->model, device, threads, quantization and load_format are ignored (the model has them). */
assay_status assay_engine_open_model(assay_engine **out, assay_model *m, assay_tokenizer *tok, const assay_engine_args *args);
void assay_engine_close(assay_engine *e);
assay_model *assay_engine_model(assay_engine *e);
assay_tokenizer *assay_engine_tokenizer(assay_engine *e);
int64_t assay_engine_max_model_len(const assay_engine *e);
/* The flags the engine was opened with (its strings are the caller's), for reports and a server's info metric. */
const assay_engine_args *assay_engine_get_args(const assay_engine *e);
/* The model runner (model.h's session the engine steps), for its KV-scale reports. */
struct assay_session *assay_engine_runner(assay_engine *e);
/* One line saying how the KV pool was sized and where its scales come from, for a log. */
const char *assay_engine_describe(const assay_engine *e);

/* Queues a request. Errors (ASSAY_ERR_ARG or ASSAY_ERR_RANGE, with a message; nothing queued, the engine unharmed):
 * an empty prompt, a token id outside the vocabulary, a prompt of max_model_len tokens or more, max_tokens <= 0,
 * temperature < 0, top_p outside (0, 1], top_k < -1, min_p outside [0, 1], logprobs above 20, a prompt that needs
 * more KV blocks than the whole pool. */
assay_status assay_engine_add_request(assay_engine *e, const int32_t *prompt, int64_t n_prompt,
                                      const assay_sampling_params *sp, int64_t *id);
/* Ends a request now; its output (finish = abort) comes with the next step. Unknown or finished id: ASSAY_ERR_ARG. */
assay_status assay_engine_abort(assay_engine *e, int64_t id);
/* Schedules and runs one step; *outs: the requests that got a token or finished. */
assay_status assay_engine_step(assay_engine *e, const assay_request_output **outs, int64_t *n_outs);
int assay_engine_has_unfinished(const assay_engine *e);
/* Forgets every cached free block (vLLM's reset_prefix_cache): benchmarks that repeat the same prompts. */
void assay_engine_reset_prefix_cache(assay_engine *e);
void assay_engine_counters_get(const assay_engine *e, assay_engine_counters *c);
/* For tests: the KV blocks free now (every block once no request runs, prefix-cached ones included). */
int64_t assay_engine_kv_blocks_free(const assay_engine *e);

#endif
