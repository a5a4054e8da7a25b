/* server.c — see server.h. Layout: the request queue and the engine thread, then the HTTP side (responses,
 * streaming, endpoints; a request's body becomes engine requests in request.c), then start/stop. One mutex (srv->mu) guards the queue, every request's results and the
 * counters snapshot; each HTTP call waits on its own condition variable, the engine thread on srv->wake. */
#include "assay/server.h"

#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "assay/backend.h"
#include "assay/chat_template.h"
#include "assay/engine.h"
#include "assay/json.h"
#include "assay/model.h"
#include "assay/model_file.h"
#include "assay/progress.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "request.h"

/* ---- latency and size histograms (vLLM's names and buckets) ------------------------------------------------ */

#define HISTO_MAX_BOUNDS 48

/* One Prometheus histogram: counts per bucket (not cumulative; the last one is above every bound), sum, count. */
typedef struct histo {
    const char *name, *help;
    double le[HISTO_MAX_BOUNDS];
    int n_le;
    int64_t n[HISTO_MAX_BOUNDS + 1];
    double sum;
    int64_t count;
} histo;

enum { H_TTFT, H_ITL, H_E2E, H_QUEUE, H_PROMPT_TOKENS, H_GEN_TOKENS, H_COUNT };

static void histo_init(histo *h, const char *name, const char *help, const double *le, int n_le) {
    memset(h, 0, sizeof *h);
    h->name = name;
    h->help = help;
    if (n_le > HISTO_MAX_BOUNDS) n_le = HISTO_MAX_BOUNDS;
    memcpy(h->le, le, (size_t)n_le * sizeof *le);
    h->n_le = n_le;
}

/* vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max (inclusive). */
static int buckets_1_2_5(double max, double *le) {
    int n = 0;
    for (double p = 1; n < HISTO_MAX_BOUNDS; p *= 10)
        for (int k = 0; k < 3 && n < HISTO_MAX_BOUNDS; k++) {
            double v = p * (k == 0 ? 1 : k == 1 ? 2 : 5);
            if (v > max) return n;
            le[n++] = v;
        }
    return n;
}

static void histo_observe(histo *h, double v) {
    int i = 0;
    while (i < h->n_le && !(v <= h->le[i])) i++;
    h->n[i]++;
    h->sum += v;
    h->count++;
}

struct assay_server {
    assay_engine *e;
    assay_tokenizer *tok;
    char *name, *root, *api_key;
    size_t max_body;
    int max_queued, timeout;
    int64_t max_running;  /* the engine's max_num_seqs */
    int64_t n_unfinished; /* engine requests submitted and not finished (queued, waiting or running) */
    int port;
    int64_t max_model_len, n_vocab;
    time_t created;
    assay_chat_template *ct;
    char *ct_err;
    pthread_mutex_t mu, tok_mu;
    pthread_cond_t wake;
    sreq *q_head, *q_tail;
    sreq **active;
    int n_active, cap_active;
    int stopping;
    pthread_t engine_thread;
    struct MHD_Daemon *d;
    assay_engine_counters counters;
    int64_t finished[4]; /* by assay_finish_reason */
    histo h[H_COUNT];    /* recorded by the engine thread, read by /metrics, both under mu */
    char *config_labels; /* assay:engine_config_info's labels (after model_name) */
    char *cache_labels;  /* vllm:cache_config_info's labels */
    uint64_t next_id;
    assay_server_options hooks; /* on_done, metrics_extra, hook_ctx */
    serve_model pm; /* what the request parser reads (request.h) */
};

/* Drops one reference (under srv->mu). */
static void call_release(call *c) {
    if (--c->refs == 0) serve_call_free(c);
}

static void push_grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return;
    int64_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    *p = realloc(*p, (size_t)nc * elem);
    *cap = nc;
}

/* Copies one step's output into the request (under srv->mu; the engine's pointers die at the next step). */
static void absorb(sreq *r, const assay_request_output *o) {
    if (o->prompt_logprobs && !r->plps) {
        r->plps = malloc((size_t)o->n_prompt * sizeof *r->plps);
        memcpy(r->plps, o->prompt_logprobs, (size_t)o->n_prompt * sizeof *r->plps);
        r->n_ptop = o->n_prompt_top;
        if (o->prompt_top && o->n_prompt_top > 0) {
            size_t n = (size_t)o->n_prompt * (size_t)o->n_prompt_top;
            r->ptops = malloc(n * sizeof *r->ptops);
            memcpy(r->ptops, o->prompt_top, n * sizeof *r->ptops);
        }
    }
    for (int64_t j = 0; j < o->n_new; j++) {
        int64_t cap = r->cap;
        void *p = r->toks;
        push_grow(&p, &cap, r->n_toks + 1, sizeof *r->toks);
        r->toks = p;
        if (cap != r->cap) {
            r->lps = realloc(r->lps, (size_t)cap * sizeof *r->lps);
            r->tops = realloc(r->tops, (size_t)cap * (size_t)(o->n_top > 0 ? o->n_top : 1) * sizeof *r->tops);
            r->cap = cap;
        }
        r->n_top = o->n_top;
        r->toks[r->n_toks] = o->new_tokens[j];
        r->lps[r->n_toks] = o->new_logprobs ? o->new_logprobs[j] : NAN;
        if (o->new_top && o->n_top > 0)
            memcpy(r->tops + r->n_toks * o->n_top, o->new_top + j * o->n_top, (size_t)o->n_top * sizeof *r->tops);
        r->n_toks++;
    }
    if (o->text_len != r->text_len || !r->text) {
        r->text = realloc(r->text, o->text_len + 1);
        memcpy(r->text, o->text, o->text_len);
        r->text[o->text_len] = 0;
        r->text_len = o->text_len;
    } else if (o->text_len) {
        memcpy(r->text, o->text, o->text_len);
    }
    r->finish = o->finish;
}

static void finish_req(assay_server *s, sreq *r, assay_finish_reason why) {
    r->state = 2;
    s->n_unfinished--;
    if (r->finish == ASSAY_FINISH_NONE) r->finish = why;
    pthread_cond_broadcast(&r->c->cv);
    call_release(r->c);
}

static void active_remove(assay_server *s, int i) { s->active[i] = s->active[--s->n_active]; }

/* A step gave r tokens (it had `had` before): its first one is its TTFT, every later one an inter-token latency
 * (one per token, as vLLM records them). Under srv->mu. */
static void record_tokens(assay_server *s, sreq *r, int64_t had, double now) {
    if (r->sp.prompt_only || r->n_toks == had) return;
    if (had == 0) histo_observe(&s->h[H_TTFT], now - r->c->t_arrival);
    else histo_observe(&s->h[H_ITL], now - r->t_last);
    r->t_last = now;
}

/* A request the engine finished (any reason, as vllm:request_success counts them). Under srv->mu. */
static void record_finish(assay_server *s, sreq *r, const assay_request_output *o, double now) {
    histo_observe(&s->h[H_E2E], now - r->c->t_arrival);
    if (o->queue_time >= 0) histo_observe(&s->h[H_QUEUE], o->queue_time);
    histo_observe(&s->h[H_PROMPT_TOKENS], (double)o->n_prompt);
    histo_observe(&s->h[H_GEN_TOKENS], (double)(r->sp.prompt_only ? 0 : o->n_generated));
}

