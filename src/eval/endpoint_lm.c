/* endpoint_lm.c — an OpenAI-compatible completions server behind the assay_lm table (see include/assay/eval.h), so
 * the eval tasks run unchanged against assay serve, vLLM or any server of that API.
 *
 * With the server's /tokenize (vLLM's shape: {"prompt", "add_special_tokens"} -> {"tokens", "max_model_len"}) the
 * model is token-level like the in-process engine: lm.c tokenizes the context and context + continuation there, splits
 * them as lm-evaluation-harness does and sends token ids; score() is one completions request with echo, logprobs 1 and
 * max_tokens 0, whose prompt log-probabilities are summed by lm.c in the same order as in-process. A prompt token is
 * the greedy choice when no other token among its top alternatives is at least as likely.
 *
 * Without /tokenize the prompts are text: loglikelihood() sends context + continuation and counts the context's
 * tokens with a second prompt-only request on the context alone (cached: a document's choices share it), so the
 * server's own tokenizer draws the boundary. Generation is the server's in both cases (its stop sequences, its
 * detokenizer); with token ids the prompt is left-truncated to max_length - max_gen_toks first, as in-process.
 *
 * Every function is thread-safe (the HTTP client pools its handles), so the eval loop may run num_concurrent
 * documents at once. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"
#include "assay/http.h"
#include "assay/json.h"

enum { CTX_CACHE = 64 };

typedef struct endpoint_lm {
    assay_lm lm;
    assay_http_client *http;
    char *model;   /* sent as "model"; NULL: not sent */
    char *url;     /* as given, for model_args */
    char name[256];
    int tokenized; /* token-id requests (the server has /tokenize) */
    pthread_mutex_t mu;
    struct {
        char *text;
        int64_t n;
    } ctx_cache[CTX_CACHE]; /* text mode: token counts of recent contexts */
    int ctx_next;
} endpoint_lm;

void assay_endpoint_options_default(assay_endpoint_options *o) {
    memset(o, 0, sizeof *o);
    o->num_concurrent = 1;
    o->tokenized = -1;
    o->prefix_token = -1;
    o->timeout_s = 300;
    o->max_retries = 3;
    o->backoff_s = 0.5;
}

static int is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static void body_begin(const endpoint_lm *e, assay_strbuf *b) {
    assay_strbuf_putc(b, '{');
    if (e->model) {
        assay_strbuf_puts(b, "\"model\": ");
        assay_strbuf_json_string(b, e->model, strlen(e->model));
        assay_strbuf_puts(b, ", ");
    }
}

static void ids_json(assay_strbuf *b, const int32_t *ids, int64_t n) {
    assay_strbuf_putc(b, '[');
    for (int64_t i = 0; i < n; i++) assay_strbuf_printf(b, "%s%d", i ? "," : "", ids[i]);
    assay_strbuf_putc(b, ']');
}

/* The server's own words for an error answer: {"error": {"message": ...}} (OpenAI), {"message"}, {"detail"}, or
 * the start of the body. */
static void error_text(const assay_http_response *r, char *out, size_t n) {
    assay_json_doc *doc = NULL;
    const char *msg = NULL;
    if (r->body.len && assay_json_parse(r->body.data, r->body.len, &doc) == ASSAY_OK) {
        const assay_json *root = assay_json_root(doc), *err = assay_json_get(root, "error");
        msg = assay_json_string(assay_json_get(err, "message"), NULL);
        if (!msg) msg = assay_json_string(err, NULL);
        if (!msg) msg = assay_json_string(assay_json_get(root, "message"), NULL);
        if (!msg) msg = assay_json_string(assay_json_get(root, "detail"), NULL);
    }
    if (msg) snprintf(out, n, "%s", msg);
    else snprintf(out, n, "%.*s", (int)(r->body.len < 200 ? r->body.len : 200), r->body.data ? r->body.data : "");
    assay_json_doc_free(doc);
}

/* POST (or GET when body is NULL) and parse the JSON answer; a status other than 200 or a body that is not JSON is
 * an error naming the path. *status (may be NULL) gets the HTTP status. */
