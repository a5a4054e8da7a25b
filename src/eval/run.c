/* run.c — scores loaded tasks through assay_lm and aggregates them the way lm-evaluation-harness does:
 *   multiple choice: acc = [argmax ll == gold], acc_norm = [argmax ll / len(choice in characters) == gold]
 *                    (api/task.py process_results), stderr = sample std (ddof 1) / sqrt(n) (api/metrics.py);
 *   gsm8k: exact_match per filter;
 *   wikitext: word_perplexity = exp(-sum ll / sum words), byte_perplexity, bits_per_byte (weighted, no stderr);
 *   text perplexity: windows of ppl_ctx input tokens stepping by ppl_ctx, every token after the first scored;
 *   kld: the same windows through the baseline and the candidate, KL(base || cand) per token; the baseline is a
 *        model, or its log-probabilities saved by `assay perplexity --score-all --save-logits` (same windows). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/eval.h"
#include "assay/file.h"
#include "assay/logits_file.h"
#include "assay/progress.h"

void assay_eval_options_default(assay_eval_options *o) {
    memset(o, 0, sizeof *o);
    const char *shared = assay_shared_dir();
    o->data_dir = NULL;
    if (shared) {
        static char buf[4096];
        snprintf(buf, sizeof buf, "%s/data", shared);
        o->data_dir = buf;
    }
    o->num_fewshot = -1;
    o->ppl_ctx = 512;
    o->max_gen_toks = 256;
    o->fewshot_seed = 1234;
    o->progress = 1;
}

static int64_t utf8_chars(const char *s) {
    int64_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80) n++;
    return n;
}

static void mean_stderr(const double *x, int64_t n, double *mean, double *se) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double m = n ? s / (double)n : NAN, v = 0;
    for (int64_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *se = n > 1 ? sqrt(v / (double)(n - 1)) / sqrt((double)n) : NAN;
}

static void add_metric(assay_task_result *r, const char *key, double v, double se, int hib) {
    ASSAY_ASSERT(r->n_metrics < 8);
    r->metric_keys[r->n_metrics] = key;
    r->metric[r->n_metrics] = v;
    r->stderr_[r->n_metrics] = se;
    r->higher_is_better[r->n_metrics] = hib;
    r->n_metrics++;
}

static void finish_mean_metrics(assay_task_result *r, const char *const *keys, int n_keys) {
    double *x = assay_xmalloc(sizeof(double) * (size_t)(r->n_samples > 0 ? r->n_samples : 1));
    for (int k = 0; k < n_keys; k++) {
        double m, se;
        for (int64_t i = 0; i < r->n_samples; i++) x[i] = r->samples[i].values[k];
        mean_stderr(x, r->n_samples, &m, &se);
        add_metric(r, keys[k], m, se, 1);
    }
    free(x);
}

/* ---- documents, one at a time or several at once ------------------------------------------------------------- */

/* The loop over a task's documents. With lm->concurrency > 1 that many threads take documents in turn (each writes
 * only its own sample); otherwise the calling thread takes them all. A failed document either ends the task (the
 * in-process default) or, with max_failed_in_a_row > 0, is counted and left out, and that many failures in a row end
 * it: a server that went away is not asked about every remaining document. */
typedef struct doc_loop doc_loop;
typedef assay_status (*doc_fn)(const doc_loop *L, int64_t i, int64_t *tokens);

struct doc_loop {
    const assay_lm *lm;
    const assay_task_docs *t;
    const assay_eval_options *o;
    assay_task_result *r;
    doc_fn fn;
    assay_progress *bar;
    pthread_mutex_t mu;
    int64_t next, done, in_a_row;
    uint8_t *failed;    /* per document: the request failed */
    int stop;           /* take no more documents */
    assay_status st;    /* what ended the task early (ASSAY_OK: it ran to the end) */
    char *stop_msg;
};

