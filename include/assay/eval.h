/* eval.h — evaluation tasks with lm-evaluation-harness semantics, over a small language-model interface.
 *
 *   assay_lm *lm = ...;                              // an engine adapter fills the function table below
 *   assay_eval_options o;
 *   assay_eval_options_default(&o);                  // data from $ASSAY_SHARED/data, lm-eval's defaults
 *   o.limit = 100;
 *   assay_eval_results *r;
 *   if (assay_eval_run(lm, "hellaswag,wikitext", &o, &r) != ASSAY_OK) ... assay_last_error()
 *   assay_strbuf json = {0};
 *   assay_eval_results_json(r, &json);             // {"results": {"hellaswag": {"acc,none": ...}}, "samples": ...}
 *   assay_eval_results_free(r);
 *
 * The tasks follow lm-evaluation-harness (v0.4.x task yamls): their prompts, their context/continuation split
 * (trailing spaces of the context move to the continuation; context and continuation are tokenized together
 * and split at the context's token count), acc = argmax of summed log-likelihood, acc_norm = argmax of
 * log-likelihood divided by the choice's length in characters, BOS only where the model's tokenizer adds it,
 * the document-level rolling windows for wikitext, the gsm8k regex filters, and the result keys
 * "<metric>,<filter>" / "<metric>_stderr,<filter>". The model is reached only through assay_lm, so the whole
 * layer is testable with a toy model and independent of the engine behind it.
 */
#ifndef ASSAY_EVAL_H
#define ASSAY_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/strbuf.h"

struct assay_logits_file;

/* ---- the language-model interface ------------------------------------------------------------------------ */

/* Called for each generated token by assay_lm.generate; return nonzero to stop generating. */
typedef int (*assay_lm_token_fn)(void *user, int32_t token);

typedef struct assay_lm {
    void *ctx;           /* the engine's state, passed back to every function */
    const char *name;    /* shown in results ("model_name") */
    int64_t n_vocab;
    int64_t max_length;  /* context window the eval uses (lm-eval's max_length) */
    int32_t prefix_token;/* lm-eval's prefix_token_id: BOS if the tokenizer has one, else EOS */
    int32_t eos_token;   /* stops generation; -1 if none */

    /* Text -> ids with the tokenizer's own special-token behaviour (add_special = 1: BOS added only if this
     * tokenizer adds one, like HF's encode(add_special_tokens=True)); add_special = 0: never. *ids is malloc'd. */
    assay_status (*tokenize)(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int64_t *n);
    /* ids -> text (special tokens skipped); *text is malloc'd and NUL-terminated. */
    assay_status (*detokenize)(void *ctx, const int32_t *ids, int64_t n, char **text, size_t *len);
    /* One causal forward pass over tokens[0..n-1) (n - 1 <= max_length). For every i in [first, n) writes
     * logprob[i-first] = log p(tokens[i] | tokens[<i]) and greedy[i-first] = 1 when tokens[i] is the argmax.
     * first >= 1. When logits is not NULL it also receives the raw logits that predicted those tokens,
     * (n - first) rows of n_vocab floats (for KL divergence). */
    assay_status (*score)(void *ctx, const int32_t *tokens, int64_t n, int64_t first, float *logprob,
                          uint8_t *greedy, float *logits);
    /* Greedy decoding after prompt[0..n): calls on_token for each new token until it returns nonzero, EOS,
     * or max_new tokens. */
    assay_status (*generate)(void *ctx, const int32_t *prompt, int64_t n, int64_t max_new, assay_lm_token_fn on_token,
                             void *user);

    /* Optional (NULL for the in-process engine): what a model behind a server does on its own side. */
    /* The whole loglikelihood request from text, for a server that hands out no token ids (tokenize is then NULL);
     * assay_lm_loglikelihood calls it instead of its own token bookkeeping. */
    assay_status (*loglikelihood)(void *ctx, const char *context, const char *continuation, double *ll, int *is_greedy,
                                  int64_t *n_tokens);
    /* generate_until with the server's stop sequences and detokenizer; assay_lm_generate_until calls it. */
    assay_status (*generate_until)(void *ctx, const char *context, const char *const *until, int n_until,
                                   int64_t max_gen_toks, char **out, int64_t *n_tokens);
    int concurrency;     /* documents scored at once, each from its own thread (the functions are then thread-safe);
                          * 0 or 1: one at a time */
} assay_lm;

/* lm-eval's loglikelihood request: sum of log p over the continuation's tokens and whether every continuation
 * token was the greedy choice. Handles the empty-context case (prefix token as context) and left-truncates
 * context + continuation to max_length like lm-eval's HF model. */