static assay_status call(endpoint_lm *e, const char *path, const assay_strbuf *body, assay_json_doc **doc, long *status) {
    *doc = NULL;
    assay_http_response r = {0};
    assay_status st = assay_http_request(e->http, path, body ? body->data : NULL, body ? body->len : 0, &r);
    if (status) *status = r.status;
    if (st != ASSAY_OK) {
        assay_http_response_free(&r);
        return st;
    }
    if (r.status != 200) {
        char msg[512];
        error_text(&r, msg, sizeof msg);
        st = assay_fail(r.status == 401 || r.status == 403 ? ASSAY_ERR_ARG : ASSAY_ERR_IO, "%s: HTTP %ld%s%s", path,
                        r.status, msg[0] ? ": " : "", msg);
    } else if (assay_json_parse(r.body.data ? r.body.data : "", r.body.len, doc) != ASSAY_OK) {
        st = assay_fail(ASSAY_ERR_FORMAT, "%s: the answer is not JSON (%s): %.*s", path, assay_last_error(),
                        (int)(r.body.len < 120 ? r.body.len : 120), r.body.data ? r.body.data : "");
    }
    assay_http_response_free(&r);
    return st;
}

static assay_status bad_answer(const char *what) {
    return assay_fail(ASSAY_ERR_FORMAT, "/v1/completions: the answer has no %s", what);
}

/* ---- token ids -------------------------------------------------------------------------------------------------- */

static assay_status ep_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int64_t *n) {
    endpoint_lm *e = ctx;
    assay_strbuf b = {0};
    body_begin(e, &b);
    assay_strbuf_puts(&b, "\"prompt\": ");
    assay_strbuf_json_string(&b, text, len);
    assay_strbuf_printf(&b, ", \"add_special_tokens\": %s}", add_special ? "true" : "false");
    assay_json_doc *doc = NULL;
    assay_status st = call(e, "/tokenize", &b, &doc, NULL);
    assay_strbuf_free(&b);
    if (st != ASSAY_OK) return st;
    const assay_json *t = assay_json_get(assay_json_root(doc), "tokens");
    if (!assay_json_is(t, ASSAY_JSON_ARRAY)) st = assay_fail(ASSAY_ERR_FORMAT, "/tokenize: the answer has no \"tokens\" list");
    else {
        *ids = assay_xmalloc(sizeof(int32_t) * (size_t)(t->count > 0 ? t->count : 1));
        int64_t k = 0;
        for (const assay_json *x = t->first; x && st == ASSAY_OK; x = x->next) {
            if (x->type != ASSAY_JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer > INT32_MAX)
                st = assay_fail(ASSAY_ERR_FORMAT, "/tokenize: a token id that is not an integer");
            else (*ids)[k++] = (int32_t)x->integer;
        }
        *n = k;
        if (st != ASSAY_OK) free(*ids), *ids = NULL;
    }
    assay_json_doc_free(doc);
    return st;
}

static assay_status ep_detokenize(void *ctx, const int32_t *ids, int64_t n, char **text, size_t *len) {
    endpoint_lm *e = ctx;
    assay_strbuf b = {0};
    body_begin(e, &b);
    assay_strbuf_puts(&b, "\"tokens\": ");
    ids_json(&b, ids, n);
    assay_strbuf_putc(&b, '}');
    assay_json_doc *doc = NULL;
    assay_status st = call(e, "/detokenize", &b, &doc, NULL);
    assay_strbuf_free(&b);
    if (st != ASSAY_OK) return st;
    const assay_json *p = assay_json_get(assay_json_root(doc), "prompt");
    if (!assay_json_is(p, ASSAY_JSON_STRING)) st = assay_fail(ASSAY_ERR_FORMAT, "/detokenize: the answer has no \"prompt\"");
    else {
        *text = assay_xmalloc(p->str_len + 1);
        memcpy(*text, p->str, p->str_len);
        (*text)[p->str_len] = 0;
        *len = p->str_len;
    }
    assay_json_doc_free(doc);
    return st;
}

/* ---- completions ---------------------------------------------------------------------------------------------- */

/* The prompt's logprobs of a completions answer: choices[0].logprobs.{tokens, token_logprobs, top_logprobs}. */
typedef struct prompt_lps {
    const assay_json *tokens, *lps, *tops;
    int64_t n;            /* entries in token_logprobs */
    int64_t prompt_tokens; /* usage.prompt_tokens, or -1 */
} prompt_lps;