static void *doc_worker(void *arg) {
    doc_loop *L = arg;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        if (L->stop || L->next >= L->t->n_docs) {
            pthread_mutex_unlock(&L->mu);
            break;
        }
        int64_t i = L->next++;
        pthread_mutex_unlock(&L->mu);
        int64_t tok = 0;
        assay_status st = L->fn(L, i, &tok);
        char *msg = NULL;
        if (st != ASSAY_OK) { /* the message is this thread's: copy it with the document's name */
            assay_strbuf m = {0};
            assay_strbuf_printf(&m, "%s doc %lld: %s", L->t->name, (long long)L->t->docs[i].doc_id, assay_last_error());
            msg = m.data;
        }
        pthread_mutex_lock(&L->mu);
        L->r->tokens_scored += tok;
        if (st == ASSAY_OK) L->in_a_row = 0;
        else {
            L->failed[i] = 1;
            L->r->n_failed++;
            L->in_a_row++;
            if (!L->r->first_error) L->r->first_error = assay_xstrdup(msg);
            int max = L->o->max_failed_in_a_row;
            if (!L->stop && (max <= 0 || L->in_a_row >= max)) {
                L->stop = 1;
                L->st = st;
                if (max > 0) {
                    assay_strbuf m = {0};
                    assay_strbuf_printf(&m, "%lld documents in a row failed, the run stops here (the last: %s)",
                                        (long long)L->in_a_row, msg);
                    free(msg);
                    msg = m.data;
                }
                L->stop_msg = msg;
                msg = NULL;
            }
        }
        L->done++;
        assay_progress_update(L->bar, L->done);
        pthread_mutex_unlock(&L->mu);
        free(msg);
    }
    return NULL;
}

static void sample_clear(assay_eval_sample *s) {
    free(s->lls);
    free(s->greedy);
    free(s->response);
    free(s->filtered[0]);
    free(s->filtered[1]);
    memset(s, 0, sizeof *s);
}

/* Runs fn over every document; failed ones are taken out of r->samples. ASSAY_OK, or what ended the task early. */
static assay_status for_each_doc(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                                 assay_task_result *r, assay_progress *bar, doc_fn fn) {
    doc_loop L;
    memset(&L, 0, sizeof L);
    L.lm = lm, L.t = t, L.o = o, L.r = r, L.fn = fn, L.bar = bar;
    L.failed = assay_xcalloc((size_t)(t->n_docs > 0 ? t->n_docs : 1), 1);
    pthread_mutex_init(&L.mu, NULL);
    int64_t nt = lm->concurrency > 1 ? lm->concurrency : 1;
    if (nt > t->n_docs) nt = t->n_docs;
    if (nt <= 1) doc_worker(&L);
    else {
        pthread_t *th = assay_xmalloc(sizeof *th * (size_t)nt);
        int64_t started = 0;
        for (; started < nt; started++)
            if (pthread_create(&th[started], NULL, doc_worker, &L) != 0) break;
        if (started == 0) doc_worker(&L); /* no threads to be had: this one does it all */
        for (int64_t k = 0; k < started; k++) pthread_join(th[k], NULL);
        free(th);
    }
    pthread_mutex_destroy(&L.mu);
    /* documents never tried (the run stopped) and failed ones leave the records; the rest keep their order */
    r->n_skipped = t->n_docs - L.next;
    int64_t w = 0;
    for (int64_t i = 0; i < t->n_docs; i++) {
        if (i >= L.next || L.failed[i]) {
            sample_clear(&r->samples[i]);
            continue;
        }
        if (w != i) {
            r->samples[w] = r->samples[i];
            memset(&r->samples[i], 0, sizeof r->samples[i]);
        }
        w++;
    }
    r->n_samples = w;
    r->n_effective = w;
    free(L.failed);
    if (L.st == ASSAY_OK) return ASSAY_OK;
    assay_status st = assay_fail(L.st, "%s", L.stop_msg);
    free(L.stop_msg);
    return st;
}

