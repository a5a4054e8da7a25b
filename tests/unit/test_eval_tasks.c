/* test_eval_tasks.c — the eval layer below the prompts (which tests/py/test_eval_prompts.py checks against
 * lm-evaluation-harness): CPython's random port, lm-eval's rolling windows, the loglikelihood bookkeeping on a toy
 * bigram model, gsm8k filters/exact_match, word counts, the wikitext page split, SHA-256.
 * Expected values come from CPython 3.11 (random, re, hashlib), lm-eval 0.4.13 (RegexFilter, exact_match) and
 * FIPS 180-2's test vector, as noted at each check. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"
#include "assay/file.h"
#include "assay/sha256.h"
#include "check.h"

/* ---- a toy model: byte tokens (id = byte + 1, 0 = BOS), bigram logits from a fixed formula ------------------- */
enum { TOY_V = 257 };

static double toy_logit(int prev, int v) { return 3.0 * sin(0.37 * v + 0.11 * prev) + 0.01 * v; }

static double toy_logprob(int prev, int v) {
    double mx = -1e30, s = 0;
    for (int i = 0; i < TOY_V; i++) mx = fmax(mx, toy_logit(prev, i));
    for (int i = 0; i < TOY_V; i++) s += exp(toy_logit(prev, i) - mx);
    return toy_logit(prev, v) - mx - log(s);
}

static int64_t toy_calls, toy_max_n;

static assay_status toy_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int64_t *n) {
    (void)ctx;
    (void)add_special; /* like GPT-2 style tokenizers: never adds BOS */
    *ids = malloc(sizeof(int32_t) * (len + 1));
    for (size_t i = 0; i < len; i++) (*ids)[i] = (unsigned char)text[i] + 1;
    *n = (int64_t)len;
    return ASSAY_OK;
}

static assay_status toy_detokenize(void *ctx, const int32_t *ids, int64_t n, char **text, size_t *len) {
    (void)ctx;
    *text = malloc((size_t)n + 1);
    size_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] > 0) (*text)[k++] = (char)(ids[i] - 1);
    (*text)[k] = 0;
    *len = k;
    return ASSAY_OK;
}

static assay_status toy_score(void *ctx, const int32_t *t, int64_t n, int64_t first, float *lp, uint8_t *g, float *logits) {
    (void)ctx;
    toy_calls++;
    if (n - 1 > toy_max_n) toy_max_n = n - 1;
    for (int64_t i = first; i < n; i++) {
        lp[i - first] = (float)toy_logprob(t[i - 1], t[i]);
        int best = 0;
        for (int v = 1; v < TOY_V; v++)
            if (toy_logit(t[i - 1], v) > toy_logit(t[i - 1], best)) best = v;
        g[i - first] = best == t[i];
        if (logits)
            for (int v = 0; v < TOY_V; v++) logits[(i - first) * TOY_V + v] = (float)toy_logit(t[i - 1], v);
    }
    return ASSAY_OK;
}

static assay_status toy_generate(void *ctx, const int32_t *prompt, int64_t n, int64_t max_new, assay_lm_token_fn fn, void *user) {
    (void)ctx;
    int prev = prompt[n - 1];
    for (int64_t k = 0; k < max_new; k++) {
        int best = 1;
        for (int v = 1; v < TOY_V; v++)
            if (toy_logit(prev, v) > toy_logit(prev, best)) best = v;
        if (fn(user, best)) break;
        prev = best;
    }
    return ASSAY_OK;
}

static assay_lm toy_lm(int64_t max_length) {
    assay_lm lm = {NULL, "toy", TOY_V, max_length, 0, -1, toy_tokenize, toy_detokenize, toy_score, toy_generate, NULL, NULL, 1};
    return lm;
}

static double direct_ll(const char *s, int prev) {
    double total = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        total += toy_logprob(prev, *p + 1);
        prev = *p + 1;
    }
    return total;
}

static void test_pyrandom(void) {
    assay_pyrandom r;
    assay_pyrandom_seed(&r, 1234);
    /* random.Random(1234).getrandbits(32) x3 */
    CHECK(assay_pyrandom_u32(&r) == 4150886329u);
    CHECK(assay_pyrandom_u32(&r) == 3342196574u);
    CHECK(assay_pyrandom_u32(&r) == 1892932127u);
    assay_pyrandom_seed(&r, 1234);
    CHECK(assay_pyrandom_random(&r) == 0.9664535356921388);
    /* r.sample(range(7473), 5) twice, then r.sample(range(20), 6) (the pool branch) */
    int64_t s[6];
    assay_pyrandom_seed(&r, 1234);
    assay_pyrandom_sample(&r, 7473, 5, s);
    CHECK(s[0] == 6374 && s[1] == 3610 && s[2] == 957 && s[3] == 61 && s[4] == 742);
    assay_pyrandom_sample(&r, 7473, 5, s);
    CHECK(s[0] == 7462 && s[1] == 6610 && s[2] == 4769 && s[3] == 286 && s[4] == 5501);
    assay_pyrandom_sample(&r, 20, 6, s);
    CHECK(s[0] == 2 && s[1] == 3 && s[2] == 11 && s[3] == 7 && s[4] == 0 && s[5] == 15);
}