static assay_status read_lps(const assay_json *root, prompt_lps *p) {
    const assay_json *choice = assay_json_at(assay_json_get(root, "choices"), 0);
    if (!choice) return bad_answer("choices");
    const assay_json *lp = assay_json_get(choice, "logprobs");
    p->tokens = assay_json_get(lp, "tokens");
    p->lps = assay_json_get(lp, "token_logprobs");
    p->tops = assay_json_get(lp, "top_logprobs");
    if (!assay_json_is(p->lps, ASSAY_JSON_ARRAY)) return bad_answer("logprobs.token_logprobs (does it support echo with logprobs?)");
    p->n = p->lps->count;
    p->prompt_tokens = assay_json_int(assay_json_get(assay_json_get(root, "usage"), "prompt_tokens"), -1);
    return ASSAY_OK;
}

/* Sums positions [first, end) of the prompt's logprobs; *greedy: every such token was the most likely one. The
 * positions are walked in order and added in double, as lm.c adds the engine's floats. */
static assay_status sum_lps(const prompt_lps *p, int64_t first, int64_t end, float *each, uint8_t *greedy_each, double *sum,
                            int *all_greedy) {
    const assay_json *lp = assay_json_at(p->lps, first), *tok = assay_json_at(p->tokens, first),
                     *top = assay_json_at(p->tops, first);
    double s = 0;
    int g_all = 1;
    for (int64_t i = first; i < end; i++) {
        if (!assay_json_is(lp, ASSAY_JSON_NUMBER))
            return assay_fail(ASSAY_ERR_FORMAT, "/v1/completions: no log-probability for prompt token %lld", (long long)i);
        float v = (float)lp->num; /* the server's float, as the engine's own scoring has it */
        int g = assay_json_is(top, ASSAY_JSON_OBJECT);
        for (const assay_json *a = g ? top->first : NULL; a; a = a->next) {
            int same = tok && tok->type == ASSAY_JSON_STRING && a->key_len == tok->str_len && memcmp(a->key, tok->str, a->key_len) == 0;
            if (!same && a->type == ASSAY_JSON_NUMBER && (float)a->num >= v) g = 0;
        }
        if (each) each[i - first] = v;
        if (greedy_each) greedy_each[i - first] = (uint8_t)g;
        s += v;
        g_all &= g;
        lp = lp ? lp->next : NULL;
        tok = tok ? tok->next : NULL;
        top = top ? top->next : NULL;
    }
    if (sum) *sum = s;
    if (all_greedy) *all_greedy = g_all;
    return ASSAY_OK;
}

/* One prompt-scoring request: the prompt (token ids, or text) echoed with its logprobs, nothing generated. */
static assay_status score_request(endpoint_lm *e, const int32_t *ids, int64_t n, const char *text, size_t len,
                                  assay_json_doc **doc, prompt_lps *p) {
    assay_strbuf b = {0};
    body_begin(e, &b);
    assay_strbuf_puts(&b, "\"prompt\": ");
    if (ids) ids_json(&b, ids, n);
    else assay_strbuf_json_string(&b, text, len);
    assay_strbuf_puts(&b, ", \"max_tokens\": 0, \"echo\": true, \"logprobs\": 1, \"temperature\": 0}");
    assay_status st = call(e, "/v1/completions", &b, doc, NULL);
    assay_strbuf_free(&b);
    if (st == ASSAY_OK) st = read_lps(assay_json_root(*doc), p);
    return st;
}

static assay_status ep_score(void *ctx, const int32_t *tokens, int64_t n, int64_t first, float *logprob, uint8_t *greedy,
                             float *logits) {
    endpoint_lm *e = ctx;
    if (logits)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: a completions server gives no logits rows (the kld task needs the "
                                                 "model in-process)", e->name);
    ASSAY_ASSERT(first >= 1 && first <= n);
    if (first == n) return ASSAY_OK;
    assay_json_doc *doc = NULL;
    prompt_lps p;
    assay_status st = score_request(e, tokens, n, NULL, 0, &doc, &p);
    /* a server that cannot stop at max_tokens 0 may add a generated token after the prompt: only the prompt counts */
    if (st == ASSAY_OK && p.n < n)
        st = assay_fail(ASSAY_ERR_FORMAT, "/v1/completions: %lld prompt log-probabilities for a prompt of %lld tokens",
                        (long long)p.n, (long long)n);
    if (st == ASSAY_OK) st = sum_lps(&p, first, n, logprob, greedy, NULL, NULL);
    assay_json_doc_free(doc);
    return st;
}