static assay_status mc_doc(const doc_loop *L, int64_t i, int64_t *tokens) {
    const assay_task_docs *t = L->t;
    const assay_eval_doc *d = &t->docs[i];
    assay_eval_sample *s = &L->r->samples[i];
    s->doc_id = d->doc_id;
    s->n_choices = d->n_choices;
    s->gold = d->gold;
    s->lls = assay_xmalloc(sizeof(double) * (size_t)d->n_choices);
    s->greedy = assay_xmalloc((size_t)d->n_choices);
    int best = 0, best_norm = 0;
    double best_ll = -INFINITY, best_llnorm = -INFINITY;
    for (int c = 0; c < d->n_choices; c++) {
        assay_strbuf cont = {0};
        assay_strbuf_puts(&cont, t->target_delimiter);
        assay_strbuf_puts(&cont, d->choices[c]);
        int g = 0;
        int64_t ntok = 0;
        assay_status st = assay_lm_loglikelihood(L->lm, d->context, cont.data, &s->lls[c], &g, &ntok);
        assay_strbuf_free(&cont);
        if (st != ASSAY_OK) return st;
        s->greedy[c] = (uint8_t)g;
        *tokens += ntok;
        /* np.argmax: the first maximum wins ties */
        double norm = s->lls[c] / (double)utf8_chars(d->choices[c]);
        if (s->lls[c] > best_ll) best_ll = s->lls[c], best = c;
        if (norm > best_llnorm) best_llnorm = norm, best_norm = c;
    }
    s->n_values = 2;
    s->values[0] = best == d->gold;
    s->values[1] = best_norm == d->gold;
    return ASSAY_OK;
}

static assay_status run_mc(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                           assay_task_result *r, assay_progress *bar) {
    assay_status st = for_each_doc(lm, t, o, r, bar, mc_doc);
    if (st != ASSAY_OK && o->max_failed_in_a_row <= 0) return st;
    if (t->group) { /* mmlu lists acc only */
        static const char *keys[] = {"acc,none"};
        finish_mean_metrics(r, keys, 1);
    } else {
        static const char *keys[] = {"acc,none", "acc_norm,none"};
        finish_mean_metrics(r, keys, 2);
    }
    return st;
}

static const char *const gen_until[] = {"Question:", "</s>", "<|im_end|>"};

static assay_status gen_doc(const doc_loop *L, int64_t i, int64_t *tokens) {
    const assay_eval_doc *d = &L->t->docs[i];
    assay_eval_sample *s = &L->r->samples[i];
    s->doc_id = d->doc_id;
    assay_status st = assay_lm_generate_until(L->lm, d->context, gen_until, 3, L->o->max_gen_toks, &s->response, tokens);
    if (st != ASSAY_OK) return st;
    s->filtered[0] = assay_gsm8k_strict(s->response);
    s->filtered[1] = assay_gsm8k_flexible(s->response);
    s->n_values = 2;
    s->values[0] = assay_gsm8k_exact_match(s->filtered[0], d->target);
    s->values[1] = assay_gsm8k_exact_match(s->filtered[1], d->target);
    return ASSAY_OK;
}

static assay_status run_gen(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                            assay_task_result *r, assay_progress *bar) {
    assay_status st = for_each_doc(lm, t, o, r, bar, gen_doc);
    if (st != ASSAY_OK && o->max_failed_in_a_row <= 0) return st;
    static const char *keys[] = {"exact_match,strict-match", "exact_match,flexible-extract"};
    finish_mean_metrics(r, keys, 2);
    return st;
}

static assay_status rolling_doc(const doc_loop *L, int64_t i, int64_t *tokens) {
    const assay_eval_doc *d = &L->t->docs[i];
    assay_eval_sample *s = &L->r->samples[i];
    s->doc_id = d->doc_id;
    assay_status st = assay_lm_loglikelihood_rolling(L->lm, d->context, strlen(d->context), &s->ll, &s->tokens);
    if (st != ASSAY_OK) return st;
    s->words = assay_count_words_python(d->target);
    s->bytes = (int64_t)strlen(d->target);
    *tokens += s->tokens;
    return ASSAY_OK;
}

