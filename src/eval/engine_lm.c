/* engine_lm.c — the CPU engine (model.h) and the model's tokenizer (tokenizer.h) behind the assay_lm table, and
 * the engine-flag text used by eval and decide.
 *
 * score() runs one sequence from position 0 in chunks of at most CHUNK tokens, asking the engine for logits only
 * at the positions that predict scored tokens, so memory stays CHUNK x n_vocab floats whatever the window.
 * generate() is plain greedy decoding on the session's KV cache. Everything is float32 log-softmax, the same
 * quantity lm-eval takes from torch.log_softmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"
#include "assay/model.h"
#include "assay/tokenizer.h"

enum { CHUNK = 256 };

typedef struct engine_lm {
    assay_lm lm;
    assay_model *model;
    assay_tokenizer *tok;
    assay_session *session;
    int64_t n_ctx;
    assay_session_options so; /* as opened (KV-cache type), for assay_eval_lm_engine */
    float *rows;      /* [CHUNK][n_vocab] logits of one forward chunk */
    int32_t *pos;     /* [CHUNK] */
    int8_t *want;     /* [CHUNK] */
    char name[256];
} engine_lm;

static assay_status e_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int64_t *n) {
    engine_lm *e = ctx;
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

/* log p(target) and whether target is the argmax, from one row of logits (double accumulation). */
static float row_logprob(const float *row, int64_t V, int32_t target, uint8_t *greedy) {
    float mx = row[0];
    int64_t arg = 0;
    for (int64_t v = 1; v < V; v++)
        if (row[v] > mx) mx = row[v], arg = v;
    double s = 0;
    for (int64_t v = 0; v < V; v++) s += exp((double)(row[v] - mx));
    *greedy = arg == target;
    return (float)((double)(row[target] - mx) - log(s));
}

static assay_status e_score(void *ctx, const int32_t *tokens, int64_t n, int64_t first, float *logprob, uint8_t *greedy,
                            float *logits) {
    engine_lm *e = ctx;
    int64_t V = e->lm.n_vocab;
    if (n - 1 > e->n_ctx)
        return assay_fail(ASSAY_ERR_RANGE, "%lld tokens exceed the session's context of %lld", (long long)(n - 1), (long long)e->n_ctx);
    ASSAY_ASSERT(first >= 1 && first <= n);
    assay_session_seq_clear(e->session, 0);
    /* input positions 0..n-2; the row at input position p predicts tokens[p + 1] */
    for (int64_t start = 0; start < n - 1; start += CHUNK) {
        int64_t len = n - 1 - start < CHUNK ? n - 1 - start : CHUNK;
        int any = 0;
        for (int64_t i = 0; i < len; i++) {
            e->pos[i] = (int32_t)(start + i);
            e->want[i] = start + i + 1 >= first;
            any |= e->want[i];
        }
        if (!any) e->want[len - 1] = 1; /* the engine returns at least the last row; ignored */
        assay_batch b = {len, tokens + start, e->pos, NULL, e->want};
        assay_status st = assay_session_forward(e->session, &b, e->rows);
        if (st != ASSAY_OK) return st;
        int64_t r = 0;
        for (int64_t i = 0; i < len; i++) {
            if (!e->want[i]) continue;
            int64_t t = start + i + 1; /* the predicted token's index */
            const float *row = e->rows + r * V;
            r++;
            if (t < first) continue;
            logprob[t - first] = row_logprob(row, V, tokens[t], &greedy[t - first]);
            if (logits) memcpy(logits + (t - first) * V, row, sizeof(float) * (size_t)V);
        }
    }
    return ASSAY_OK;
}

static assay_status e_generate(void *ctx, const int32_t *prompt, int64_t n, int64_t max_new, assay_lm_token_fn on_token,
                               void *user) {
    engine_lm *e = ctx;
    int64_t V = e->lm.n_vocab;
    if (n < 1) return assay_fail(ASSAY_ERR_ARG, "generation needs a prompt of at least one token");
    if (n > e->n_ctx) return assay_fail(ASSAY_ERR_RANGE, "a prompt of %lld tokens exceeds the context of %lld", (long long)n, (long long)e->n_ctx);
    assay_session_seq_clear(e->session, 0);
    for (int64_t start = 0; start < n; start += CHUNK) {
        int64_t len = n - start < CHUNK ? n - start : CHUNK;
        for (int64_t i = 0; i < len; i++) e->pos[i] = (int32_t)(start + i);
        assay_batch b = {len, prompt + start, e->pos, NULL, NULL}; /* logits of the last token only */
        assay_status st = assay_session_forward(e->session, &b, e->rows);
        if (st != ASSAY_OK) return st;
    }
    int64_t p = n;
    for (int64_t k = 0; k < max_new; k++) {
        int32_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (e->rows[v] > e->rows[best]) best = (int32_t)v;
        if (on_token(user, best) || assay_tokenizer_is_eog(e->tok, best) || p >= e->n_ctx) break;
        int32_t pos = (int32_t)p++;
        assay_batch b = {1, &best, &pos, NULL, NULL};
        assay_status st = assay_session_forward(e->session, &b, e->rows);
        if (st != ASSAY_OK) return st;
    }
    return ASSAY_OK;
}

void assay_eval_lm_close(assay_lm *lm) {
    if (!lm) return;
    engine_lm *e = (engine_lm *)lm;
    if (e->session) assay_session_close(e->session);
    if (e->tok) assay_tokenizer_free(e->tok);
    if (e->model) assay_model_free(e->model);
    free(e->rows);
    free(e->pos);
    free(e->want);
    free(e);
}

assay_status assay_eval_lm_open(const char *model, const assay_engine_flags *flags, assay_lm **out) {
    *out = NULL;
    if (flags->device && strcmp(flags->device, "cpu") != 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "--device %s: the eval runs on the CPU engine only in this build", flags->device);
    if (flags->quantization) {
        assay_status st = assay_model_quantization_check(flags->quantization);
        if (st != ASSAY_OK) return assay_fail_context(st, "--quantization");
    }
    assay_session_options so;
    assay_session_options_default(&so);
    if (flags->kv_cache_dtype && strcmp(flags->kv_cache_dtype, "auto") != 0) {
        const char *name = strcmp(flags->kv_cache_dtype, "fp8") == 0 ? "fp8_e4m3" : flags->kv_cache_dtype;
        assay_status st = assay_kv_dtype_from_name(name, &so.kv_dtype);
        if (st != ASSAY_OK) return assay_fail_context(st, "--kv-cache-dtype");
    }
    engine_lm *e = assay_xcalloc(1, sizeof *e);
    assay_model_options mo;
    assay_model_options_default(&mo);
    if (flags->threads > 0) mo.n_threads = (int)flags->threads;
    mo.quantization = flags->quantization; /* on-the-fly, as vLLM's --quantization (model.h) */
    assay_status st = assay_model_load(&e->model, model, &mo);
    if (st == ASSAY_OK) st = assay_tokenizer_load(&e->tok, model);
    if (st != ASSAY_OK) {
        assay_eval_lm_close(&e->lm);
        return assay_fail_context(st, "%s", model);
    }
    const assay_model_config *c = assay_model_get_config(e->model);
    /* lm-eval's HF max_length is the model's max positions; the engine's sessions hold at most 4096 */
    int64_t max_len = flags->max_model_len > 0 ? flags->max_model_len : (c->n_ctx_train > 0 ? c->n_ctx_train : 2048);
    if (!flags->max_model_len && max_len > 4096) max_len = 4096;
    so.n_ctx = max_len;
    if (flags->calculate_kv_scales) so.kv_calc_tokens = flags->kv_scale_tokens > 0 ? flags->kv_scale_tokens : 1024;
    st = assay_session_open(&e->session, e->model, &so);
    if (st != ASSAY_OK) {
        assay_eval_lm_close(&e->lm);
        return assay_fail_context(st, "%s: opening a session of %lld positions", model, (long long)max_len);
    }
    e->n_ctx = assay_session_n_ctx(e->session);
    e->so = so;
    int64_t V = c->n_vocab;
    e->rows = malloc(sizeof(float) * (size_t)(CHUNK * V));
    e->pos = assay_xmalloc(sizeof(int32_t) * CHUNK);
    e->want = assay_xmalloc(CHUNK);
    if (!e->rows) {
        assay_eval_lm_close(&e->lm);
        return assay_fail(ASSAY_ERR_NOMEM, "%s: no memory for %d rows of %lld logits", model, CHUNK, (long long)V);
    }
    const char *base = strrchr(model, '/');
    snprintf(e->name, sizeof e->name, "%s", base && base[1] ? base + 1 : model);
    int32_t bos = assay_tokenizer_bos(e->tok), eos = assay_tokenizer_eos(e->tok);
    e->lm = (assay_lm){e, e->name, V, e->n_ctx, bos >= 0 ? bos : eos, eos, e_tokenize, e_detokenize, e_score, e_generate};
    *out = &e->lm;
    return ASSAY_OK;
}

void assay_eval_lm_engine(const assay_lm *lm, assay_model **model, assay_session_options *so) {
    const engine_lm *e = (const engine_lm *)lm;
    *model = e->model;
    *so = e->so;
}

assay_status assay_engine_flags_parse(const char *text, assay_engine_flags *f, char **storage) {
    memset(f, 0, sizeof *f);
    char *s = assay_xstrdup(text ? text : "");
    *storage = s;
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *val = strchr(tok, '=');
        if (val) *val++ = 0;
        else if (strcmp(tok, "--calculate-kv-scales") == 0) val = "1"; /* a switch, as in vLLM */
        else val = strtok_r(NULL, " \t", &save);
        if (!val) return assay_fail(ASSAY_ERR_ARG, "engine flag %s needs a value", tok);
        char *end = NULL;
        if (strcmp(tok, "--device") == 0) f->device = val;
        else if (strcmp(tok, "--quantization") == 0 || strcmp(tok, "-q") == 0) {
            f->quantization = val;
            assay_status st = assay_model_quantization_check(val); /* a usage error before any model loads */
            if (st != ASSAY_OK) return st;
        }
        else if (strcmp(tok, "--kv-cache-dtype") == 0) f->kv_cache_dtype = val;
        else if (strcmp(tok, "--calculate-kv-scales") == 0) {
            if (strcmp(val, "1") && strcmp(val, "true")) return assay_fail(ASSAY_ERR_ARG, "--calculate-kv-scales is a switch");
            f->calculate_kv_scales = 1;
        } else if (strcmp(tok, "--kv-scale-tokens") == 0) {
            f->kv_scale_tokens = strtoll(val, &end, 10);
            if (!*val || *end || f->kv_scale_tokens < 1)
                return assay_fail(ASSAY_ERR_ARG, "--kv-scale-tokens wants a positive integer, got '%s'", val);
        }
        else if (strcmp(tok, "--threads") == 0 || strcmp(tok, "-t") == 0) {
            f->threads = strtoll(val, &end, 10);
            if (!*val || *end || f->threads < 1) return assay_fail(ASSAY_ERR_ARG, "--threads wants a positive integer, got '%s'", val);
        } else if (strcmp(tok, "--max-model-len") == 0) {
            f->max_model_len = strtoll(val, &end, 10);
            if (!*val || *end || f->max_model_len < 2) return assay_fail(ASSAY_ERR_ARG, "--max-model-len wants an integer >= 2, got '%s'", val);
        } else
            return assay_fail(ASSAY_ERR_ARG,
                              "unknown engine flag '%s' (known: --device, --quantization, --kv-cache-dtype, "
                              "--calculate-kv-scales, --kv-scale-tokens, --threads, --max-model-len)",
                              tok);
    }
    return ASSAY_OK;
}

void assay_engine_flags_format(const assay_engine_flags *f, assay_strbuf *out) {
    const char *sep = "";
    if (f->device) assay_strbuf_printf(out, "%s--device %s", sep, f->device), sep = " ";
    if (f->quantization) assay_strbuf_printf(out, "%s--quantization %s", sep, f->quantization), sep = " ";
    if (f->kv_cache_dtype) assay_strbuf_printf(out, "%s--kv-cache-dtype %s", sep, f->kv_cache_dtype), sep = " ";
    if (f->calculate_kv_scales) assay_strbuf_printf(out, "%s--calculate-kv-scales", sep), sep = " ";
    if (f->kv_scale_tokens) assay_strbuf_printf(out, "%s--kv-scale-tokens %lld", sep, (long long)f->kv_scale_tokens), sep = " ";
    if (f->threads) assay_strbuf_printf(out, "%s--threads %lld", sep, (long long)f->threads), sep = " ";
    if (f->max_model_len) assay_strbuf_printf(out, "%s--max-model-len %lld", sep, (long long)f->max_model_len), sep = " ";
    if (!out->data) assay_strbuf_puts(out, "");
}