static void test_windows(void) {
    /* lm_eval.utils.get_rolling_token_windows(list(range(10)), prefix, max_seq_len=4, context_len=1) with
     * make_disjoint_window: ([P,0,1,2] -> 0..3), ([3,4,5,6] -> 4..7), ([5,6,7,8] -> 8..9) */
    assay_rolling_window w[8];
    CHECK(assay_rolling_windows(10, 4, w, 8) == 3);
    CHECK(w[0].in_begin == -1 && w[0].pred_begin == 0 && w[0].pred_end == 4);
    CHECK(w[1].in_begin == 3 && w[1].pred_begin == 4 && w[1].pred_end == 8);
    CHECK(w[2].in_begin == 5 && w[2].pred_begin == 8 && w[2].pred_end == 10);
    CHECK(assay_rolling_windows(0, 4, w, 8) == 0);
    CHECK(assay_rolling_windows(3, 4, w, 8) == 1 && w[0].pred_end == 3);
}

static void test_loglikelihood(void) {
    assay_lm lm = toy_lm(64);
    double ll = 0;
    int g = 0;
    int64_t n = 0;
    /* the trailing space moves into the continuation: scored tokens are " cd" after "ab" */
    CHECK_OK(assay_lm_loglikelihood(&lm, "ab ", "cd", &ll, &g, &n));
    CHECK_NEAR(ll, direct_ll(" cd", 'b' + 1), 1e-5);
    CHECK(n == 5);
    /* empty context: the prefix token conditions the continuation */
    CHECK_OK(assay_lm_loglikelihood(&lm, "", "xyz", &ll, &g, &n));
    CHECK_NEAR(ll, direct_ll("xyz", 0), 1e-5);
    /* a bigram model's rolling log-likelihood does not depend on the window: every token is scored once,
     * the first after the prefix token */
    const char *text = "The quick brown fox jumps over the lazy dog, again and again and again.";
    for (int64_t L = 1; L <= 80; L += 7) {
        assay_lm l2 = toy_lm(L);
        toy_max_n = 0;
        CHECK_OK(assay_lm_loglikelihood_rolling(&l2, text, strlen(text), &ll, &n));
        CHECK_NEAR(ll, direct_ll(text, 0), 1e-4);
        CHECK(n == (int64_t)strlen(text));
        CHECK(toy_max_n <= L); /* never more than max_length tokens through the model */
    }
    /* generate_until cuts at the stop string */
    char *out = NULL;
    const char *until[] = {"Q"};
    int64_t ntok = -1;
    CHECK_OK(assay_lm_generate_until(&lm, "abc", until, 1, 20, &out, &ntok));
    CHECK(out && strlen(out) <= 20 && !strchr(out, 'Q'));
    /* the prompt (3 bytes, maybe a prefix token) and at least one generated token went through the model */
    CHECK(ntok >= 4 && ntok <= 3 + 1 + 20);
    free(out);
}