static assay_status run_rolling(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                                assay_task_result *r, assay_progress *bar) {
    assay_status st = for_each_doc(lm, t, o, r, bar, rolling_doc);
    if (st != ASSAY_OK && o->max_failed_in_a_row <= 0) return st;
    double ll = 0;
    int64_t words = 0, bytes = 0, tokens = 0;
    for (int64_t i = 0; i < r->n_samples; i++) { /* in document order, as the sequential sum always was */
        ll += r->samples[i].ll;
        words += r->samples[i].words;
        bytes += r->samples[i].bytes;
        tokens += r->samples[i].tokens;
    }
    add_metric(r, "word_perplexity,none", exp(-ll / (double)words), NAN, 0);
    add_metric(r, "byte_perplexity,none", exp(-ll / (double)bytes), NAN, 0);
    add_metric(r, "bits_per_byte,none", -ll / (double)bytes / log(2.0), NAN, 0);
    add_metric(r, "token_perplexity,none", exp(-ll / (double)tokens), NAN, 0);
    return st;
}

/* Log-softmax of one row into out; returns the argmax. */
static int64_t log_softmax(const float *logits, int64_t n, double *out) {
    int64_t arg = 0;
    double mx = logits[0];
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i], arg = i;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)logits[i] - mx);
    double lse = mx + log(s);
    for (int64_t i = 0; i < n; i++) out[i] = (double)logits[i] - lse;
    return arg;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A saved baseline must describe exactly these windows: same vocabulary, --score-all windows of ctx tokens, the same
 * token ids (same text, same tokenizer), and rows for every token the first nw windows score. */
static assay_status check_logits_file(const assay_logits_file *f, const assay_lm *lm, const int32_t *ids, int64_t n,
                                      int64_t ctx, int64_t nw, const char *text_name) {
    const char *path = f->map.path ? f->map.path : "the kld baseline";
    if ((int64_t)f->h.n_vocab != lm->n_vocab)
        return assay_fail(ASSAY_ERR_ARG, "kld: %s holds %u-entry vocabulary rows, the model has %lld entries", path,
                          f->h.n_vocab, (long long)lm->n_vocab);
    if (!f->h.score_all)
        return assay_fail(ASSAY_ERR_ARG, "kld: %s was saved in llama.cpp's chunk convention (BOS, half of each chunk scored); "
                          "the kld task scores every token of --ctx windows: save it with `assay perplexity MODEL -f TEXT "
                          "--score-all --ctx %lld --save-logits FILE`", path, (long long)ctx);
    if ((int64_t)f->h.n_ctx != ctx)
        return assay_fail(ASSAY_ERR_ARG, "kld: %s was saved with --ctx %u, this run uses windows of %lld tokens (pass --ctx %u)",
                          path, f->h.n_ctx, (long long)ctx, f->h.n_ctx);
    if ((int64_t)f->h.n_tokens != n || memcmp(f->tokens, ids, sizeof(int32_t) * (size_t)n) != 0) {
        int64_t k = 0;
        while (k < n && k < (int64_t)f->h.n_tokens && f->tokens[k] == ids[k]) k++;
        return assay_fail(ASSAY_ERR_ARG, "kld: %s holds %llu tokens, this model's tokenization of %s has %lld; they differ from "
                          "token %lld on (another text or another tokenizer)", path, (unsigned long long)f->h.n_tokens,
                          text_name, (long long)n, (long long)k);
    }
    int64_t need = nw * ctx < n - 1 ? nw * ctx : n - 1;
    if ((int64_t)f->h.n_scored < need)
        return assay_fail(ASSAY_ERR_ARG, "kld: %s holds %llu scored tokens (%llu windows), %lld windows need %lld: "
                          "lower --limit to %llu or save more chunks", path, (unsigned long long)f->h.n_scored,
                          (unsigned long long)(f->h.n_scored / (uint64_t)ctx), (long long)nw, (long long)need,
                          (unsigned long long)(f->h.n_scored / (uint64_t)ctx));
    return ASSAY_OK;
}

