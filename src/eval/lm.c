/* lm.c — lm-evaluation-harness's three request types (loglikelihood, loglikelihood_rolling, generate_until)
 * on top of the assay_lm function table. The token bookkeeping follows lm-eval's HF model (api/model.py
 * _encode_pair, models/huggingface.py _loglikelihood_tokens, utils.get_rolling_token_windows), so a model
 * scored here and there sees exactly the same token sequences. */
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"
#include "assay/progress.h"

static int is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Scores all[0..n) on positions [first, n), where the forward pass sees at most max_length + 1 tokens:
 * lm-eval feeds (context + continuation)[-(max_length + 1):][:-1]. */
static assay_status score_tail(const assay_lm *lm, const int32_t *all, int64_t n, int64_t n_cont, double *ll,
                               int *is_greedy) {
    int64_t keep = n;
    if (keep > lm->max_length + 1) keep = lm->max_length + 1;
    const int32_t *tok = all + (n - keep);
    int64_t first = keep - n_cont;
    if (first < 1) first = 1; /* continuation longer than the window: its oldest tokens fall off, as in lm-eval */
    int64_t m = keep - first;
    float *lp = assay_xmalloc(sizeof(float) * (size_t)(m > 0 ? m : 1));
    uint8_t *g = assay_xmalloc((size_t)(m > 0 ? m : 1));
    assay_status st = lm->score(lm->ctx, tok, keep, first, lp, g, NULL);
    if (st == ASSAY_OK) {
        double s = 0;
        int all_greedy = 1;
        for (int64_t i = 0; i < m; i++) {
            s += lp[i];
            all_greedy &= g[i] != 0;
        }
        *ll = s;
        if (is_greedy) *is_greedy = all_greedy;
    }
    free(lp);
    free(g);
    return st;
}

static assay_status need_tokens(const assay_lm *lm, const char *what) {
    if (!lm->tokenize || !lm->score)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: %s needs token ids, and this model gives none (a server without "
                                                 "/tokenize)", lm->name ? lm->name : "model", what);
    return ASSAY_OK;
}

static assay_status need_prefix(const assay_lm *lm, const char *what) {
    if (lm->prefix_token < 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: %s needs the prefix token (BOS, else EOS), which this model's server "
                                                 "does not tell (give its id: --prefix-token-id)", lm->name ? lm->name : "model", what);
    return ASSAY_OK;
}

assay_status assay_lm_loglikelihood(const assay_lm *lm, const char *context, const char *continuation, double *ll,
                                    int *is_greedy, int64_t *n_tokens) {
    if (lm->loglikelihood) return lm->loglikelihood(lm->ctx, context, continuation, ll, is_greedy, n_tokens);
    assay_status st = need_tokens(lm, "a loglikelihood request");
    if (st != ASSAY_OK) return st;
    int32_t *ctx_ids = NULL, *whole = NULL, *all = NULL;
    int64_t n_ctx = 0, n_whole = 0, n_all = 0, n_cont = 0;
    size_t clen = strlen(context);
    if (clen == 0) {
        /* Empty context: the prefix token (BOS/EOS) conditions the continuation, unless the continuation
         * already starts with it. */
        if ((st = need_prefix(lm, "an empty context")) != ASSAY_OK) return st;
        st = lm->tokenize(lm->ctx, continuation, strlen(continuation), 0, &whole, &n_whole);
        if (st != ASSAY_OK) return st;
        if (n_whole > 0 && whole[0] == lm->prefix_token) {
            all = whole;
            n_all = n_whole;
            n_cont = n_whole - 1;
            whole = NULL;
        } else {
            all = assay_xmalloc(sizeof(int32_t) * (size_t)(n_whole + 1));
            all[0] = lm->prefix_token;
            memcpy(all + 1, whole, sizeof(int32_t) * (size_t)n_whole);
            n_all = n_whole + 1;
            n_cont = n_whole;
        }
    } else {
        /* Trailing whitespace of the context moves to the continuation (word-boundary tokenization). */
        size_t keep = clen;
        while (keep > 0 && is_py_space((unsigned char)context[keep - 1])) keep--;
        size_t cont_len = strlen(continuation);
        char *joined = assay_xmalloc(clen + cont_len + 1);
        memcpy(joined, context, clen);
        memcpy(joined + clen, continuation, cont_len + 1);
        st = lm->tokenize(lm->ctx, joined, clen + cont_len, 1, &whole, &n_whole);
        if (st == ASSAY_OK) st = lm->tokenize(lm->ctx, context, keep, 1, &ctx_ids, &n_ctx);
        free(joined);
        if (st != ASSAY_OK) {
            free(whole);
            free(ctx_ids);
            return st;
        }
        all = whole;
        whole = NULL;
        n_all = n_whole;
        n_cont = n_whole - n_ctx;
        if (n_cont < 0) n_cont = 0;
    }
    if (n_cont == 0) {
        *ll = 0;
        if (is_greedy) *is_greedy = 1;
        st = ASSAY_OK;
    } else {
        st = score_tail(lm, all, n_all, n_cont, ll, is_greedy);
    }
    if (n_tokens) *n_tokens = n_all;
    free(all);
    free(whole);
    free(ctx_ids);
    return st;
}