assay_status assay_lm_loglikelihood(const assay_lm *lm, const char *context, const char *continuation, double *ll,
                                    int *is_greedy, int64_t *n_tokens);
/* lm-eval's loglikelihood_rolling: the text's tokens (tokenizer defaults) scored in disjoint windows of
 * max_length with the prefix token before the first window. */
assay_status assay_lm_loglikelihood_rolling(const assay_lm *lm, const char *text, size_t len, double *ll,
                                            int64_t *n_tokens);
/* lm-eval's generate_until for greedy decoding: the context left-truncated to max_length - max_gen_toks, at
 * most max_gen_toks new tokens, the text cut at the first occurrence of any stop string. *out is malloc'd.
 * *n_tokens (may be NULL) gets the tokens through the model: the prompt as fed plus every generated token. */
assay_status assay_lm_generate_until(const assay_lm *lm, const char *context, const char *const *until, int n_until,
                                     int64_t max_gen_toks, char **out, int64_t *n_tokens);

/* lm-eval's window split (utils.get_rolling_token_windows + make_disjoint_window, context_len = 1): window w
 * covers predicted tokens [pred_begin, pred_end) and is fed input tokens [in_begin, pred_end - 1) of the token
 * list, where index -1 means the prefix token. Returns the number of windows (0 for an empty list); fills
 * at most max_windows entries. */
typedef struct assay_rolling_window {
    int64_t in_begin, pred_begin, pred_end;
} assay_rolling_window;
int64_t assay_rolling_windows(int64_t n_tokens, int64_t max_length, assay_rolling_window *w, int64_t max_windows);

/* ---- tasks ------------------------------------------------------------------------------------------------ */

typedef enum assay_task_kind {
    ASSAY_TASK_MULTIPLE_CHOICE, /* hellaswag, arc_challenge, piqa, mmlu_* */
    ASSAY_TASK_GENERATE,        /* gsm8k */
    ASSAY_TASK_ROLLING,         /* wikitext: document-level perplexity */
    ASSAY_TASK_TEXT_PPL,        /* heldout / --text FILE: fixed windows, llama-perplexity style */
    ASSAY_TASK_KLD,             /* KL divergence against a baseline model or its saved logits */
} assay_task_kind;

/* One evaluation document, in the form the task's prompt builder produced. */
typedef struct assay_eval_doc {
    int64_t doc_id;
    char *context;   /* MC / GENERATE: the full prompt (few-shot + description + question); ROLLING: the target */
    int n_choices;
    char **choices;  /* MC: the choice strings; continuation = target_delimiter + choice */
    int gold;        /* MC: index of the right choice */
    char *target;    /* GENERATE: the reference answer; ROLLING: the original page (for word/byte counts) */
} assay_eval_doc;

typedef struct assay_task_docs {
    char *name;                /* "hellaswag", "mmlu_anatomy", ... */
    const char *group;         /* "mmlu_stem" ... for mmlu subjects, else NULL */
    assay_task_kind kind;
    int num_fewshot;
    const char *target_delimiter;
    assay_eval_doc *docs;
    int64_t n_docs;            /* after --limit */
    int64_t n_original;        /* before --limit */
} assay_task_docs;

typedef struct assay_eval_options {
    const char *data_dir;      /* root holding hellaswag/, arc_challenge/, ...; default $ASSAY_SHARED/data */
    const char *text_file;     /* TEXT_PPL / KLD text (default: the house model's heldout.txt or wikitext) */
    int num_fewshot;           /* -1: each task's default (lm-eval yaml) */
    int64_t limit;             /* 0: all documents; else the first N per task (lm-eval --limit) */
    int64_t ppl_ctx;           /* TEXT_PPL / KLD window in tokens (default 512) */
    int64_t max_gen_toks;      /* gsm8k generation budget (lm-eval: 256) */
    int fewshot_seed;          /* lm-eval's fewshot_random_seed (1234) */
    int progress;              /* draw progress bars */
    const assay_lm *kld_base;  /* KLD: the baseline model, or ... */
    const struct assay_logits_file *kld_base_file; /* ... its saved log-probabilities (logits_file.h; --score-all
                                  windows of ppl_ctx over the same text); neither: the kld task is refused */
    int max_failed_in_a_row;   /* 0: the first failed document ends the run with an error (in-process: a failure is a
                                  bug or an I/O error). N > 0 (a model behind a server): a document whose request
                                  failed is counted and left out of the metrics and the records, and N failures in a
                                  row end the run, with the results so far kept (assay_eval_run) */
} assay_eval_options;