/* Windows of ctx + 1 tokens starting every ctx tokens: each feeds ctx tokens and scores all but its first. */
static assay_status run_text(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                             assay_task_result *r, assay_progress *bar_unused) {
    const assay_eval_doc *d = &t->docs[0];
    const assay_lm *base = t->kind == ASSAY_TASK_KLD ? o->kld_base : NULL;
    const assay_logits_file *bfile = t->kind == ASSAY_TASK_KLD ? o->kld_base_file : NULL;
    if (t->kind == ASSAY_TASK_KLD && !base && !bfile)
        return assay_fail(ASSAY_ERR_ARG, "kld: no baseline (give --kld-base MODEL or a logits file from "
                                         "`assay perplexity --score-all --save-logits`)");
    if (base && base->n_vocab != lm->n_vocab)
        return assay_fail(ASSAY_ERR_ARG, "kld: the baseline has %lld vocabulary entries, the model %lld",
                          (long long)base->n_vocab, (long long)lm->n_vocab);
    int32_t *ids = NULL;
    int64_t n = 0;
    assay_status st = lm->tokenize(lm->ctx, d->context, strlen(d->context), 0, &ids, &n);
    if (st != ASSAY_OK) return st;
    int64_t ctx = o->ppl_ctx;
    if (ctx > lm->max_length) ctx = lm->max_length;
    int64_t nw = n > 1 ? (n - 2) / ctx + 1 : 0;
    if (o->limit > 0 && nw > o->limit) nw = o->limit;
    if (nw == 0) {
        free(ids);
        return assay_fail(ASSAY_ERR_ARG, "%s: the text has fewer than 2 tokens", t->name);
    }
    if (bfile) {
        st = check_logits_file(bfile, lm, ids, n, ctx, nw, d->target);
        if (st != ASSAY_OK) {
            free(ids);
            return st;
        }
    }
    r->samples = assay_xrealloc(r->samples, sizeof *r->samples * (size_t)nw);
    memset(r->samples, 0, sizeof *r->samples * (size_t)nw);
    r->n_samples = nw;
    r->n_effective = nw;
    r->n_original = n > 1 ? (n - 2) / ctx + 1 : 0;
    float *lp = assay_xmalloc(sizeof(float) * (size_t)ctx), *lpb = assay_xmalloc(sizeof(float) * (size_t)ctx);
    uint8_t *g = assay_xmalloc((size_t)ctx);
    int64_t V = lm->n_vocab;
    float *lc = NULL, *lb = NULL;
    double *pc = NULL, *pb = NULL, *kl_all = NULL;
    int64_t n_kl = 0;
    if (base || bfile) {
        lc = malloc(sizeof(float) * (size_t)(ctx * V));
        lb = base ? malloc(sizeof(float) * (size_t)(ctx * V)) : NULL;
        pc = assay_xmalloc(sizeof(double) * (size_t)V);
        pb = assay_xmalloc(sizeof(double) * (size_t)V);
        kl_all = assay_xmalloc(sizeof(double) * (size_t)(nw * ctx));
        if (!lc || (base && !lb)) {
            free(lc);
            free(lb);
            free(ids);
            free(lp);
            free(lpb);
            free(g);
            free(pc);
            free(pb);
            free(kl_all);
            return assay_fail(ASSAY_ERR_NOMEM, "kld: %lld x %lld logits do not fit in memory (lower --ctx)", (long long)ctx,
                              (long long)V);
        }
    }
    assay_progress bar;
    assay_progress_begin(&bar, t->name, nw, "window");
    if (!o->progress) bar.mode = 0;
    double ll = 0, llb = 0;
    int64_t scored = 0, same_top = 0;
    for (int64_t w = 0; w < nw && st == ASSAY_OK; w++) {
        int64_t s0 = w * ctx, len = n - s0 < ctx + 1 ? n - s0 : ctx + 1;
        st = lm->score(lm->ctx, ids + s0, len, 1, lp, g, lc);
        if (st == ASSAY_OK && base) st = base->score(base->ctx, ids + s0, len, 1, lpb, g, lb);
        if (st != ASSAY_OK) break;
        assay_eval_sample *s = &r->samples[w];
        s->doc_id = w;
        s->tokens = len - 1;
        for (int64_t i = 0; i < len - 1; i++) s->ll += lp[i];
        if (base || bfile) {
            double kl_sum = 0, llb_w = 0;
            int64_t top = 0;
            for (int64_t i = 0; i < len - 1; i++) {
                int64_t ac = log_softmax(lc + i * V, V, pc), ab = 0;
                double lpb_i;
                if (bfile) { /* rows in scoring order: every earlier window scored ctx tokens */
                    assay_logits_row_decode(assay_logits_file_row(bfile, w * ctx + i), V, pb);
                    for (int64_t v = 1; v < V; v++)
                        if (pb[v] > pb[ab]) ab = v;
                    lpb_i = pb[ids[s0 + i + 1]];
                } else {
                    ab = log_softmax(lb + i * V, V, pb);
                    lpb_i = lpb[i];
                }
                double kl = 0;
                for (int64_t v = 0; v < V; v++) kl += exp(pb[v]) * (pb[v] - pc[v]);
                kl_all[n_kl++] = kl;
                kl_sum += kl;
                top += ac == ab;
                llb_w += lpb_i;
            }
            s->n_values = 3;
            s->values[0] = kl_sum;
            s->values[1] = (double)top;
            s->values[2] = llb_w;
            llb += llb_w;
            same_top += top;
        }
        ll += s->ll;
        scored += s->tokens;
        r->tokens_scored += len - 1;
        assay_progress_update(&bar, w + 1);
    }
    assay_progress_end(&bar);
    if (st == ASSAY_OK) {
        if (!base && !bfile) {
            add_metric(r, "perplexity,none", exp(-ll / (double)scored), NAN, 0);
            add_metric(r, "bits_per_token,none", -ll / (double)scored / log(2.0), NAN, 0);
        } else {
            double mean = 0;
            for (int64_t i = 0; i < n_kl; i++) mean += kl_all[i];
            mean /= (double)n_kl;
            double var = 0;
            for (int64_t i = 0; i < n_kl; i++) var += (kl_all[i] - mean) * (kl_all[i] - mean);
            double se = n_kl > 1 ? sqrt(var / (double)(n_kl - 1) / (double)n_kl) : NAN;
            qsort(kl_all, (size_t)n_kl, sizeof(double), cmp_double);
            double p99 = kl_all[(int64_t)floor(0.99 * (double)(n_kl - 1))];
            add_metric(r, "kld,none", mean, se, 0);
            add_metric(r, "kld_median,none", kl_all[(n_kl - 1) / 2], NAN, 0);
            add_metric(r, "kld_p99,none", p99, NAN, 0);
            add_metric(r, "kld_max,none", kl_all[n_kl - 1], NAN, 0);
            add_metric(r, "same_top_pct,none", 100.0 * (double)same_top / (double)scored, NAN, 1);
            add_metric(r, "ppl_ratio,none", exp(-(ll - llb) / (double)scored), NAN, 0);
        }
    }
    free(ids);
    free(lp);
    free(lpb);
    free(g);
    free(lc);
    free(lb);
    free(pc);
    free(pb);
    free(kl_all);
    return st;
}