static void test_gsm8k(void) {
    /* lm-eval 0.4.13: RegexFilter(strict / flexible, group_select 0 / -1) on these responses */
    struct {
        const char *resp, *strict, *flex;
    } c[] = {
        {"She pays $1,200.50 in total.\n#### 1,200.50", "1,200.50", "1,200.50"},
        {"The answer is 42.", "[invalid]", "42."},
        {"no numbers here", "[invalid]", "[invalid]"},
        {"It costs $5 and then 7 more, so 12.\n\nQuestion:", "[invalid]", "12."},
        {"#### -3\nthen #### 8", "-3", "8"},
        {"x = 3.5, y = -4", "[invalid]", "-4"},
        {"5", "[invalid]", "5"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *s = assay_gsm8k_strict(c[i].resp), *f = assay_gsm8k_flexible(c[i].resp);
        CHECK(strcmp(s, c[i].strict) == 0);
        CHECK(strcmp(f, c[i].flex) == 0);
        free(s);
        free(f);
    }
    /* exact_match_hf_evaluate with gsm8k's regexes_to_ignore and ignore_case: 1, 1, 0, 1, 0 */
    const char *ref = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 1,800";
    CHECK(assay_gsm8k_exact_match("1800", ref) == 1);
    CHECK(assay_gsm8k_exact_match("$1,800.", ref) == 1);
    CHECK(assay_gsm8k_exact_match("1800.0", ref) == 0);
    CHECK(assay_gsm8k_exact_match("#### 1800", ref) == 1);
    CHECK(assay_gsm8k_exact_match("1,800\n", ref) == 0);
}

static void test_text(void) {
    /* len(re.split(r"\s+", " a  b\u00a0c\n")) == 5 */
    CHECK(assay_count_words_python(" a  b\xC2\xA0" "c\n") == 5);
    CHECK(assay_count_words_python("") == 1);
    char *d = assay_wikitext_detokenize(" = Title = \n The cat 's toy ( red ) costs 1 @,@ 000 . \n");
    CHECK(strcmp(d, " = Title =\nThe cat's toy (red) costs 1,000.\n") == 0);
    free(d);
    char *raw = NULL;
    size_t len = 0;
    CHECK_OK(assay_read_file(check_shared_path("data/wikitext2_raw/wiki.test.raw"), &raw, &len));
    char **docs = NULL;
    int64_t n = 0;
    if (raw) {
        CHECK_OK(assay_wikitext_documents(raw, len, &docs, &n));
        CHECK(n == 62); /* EleutherAI/wikitext_document_level wikitext-2-raw-v1 test: 62 pages */
        size_t total = 0;
        for (int64_t i = 0; i < n; i++) total += strlen(docs[i]) + 1;
        /* pages joined by "\n" give back the file, less its blank first line " \n" (a page of only blanks is
         * dropped by the loader) */
        CHECK(total - 1 == len - 2);
        CHECK(strncmp(docs[0], " = Robert Boulter = \n", 21) == 0);
        for (int64_t i = 0; i < n; i++) free(docs[i]);
        free(docs);
    }
    free(raw);
}

static void test_sha256(void) {
    uint8_t dg[32];
    char hex[65];
    assay_sha256 h;
    assay_sha256_init(&h);
    assay_sha256_update(&h, "abc", 3);
    assay_sha256_final(&h, dg);
    assay_sha256_hex(dg, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    assay_sha256_init(&h);
    for (int i = 0; i < 1000; i++) assay_sha256_update(&h, "a", 1); /* hashlib.sha256(b"a" * 1000) */
    assay_sha256_final(&h, dg);
    assay_sha256_hex(dg, hex);
    CHECK(strcmp(hex, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3") == 0);
}

/* A toy end-to-end run: results have lm-eval's keys and acc equals the fraction of argmax == gold. */
static void test_run(void) {
    assay_lm lm = toy_lm(256);
    assay_eval_options o;
    assay_eval_options_default(&o);
    o.data_dir = check_shared_path("data");
    o.limit = 20;
    o.progress = 0;
    assay_eval_results *r = NULL, *r2 = NULL;
    CHECK_OK(assay_eval_run(&lm, "arc_challenge", &o, &r));
    o.limit = 2;
    CHECK_OK(assay_eval_run(&lm, "wikitext", &o, &r2));
    if (!r || !r2) return;
    CHECK(r->n_tasks == 1 && r2->n_tasks == 1);
    const assay_task_result *arc = &r->tasks[0];
    CHECK(strcmp(arc->metric_keys[0], "acc,none") == 0 && strcmp(arc->metric_keys[1], "acc_norm,none") == 0);
    double acc = 0;
    for (int64_t i = 0; i < arc->n_samples; i++) {
        const assay_eval_sample *s = &arc->samples[i];
        int best = 0;
        for (int c = 1; c < s->n_choices; c++)
            if (s->lls[c] > s->lls[best]) best = c;
        acc += best == s->gold;
    }
    CHECK_NEAR(arc->metric[0], acc / 20.0, 1e-12);
    const assay_task_result *wt = &r2->tasks[0];
    double ll = 0;
    int64_t words = 0;
    for (int64_t i = 0; i < wt->n_samples; i++) ll += wt->samples[i].ll, words += wt->samples[i].words;
    CHECK_NEAR(wt->metric[0], exp(-ll / (double)words), 1e-9 * wt->metric[0]);
    assay_strbuf js = {0};
    assay_eval_results_json(r, &js);
    assay_eval_results_json(r2, &js);
    CHECK(strstr(js.data, "\"acc_stderr,none\"") && strstr(js.data, "\"word_perplexity,none\"") &&
          strstr(js.data, "\"bits_per_byte_stderr,none\": \"N/A\""));
    assay_strbuf_free(&js);
    assay_eval_results_free(r);
    assay_eval_results_free(r2);
}

/* --write-results FILE: a results file from the toy model, for tests/py/test_eval_results_keys.py */
static int write_results(const char *path) {
    assay_lm lm = toy_lm(256);
    assay_eval_options o;
    assay_eval_options_default(&o);
    o.data_dir = check_shared_path("data");
    o.limit = 8;
    o.progress = 0;
    assay_eval_results *r = NULL;
    if (assay_eval_run(&lm, "arc_challenge,piqa,mmlu_abstract_algebra,mmlu_anatomy,mmlu_astronomy,mmlu_philosophy,wikitext",
                       &o, &r) != ASSAY_OK) {
        fprintf(stderr, "%s\n", assay_last_error());
        return 1;
    }
    assay_strbuf js = {0};
    assay_eval_results_json(r, &js);
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    fwrite(js.data, 1, js.len, f);
    fclose(f);
    assay_strbuf_free(&js);
    assay_eval_results_free(r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-results") == 0) return write_results(argv[2]);
    test_pyrandom();
    test_windows();
    test_loglikelihood();
    test_gsm8k();
    test_text();
    test_sha256();
    test_run();
    return check_finish("eval_tasks");
}
