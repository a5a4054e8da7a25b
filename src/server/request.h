/* request.h — the body of a completions or chat request turned into the engine requests the server queues: the JSON
 * parsed and checked (OpenAI's parameter names, vLLM's limits and messages), the prompts tokenized (chat messages
 * through the chat template), the sampling parameters filled. server.c drives it; it needs no socket and no engine,
 * only what serve_model holds, so the fuzz harness (fuzz/fuzz_serve_request.c) calls it directly.
 *
 *   serve_model m = {tok, NULL, ct, NULL, "house", 2048, 8192};
 *   gen_request g; req_error er;
 *   if (!serve_parse_body(&m, body, len, 0, &g, &er)) { ... er.status, er.param, er.msg ...; }
 *   ... g.c->reqs[0 .. g.c->n - 1]: prompt, sp ...
 *   serve_call_free(g.c);   // also after a failure (g.c may be NULL)
 */
#ifndef ASSAY_SERVER_REQUEST_H
#define ASSAY_SERVER_REQUEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "assay/engine.h"
#include "assay/json.h"
#include "assay/tokenizer.h"

typedef struct assay_chat_template assay_chat_template;

#define MAX_PROMPTS 64
#define MAX_CHOICES 128 /* prompts x n */

/* What parsing needs to know of the served model. */
typedef struct serve_model {
    assay_tokenizer *tok;
    pthread_mutex_t *tok_mu;       /* held around the tokenizer (NULL: one thread only) */
    const assay_chat_template *ct; /* NULL: chat requests are refused with ct_err */
    const char *ct_err;
    const char *name;              /* the served model name ("model" must be it when given) */
    int64_t max_model_len, n_vocab;
} serve_model;

typedef struct call call;

/* One prompt's engine request and what came out of it so far. */
typedef struct sreq {
    call *c;
    int index;  /* the choice's index: prompt * n + sample */
    int sample; /* which of the prompt's n samples (0 .. n-1) */
    int32_t *prompt;
    int64_t n_prompt;
    char *prompt_text; /* the prompt as text, for echo */
    size_t prompt_text_len;
    assay_sampling_params sp;
    char **stop;
    int32_t *stop_ids;
    int64_t eid;
    int state;       /* 0 queued, 1 in the engine, 2 done */
    int abort_sent;
    char *err;       /* add_request refused it: the message */
    /* results */
    int32_t *toks;
    float *lps;
    assay_top_logprob *tops; /* [n_toks][n_top] */
    int64_t n_toks, cap;
    int n_top;
    float *plps;             /* [n_prompt] prompt logprobs, NULL until they came */
    assay_top_logprob *ptops; /* [n_prompt][n_ptop] */
    int n_ptop;
    char *text;
    size_t text_len;
    assay_finish_reason finish;
    double t_last; /* when its last token came (monotonic seconds) */
    struct sreq *next; /* queue link */
} sreq;

/* One HTTP request: its prompts' engine requests and the condition variable its thread waits on. Freed when the
 * HTTP side and every engine request let go (refs). */
struct call {
    pthread_cond_t cv;
    int n;
    sreq *reqs;
    int refs;
    int gone; /* the HTTP side let go: abort what still runs */
    double t_arrival; /* when the HTTP request came (monotonic seconds): TTFT and E2E count from here */
};

typedef struct gen_request {
    int chat, stream, include_usage, echo, n_prompts;
    int n;        /* samples per prompt */
    int logprobs; /* -1 none; completions: the top alternatives per token; chat: top_logprobs (logprobs: true) */
    int64_t max_tokens; /* -1: not given */
    call *c;
} gen_request;

/* A request's problem, found while parsing: status, the parameter, the message. */
typedef struct req_error {
    unsigned status;
    const char *param;
    char msg[1024];
} req_error;

/* Sets *er and returns 0 (so a check reads `return serve_set_err(...)`). */
int serve_set_err(req_error *er, unsigned status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Optional boolean member `key` into *out (untouched when absent or null); 0 with *er when it is not a boolean. */
int serve_get_bool(const assay_json *root, const char *key, int *out, req_error *er);
/* "model", when given, must be the served name (404 otherwise). */
int serve_check_model(const serve_model *s, const assay_json *root, req_error *er);
void serve_tokenize(const serve_model *s, const char *text, size_t len, int flags, assay_tokens *out);
/* 0 with *er when the bytes are not UTF-8 (JSON text must be, RFC 8259 section 8.1). */
int serve_check_utf8(const char *p, size_t len, req_error *er);
/* A completions (chat = 0) or chat body, parsed: 1 and g filled (g->c allocated), or 0 with *er (g->c may be set:
 * free it). */
int serve_parse_generate(const serve_model *s, const assay_json *root, int chat, gen_request *g, req_error *er);
/* The same from the body's bytes: UTF-8, then JSON, then serve_parse_generate. */
int serve_parse_body(const serve_model *s, const char *body, size_t len, int chat, gen_request *g, req_error *er);

call *serve_call_new(int n);
void serve_call_free(call *c);

#endif