assay_status assay_eval_task(const assay_lm *lm, const assay_task_docs *t, const assay_eval_options *o,
                             assay_task_result *r) {
    memset(r, 0, sizeof *r);
    r->name = assay_xstrdup(t->name);
    r->group = t->group;
    r->kind = t->kind;
    r->num_fewshot = t->num_fewshot;
    r->n_original = t->n_original;
    r->n_effective = t->n_docs;
    r->n_samples = t->n_docs;
    r->samples = assay_xcalloc((size_t)(t->n_docs > 0 ? t->n_docs : 1), sizeof *r->samples);
    double t0 = assay_now_seconds();
    assay_status st;
    if (t->kind == ASSAY_TASK_TEXT_PPL || t->kind == ASSAY_TASK_KLD) {
        st = run_text(lm, t, o, r, NULL);
    } else {
        assay_progress bar;
        assay_progress_begin(&bar, t->name, t->n_docs, "doc");
        if (!o->progress) bar.mode = 0;
        if (t->kind == ASSAY_TASK_MULTIPLE_CHOICE) st = run_mc(lm, t, o, r, &bar);
        else if (t->kind == ASSAY_TASK_GENERATE) st = run_gen(lm, t, o, r, &bar);
        else st = run_rolling(lm, t, o, r, &bar);
        assay_progress_end(&bar);
    }
    r->seconds = assay_now_seconds() - t0;
    return st;
}