/* ---- text prompts (no /tokenize) ----------------------------------------------------------------------------- */

static int64_t prompt_count(const prompt_lps *p) {
    /* usage counts the prompt alone; the logprobs list may carry a generated token after it */
    return p->prompt_tokens >= 0 && p->prompt_tokens <= p->n ? p->prompt_tokens : p->n;
}

/* The server's token count of `text` (cached). */
static assay_status count_tokens(endpoint_lm *e, const char *text, size_t len, int64_t *n) {
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < CTX_CACHE; i++)
        if (e->ctx_cache[i].text && strlen(e->ctx_cache[i].text) == len && memcmp(e->ctx_cache[i].text, text, len) == 0) {
            *n = e->ctx_cache[i].n;
            pthread_mutex_unlock(&e->mu);
            return ASSAY_OK;
        }
    pthread_mutex_unlock(&e->mu);
    assay_json_doc *doc = NULL;
    prompt_lps p;
    assay_status st = score_request(e, NULL, 0, text, len, &doc, &p);
    if (st == ASSAY_OK) *n = prompt_count(&p);
    assay_json_doc_free(doc);
    if (st != ASSAY_OK) return st;
    pthread_mutex_lock(&e->mu);
    int k = e->ctx_next++ % CTX_CACHE;
    free(e->ctx_cache[k].text);
    e->ctx_cache[k].text = assay_xmalloc(len + 1);
    memcpy(e->ctx_cache[k].text, text, len);
    e->ctx_cache[k].text[len] = 0;
    e->ctx_cache[k].n = *n;
    pthread_mutex_unlock(&e->mu);
    return ASSAY_OK;
}

static assay_status ep_loglikelihood_text(void *ctx, const char *context, const char *continuation, double *ll,
                                          int *is_greedy, int64_t *n_tokens) {
    endpoint_lm *e = ctx;
    size_t clen = strlen(context), keep = clen, cont_len = strlen(continuation);
    while (keep > 0 && is_py_space((unsigned char)context[keep - 1])) keep--;
    if (keep == 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: an empty context needs the prefix token, and this server takes only "
                                                 "text (no /tokenize)", e->name);
    int64_t n_ctx = 0;
    assay_status st = count_tokens(e, context, keep, &n_ctx);
    if (st != ASSAY_OK) return st;
    char *joined = assay_xmalloc(clen + cont_len + 1);
    memcpy(joined, context, clen);
    memcpy(joined + clen, continuation, cont_len + 1);
    assay_json_doc *doc = NULL;
    prompt_lps p;
    st = score_request(e, NULL, 0, joined, clen + cont_len, &doc, &p);
    free(joined);
    if (st == ASSAY_OK) {
        int64_t n_all = prompt_count(&p), n_cont = n_all - n_ctx;
        if (n_tokens) *n_tokens = n_all;
        if (n_cont <= 0) { /* the continuation added no token: lm.c's convention */
            *ll = 0;
            if (is_greedy) *is_greedy = 1;
        } else {
            int g = 1;
            st = sum_lps(&p, n_all - n_cont < 1 ? 1 : n_all - n_cont, n_all, NULL, NULL, ll, &g);
            if (is_greedy) *is_greedy = g;
        }
    }
    assay_json_doc_free(doc);
    return st;
}

/* ---- generation ------------------------------------------------------------------------------------------------ */