void assay_eval_options_default(assay_eval_options *o);

/* Builds a task's documents and prompts. `name` is a task or group name (mmlu expands to its 57 subjects).
 * Appends to *tasks (a malloc'd array of *n_tasks entries). No model needed: this is what --dump-requests
 * prints and what the prompt tests compare with lm-evaluation-harness. */
assay_status assay_task_load(const char *name, const assay_eval_options *o, assay_task_docs **tasks, int *n_tasks);
void assay_task_docs_free(assay_task_docs *t);
/* Known task names, NULL-terminated ("wikitext", "heldout", "kld", "hellaswag", ...). */
extern const char *const assay_task_names[];

/* ---- running and results ------------------------------------------------------------------------------------ */

/* Per-sample record kept for pairing two runs (compare) and written under "samples". */
typedef struct assay_eval_sample {
    int64_t doc_id;
    int n_values;
    double values[4];    /* per-task metric values for this doc (acc, acc_norm | em strict, em flexible | ll...) */
    double *lls;         /* MC: per-choice log-likelihood (n_choices) */
    uint8_t *greedy;     /* MC: per-choice is_greedy */
    int n_choices;
    int gold;
    char *response;      /* GENERATE: the generated text */
    char *filtered[2];   /* GENERATE: strict-match and flexible-extract answers */
    double ll;           /* ROLLING / TEXT_PPL: total log-likelihood */
    int64_t tokens, words, bytes;
} assay_eval_sample;

typedef struct assay_task_result {
    char *name;
    const char *group;
    assay_task_kind kind;
    int num_fewshot;
    int64_t n_original, n_effective;
    int n_metrics;
    const char *metric_keys[8];  /* "acc,none", "exact_match,strict-match", ... */
    double metric[8];
    double stderr_[8];           /* NAN when lm-eval writes "N/A" */
    int higher_is_better[8];
    assay_eval_sample *samples;
    int64_t n_samples;
    double seconds;              /* wall time of this task */
    int64_t tokens_scored;       /* tokens through the model (prompt + continuation), for throughput */
    int64_t n_failed;            /* documents whose request failed (max_failed_in_a_row > 0): not in samples */
    int64_t n_skipped;           /* documents never tried because the run stopped */
    char *first_error;           /* the first failure's message, or NULL */
} assay_task_result;

typedef struct assay_eval_results {
    assay_task_result *tasks;
    int n_tasks;
    char *model_name;
    char *model_sha256;          /* hex, or NULL when unknown */
    char *model_args;            /* engine flags as given */
    char *device;
    int64_t limit;
    int fewshot_seed;
    int64_t max_length;
    double start_time, end_time; /* Unix seconds */
    double total_seconds;
    char *error;                 /* a run that stopped early: why (its tasks so far are kept); else NULL */
} assay_eval_results;

/* Runs every task in the comma-separated list. On an error *out is left alone, except with max_failed_in_a_row > 0
 * once scoring began: then *out gets the partial results (tasks finished or stopped, ->error set) as well. */
assay_status assay_eval_run(const assay_lm *lm, const char *task_list, const assay_eval_options *o,
                            assay_eval_results **out);
/* Scores one loaded task (used by assay_eval_run; exposed for tests with a toy model). */
assay_status assay_eval_task(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                             assay_task_result *r);
/* lm-eval's results JSON plus "samples" and assay's own "assay" block (timings, model hash). */
void assay_eval_results_json(const assay_eval_results *r, assay_strbuf *out);
void assay_eval_results_free(assay_eval_results *r);

/* ---- the engine behind assay_lm ------------------------------------------------------------------------------ */

/* Opens MODEL (GGUF file or HF directory) on the serving engine (engine.h) with the engine flags `args` (its
 * model field is ignored) and wraps it as an assay_lm. max_model_len 0: the model's positions, at most 4096 (lm-eval's
 * max_length). */
struct assay_engine_args;
assay_status assay_eval_lm_open(const char *model, const struct assay_engine_args *args, assay_lm **out);
void assay_eval_lm_close(assay_lm *lm);
/* The engine behind an assay_lm from assay_eval_lm_open: its model and the session options it runs with (KV-cache
 * type), so a throughput bench (bench.h) measures the same configuration. */
struct assay_model;
struct assay_session_options;
void assay_eval_lm_engine(const assay_lm *lm, struct assay_model **model, struct assay_session_options *so);