int64_t assay_rolling_windows(int64_t n_tokens, int64_t max_length, assay_rolling_window *w, int64_t max_windows) {
    ASSAY_ASSERT(max_length >= 1);
    if (n_tokens <= 0) return 0;
    int64_t count = 0, predicted = 0;
    int64_t first = n_tokens < max_length ? n_tokens : max_length;
    if (count < max_windows) w[count] = (assay_rolling_window){-1, 0, first};
    count++;
    predicted = first;
    while (predicted < n_tokens) {
        int64_t len = n_tokens - predicted < max_length ? n_tokens - predicted : max_length;
        int64_t end = predicted + len;
        /* input tokens[end - max_length - 1, end - 1): the full window of context before the new tokens */
        if (count < max_windows) w[count] = (assay_rolling_window){end - max_length - 1, end - len, end};
        count++;
        predicted += len;
    }
    return count;
}

assay_status assay_lm_loglikelihood_rolling(const assay_lm *lm, const char *text, size_t len, double *ll,
                                            int64_t *n_tokens) {
    assay_status st = need_tokens(lm, "rolling windows");
    if (st == ASSAY_OK) st = need_prefix(lm, "rolling windows");
    if (st != ASSAY_OK) return st;
    int32_t *ids = NULL;
    int64_t n = 0;
    st = lm->tokenize(lm->ctx, text, len, 1, &ids, &n);
    if (st != ASSAY_OK) return st;
    int64_t nw = assay_rolling_windows(n, lm->max_length, NULL, 0);
    assay_rolling_window *w = assay_xmalloc(sizeof *w * (size_t)(nw > 0 ? nw : 1));
    assay_rolling_windows(n, lm->max_length, w, nw);
    int32_t *buf = assay_xmalloc(sizeof(int32_t) * (size_t)(lm->max_length + 2));
    double total = 0;
    for (int64_t i = 0; i < nw && st == ASSAY_OK; i++) {
        int64_t m = 0;
        if (w[i].in_begin < 0) buf[m++] = lm->prefix_token;
        for (int64_t j = w[i].in_begin < 0 ? 0 : w[i].in_begin; j < w[i].pred_end; j++) buf[m++] = ids[j];
        double part = 0;
        st = score_tail(lm, buf, m, w[i].pred_end - w[i].pred_begin, &part, NULL);
        total += part;
    }
    free(buf);
    free(w);
    free(ids);
    if (st != ASSAY_OK) return st;
    *ll = total;
    if (n_tokens) *n_tokens = n;
    return ASSAY_OK;
}

typedef struct gen_state {
    const assay_lm *lm;
    int32_t *ids;
    int64_t n, cap, max;
    const char *const *until;
    int n_until;
    assay_status st;
} gen_state;

static int gen_on_token(void *user, int32_t token) {
    gen_state *g = user;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->ids = assay_xrealloc(g->ids, sizeof(int32_t) * (size_t)g->cap);
    }
    g->ids[g->n++] = token;
    if (g->n >= g->max) return 1;
    if (token == g->lm->eos_token) return 1;
    /* Stop once any stop sequence shows up in the decoded text (HF's stop-string criteria); the text is cut at
     * it afterwards, so stopping late would not change the answer, only waste time. */
    char *text = NULL;
    size_t len = 0;
    g->st = g->lm->detokenize(g->lm->ctx, g->ids, g->n, &text, &len);
    if (g->st != ASSAY_OK) return 1;
    int stop = 0;
    for (int i = 0; i < g->n_until && !stop; i++)
        if (g->until[i][0] && strstr(text, g->until[i])) stop = 1;
    free(text);
    return stop;
}

assay_status assay_lm_generate_until(const assay_lm *lm, const char *context, const char *const *until, int n_until,
                                     int64_t max_gen_toks, char **out, int64_t *n_tokens) {
    if (lm->generate_until) return lm->generate_until(lm->ctx, context, until, n_until, max_gen_toks, out, n_tokens);
    assay_status st = need_tokens(lm, "generation");
    if (st != ASSAY_OK) return st;
    if (!lm->generate) return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: this model does not generate", lm->name ? lm->name : "model");
    int32_t *ids = NULL;
    int64_t n = 0;
    st = lm->tokenize(lm->ctx, context, strlen(context), 1, &ids, &n);
    if (st != ASSAY_OK) return st;
    int64_t max_ctx = lm->max_length - max_gen_toks;
    if (max_ctx < 1) max_ctx = 1;
    const int32_t *prompt = n > max_ctx ? ids + (n - max_ctx) : ids; /* left truncation, as lm-eval */
    int64_t n_prompt = n > max_ctx ? max_ctx : n;
    gen_state g = {lm, NULL, 0, 0, max_gen_toks, until, n_until, ASSAY_OK};
    st = lm->generate(lm->ctx, prompt, n_prompt, max_gen_toks, gen_on_token, &g);
    free(ids);
    if (n_tokens) *n_tokens = n_prompt + g.n;
    if (st == ASSAY_OK) st = g.st;
    if (st != ASSAY_OK) {
        free(g.ids);
        return st;
    }
    /* The EOS token itself is not text. */
    int64_t n_text = g.n;
    if (n_text > 0 && g.ids[n_text - 1] == lm->eos_token) n_text--;
    char *text = NULL;
    size_t len = 0;
    st = lm->detokenize(lm->ctx, g.ids, n_text, &text, &len);
    free(g.ids);
    if (st != ASSAY_OK) return st;
    for (int i = 0; i < n_until; i++) {
        if (!until[i][0]) continue;
        char *hit = strstr(text, until[i]);
        if (hit) *hit = 0;
    }
    *out = text;
    return ASSAY_OK;
}