static assay_status ep_generate_until(void *ctx, const char *context, const char *const *until, int n_until,
                                      int64_t max_gen_toks, char **out, int64_t *n_tokens) {
    endpoint_lm *e = ctx;
    int32_t *ids = NULL;
    int64_t n = 0;
    assay_status st = ASSAY_OK;
    if (e->tokenized) {
        st = ep_tokenize(e, context, strlen(context), 1, &ids, &n);
        if (st != ASSAY_OK) return st;
    }
    int64_t max_ctx = e->lm.max_length - max_gen_toks;
    if (max_ctx < 1) max_ctx = 1;
    const int32_t *prompt = n > max_ctx ? ids + (n - max_ctx) : ids; /* left truncation, as lm-eval */
    int64_t n_prompt = n > max_ctx ? max_ctx : n;
    assay_strbuf b = {0};
    body_begin(e, &b);
    assay_strbuf_puts(&b, "\"prompt\": ");
    if (e->tokenized) ids_json(&b, prompt, n_prompt);
    else assay_strbuf_json_string(&b, context, strlen(context));
    assay_strbuf_printf(&b, ", \"max_tokens\": %lld, \"temperature\": 0, \"stop\": [", (long long)max_gen_toks);
    int k = 0;
    for (int i = 0; i < n_until; i++) {
        if (!until[i][0]) continue;
        if (k++) assay_strbuf_puts(&b, ", ");
        assay_strbuf_json_string(&b, until[i], strlen(until[i]));
    }
    assay_strbuf_puts(&b, "]}");
    free(ids);
    assay_json_doc *doc = NULL;
    st = call(e, "/v1/completions", &b, &doc, NULL);
    assay_strbuf_free(&b);
    if (st != ASSAY_OK) return st;
    const assay_json *root = assay_json_root(doc);
    const assay_json *text = assay_json_get(assay_json_at(assay_json_get(root, "choices"), 0), "text");
    if (!assay_json_is(text, ASSAY_JSON_STRING)) st = bad_answer("choices[0].text");
    else {
        char *s = assay_xmalloc(text->str_len + 1);
        memcpy(s, text->str, text->str_len);
        s[text->str_len] = 0;
        /* servers cut at the stop sequence already; cutting again is what lm-eval does and changes nothing then */
        for (int i = 0; i < n_until; i++) {
            if (!until[i][0]) continue;
            char *hit = strstr(s, until[i]);
            if (hit) *hit = 0;
        }
        *out = s;
        const assay_json *usage = assay_json_get(root, "usage");
        int64_t pt = assay_json_int(assay_json_get(usage, "prompt_tokens"), e->tokenized ? n_prompt : 0),
                ct = assay_json_int(assay_json_get(usage, "completion_tokens"), 0);
        if (n_tokens) *n_tokens = pt + ct;
    }
    assay_json_doc_free(doc);
    return st;
}

/* ---- opening -------------------------------------------------------------------------------------------------- */

void assay_eval_endpoint_close(assay_lm *lm) {
    if (!lm) return;
    endpoint_lm *e = (endpoint_lm *)lm;
    assay_http_client_close(e->http);
    for (int i = 0; i < CTX_CACHE; i++) free(e->ctx_cache[i].text);
    pthread_mutex_destroy(&e->mu);
    free(e->model);
    free(e->url);
    free(e);
}

/* "http://h:p/v1/completions", "http://h:p/v1/" and "http://h:p" all name the server at http://h:p. */
static char *server_root(const char *url) {
    char *s = assay_xstrdup(url);
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/') s[--n] = 0;
    static const char *const tails[] = {"/completions", "/chat/completions", "/v1"};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
            size_t t = strlen(tails[i]);
            if (n >= t && strcmp(s + n - t, tails[i]) == 0) s[n -= t] = 0;
        }
    return s;
}