static void task_result_free(assay_task_result *r) {
    for (int64_t i = 0; i < r->n_samples; i++) sample_clear(&r->samples[i]);
    free(r->samples);
    free(r->name);
    free(r->first_error);
}

void assay_eval_results_free(assay_eval_results *r) {
    if (!r) return;
    for (int i = 0; i < r->n_tasks; i++) task_result_free(&r->tasks[i]);
    free(r->tasks);
    free(r->model_name);
    free(r->model_sha256);
    free(r->model_args);
    free(r->device);
    free(r->error);
    free(r);
}

assay_status assay_eval_run(const assay_lm *lm, const char *task_list, const assay_eval_options *o,
                            assay_eval_results **out) {
    if (!o->data_dir) return assay_fail(ASSAY_ERR_ARG, "no data directory: set ASSAY_SHARED (the folder holding data/) or pass --data-dir");
    assay_task_docs *tasks = NULL;
    int n_tasks = 0;
    assay_status st = ASSAY_OK;
    char *list = assay_xstrdup(task_list);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && st == ASSAY_OK; name = strtok_r(NULL, ",", &save)) {
        while (*name == ' ') name++;
        if (*name) st = assay_task_load(name, o, &tasks, &n_tasks);
    }
    free(list);
    if (st == ASSAY_OK && n_tasks == 0) st = assay_fail(ASSAY_ERR_ARG, "no tasks given");
    assay_eval_results *r = assay_xcalloc(1, sizeof *r);
    r->model_name = assay_xstrdup(lm->name ? lm->name : "model");
    r->limit = o->limit;
    r->fewshot_seed = o->fewshot_seed;
    r->max_length = lm->max_length;
    r->start_time = (double)time(NULL);
    double t0 = assay_now_seconds();
    if (st == ASSAY_OK) {
        r->tasks = assay_xcalloc((size_t)n_tasks, sizeof *r->tasks);
        for (int i = 0; i < n_tasks && st == ASSAY_OK; i++) {
            st = assay_eval_task(lm, &tasks[i], o, &r->tasks[i]);
            r->n_tasks = i + 1;
        }
    }
    r->total_seconds = assay_now_seconds() - t0;
    r->end_time = r->start_time + r->total_seconds;
    for (int i = 0; i < n_tasks; i++) assay_task_docs_free(&tasks[i]);
    free(tasks);
    if (st != ASSAY_OK && o->max_failed_in_a_row > 0 && r->n_tasks > 0) {
        /* a run that stopped: its tasks so far are kept; one stopped before it had any metric is dropped */
        r->error = assay_xstrdup(assay_last_error());
        if (r->tasks[r->n_tasks - 1].n_metrics == 0) task_result_free(&r->tasks[--r->n_tasks]);
        *out = r;
        return assay_fail(st, "%s", r->error);
    }
    if (st != ASSAY_OK) {
        assay_eval_results_free(r);
        return st;
    }
    *out = r;
    return ASSAY_OK;
}
