/* request.c — see request.h. */
#include "request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/chat_template.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"

static void sreq_free_contents(sreq *r) {
    free(r->prompt);
    free(r->prompt_text);
    if (r->stop)
        for (int i = 0; i < r->sp.n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->stop_ids);
    free(r->err);
    free(r->toks);
    free(r->lps);
    free(r->tops);
    free(r->plps);
    free(r->ptops);
    free(r->text);
}

call *serve_call_new(int n) {
    call *c = calloc(1, sizeof *c);
    c->reqs = calloc((size_t)n, sizeof *c->reqs);
    c->n = n;
    c->refs = n + 1;
    pthread_condattr_t ca; /* timed waits count on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < n; i++) c->reqs[i].c = c, c->reqs[i].index = i;
    return c;
}

void serve_call_free(call *c) {
    for (int i = 0; i < c->n; i++) sreq_free_contents(&c->reqs[i]);
    pthread_cond_destroy(&c->cv);
    free(c->reqs);
    free(c);
}

int serve_set_err(req_error *er, unsigned status, const char *param, const char *fmt, ...) {
    er->status = status;
    er->param = param;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(er->msg, sizeof er->msg, fmt, ap);
    va_end(ap);
    return 0;
}

static int get_number(const assay_json *root, const char *key, double lo, double hi, double *out, req_error *er) {
    const assay_json *v = assay_json_get(root, key);
    if (!v || v->type == ASSAY_JSON_NULL) return 1;
    if (v->type != ASSAY_JSON_NUMBER) return serve_set_err(er, 400, key, "%s must be a number", key);
    if (!(v->num >= lo && v->num <= hi)) return serve_set_err(er, 400, key, "%s must be in [%g, %g], got %g", key, lo, hi, v->num);
    *out = v->num;
    return 1;
}

static int get_int(const assay_json *root, const char *key, int64_t lo, int64_t hi, int64_t *out, req_error *er) {
    const assay_json *v = assay_json_get(root, key);
    if (!v || v->type == ASSAY_JSON_NULL) return 1;
    if (v->type != ASSAY_JSON_NUMBER || !v->is_integer) return serve_set_err(er, 400, key, "%s must be an integer", key);
    if (v->integer < lo || v->integer > hi)
        return serve_set_err(er, 400, key, "%s must be in [%lld, %lld], got %lld", key, (long long)lo, (long long)hi,
                             (long long)v->integer);
    *out = v->integer;
    return 1;
}

int serve_get_bool(const assay_json *root, const char *key, int *out, req_error *er) {
    const assay_json *v = assay_json_get(root, key);
    if (!v || v->type == ASSAY_JSON_NULL) return 1;
    if (v->type != ASSAY_JSON_TRUE && v->type != ASSAY_JSON_FALSE) return serve_set_err(er, 400, key, "%s must be a boolean", key);
    *out = v->type == ASSAY_JSON_TRUE;
    return 1;
}

/* Sampling parameters shared by both endpoints, into every prompt's request. */
static int parse_sampling(const serve_model *s, const assay_json *root, gen_request *g, req_error *er) {
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    double temp = 1, top_p = 1, min_p = 0;
    int64_t top_k = -1, seed = -1, min_tokens = 0;
    int ignore_eos = 0, has_seed = 0;
    if (!get_number(root, "temperature", 0, 1e9, &temp, er) || !get_number(root, "top_p", 1e-9, 1, &top_p, er) ||
        !get_number(root, "min_p", 0, 1, &min_p, er) || !get_int(root, "top_k", -1, INT32_MAX, &top_k, er) ||
        !get_int(root, "min_tokens", 0, INT64_MAX / 2, &min_tokens, er) || !serve_get_bool(root, "ignore_eos", &ignore_eos, er))
        return 0;
    const assay_json *sv = assay_json_get(root, "seed");
    if (sv && sv->type != ASSAY_JSON_NULL) {
        if (sv->type != ASSAY_JSON_NUMBER || !sv->is_integer) return serve_set_err(er, 400, "seed", "seed must be an integer");
        seed = sv->integer;
        has_seed = 1;
    }
    sp.temperature = (float)temp;
    sp.top_p = (float)top_p;
    sp.min_p = (float)min_p;
    sp.top_k = (int)top_k;
    sp.min_tokens = min_tokens;
    sp.ignore_eos = ignore_eos;
    sp.has_seed = has_seed;
    sp.seed = (uint64_t)seed;
    /* stop strings and ids */
    const assay_json *stop = assay_json_get(root, "stop");
    const assay_json *stop_ids = assay_json_get(root, "stop_token_ids");
    int n_stop = 0;
    if (stop && stop->type == ASSAY_JSON_STRING) n_stop = 1;
    else if (stop && stop->type == ASSAY_JSON_ARRAY) {
        for (const assay_json *x = stop->first; x; x = x->next)
            if (x->type != ASSAY_JSON_STRING) return serve_set_err(er, 400, "stop", "stop must be a string or a list of strings");
        n_stop = (int)stop->count;
    } else if (stop && stop->type != ASSAY_JSON_NULL)
        return serve_set_err(er, 400, "stop", "stop must be a string or a list of strings");
    int n_ids = 0;
    if (stop_ids && stop_ids->type == ASSAY_JSON_ARRAY) {
        for (const assay_json *x = stop_ids->first; x; x = x->next)
            if (x->type != ASSAY_JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer >= s->n_vocab)
                return serve_set_err(er, 400, "stop_token_ids", "stop_token_ids must be token ids below %lld", (long long)s->n_vocab);
        n_ids = (int)stop_ids->count;
    } else if (stop_ids && stop_ids->type != ASSAY_JSON_NULL)
        return serve_set_err(er, 400, "stop_token_ids", "stop_token_ids must be a list of integers");
    for (int i = 0; i < g->c->n; i++) {
        sreq *r = &g->c->reqs[i];
        r->sp = sp;
        if (has_seed) r->sp.seed = (uint64_t)seed + (uint64_t)r->sample; /* n samples: seed, seed + 1, ... (vLLM) */
        if (n_stop) {
            r->stop = calloc((size_t)n_stop, sizeof *r->stop);
            if (stop->type == ASSAY_JSON_STRING) r->stop[0] = strdup(stop->str);
            else {
                int k = 0;
                for (const assay_json *x = stop->first; x; x = x->next) r->stop[k++] = strdup(x->str);
            }
            r->sp.stop = (const char *const *)r->stop;
            r->sp.n_stop = n_stop;
        }
        if (n_ids) {
            r->stop_ids = malloc((size_t)n_ids * sizeof *r->stop_ids);
            int k = 0;
            for (const assay_json *x = stop_ids->first; x; x = x->next) r->stop_ids[k++] = (int32_t)x->integer;
            r->sp.stop_token_ids = r->stop_ids;
            r->sp.n_stop_token_ids = n_ids;
        }
    }
    return 1;
}

void serve_tokenize(const serve_model *s, const char *text, size_t len, int flags, assay_tokens *out) {
    if (s->tok_mu) pthread_mutex_lock(s->tok_mu);
    assay_tokenizer_encode(s->tok, text, len, flags, out);
    if (s->tok_mu) pthread_mutex_unlock(s->tok_mu);
}

/* A prompt as a token-id array. */
static int prompt_from_ids(const serve_model *s, const assay_json *arr, sreq *r, req_error *er) {
    if (arr->count == 0) return serve_set_err(er, 400, "prompt", "the prompt is empty");
    r->prompt = malloc((size_t)arr->count * sizeof *r->prompt);
    for (const assay_json *x = arr->first; x; x = x->next) {
        if (x->type != ASSAY_JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer >= s->n_vocab)
            return serve_set_err(er, 400, "prompt", "prompt token ids must be integers in [0, %lld)", (long long)s->n_vocab);
        r->prompt[r->n_prompt++] = (int32_t)x->integer;
    }
    assay_strbuf t = {0};
    if (s->tok_mu) pthread_mutex_lock(s->tok_mu);
    assay_tokenizer_decode(s->tok, r->prompt, r->n_prompt, 0, &t);
    if (s->tok_mu) pthread_mutex_unlock(s->tok_mu);
    r->prompt_text = t.data ? t.data : strdup("");
    r->prompt_text_len = t.len;
    return 1;
}

static int prompt_from_text(const serve_model *s, const char *text, size_t len, int flags, sreq *r, req_error *er) {
    assay_tokens ids = {0};
    serve_tokenize(s, text, len, flags, &ids);
    if (ids.n == 0) {
        int32_t bos = assay_tokenizer_bos(s->tok);
        if (bos < 0) {
            assay_tokens_free(&ids);
            return serve_set_err(er, 400, "prompt", "the prompt is empty and the model has no BOS token");
        }
        assay_tokens_push(&ids, bos);
    }
    r->prompt = ids.ids;
    r->n_prompt = ids.n;
    r->prompt_text = malloc(len + 1);
    memcpy(r->prompt_text, text, len);
    r->prompt_text[len] = 0;
    r->prompt_text_len = len;
    return 1;
}

int serve_check_model(const serve_model *s, const assay_json *root, req_error *er) {
    const assay_json *m = assay_json_get(root, "model");
    if (!m || m->type == ASSAY_JSON_NULL) return 1;
    if (m->type != ASSAY_JSON_STRING) return serve_set_err(er, 400, "model", "model must be a string");
    if (strcmp(m->str, s->name) != 0) return serve_set_err(er, 404, "model", "The model `%s` does not exist.", m->str);
    return 1;
}

/* The chat messages rendered with the model's template, into req 0's prompt. */
static int chat_prompt(const serve_model *s, const assay_json *msgs, sreq *r, req_error *er) {
    if (!s->ct) return serve_set_err(er, 400, "messages", "%s", s->ct_err);
    if (!msgs || msgs->type != ASSAY_JSON_ARRAY || msgs->count == 0)
        return serve_set_err(er, 400, "messages", "messages must be a non-empty list");
    assay_chat_message *m = calloc((size_t)msgs->count, sizeof *m);
    assay_strbuf *parts = calloc((size_t)msgs->count, sizeof *parts);
    int64_t n = 0, ok = 1;
    for (const assay_json *x = msgs->first; x && ok; x = x->next, n++) {
        const char *role = assay_json_string(assay_json_get(x, "role"), NULL);
        const assay_json *content = assay_json_get(x, "content");
        if (!role) {
            ok = serve_set_err(er, 400, "messages", "messages[%lld] has no role", (long long)n);
            break;
        }
        m[n].role = role;
        if (content && content->type == ASSAY_JSON_STRING) m[n].content = content->str;
        else if (content && content->type == ASSAY_JSON_ARRAY) { /* [{"type": "text", "text": ...}, ...] */
            for (const assay_json *p = content->first; p; p = p->next) {
                const char *type = assay_json_string(assay_json_get(p, "type"), "");
                const char *t = assay_json_string(assay_json_get(p, "text"), NULL);
                if (strcmp(type, "text") != 0 || !t) {
                    ok = serve_set_err(er, 400, "messages", "messages[%lld]: only text content parts are supported", (long long)n);
                    break;
                }
                assay_strbuf_puts(&parts[n], t);
            }
            m[n].content = parts[n].data ? parts[n].data : "";
        } else if (!content || content->type == ASSAY_JSON_NULL) m[n].content = "";
        else ok = serve_set_err(er, 400, "messages", "messages[%lld].content must be a string or a list of parts", (long long)n);
    }
    if (ok) {
        assay_strbuf text = {0};
        if (assay_chat_template_render(s->ct, m, n, 1, &text) != ASSAY_OK)
            ok = serve_set_err(er, 400, "messages", "%s", assay_last_error());
        else {
            int flags = ASSAY_TOK_PARSE_SPECIAL | (assay_chat_template_writes_bos(s->ct) ? 0 : ASSAY_TOK_ADD_SPECIAL);
            ok = prompt_from_text(s, text.data ? text.data : "", text.len, flags, r, er);
        }
        assay_strbuf_free(&text);
    }
    for (int64_t i = 0; i < msgs->count; i++) assay_strbuf_free(&parts[i]);
    free(parts);
    free(m);
    return (int)ok;
}

/* Parses a completions / chat body into g (g->c allocated); 0 with *er on a bad request. */
int serve_parse_generate(const serve_model *s, const assay_json *root, int chat, gen_request *g, req_error *er) {
    memset(g, 0, sizeof *g);
    g->chat = chat;
    g->logprobs = -1;
    g->max_tokens = -1;
    if (!root || root->type != ASSAY_JSON_OBJECT) return serve_set_err(er, 400, NULL, "the body must be a JSON object");
    if (!serve_check_model(s, root, er)) return 0;
    if (!serve_get_bool(root, "stream", &g->stream, er)) return 0;
    const assay_json *so = assay_json_get(root, "stream_options");
    if (so && so->type != ASSAY_JSON_OBJECT && so->type != ASSAY_JSON_NULL)
        return serve_set_err(er, 400, "stream_options", "stream_options must be an object");
    if (so && so->type == ASSAY_JSON_OBJECT && !serve_get_bool(so, "include_usage", &g->include_usage, er)) return 0;
    if (!chat) {
        if (!serve_get_bool(root, "echo", &g->echo, er)) return 0;
        int64_t lp = -1;
        if (!get_int(root, "logprobs", 0, 20, &lp, er)) return 0;
        g->logprobs = (int)lp;
    } else {
        int want = 0;
        int64_t top = -1;
        if (!serve_get_bool(root, "logprobs", &want, er) || !get_int(root, "top_logprobs", 0, 20, &top, er)) return 0;
        if (top >= 0 && !want)
            return serve_set_err(er, 400, "top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true");
        if (want) g->logprobs = top >= 0 ? (int)top : 0;
    }
    int64_t n_samples = 1;
    if (!get_int(root, "n", 1, MAX_CHOICES, &n_samples, er)) return 0;
    g->n = (int)n_samples;
    if (!get_int(root, "max_tokens", 0, INT64_MAX / 2, &g->max_tokens, er)) return 0;
    if (chat && !get_int(root, "max_completion_tokens", 0, INT64_MAX / 2, &g->max_tokens, er)) return 0;
    if (!chat && g->max_tokens < 0) g->max_tokens = 16; /* vLLM's completions default */

    /* the prompts */
    if (chat) {
        g->c = serve_call_new(g->n);
        if (!chat_prompt(s, assay_json_get(root, "messages"), &g->c->reqs[0], er)) return 0;
    } else {
        const assay_json *p = assay_json_get(root, "prompt");
        if (!p) return serve_set_err(er, 400, "prompt", "prompt is required");
        int n = 1, batch = 0;
        if (p->type == ASSAY_JSON_ARRAY && p->count > 0 &&
            (p->first->type == ASSAY_JSON_STRING || p->first->type == ASSAY_JSON_ARRAY)) {
            batch = 1;
            n = (int)(p->count > MAX_PROMPTS ? MAX_PROMPTS + 1 : p->count);
            if (n > MAX_PROMPTS) return serve_set_err(er, 400, "prompt", "at most %d prompts per request", MAX_PROMPTS);
        } else if (p->type != ASSAY_JSON_STRING && p->type != ASSAY_JSON_ARRAY)
            return serve_set_err(er, 400, "prompt", "prompt must be a string, a list of token ids, or a list of those");
        if ((int64_t)n * g->n > MAX_CHOICES)
            return serve_set_err(er, 400, "n", "at most %d choices per request (prompts x n), got %d x %d", MAX_CHOICES, n, g->n);
        g->c = serve_call_new(n * g->n);
        int flags = ASSAY_TOK_ADD_SPECIAL;
        const assay_json *x = batch ? p->first : p;
        for (int i = 0; i < n; i++, x = x->next) {
            sreq *r = &g->c->reqs[i * g->n];
            if (x->type == ASSAY_JSON_STRING) {
                if (!prompt_from_text(s, x->str, x->str_len, flags, r, er)) return 0;
            } else if (x->type == ASSAY_JSON_ARRAY) {
                if (!prompt_from_ids(s, x, r, er)) return 0;
            } else
                return serve_set_err(er, 400, "prompt", "prompt must be a string, a list of token ids, or a list of those");
        }
    }
    g->n_prompts = g->c->n / g->n;
    /* each prompt's other samples: the same prompt, their own engine requests */
    for (int i = 0; i < g->c->n; i++) {
        sreq *r = &g->c->reqs[i], *first = &g->c->reqs[i - i % g->n];
        r->sample = i % g->n;
        if (r == first) continue;
        r->n_prompt = first->n_prompt;
        r->prompt = malloc((size_t)r->n_prompt * sizeof *r->prompt);
        memcpy(r->prompt, first->prompt, (size_t)r->n_prompt * sizeof *r->prompt);
        r->prompt_text_len = first->prompt_text_len;
        r->prompt_text = malloc(r->prompt_text_len + 1);
        memcpy(r->prompt_text, first->prompt_text, r->prompt_text_len);
        r->prompt_text[r->prompt_text_len] = 0;
    }
    if (!parse_sampling(s, root, g, er)) return 0;
    for (int i = 0; i < g->c->n; i++) {
        sreq *r = &g->c->reqs[i];
        if (r->n_prompt >= s->max_model_len)
            return serve_set_err(er, 400, "prompt",
                                 "This model's maximum context length is %lld tokens. However, your prompt has %lld tokens.",
                                 (long long)s->max_model_len, (long long)r->n_prompt);
        int64_t mt = g->max_tokens;
        if (mt < 0) mt = s->max_model_len - r->n_prompt; /* chat without a limit: up to the context */
        if (r->n_prompt + mt > s->max_model_len)
            return serve_set_err(er, 400, "max_tokens",
                                 "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
                                 "(%lld in the prompt, %lld for the completion).",
                                 (long long)s->max_model_len, (long long)(r->n_prompt + mt), (long long)r->n_prompt,
                                 (long long)mt);
        if (mt == 0) {
            r->sp.prompt_only = 1;
            r->sp.max_tokens = 1;
        } else
            r->sp.max_tokens = mt;
        if (g->max_tokens >= 0 && r->sp.min_tokens > g->max_tokens)
            return serve_set_err(er, 400, "min_tokens", "min_tokens must be less than or equal to max_tokens=%lld, got %lld",
                                 (long long)g->max_tokens, (long long)r->sp.min_tokens);
        r->sp.logprobs = g->logprobs;
        if (g->echo && g->logprobs >= 0) r->sp.prompt_logprobs = g->logprobs;
    }
    return 1;
}

int serve_check_utf8(const char *text, size_t len, req_error *er) {
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        unsigned c = p[i];
        size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = n > 0 && i + n <= len;
        for (size_t k = 1; ok && k < n; k++) ok = (p[i + k] & 0xC0) == 0x80;
        /* no overlong forms, no surrogates, nothing above U+10FFFF */
        if (ok && n == 3) ok = !(c == 0xE0 && p[i + 1] < 0xA0) && !(c == 0xED && p[i + 1] >= 0xA0);
        if (ok && n == 4) ok = !(c == 0xF0 && p[i + 1] < 0x90) && !(c == 0xF4 && p[i + 1] >= 0x90);
        if (!ok) return serve_set_err(er, 400, NULL, "the body is not valid UTF-8 (byte %zu)", i);
        i += n;
    }
    return 1;
}

int serve_parse_body(const serve_model *s, const char *body, size_t len, int chat, gen_request *g, req_error *er) {
    memset(g, 0, sizeof *g);
    if (!serve_check_utf8(body, len, er)) return 0;
    assay_json_doc *doc = NULL;
    if (assay_json_parse(body, len, &doc) != ASSAY_OK)
        return serve_set_err(er, 400, NULL, "invalid JSON body: %s", assay_last_error());
    int ok = serve_parse_generate(s, assay_json_root(doc), chat, g, er);
    assay_json_doc_free(doc);
    return ok;
}
