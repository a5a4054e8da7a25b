/* server.h — an OpenAI-compatible HTTP server over one serving engine (engine.h), vLLM's endpoints and metric names.
 *
 *   assay_server_options o; assay_server_options_default(&o); o.port = 8000; o.served_model_name = "house";
 *   assay_server *s;
 *   if (assay_server_start(&s, engine, &o) != ASSAY_OK) { fprintf(stderr, "%s\n", assay_last_error()); ... }
 *   ... wait for SIGINT/SIGTERM ...
 *   assay_server_stop(s);      // stops accepting, aborts the requests in flight, joins every thread
 *
 * Threads: one engine thread owns the engine (which is not thread-safe) and steps it while any request is
 * unfinished, sleeping on a condition variable otherwise; libmicrohttpd runs one thread per connection. A connection
 * thread parses and tokenizes its request, hands it to the engine thread through a mutex-protected queue, and waits
 * on its own condition variable for the tokens the engine thread copies out after each step. Requests that arrive
 * while others run join the running batch at the next step (continuous batching). A client that goes away has its
 * request aborted, streaming or not (a waiting connection thread checks its socket a few times a second), which
 * frees its KV blocks.
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (the model's chat template, chat_template.h, or the
 * options'), GET /v1/models, GET /health, GET /version, GET /metrics (Prometheus text, vLLM's names, a model_name
 * label: counters, gauges, vLLM's latency and size histograms, the configuration as info gauges), POST /tokenize,
 * POST /detokenize. `n` samples per prompt are n engine requests (choice index = prompt x n + sample; with a seed,
 * sample j uses seed + j, as vLLM does). Errors are OpenAI's error object {"error": {"message", "type", "param",
 * "code"}}: 400 bad JSON (or a body that is not UTF-8) or parameters or a prompt longer than the context, 401 a
 * missing or wrong API key (paths under /v1), 404 an unknown path or model name, 405 a known path asked with another
 * method (Allow says which), 413 a body over max_body_bytes (refused from its Content-Length before it is read; a
 * chunked one is read and dropped past the limit), 503 when the waiting queue is full (max_queued_requests) or while
 * shutting down.
 * The engine must have a tokenizer (assay_engine_tokenizer) for text prompts and outputs. */
#ifndef ASSAY_SERVER_H
#define ASSAY_SERVER_H

#include <stddef.h>

#include "assay/status.h"
#include "assay/strbuf.h"

typedef struct assay_engine assay_engine;
typedef struct assay_server assay_server;

typedef struct assay_server_options {
    const char *host;              /* address to listen on (default "127.0.0.1": this machine only) */
    int port;                      /* default 8000; 0: any free port (assay_server_port says which) */
    const char *api_key;           /* NULL: no key; else "Authorization: Bearer KEY" on /v1/ paths */
    const char *served_model_name; /* the model's name in requests, /v1/models and metrics (required) */
    const char *model_path;        /* shown as the model's root in /v1/models (may be NULL) */
    size_t max_body_bytes;         /* request bodies above this get 413 (default 16 MiB) */
    int max_queued_requests;       /* requests admitted beyond the engine's max_num_seqs running ones; more get 503
                                    * (default 1024; a choice of n > 1 or a prompt list counts each engine request) */
    int timeout;                   /* seconds a client connection may stay silent while the server waits on it (a
                                    * body that stops coming, a response it does not read, an idle keep-alive) before
                                    * it is closed; the wait for the engine's tokens does not count (default 600) */
    const char *chat_template;     /* NULL: the model's; else a Jinja template's text (recognised as chat_template.h
                                    * does) or a family name ("chatml", "llama3", "gemma", "llama2", "mistral") */
    /* Optional hooks (NULL: none), both called with hook_ctx. on_done sees every generation that finished normally
     * (stop or length; not errors, aborts or prompt-only scoring), its prompt as the model saw it and its output
     * text, from an HTTP thread holding the server's lock: it must return at once and copy what it keeps.
     * metrics_extra appends Prometheus text to /metrics; model_label is the `model_name="..."` label pair. */
    void (*on_done)(void *ctx, const char *prompt, size_t prompt_len, const char *answer, size_t answer_len);
    void (*metrics_extra)(void *ctx, assay_strbuf *out, const char *model_label);
    void *hook_ctx;
} assay_server_options;

void assay_server_options_default(assay_server_options *o);
/* Starts the engine thread and the HTTP listener; the engine stays the caller's and must outlive the server. */
assay_status assay_server_start(assay_server **out, assay_engine *e, const assay_server_options *o);
/* The port listened on (the one chosen when options.port was 0). */
int assay_server_port(const assay_server *s);
/* Stops accepting connections, aborts every request in flight (clients get finish_reason "abort"), waits for
 * the threads and frees the server. NULL: nothing. */
void assay_server_stop(assay_server *s);

#endif