assay_status assay_eval_endpoint_open(const assay_endpoint_options *o, assay_lm **out) {
    *out = NULL;
    if (!o->base_url || !o->base_url[0]) return assay_fail(ASSAY_ERR_ARG, "no server URL");
    if (o->num_concurrent < 1) return assay_fail(ASSAY_ERR_ARG, "num_concurrent must be at least 1");
    assay_http_options ho;
    assay_http_options_default(&ho);
    ho.timeout_s = o->timeout_s > 0 ? o->timeout_s : ho.timeout_s;
    ho.connect_timeout_s = ho.timeout_s < ho.connect_timeout_s ? ho.timeout_s : ho.connect_timeout_s;
    ho.max_retries = o->max_retries >= 0 ? o->max_retries : ho.max_retries;
    ho.backoff_s = o->backoff_s >= 0 ? o->backoff_s : ho.backoff_s;
    ho.api_key = o->api_key;
    endpoint_lm *e = assay_xcalloc(1, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    e->url = assay_xstrdup(o->base_url);
    char *root = server_root(o->base_url);
    assay_status st = assay_http_client_open(root, &ho, &e->http);
    free(root);
    if (st != ASSAY_OK) {
        assay_eval_endpoint_close(&e->lm);
        return st;
    }
    /* reachable? which model? */
    assay_json_doc *doc = NULL;
    long status = 0;
    st = call(e, "/v1/models", NULL, &doc, &status);
    if (st == ASSAY_OK) {
        const assay_json *data = assay_json_get(assay_json_root(doc), "data");
        const char *first = assay_json_string(assay_json_get(assay_json_at(data, 0), "id"), NULL);
        if (o->model && o->model[0]) e->model = assay_xstrdup(o->model);
        else if (first) e->model = assay_xstrdup(first);
        else st = assay_fail(ASSAY_ERR_FORMAT, "/v1/models lists no model: give --model");
    } else if (status == 404 && o->model && o->model[0]) { /* a server without the list: the name given will do */
        e->model = assay_xstrdup(o->model);
        st = ASSAY_OK;
    }
    assay_json_doc_free(doc);
    if (st != ASSAY_OK) {
        st = assay_fail_context(st, "the server at %s", assay_http_client_base(e->http));
        assay_eval_endpoint_close(&e->lm);
        return st;
    }
    snprintf(e->name, sizeof e->name, "%s", e->model);
    /* token ids, if the server tokenizes for us */
    int64_t max_model_len = 0;
    int32_t bos = -1;
    if (o->tokenized != 0) {
        assay_strbuf b = {0};
        body_begin(e, &b);
        assay_strbuf_puts(&b, "\"prompt\": \"Hello\", \"add_special_tokens\": true}");
        st = call(e, "/tokenize", &b, &doc, &status);
        assay_strbuf_free(&b);
        const assay_json *r = st == ASSAY_OK ? assay_json_root(doc) : NULL;
        if (st == ASSAY_OK && assay_json_is(assay_json_get(r, "tokens"), ASSAY_JSON_ARRAY)) {
            e->tokenized = 1;
            max_model_len = assay_json_int(assay_json_get(r, "max_model_len"), 0);
        }
        assay_json_doc_free(doc);
        doc = NULL;
        if (!e->tokenized && o->tokenized == 1) {
            st = assay_fail(ASSAY_ERR_UNSUPPORTED, "the server at %s does not tokenize (/tokenize: %s)",
                            assay_http_client_base(e->http), st == ASSAY_OK ? "no token list" : assay_last_error());
            assay_eval_endpoint_close(&e->lm);
            return st;
        }
        if (e->tokenized) { /* the BOS its tokenizer adds, if any: the tokens of an empty text */
            int32_t *ids = NULL;
            int64_t n = 0;
            if (ep_tokenize(e, "", 0, 1, &ids, &n) == ASSAY_OK && n == 1) bos = ids[0];
            free(ids);
        }
    }
    /* lm-eval feeds max_length + 1 tokens when it truncates; the server wants the prompt below its max_model_len */
    int64_t max_length = o->max_length > 0 ? o->max_length : max_model_len > 2 ? max_model_len - 2 : 2048;
    e->lm = (assay_lm){e,
                       e->name,
                       0,
                       max_length,
                       o->prefix_token >= 0 ? o->prefix_token : bos,
                       -1,
                       e->tokenized ? ep_tokenize : NULL,
                       e->tokenized ? ep_detokenize : NULL,
                       e->tokenized ? ep_score : NULL,
                       NULL,
                       e->tokenized ? NULL : ep_loglikelihood_text,
                       ep_generate_until,
                       o->num_concurrent};
    *out = &e->lm;
    return ASSAY_OK;
}

void assay_eval_endpoint_describe(const assay_lm *lm, assay_strbuf *out) {
    const endpoint_lm *e = (const endpoint_lm *)lm;
    assay_strbuf_printf(out, "base_url=%s,model=%s,tokenized_requests=%s,num_concurrent=%d", e->url, e->model,
                        e->tokenized ? "True" : "False", e->lm.concurrency);
}

void assay_eval_endpoint_stats(const assay_lm *lm, int64_t *attempts, int64_t *retries, int64_t *failed) {
    assay_http_client_stats(((const endpoint_lm *)lm)->http, attempts, retries, failed);
}