/* ---- a model behind an OpenAI-compatible server ------------------------------------------------------------- */

/* The same tasks through any OpenAI-compatible completions server (assay serve, vLLM, ...), as lm-evaluation-harness's
 * local-completions model sends them:
 *   - loglikelihood: context + continuation as one prompt to /v1/completions with echo, logprobs 1 and max_tokens 0,
 *     so the answer carries every prompt token's log-probability and its top alternative (is_greedy). Where the server
 *     has vLLM's /tokenize the requests are made of token ids: the context and the whole are tokenized there and the
 *     split is lm.c's (context tokens counted, the rest is the continuation), exactly as in-process. Otherwise the
 *     prompt is text and the context's tokens are counted by a prompt-only request on the context alone (the server
 *     tokenizes both, so the boundary is its own; text offsets are not used: their units and their treatment of a
 *     BOS token differ between servers);
 *   - generate_until: /v1/completions with the task's stop sequences, temperature 0 and max_tokens = max_gen_toks;
 *   - windows (heldout, wikitext): token ids through /tokenize (refused without it); kld needs logits: refused.
 * Requests time out, and 429, 5xx and transport failures are retried with backoff (http.h); num_concurrent documents
 * are in flight at once. */
typedef struct assay_endpoint_options {
    const char *base_url;      /* http://host:port, with or without /v1 or /v1/completions */
    const char *model;         /* the served model; NULL: the first one /v1/models lists */
    const char *api_key;       /* NULL: none */
    int num_concurrent;        /* default 1 */
    int64_t max_length;        /* 0: from the server's max_model_len (/tokenize), else 2048 */
    int tokenized;             /* -1 (default): token ids when /tokenize answers; 0: text prompts; 1: require /tokenize */
    int32_t prefix_token;      /* lm-eval's prefix token (BOS, else EOS) for empty contexts and rolling windows;
                                  -1 (default): the BOS the server's tokenizer adds, if any */
    double timeout_s;          /* each request (default 300) */
    int max_retries;           /* default 3 */
    double backoff_s;          /* the first retry's wait (default 0.5; doubled for each further one, at most 8 s) */
} assay_endpoint_options;

void assay_endpoint_options_default(assay_endpoint_options *o);
/* Reaches the server (GET /v1/models), finds the model and whether /tokenize answers. */
assay_status assay_eval_endpoint_open(const assay_endpoint_options *o, assay_lm **out);
void assay_eval_endpoint_close(assay_lm *lm);
/* "base_url=...,model=...,tokenized_requests=...,num_concurrent=N": lm-eval's model_args for the results file. */
void assay_eval_endpoint_describe(const assay_lm *lm, assay_strbuf *out);
/* Requests made (attempts), retries and requests that failed for good. */
void assay_eval_endpoint_stats(const assay_lm *lm, int64_t *attempts, int64_t *retries, int64_t *failed);

/* ---- pieces exposed for tests ------------------------------------------------------------------------------ */

/* lm-eval's wikitext_detokenizer (tasks/wikitext/preprocess_wikitext.py). Returns a malloc'd string. */
char *assay_wikitext_detokenize(const char *page);
/* Splits wiki.*.raw into documents like the EleutherAI/wikitext_document_level loader. */
assay_status assay_wikitext_documents(const char *raw, size_t len, char ***docs, int64_t *n_docs);
/* len(re.split(r"\s+", page)) */
int64_t assay_count_words_python(const char *page);
/* gsm8k filters: strict-match ("#### (\-?[0-9\.\,]+)", first) and flexible-extract (last number). Return
 * malloc'd strings ("[invalid]" when nothing matched). */
char *assay_gsm8k_strict(const char *response);
char *assay_gsm8k_flexible(const char *response);
/* lm-eval's exact_match with gsm8k's options (ignore_case, regexes_to_ignore , \$ (?s).*####\s \.$). */
int assay_gsm8k_exact_match(const char *prediction, const char *reference);

/* Python's random.Random(seed).sample(range(n), k), drawn repeatedly from one generator, as lm-eval's few-shot
 * sampler does. */
typedef struct assay_pyrandom {
    uint32_t mt[624];
    int index;
} assay_pyrandom;
void assay_pyrandom_seed(assay_pyrandom *r, uint32_t seed);
uint32_t assay_pyrandom_u32(assay_pyrandom *r);
double assay_pyrandom_random(assay_pyrandom *r); /* random.random() */
void assay_pyrandom_sample(assay_pyrandom *r, int64_t n, int k, int64_t *out);

#endif