static void *engine_main(void *arg) {
    assay_server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->q_head) {
            sreq *r = s->q_head;
            s->q_head = r->next;
            if (!s->q_head) s->q_tail = NULL;
            if (s->stopping || r->c->gone) {
                s->finished[ASSAY_FINISH_ABORT]++;
                finish_req(s, r, ASSAY_FINISH_ABORT);
                continue;
            }
            if (assay_engine_add_request(s->e, r->prompt, r->n_prompt, &r->sp, &r->eid) != ASSAY_OK) {
                r->err = strdup(assay_last_error());
                finish_req(s, r, ASSAY_FINISH_ABORT);
                continue;
            }
            r->state = 1;
            if (s->n_active == s->cap_active) {
                s->cap_active = s->cap_active ? s->cap_active * 2 : 64;
                s->active = realloc(s->active, (size_t)s->cap_active * sizeof *s->active);
            }
            s->active[s->n_active++] = r;
        }
        int aborted = 0; /* an aborted request's output comes with the next step, even when nothing else runs */
        for (int i = 0; i < s->n_active; i++) {
            sreq *r = s->active[i];
            if ((s->stopping || r->c->gone) && !r->abort_sent) {
                r->abort_sent = 1;
                aborted = 1;
                assay_engine_abort(s->e, r->eid);
            }
        }
        if (!aborted && !assay_engine_has_unfinished(s->e)) {
            if (s->stopping) {
                while (s->n_active > 0) { /* nothing left to step: whatever was not reported ends as aborted */
                    sreq *r = s->active[0];
                    active_remove(s, 0);
                    finish_req(s, r, ASSAY_FINISH_ABORT);
                }
                break;
            }
            pthread_cond_wait(&s->wake, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        const assay_request_output *outs;
        int64_t n_outs;
        assay_status st = assay_engine_step(s->e, &outs, &n_outs);
        double now = assay_now_seconds();
        pthread_mutex_lock(&s->mu);
        if (st != ASSAY_OK) { /* the model failed: every running request ends with the message */
            const char *msg = assay_last_error();
            fprintf(stderr, "assay serve: engine step failed: %s\n", msg);
            while (s->n_active > 0) {
                sreq *r = s->active[0];
                if (!r->abort_sent) assay_engine_abort(s->e, r->eid);
                r->err = strdup(msg);
                active_remove(s, 0);
                finish_req(s, r, ASSAY_FINISH_ABORT);
            }
            pthread_mutex_unlock(&s->mu);
            while (assay_engine_has_unfinished(s->e) && assay_engine_step(s->e, &outs, &n_outs) == ASSAY_OK) {}
            pthread_mutex_lock(&s->mu);
            continue;
        }
        for (int64_t k = 0; k < n_outs; k++) {
            const assay_request_output *o = &outs[k];
            for (int i = 0; i < s->n_active; i++) {
                sreq *r = s->active[i];
                if (r->eid != o->id) continue;
                int64_t had = r->n_toks;
                absorb(r, o);
                record_tokens(s, r, had, now);
                if (o->finish != ASSAY_FINISH_NONE) {
                    record_finish(s, r, o, now);
                    s->finished[o->finish]++;
                    active_remove(s, i);
                    finish_req(s, r, o->finish);
                } else {
                    pthread_cond_broadcast(&r->c->cv);
                }
                break;
            }
        }
        assay_engine_counters_get(s->e, &s->counters);
    }
    assay_engine_counters_get(s->e, &s->counters);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Queues a call's requests: 1; 0 when the server is stopping, -1 when the waiting queue would hold more than
 * max_queued requests beyond the max_running ones (nothing queued, *waiting says how many wait now). */
static int submit(assay_server *s, call *c, int64_t *waiting) {
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (s->n_unfinished + c->n > s->max_running + s->max_queued) {
        *waiting = s->n_unfinished > s->max_running ? s->n_unfinished - s->max_running : 0;
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    s->n_unfinished += c->n;
    for (int i = 0; i < c->n; i++) {
        sreq *r = &c->reqs[i];
        r->next = NULL;
        if (s->q_tail) s->q_tail->next = r;
        else s->q_head = r;
        s->q_tail = r;
    }
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* The HTTP side lets go of a call (under srv->mu): what still runs is aborted. */
static void call_drop(assay_server *s, call *c) {
    c->gone = 1;
    pthread_cond_signal(&s->wake);
    call_release(c);
}

#define CLIENT_CHECK_S 0.25 /* how often a waiting request's thread looks at its client */

/* Waits on the call's condition variable (srv->mu held) for news or at most until *next_check (monotonic seconds,
 * 0: now + CLIENT_CHECK_S); 1 when that time has come (*next_check moves on): the caller looks at its client. */
static int call_wait(assay_server *s, call *c, double *next_check) {
    if (*next_check == 0) *next_check = assay_now_seconds() + CLIENT_CHECK_S;
    double t = *next_check;
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    pthread_cond_timedwait(&c->cv, &s->mu, &ts);
    double now = assay_now_seconds();
    if (now < *next_check) return 0;
    *next_check = now + CLIENT_CHECK_S;
    return 1;
}

static int call_done(const call *c) {
    for (int i = 0; i < c->n; i++)
        if (c->reqs[i].state != 2) return 0;
    return 1;
}

/* ---- HTTP plumbing ----------------------------------------------------------------------------------------- */

/* Whether the client closed its end of the connection or it broke (the peer's FIN or RST, a socket error). A
 * request's thread asks while it waits for tokens, since nothing is written to the socket then. */
static int client_gone(struct MHD_Connection *con) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* libmicrohttpd closes a connection that has been silent for the timeout, counting from its last read or write;
 * the time a request's thread spends waiting for the engine must not count. Setting the timeout to 0 stops the
 * clock; setting it again from 0 restarts it from now (MHD_CONNECTION_OPTION_TIMEOUT's documented behaviour). */
static void timeout_pause(assay_server *s, struct MHD_Connection *con) {
    if (s->timeout > 0) MHD_set_connection_option(con, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
}

static void timeout_resume(assay_server *s, struct MHD_Connection *con) {
    if (s->timeout > 0) MHD_set_connection_option(con, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->timeout);
}

typedef struct conn {
    assay_strbuf body;
    int too_big;
    int responded;
} conn;

static enum MHD_Result send_text(struct MHD_Connection *con, unsigned status, const char *type, const char *data, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(con, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *con, unsigned status, const assay_strbuf *b) {
    return send_text(con, status, "application/json", b->data ? b->data : "", b->len);
}

static const char *error_type(unsigned status) {
    switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 413: return "RequestEntityTooLargeError";
    case 503: return "ServiceUnavailableError";
    default: return "InternalServerError";
    }
}

static void error_json(assay_strbuf *b, unsigned status, const char *msg, const char *param) {
    assay_strbuf_puts(b, "{\"error\": {\"message\": ");
    assay_strbuf_json_string(b, msg, strlen(msg));
    assay_strbuf_printf(b, ", \"type\": \"%s\", \"param\": ", error_type(status));
    if (param) assay_strbuf_json_string(b, param, strlen(param));
    else assay_strbuf_puts(b, "null");
    assay_strbuf_printf(b, ", \"code\": %u}}", status);
}

static enum MHD_Result send_error(struct MHD_Connection *con, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *con, unsigned status, const char *param, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    assay_strbuf b = {0};
    error_json(&b, status, msg, param);
    enum MHD_Result r = send_json(con, status, &b);
    assay_strbuf_free(&b);
    return r;
}

/* Token bytes as shown in logprobs ("tokens", the keys of top_logprobs). */
static void token_json(assay_server *s, assay_strbuf *b, int32_t id) {
    size_t len = 0;
    const char *p = assay_tokenizer_token_bytes(s->tok, id, &len);
    if (!p) p = "", len = 0;
    assay_strbuf_json_string(b, p, len);
}

static size_t token_len(assay_server *s, int32_t id) {
    size_t len = 0;
    assay_tokenizer_token_bytes(s->tok, id, &len);
    return len;
}

static void num_or_null(assay_strbuf *b, double v) {
    if (isfinite(v)) assay_strbuf_json_number(b, v);
    else if (isinf(v) && v < 0) assay_strbuf_puts(b, "-9999.0"); /* JSON has no -inf: vLLM writes -9999.0 */
    else assay_strbuf_puts(b, "null");
}

static void top_json(assay_server *s, assay_strbuf *b, const assay_top_logprob *t, int n) {
    assay_strbuf_putc(b, '{');
    for (int k = 0; k < n; k++) {
        if (k) assay_strbuf_puts(b, ", ");
        token_json(s, b, t[k].token);
        assay_strbuf_puts(b, ": ");
        num_or_null(b, t[k].logprob);
    }
    assay_strbuf_putc(b, '}');
}

/* The completions logprobs object for the prompt (when echoed) and generated tokens [g0, g1). */
static void completion_logprobs_json(assay_server *s, assay_strbuf *b, const sreq *r, int echo, int64_t g0, int64_t g1,
                                     size_t offset0) {
    int with_prompt = echo && r->plps;
    size_t off = offset0;
    assay_strbuf_puts(b, "{\"tokens\": [");
    int first = 1;
    if (with_prompt)
        for (int64_t i = 0; i < r->n_prompt; i++, first = 0) {
            if (!first) assay_strbuf_puts(b, ", ");
            token_json(s, b, r->prompt[i]);
        }
    for (int64_t i = g0; i < g1; i++, first = 0) {
        if (!first) assay_strbuf_puts(b, ", ");
        token_json(s, b, r->toks[i]);
    }
    assay_strbuf_puts(b, "], \"token_logprobs\": [");
    first = 1;
    if (with_prompt)
        for (int64_t i = 0; i < r->n_prompt; i++, first = 0) {
            if (!first) assay_strbuf_puts(b, ", ");
            if (i == 0 || isnan(r->plps[i])) assay_strbuf_puts(b, "null");
            else num_or_null(b, r->plps[i]);
        }
    for (int64_t i = g0; i < g1; i++, first = 0) {
        if (!first) assay_strbuf_puts(b, ", ");
        num_or_null(b, r->lps[i]);
    }
    assay_strbuf_puts(b, "], \"top_logprobs\": [");
    first = 1;
    if (with_prompt)
        for (int64_t i = 0; i < r->n_prompt; i++, first = 0) {
            if (!first) assay_strbuf_puts(b, ", ");
            if (i == 0 || isnan(r->plps[i])) {
                assay_strbuf_puts(b, "null");
                continue;
            }
            /* the chosen token first, then the top alternatives (vLLM's shape) */
            assay_strbuf_putc(b, '{');
            token_json(s, b, r->prompt[i]);
            assay_strbuf_puts(b, ": ");
            num_or_null(b, r->plps[i]);
            for (int k = 0; k < r->n_ptop; k++) {
                const assay_top_logprob *t = &r->ptops[i * r->n_ptop + k];
                if (t->token == r->prompt[i]) continue;
                assay_strbuf_puts(b, ", ");
                token_json(s, b, t->token);
                assay_strbuf_puts(b, ": ");
                num_or_null(b, t->logprob);
            }
            assay_strbuf_putc(b, '}');
        }
    for (int64_t i = g0; i < g1; i++, first = 0) {
        if (!first) assay_strbuf_puts(b, ", ");
        top_json(s, b, r->tops + i * r->n_top, r->n_top);
    }
    assay_strbuf_puts(b, "], \"text_offset\": [");
    first = 1;
    if (with_prompt)
        for (int64_t i = 0; i < r->n_prompt; i++, first = 0) {
            if (!first) assay_strbuf_puts(b, ", ");
            assay_strbuf_printf(b, "%zu", off);
            off += token_len(s, r->prompt[i]);
        }
    for (int64_t i = g0; i < g1; i++, first = 0) {
        if (!first) assay_strbuf_puts(b, ", ");
        assay_strbuf_printf(b, "%zu", off);
        off += token_len(s, r->toks[i]);
    }
    assay_strbuf_puts(b, "]}");
}

/* One chat logprob entry: {"token", "logprob", "bytes"} (+ "top_logprobs" when top is not NULL). */
static void chat_logprob_entry(assay_server *s, assay_strbuf *b, int32_t id, float lp, int with_top,
                               const assay_top_logprob *top, int n_top) {
    size_t len = 0;
    const char *p = assay_tokenizer_token_bytes(s->tok, id, &len);
    if (!p) p = "", len = 0;
    assay_strbuf_puts(b, "{\"token\": ");
    assay_strbuf_json_string(b, p, len);
    assay_strbuf_puts(b, ", \"logprob\": ");
    num_or_null(b, lp);
    assay_strbuf_puts(b, ", \"bytes\": [");
    for (size_t k = 0; k < len; k++) assay_strbuf_printf(b, "%s%u", k ? ", " : "", (unsigned char)p[k]);
    assay_strbuf_putc(b, ']');
    if (with_top) {
        assay_strbuf_puts(b, ", \"top_logprobs\": [");
        for (int k = 0; k < n_top; k++) {
            if (k) assay_strbuf_puts(b, ", ");
            chat_logprob_entry(s, b, top[k].token, top[k].logprob, 0, NULL, 0);
        }
        assay_strbuf_putc(b, ']');
    }
    assay_strbuf_putc(b, '}');
}

/* The chat logprobs object of generated tokens [t0, t1): {"content": [...]}, OpenAI's shape. */
static void chat_logprobs_json(assay_server *s, assay_strbuf *b, const sreq *r, int64_t t0, int64_t t1) {
    assay_strbuf_puts(b, "{\"content\": [");
    for (int64_t i = t0; i < t1; i++) {
        if (i > t0) assay_strbuf_puts(b, ", ");
        int nt = r->n_top > 0 ? r->n_top : 0;
        chat_logprob_entry(s, b, r->toks[i], r->lps[i], 1, nt ? r->tops + i * nt : NULL, nt);
    }
    assay_strbuf_puts(b, "]}");
}

/* ---- responses --------------------------------------------------------------------------------------------- */

static void make_id(assay_server *s, const char *prefix, char *out, size_t n) {
    pthread_mutex_lock(&s->mu);
    uint64_t k = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    snprintf(out, n, "%s-%llx%08llx", prefix, (unsigned long long)time(NULL), (unsigned long long)k);
}

static void usage_json(assay_strbuf *b, const call *c) {
    int64_t p = 0, g = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->reqs[i].sample == 0) p += c->reqs[i].n_prompt; /* a prompt counts once, whatever n */
        g += c->reqs[i].sp.prompt_only ? 0 : c->reqs[i].n_toks;
    }
    assay_strbuf_printf(b, "{\"prompt_tokens\": %lld, \"completion_tokens\": %lld, \"total_tokens\": %lld}", (long long)p,
                        (long long)g, (long long)(p + g));
}

static void finish_json(assay_strbuf *b, assay_finish_reason f) {
    const char *n = assay_finish_reason_name(f);
    if (n) assay_strbuf_printf(b, "\"%s\"", n);
    else assay_strbuf_puts(b, "null");
}

/* The whole (non-streaming) response, under srv->mu. */
static void full_response(assay_server *s, const gen_request *g, const char *id, assay_strbuf *b) {
    const call *c = g->c;
    assay_strbuf_printf(b, "{\"id\": \"%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ", id,
                        g->chat ? "chat.completion" : "text_completion", (long long)time(NULL));
    assay_strbuf_json_string(b, s->name, strlen(s->name));
    assay_strbuf_puts(b, ", \"choices\": [");
    for (int i = 0; i < c->n; i++) {
        const sreq *r = &c->reqs[i];
        if (i) assay_strbuf_puts(b, ", ");
        assay_strbuf_printf(b, "{\"index\": %d, ", i);
        if (g->chat) {
            assay_strbuf_puts(b, "\"message\": {\"role\": \"assistant\", \"content\": ");
            assay_strbuf_json_string(b, r->text ? r->text : "", r->text_len);
            assay_strbuf_puts(b, "}, \"logprobs\": ");
            if (g->logprobs >= 0) chat_logprobs_json((assay_server *)s, b, r, 0, r->n_toks);
            else assay_strbuf_puts(b, "null");
        } else {
            assay_strbuf_puts(b, "\"text\": ");
            assay_strbuf t = {0};
            if (g->echo) assay_strbuf_append(&t, r->prompt_text, r->prompt_text_len);
            if (r->text && !r->sp.prompt_only) assay_strbuf_append(&t, r->text, r->text_len);
            assay_strbuf_json_string(b, t.data ? t.data : "", t.len);
            assay_strbuf_free(&t);
            assay_strbuf_puts(b, ", \"logprobs\": ");
            if (g->logprobs >= 0) completion_logprobs_json((assay_server *)s, b, r, g->echo, 0, r->sp.prompt_only ? 0 : r->n_toks, 0);
            else assay_strbuf_puts(b, "null");
        }
        assay_strbuf_puts(b, ", \"finish_reason\": ");
        finish_json(b, r->finish);
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "], \"usage\": ");
    usage_json(b, c);
    assay_strbuf_puts(b, "}");
}

/* Hands each normally finished generation of a call to the on_done hook (under srv->mu). */
static void offer_done(assay_server *s, const call *c) {
    if (!s->hooks.on_done) return;
    for (int i = 0; i < c->n; i++) {
        const sreq *r = &c->reqs[i];
        if (r->err || r->sp.prompt_only || r->n_toks == 0 || (r->finish != ASSAY_FINISH_STOP && r->finish != ASSAY_FINISH_LENGTH))
            continue;
        s->hooks.on_done(s->hooks.hook_ctx, r->prompt_text ? r->prompt_text : "", r->prompt_text_len, r->text ? r->text : "", r->text_len);
    }
}

/* ---- streaming --------------------------------------------------------------------------------------------- */

typedef struct stream {
    assay_server *s;
    struct MHD_Connection *con;
    gen_request g;
    char id[64];
    time_t created;
    size_t *sent_text;  /* per prompt: bytes of text sent */
    int64_t *sent_toks; /* per prompt: tokens whose logprobs were sent */
    int *ended;         /* per prompt: the finish chunk was sent */
    int *echo_sent;     /* per prompt: the echoed prompt was sent */
    int *role_sent;     /* chat, per choice: the opening {"role": "assistant"} chunk was sent */
    int usage_sent, done_sent;
    assay_strbuf buf;
    size_t off;
} stream;

/* How much of the text may go out now: not a possible start of a stop string, not a split UTF-8 character. */
static size_t sendable(const sreq *r) {
    size_t n = r->text_len;
    if (r->state == 2) return n;
    size_t hold = 0;
    for (int i = 0; i < r->sp.n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        if (sl > hold + 1) hold = sl - 1;
    }
    n = n > hold ? n - hold : 0;
    /* back off an incomplete UTF-8 sequence at the end */
    size_t k = n, back = 0;
    while (k > 0 && back < 4 && ((unsigned char)r->text[k - 1] & 0xC0) == 0x80) k--, back++;
    if (k > 0) {
        unsigned char lead = (unsigned char)r->text[k - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (need > back + 1) n = k - 1;
    }
    return n;
}

static void chunk_head(stream *st, assay_strbuf *b) {
    assay_strbuf_printf(b, "data: {\"id\": \"%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ", st->id,
                        st->g.chat ? "chat.completion.chunk" : "text_completion", (long long)st->created);
    assay_strbuf_json_string(b, st->s->name, strlen(st->s->name));
    assay_strbuf_puts(b, ", \"choices\": [");
}

/* Appends the chunks that the requests' progress allows (under srv->mu); 1 when anything was added. */
static int stream_fill(stream *st) {
    assay_server *s = st->s;
    call *c = st->g.c;
    assay_strbuf *b = &st->buf;
    size_t before = b->len;
    /* chat: a choice's opening role chunk goes out with its first output, as vLLM sends it (a client timing the
     * first chunk measures the time to the first token) */
    for (int i = 0; st->g.chat && i < c->n; i++) {
        sreq *r = &c->reqs[i];
        if (st->role_sent[i] || r->err || (r->n_toks == 0 && r->text_len == 0 && r->state != 2)) continue;
        chunk_head(st, b);
        assay_strbuf_printf(b, "{\"index\": %d, \"delta\": {\"role\": \"assistant\", \"content\": \"\"}, "
                               "\"logprobs\": null, \"finish_reason\": null}]}\n\n", i);
        st->role_sent[i] = 1;
    }
    for (int i = 0; i < c->n; i++) {
        sreq *r = &c->reqs[i];
        if (st->ended[i]) continue;
        if (r->err) {
            assay_strbuf_puts(b, "data: ");
            error_json(b, 400, r->err, NULL);
            assay_strbuf_puts(b, "\n\n");
            st->ended[i] = 1;
            continue;
        }
        int done = r->state == 2;
        int need_echo = !st->g.chat && st->g.echo && !st->echo_sent[i];
        if (need_echo && st->g.logprobs >= 0 && !r->plps && !done) continue; /* wait for the prompt logprobs */
        size_t upto = r->sp.prompt_only ? 0 : sendable(r);
        if (upto < st->sent_text[i]) upto = st->sent_text[i];
        int64_t t1 = r->sp.prompt_only ? 0 : r->n_toks;
        if (!need_echo && !done && upto == st->sent_text[i] && (st->g.logprobs < 0 || t1 == st->sent_toks[i])) continue;
        chunk_head(st, b);
        assay_strbuf_printf(b, "{\"index\": %d, ", i);
        assay_strbuf t = {0};
        if (need_echo) assay_strbuf_append(&t, r->prompt_text, r->prompt_text_len);
        if (upto > st->sent_text[i]) assay_strbuf_append(&t, r->text + st->sent_text[i], upto - st->sent_text[i]);
        if (st->g.chat) {
            assay_strbuf_puts(b, "\"delta\": {");
            if (t.len) {
                assay_strbuf_puts(b, "\"content\": ");
                assay_strbuf_json_string(b, t.data, t.len);
            }
            assay_strbuf_puts(b, "}, \"logprobs\": ");
            if (st->g.logprobs >= 0 && t1 > st->sent_toks[i]) chat_logprobs_json(s, b, r, st->sent_toks[i], t1);
            else assay_strbuf_puts(b, "null");
        } else {
            assay_strbuf_puts(b, "\"text\": ");
            assay_strbuf_json_string(b, t.data ? t.data : "", t.len);
            assay_strbuf_puts(b, ", \"logprobs\": ");
            if (st->g.logprobs >= 0) completion_logprobs_json(s, b, r, need_echo, st->sent_toks[i], t1, 0);
            else assay_strbuf_puts(b, "null");
        }
        assay_strbuf_free(&t);
        st->echo_sent[i] = 1;
        st->sent_toks[i] = t1;
        st->sent_text[i] = upto;
        assay_strbuf_puts(b, ", \"finish_reason\": ");
        if (done) {
            finish_json(b, r->finish);
            st->ended[i] = 1;
        } else
            assay_strbuf_puts(b, "null");
        assay_strbuf_puts(b, "}]}\n\n");
    }
    return b->len > before;
}

static int all_ended(const stream *st) {
    for (int i = 0; i < st->g.c->n; i++)
        if (!st->ended[i]) return 0;
    return 1;
}

/* libmicrohttpd's content reader: blocks (one thread per connection) until the engine has more to say. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    stream *st = cls;
    assay_server *s = st->s;
    if (st->off == st->buf.len) {
        assay_strbuf_clear(&st->buf);
        st->off = 0;
        if (st->done_sent) return MHD_CONTENT_READER_END_OF_STREAM;
        timeout_pause(s, st->con);
        pthread_mutex_lock(&s->mu);
        int gone = 0;
        double next_check = 0;
        while (!gone && !stream_fill(st) && !all_ended(st))
            if (call_wait(s, st->g.c, &next_check)) gone = client_gone(st->con);
        if (gone) { /* the client left while its request waited or ran: END_WITH_ERROR closes, stream_free aborts */
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (all_ended(st)) {
            offer_done(s, st->g.c);
            if (st->g.include_usage && !st->usage_sent) {
                chunk_head(st, &st->buf);
                assay_strbuf_puts(&st->buf, "], \"usage\": ");
                usage_json(&st->buf, st->g.c);
                assay_strbuf_puts(&st->buf, "}\n\n");
                st->usage_sent = 1;
            }
            assay_strbuf_puts(&st->buf, "data: [DONE]\n\n");
            st->done_sent = 1;
        }
        pthread_mutex_unlock(&s->mu);
        timeout_resume(s, st->con);
    }
    size_t n = st->buf.len - st->off;
    if (n > max) n = max;
    memcpy(out, st->buf.data + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* The response is gone (finished, or the client disconnected): abort what still runs. */
static void stream_free(void *cls) {
    stream *st = cls;
    pthread_mutex_lock(&st->s->mu);
    call_drop(st->s, st->g.c);
    pthread_mutex_unlock(&st->s->mu);
    assay_strbuf_free(&st->buf);
    free(st->sent_text);
    free(st->sent_toks);
    free(st->ended);
    free(st->echo_sent);
    free(st->role_sent);
    free(st);
}

/* ---- endpoints --------------------------------------------------------------------------------------------- */

static enum MHD_Result handle_generate(assay_server *s, struct MHD_Connection *con, const char *body, size_t len, int chat) {
    double t_arrival = assay_now_seconds();
    gen_request g;
    req_error er = {0};
    if (!serve_parse_body(&s->pm, body, len, chat, &g, &er)) {
        if (g.c) serve_call_free(g.c);
        return send_error(con, er.status, er.param, "%s", er.msg);
    }
    call *c = g.c;
    c->t_arrival = t_arrival;
    int64_t waiting = 0;
    int queued = submit(s, c, &waiting);
    if (queued <= 0) {
        serve_call_free(c);
        if (queued == 0) return send_error(con, 503, NULL, "the server is shutting down");
        return send_error(con, 503, NULL, "the server is busy: %lld requests are waiting, the queue holds %d (--max-queued-requests); "
                          "retry later", (long long)waiting, s->max_queued);
    }
    char id[64];
    make_id(s, chat ? "chatcmpl" : "cmpl", id, sizeof id);
    if (g.stream) {
        stream *st = calloc(1, sizeof *st);
        st->s = s;
        st->con = con;
        st->g = g;
        st->created = time(NULL);
        snprintf(st->id, sizeof st->id, "%s", id);
        st->sent_text = calloc((size_t)c->n, sizeof *st->sent_text);
        st->sent_toks = calloc((size_t)c->n, sizeof *st->sent_toks);
        st->ended = calloc((size_t)c->n, sizeof *st->ended);
        st->echo_sent = calloc((size_t)c->n, sizeof *st->echo_sent);
        st->role_sent = calloc((size_t)c->n, sizeof *st->role_sent);
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
        if (!resp) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ret = MHD_queue_response(con, 200, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    timeout_pause(s, con);
    pthread_mutex_lock(&s->mu);
    double next_check = 0;
    while (!call_done(c))
        if (call_wait(s, c, &next_check) && client_gone(con)) { /* the client left: abort, close without an answer */
            call_drop(s, c);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
    assay_strbuf b = {0};
    const char *err = NULL;
    int aborted = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->reqs[i].err && !err) err = c->reqs[i].err;
        if (c->reqs[i].finish == ASSAY_FINISH_ABORT) aborted = 1;
    }
    unsigned status = 200;
    if (err) error_json(&b, status = 400, err, NULL);
    else if (aborted && s->stopping) error_json(&b, status = 503, "the server is shutting down", NULL);
    else {
        full_response(s, &g, id, &b);
        offer_done(s, c);
    }
    call_drop(s, c);
    pthread_mutex_unlock(&s->mu);
    timeout_resume(s, con);
    enum MHD_Result ret = send_json(con, status, &b);
    assay_strbuf_free(&b);
    return ret;
}

static enum MHD_Result handle_tokenize(assay_server *s, struct MHD_Connection *con, const char *body, size_t len) {
    assay_json_doc *doc = NULL;
    req_error ue = {0};
    if (!serve_check_utf8(body, len, &ue)) return send_error(con, 400, NULL, "%s", ue.msg);
    if (assay_json_parse(body, len, &doc) != ASSAY_OK)
        return send_error(con, 400, NULL, "invalid JSON body: %s", assay_last_error());
    const assay_json *root = assay_json_root(doc);
    req_error er = {0};
    int add_special = 1;
    const assay_json *p = assay_json_get(root, "prompt");
    enum MHD_Result ret;
    if (!serve_check_model(&s->pm, root, &er) || !serve_get_bool(root, "add_special_tokens", &add_special, &er) ||
        (!assay_json_is(p, ASSAY_JSON_STRING) && serve_set_err(&er, 400, "prompt", "prompt must be a string") == 0)) {
        ret = send_error(con, er.status, er.param, "%s", er.msg);
    } else {
        assay_tokens ids = {0};
        serve_tokenize(&s->pm, p->str, p->str_len, add_special ? ASSAY_TOK_ADD_SPECIAL : 0, &ids);
        assay_strbuf b = {0};
        assay_strbuf_printf(&b, "{\"count\": %lld, \"max_model_len\": %lld, \"tokens\": [", (long long)ids.n,
                            (long long)s->max_model_len);
        for (int64_t i = 0; i < ids.n; i++) assay_strbuf_printf(&b, "%s%d", i ? ", " : "", ids.ids[i]);
        assay_strbuf_puts(&b, "]}");
        ret = send_json(con, 200, &b);
        assay_strbuf_free(&b);
        assay_tokens_free(&ids);
    }
    assay_json_doc_free(doc);
    return ret;
}

static enum MHD_Result handle_detokenize(assay_server *s, struct MHD_Connection *con, const char *body, size_t len) {
    assay_json_doc *doc = NULL;
    req_error ue = {0};
    if (!serve_check_utf8(body, len, &ue)) return send_error(con, 400, NULL, "%s", ue.msg);
    if (assay_json_parse(body, len, &doc) != ASSAY_OK)
        return send_error(con, 400, NULL, "invalid JSON body: %s", assay_last_error());
    const assay_json *root = assay_json_root(doc);
    req_error er = {0};
    const assay_json *t = assay_json_get(root, "tokens");
    enum MHD_Result ret;
    int ok = serve_check_model(&s->pm, root, &er);
    if (ok && !assay_json_is(t, ASSAY_JSON_ARRAY)) ok = serve_set_err(&er, 400, "tokens", "tokens must be a list of token ids");
    int32_t *ids = NULL;
    int64_t n = 0;
    if (ok) {
        ids = malloc((size_t)(t->count ? t->count : 1) * sizeof *ids);
        for (const assay_json *x = t->first; x && ok; x = x->next) {
            if (x->type != ASSAY_JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer >= s->n_vocab)
                ok = serve_set_err(&er, 400, "tokens", "tokens must be integers in [0, %lld)", (long long)s->n_vocab);
            else ids[n++] = (int32_t)x->integer;
        }
    }
    if (!ok) ret = send_error(con, er.status, er.param, "%s", er.msg);
    else {
        assay_strbuf text = {0}, b = {0};
        pthread_mutex_lock(&s->tok_mu);
        assay_tokenizer_decode(s->tok, ids, n, 0, &text);
        pthread_mutex_unlock(&s->tok_mu);
        assay_strbuf_puts(&b, "{\"prompt\": ");
        assay_strbuf_json_string(&b, text.data ? text.data : "", text.len);
        assay_strbuf_puts(&b, "}");
        ret = send_json(con, 200, &b);
        assay_strbuf_free(&b);
        assay_strbuf_free(&text);
    }
    free(ids);
    assay_json_doc_free(doc);
    return ret;
}

static enum MHD_Result handle_models(assay_server *s, struct MHD_Connection *con) {
    assay_strbuf b = {0};
    assay_strbuf_puts(&b, "{\"object\": \"list\", \"data\": [{\"id\": ");
    assay_strbuf_json_string(&b, s->name, strlen(s->name));
    assay_strbuf_printf(&b, ", \"object\": \"model\", \"created\": %lld, \"owned_by\": \"assay\", \"root\": ",
                        (long long)s->created);
    assay_strbuf_json_string(&b, s->root, strlen(s->root));
    assay_strbuf_printf(&b, ", \"parent\": null, \"max_model_len\": %lld}]}", (long long)s->max_model_len);
    enum MHD_Result r = send_json(con, 200, &b);
    assay_strbuf_free(&b);
    return r;
}

/* A label value in the Prometheus text format: backslash, quote and newline escaped. */
static void prom_label(assay_strbuf *b, const char *v) {
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') assay_strbuf_putc(b, '\\'), assay_strbuf_putc(b, *v);
        else if (*v == '\n') assay_strbuf_puts(b, "\\n");
        else assay_strbuf_putc(b, *v);
    }
}

/* A bucket bound as Prometheus' Python client writes it (Go's float format: "0.001", "1.0", "2560.0", "+Inf"). */
static void prom_float(assay_strbuf *b, double v) {
    if (isinf(v)) {
        assay_strbuf_puts(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    size_t start = b->len;
    assay_strbuf_json_number(b, v);
    if (!strpbrk(b->data + start, ".eE")) assay_strbuf_puts(b, ".0");
}

/* A histogram in the text format: cumulative _bucket series ending with le="+Inf" (= _count), _sum, _count. */
static void histo_text(assay_strbuf *b, const histo *h, const char *labels) {
    assay_strbuf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    int64_t cum = 0;
    for (int i = 0; i <= h->n_le; i++) {
        cum += h->n[i];
        assay_strbuf_printf(b, "%s_bucket{%s,le=\"", h->name, labels);
        prom_float(b, i < h->n_le ? h->le[i] : INFINITY);
        assay_strbuf_printf(b, "\"} %lld\n", (long long)cum);
    }
    assay_strbuf_printf(b, "%s_sum{%s} ", h->name, labels);
    assay_strbuf_json_number(b, h->sum);
    assay_strbuf_printf(b, "\n%s_count{%s} %lld\n", h->name, labels, (long long)h->count);
}

static enum MHD_Result handle_metrics(assay_server *s, struct MHD_Connection *con) {
    pthread_mutex_lock(&s->mu);
    assay_engine_counters c = s->counters;
    int64_t fin[4];
    memcpy(fin, s->finished, sizeof fin);
    histo h[H_COUNT];
    memcpy(h, s->h, sizeof h);
    pthread_mutex_unlock(&s->mu);
    assay_strbuf lab = {0}, b = {0};
    assay_strbuf_puts(&lab, "model_name=\"");
    prom_label(&lab, s->name);
    assay_strbuf_puts(&lab, "\"");
    struct {
        const char *name, *type, *help;
        double v;
    } m[] = {
        {"vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", (double)c.n_running},
        {"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", (double)c.n_waiting},
        {"vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", c.kv_usage},
        {"vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", (double)c.prompt_tokens},
        {"vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", (double)c.generation_tokens},
        {"vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.", (double)c.preemptions},
        {"vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in tokens.", (double)c.prefix_cache_queries},
        {"vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in tokens.", (double)c.prefix_cache_hits},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        assay_strbuf_printf(&b, "# HELP %s %s\n# TYPE %s %s\n%s{%s} ", m[i].name, m[i].help, m[i].name, m[i].type,
                            m[i].name, lab.data);
        assay_strbuf_json_number(&b, m[i].v);
        assay_strbuf_putc(&b, '\n');
    }
    assay_strbuf_puts(&b, "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                          "# TYPE vllm:request_success_total counter\n");
    const assay_finish_reason fr[] = {ASSAY_FINISH_STOP, ASSAY_FINISH_LENGTH, ASSAY_FINISH_ABORT};
    for (int i = 0; i < 3; i++)
        assay_strbuf_printf(&b, "vllm:request_success_total{%s,finished_reason=\"%s\"} %lld\n", lab.data,
                            assay_finish_reason_name(fr[i]), (long long)fin[fr[i]]);
    for (int i = 0; i < H_COUNT; i++) histo_text(&b, &h[i], lab.data);
    /* the configuration as info-style gauges (always 1): a dashboard sees when FP8 weights or KV were switched on */
    assay_strbuf_printf(&b, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                            "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{%s} 1\n", s->cache_labels);
    assay_strbuf_printf(&b, "# HELP assay:engine_config_info The engine's configuration: weight quantization, KV-cache "
                            "dtype, device.\n# TYPE assay:engine_config_info gauge\nassay:engine_config_info{%s,%s} 1\n",
                        lab.data, s->config_labels);
    if (s->hooks.metrics_extra) s->hooks.metrics_extra(s->hooks.hook_ctx, &b, lab.data);
    enum MHD_Result r = send_text(con, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    assay_strbuf_free(&b);
    assay_strbuf_free(&lab);
    return r;
}

static int authorized(assay_server *s, struct MHD_Connection *con, const char *url) {
    if (!s->api_key || strncmp(url, "/v1/", 4) != 0) return 1;
    const char *h = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
    const char *k = h + 7;
    size_t a = strlen(k), b = strlen(s->api_key);
    unsigned diff = a != b; /* compare every byte: the time does not say where a guess went wrong */
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned char)(k[i] ^ s->api_key[i]);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    assay_server *s = cls;
    conn *cc = *con_cls;
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        *con_cls = cc;
        const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->max_body) { /* refuse before reading the body */
            cc->responded = 1;
            return send_error(con, 413, NULL, "the request body (%s bytes) is over the limit of %zu bytes", cl, s->max_body);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cc->too_big && cc->body.len + *upload_size > s->max_body) { /* the rest is read and dropped */
            cc->too_big = 1;
            assay_strbuf_free(&cc->body);
        }
        if (!cc->too_big) assay_strbuf_append(&cc->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->responded) return MHD_YES;
    cc->responded = 1;
    if (cc->too_big) return send_error(con, 413, NULL, "the request body is over the limit of %zu bytes", s->max_body);
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0, post = strcmp(method, "POST") == 0;
    if (!authorized(s, con, url)) return send_error(con, 401, NULL, "Incorrect API key provided.");
    const char *body = cc->body.data ? cc->body.data : "";
    size_t len = cc->body.len;
    if (post && strcmp(url, "/v1/completions") == 0) return handle_generate(s, con, body, len, 0);
    if (post && strcmp(url, "/v1/chat/completions") == 0) return handle_generate(s, con, body, len, 1);
    if (post && strcmp(url, "/tokenize") == 0) return handle_tokenize(s, con, body, len);
    if (post && strcmp(url, "/detokenize") == 0) return handle_detokenize(s, con, body, len);
    if (get && strcmp(url, "/v1/models") == 0) return handle_models(s, con);
    if (get && strcmp(url, "/metrics") == 0) return handle_metrics(s, con);
    if (get && strcmp(url, "/health") == 0) return send_text(con, 200, "text/plain", "", 0);
    if (get && strcmp(url, "/version") == 0) {
        const char v[] = "{\"version\": \"" ASSAY_VERSION "\"}";
        return send_text(con, 200, "application/json", v, sizeof v - 1);
    }
    /* a known path asked with another method: 405 with the methods it takes */
    static const struct {
        const char *path, *allow;
    } known[] = {{"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/tokenize", "POST"},
                 {"/detokenize", "POST"},     {"/v1/models", "GET"},           {"/metrics", "GET"},
                 {"/health", "GET"},          {"/version", "GET"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(url, known[i].path) != 0) continue;
        assay_strbuf b = {0};
        char msg[256];
        snprintf(msg, sizeof msg, "Method %s not allowed on %s (allowed: %s)", method, url, known[i].allow);
        error_json(&b, 405, msg, NULL);
        struct MHD_Response *resp = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_COPY);
        assay_strbuf_free(&b);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, known[i].allow);
        enum MHD_Result ret = MHD_queue_response(con, 405, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    return send_error(con, 404, NULL, "%s %s: no such endpoint", method, url);
}

static void on_completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode toe) {
    conn *cc = *con_cls;
    if (!cc) return;
    assay_strbuf_free(&cc->body);
    free(cc);
    *con_cls = NULL;
}

/* ---- start / stop ------------------------------------------------------------------------------------------ */

void assay_server_options_default(assay_server_options *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_body_bytes = (size_t)16 << 20;
    o->max_queued_requests = 1024;
    o->timeout = 600;
}


static void server_free(assay_server *s) {
    assay_chat_template_free(s->ct);
    free(s->ct_err);
    free(s->name);
    free(s->root);
    free(s->api_key);
    free(s->active);
    free(s->config_labels);
    free(s->cache_labels);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->tok_mu);
    pthread_cond_destroy(&s->wake);
    free(s);
}

/* The chat template (the options', else the model's), once; where there is none (or it is not supported) chat
 * requests get the reason. An option's template that cannot be used fails the start. */
static assay_status load_chat_template(assay_server *s, const char *given) {
    const assay_model_file *mf = assay_model_get_file(assay_engine_model(s->e));
    const char *tmpl = given ? given : mf ? assay_model_file_chat_template(mf) : NULL;
    if (!tmpl) {
        s->ct_err = strdup("this model has no chat template: use /v1/completions, or start the server with --chat-template");
        return ASSAY_OK;
    }
    char bos[256] = "", eos[256] = "";
    size_t len;
    const char *p;
    if (assay_tokenizer_bos(s->tok) >= 0 && (p = assay_tokenizer_piece(s->tok, assay_tokenizer_bos(s->tok), &len)) && len < sizeof bos)
        memcpy(bos, p, len), bos[len] = 0;
    if (assay_tokenizer_eos(s->tok) >= 0 && (p = assay_tokenizer_piece(s->tok, assay_tokenizer_eos(s->tok), &len)) && len < sizeof eos)
        memcpy(eos, p, len), eos[len] = 0;
    if (given) {
        assay_status st = strchr(given, '{') ? assay_chat_template_parse(&s->ct, tmpl, bos[0] ? bos : NULL, eos[0] ? eos : NULL)
                                             : assay_chat_template_builtin(&s->ct, given, bos[0] ? bos : NULL, eos[0] ? eos : NULL);
        return st ? assay_fail_context(st, "--chat-template") : ASSAY_OK;
    }
    if (assay_chat_template_parse(&s->ct, tmpl, bos[0] ? bos : NULL, eos[0] ? eos : NULL) != ASSAY_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "the model's chat template cannot be used: %s", assay_last_error());
        s->ct_err = strdup(msg);
        s->ct = NULL;
    }
    return ASSAY_OK;
}

/* vLLM's buckets (vllm/v1/metrics): TTFT, inter-token latency, request latencies, token counts by 1-2-5 up to the
 * context; and the configuration labels of the info gauges. */
static void metrics_init(assay_server *s) {
    static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                  1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
    static const double itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                 0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
    static const double req[] = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
    double tok[HISTO_MAX_BOUNDS];
    int n_tok = buckets_1_2_5((double)s->max_model_len, tok);
#define N(a) (int)(sizeof a / sizeof a[0])
    histo_init(&s->h[H_TTFT], "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft, N(ttft));
    histo_init(&s->h[H_ITL], "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl, N(itl));
    histo_init(&s->h[H_E2E], "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", req, N(req));
    histo_init(&s->h[H_QUEUE], "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
               req, N(req));
#undef N
    histo_init(&s->h[H_PROMPT_TOKENS], "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok, n_tok);
    histo_init(&s->h[H_GEN_TOKENS], "vllm:request_generation_tokens", "Number of generation tokens processed.", tok, n_tok);

    const assay_engine_args *a = assay_engine_get_args(s->e);
    const assay_model_file *mf = assay_model_get_file(assay_engine_model(s->e));
    const char *quant = a->quantization;
    if (!quant && mf) {
        const assay_json *qc = assay_model_file_quantization_config(mf);
        quant = assay_json_string(assay_json_get(qc, "quant_method"), NULL);
        if (!quant && assay_model_file_format(mf) == ASSAY_MODEL_FORMAT_GGUF) quant = "gguf";
    }
    assay_engine_counters c;
    assay_engine_counters_get(s->e, &c);
    const char *kv = assay_kv_dtype_name(a->kv_cache_dtype);
    assay_strbuf b = {0};
    assay_strbuf_puts(&b, "quantization=\"");
    prom_label(&b, quant ? quant : "None");
    assay_strbuf_printf(&b, "\",kv_cache_dtype=\"%s\",calculate_kv_scales=\"%s\",device=\"", kv,
                        a->calculate_kv_scales > 0 ? "True" : "False");
    prom_label(&b, a->device ? a->device : "cpu");
    assay_strbuf_puts(&b, "\"");
    s->config_labels = b.data;
    b = (assay_strbuf){0};
    assay_strbuf_printf(&b, "block_size=\"%d\",cache_dtype=\"%s\",calculate_kv_scales=\"%s\","
                            "enable_prefix_caching=\"%s\",engine=\"0\",gpu_memory_utilization=\"",
                        ASSAY_KV_BLOCK, kv, a->calculate_kv_scales > 0 ? "True" : "False",
                        a->enable_prefix_caching ? "True" : "False");
    prom_float(&b, a->gpu_memory_utilization);
    assay_strbuf_printf(&b, "\",num_gpu_blocks=\"%lld\"", (long long)c.kv_blocks);
    s->cache_labels = b.data;
}

assay_status assay_server_start(assay_server **out, assay_engine *e, const assay_server_options *o) {
    *out = NULL;
    if (!o->served_model_name) return assay_fail(ASSAY_ERR_ARG, "server: served_model_name is required");
    if (!assay_engine_tokenizer(e)) return assay_fail(ASSAY_ERR_ARG, "server: the engine has no tokenizer");
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    const char *host = o->host ? o->host : "127.0.0.1";
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)o->port);
        addr = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        addr = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else
        return assay_fail(ASSAY_ERR_ARG, "server: --host %s is not an IPv4 or IPv6 address", host);
    if (o->port < 0 || o->port > 65535) return assay_fail(ASSAY_ERR_ARG, "server: --port %d is out of range", o->port);
    if (o->max_queued_requests < 0)
        return assay_fail(ASSAY_ERR_ARG, "server: --max-queued-requests must be >= 0, got %d", o->max_queued_requests);
    if (o->timeout < 0) return assay_fail(ASSAY_ERR_ARG, "server: --timeout must be >= 0, got %d", o->timeout);

    assay_server *s = calloc(1, sizeof *s);
    s->e = e;
    s->tok = assay_engine_tokenizer(e);
    s->name = strdup(o->served_model_name);
    s->root = strdup(o->model_path ? o->model_path : o->served_model_name);
    s->api_key = o->api_key && o->api_key[0] ? strdup(o->api_key) : NULL;
    s->max_body = o->max_body_bytes ? o->max_body_bytes : (size_t)16 << 20;
    s->max_queued = o->max_queued_requests;
    s->timeout = o->timeout;
    s->max_running = assay_engine_get_args(e)->max_num_seqs;
    s->max_model_len = assay_engine_max_model_len(e);
    s->n_vocab = assay_tokenizer_n_vocab(s->tok);
    s->created = time(NULL);
    s->hooks.on_done = o->on_done;
    s->hooks.metrics_extra = o->metrics_extra;
    s->hooks.hook_ctx = o->hook_ctx;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->tok_mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (load_chat_template(s, o->chat_template) != ASSAY_OK) {
        server_free(s);
        return ASSAY_ERR_ARG;
    }
    s->pm = (serve_model){s->tok, &s->tok_mu, s->ct, s->ct_err, s->name, s->max_model_len, s->n_vocab};
    assay_engine_counters_get(e, &s->counters);
    metrics_init(s);
    if (pthread_create(&s->engine_thread, NULL, engine_main, s) != 0) {
        server_free(s);
        return assay_fail(ASSAY_ERR_IO, "server: cannot start the engine thread");
    }
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout,
                            MHD_OPTION_END);
    if (!s->d) {
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->engine_thread, NULL);
        server_free(s);
        return assay_fail(ASSAY_ERR_IO, "server: cannot listen on %s:%d (in use, or not this machine's address)", host, o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    *out = s;
    return ASSAY_OK;
}

int assay_server_port(const assay_server *s) { return s->port; }

void assay_server_stop(assay_server *s) {
    if (!s) return;
    MHD_socket ls = MHD_quiesce_daemon(s->d); /* no new connections */
    pthread_mutex_lock(&s->mu);
    s->stopping = 1; /* the engine thread aborts everything in flight, then ends */
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->engine_thread, NULL);
    MHD_stop_daemon(s->d); /* waits for the connection threads: every waiter was woken by its abort */
    if (ls != MHD_INVALID_SOCKET) close(ls);
    server_free(s);
}
