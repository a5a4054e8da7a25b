/* cmd_perplexity.c — `assay perplexity MODEL -f FILE [--ctx N] [--score-all] [--save-logits OUT]
 * [--kl-divergence-base BASE] [--json] [--threads N] [--kv-cache-dtype T] [--quantization fp8] [--chunks N]`.
 *
 * Conventions:
 *   default (llama.cpp's llama-perplexity): the text is tokenized with the model's BOS, cut into floor(T / N)
 *     chunks of N tokens; each chunk's first token is replaced by BOS (when the model adds one), and only the
 *     second half is scored: the tokens at positions N/2+1 .. N-1, each from the logits of the position before.
 *   --score-all (the house model's reference): no BOS; the inputs are consecutive windows of N tokens (the last
 *     may be shorter) and every position of a window is scored on the token after it, so every token but the
 *     first is scored exactly once, with the tokens of the window before it as context.
 * PPL = exp(mean NLL) +/- exp(mean) * stderr(NLL), as llama.cpp prints it.
 *
 * KL divergence: a run with --save-logits OUT stores, for every scored token, the log-probabilities over the
 * vocabulary (logits_file.h: 16 bits each with a per-row offset and step, clamped 30 nats below the row's maximum;
 * `assay eval --tasks kld --kld-base OUT` reads it too); a run of
 * another model or configuration with --kl-divergence-base OUT compares its distributions with them:
 * mean/median/99th percentile/max KLD(base || this), same top token %, RMS of p(this) - p(base) of the correct
 * token, and the PPL ratio, with uncertainties as llama.cpp computes them.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "assay/engine.h"
#include "assay/file.h"
#include "assay/logits_file.h"
#include "assay/model.h"
#include "assay/progress.h"
#include "assay/sampler.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "cli.h"
#include "commands.h"
#include "engine_cli.h"

/* log(sum exp x) of one row of logits, in double */
static double row_logsumexp(const float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

static void log_softmax(const float *x, double lse, double *lp, int64_t n) {
    for (int64_t i = 0; i < n; i++) lp[i] = x[i] - lse;
}

/* The rows' log-sum-exps over threads: the exp of every logit is most of the scoring time once the forward pass is
 * fast (a GPU's; 112K rows x 8K vocab = 0.9G exps). Each row is summed by one thread in one order, so the result is
 * the same as a single thread's. */
typedef struct lse_job {
    const float *logits;
    int64_t V, r0, r1;
    double *lse;
} lse_job;

static void *lse_worker(void *arg) {
    lse_job *j = arg;
    for (int64_t r = j->r0; r < j->r1; r++) j->lse[r] = row_logsumexp(j->logits + r * j->V, j->V);
    return NULL;
}

static void rows_logsumexp(const float *logits, int64_t rows, int64_t V, double *lse) {
    long nt = sysconf(_SC_NPROCESSORS_ONLN);
    if (nt > 64) nt = 64;
    if (nt > rows) nt = (long)rows;
    if (nt < 1) nt = 1;
    lse_job jobs[64];
    pthread_t th[64];
    for (long t = 0; t < nt; t++) {
        jobs[t] = (lse_job){logits, V, rows * t / nt, rows * (t + 1) / nt, lse};
        th[t] = 0;
        if (t && pthread_create(&th[t], NULL, lse_worker, &jobs[t]) != 0) lse_worker(&jobs[t]);
    }
    lse_worker(&jobs[0]);
    for (long t = 1; t < nt; t++)
        if (th[t]) pthread_join(th[t], NULL);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static float percentile(const float *sorted, int64_t n, double p) { /* linear interpolation */
    if (n == 0) return 0;
    double r = p * (double)(n - 1);
    int64_t i = (int64_t)r;
    if (i >= n - 1) return sorted[n - 1];
    return (float)(sorted[i] + (r - (double)i) * (sorted[i + 1] - sorted[i]));
}

int assay_cmd_perplexity(int argc, char **argv) {
    const char *file = NULL, *save = NULL, *base = NULL;
    int64_t n_ctx = 512, max_chunks = 0;
    int score_all = 0, json = 0;
    engine_cli ec;
    engine_cli_init(&ec);
    ec.max_num_seqs = 1;
    const cli_option opts[] = {
        {"-f", "--file", CLI_STRING, &file, "FILE", "text to score (-: standard input)"},
        {"-c", "--ctx-size", CLI_INT, &n_ctx, "N", "tokens per chunk (default 512)", CLI_AT_LEAST(4), .alias = "--ctx"},
        {NULL, "--score-all", CLI_FLAG, &score_all, NULL, "no BOS, every token after a window's first scored (house convention)"},
        {NULL, "--chunks", CLI_INT, &max_chunks, "N", "score only the first N chunks (default 0: all)", CLI_AT_LEAST(0)},
        {NULL, "--save-logits", CLI_STRING, &save, "OUT", "store this model's log-probabilities as a KLD baseline"},
        {NULL, "--kl-divergence-base", CLI_STRING, &base, "BASE", "compare with a baseline saved by --save-logits"},
        {NULL, "--json", CLI_FLAG, &json, NULL, "print one JSON object with every statistic"},
        ENGINE_CLI_OPTIONS(ec),
        {0}};
    const cli_spec spec = {"perplexity", "MODEL -f FILE [-c N] [--score-all] [--save-logits OUT | --kl-divergence-base BASE]",
                           "perplexity with uncertainty, KL divergence against saved baseline logits", opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (!file) return cli_args_free(&args), cli_usage_error(&spec, "-f FILE is required");
    if (save && base) return cli_args_free(&args), cli_usage_error(&spec, "--save-logits and --kl-divergence-base exclude each other");
    assay_engine_args ea;
    if ((rc = engine_cli_args(&ec, &spec, args.positional[0], &ea)) != CLI_CONTINUE) return cli_args_free(&args), rc;
    /* one chunk per request, at most n_ctx positions each */
    ea.max_model_len = n_ctx;
    ea.max_num_batched_tokens = n_ctx;
    const assay_kv_dtype kv_dtype = ea.kv_cache_dtype;
    const int calc_kv = ea.calculate_kv_scales > 0;

    const char *path = args.positional[0];
    int exit_code = CLI_EXIT_ERROR;
    assay_model *m = NULL;
    assay_tokenizer *tok = NULL;
    assay_engine *e = NULL;
    assay_session *s = NULL; /* the engine's model runner, for its KV-scale reports */
    assay_tokens ids = {0};
    char *text = NULL;
    size_t text_len = 0;
    float *logits = NULL, *klds = NULL;
    double *lp = NULL, *lpb = NULL, *lse = NULL;
    uint8_t *row = NULL;
    assay_output_file out = {0};
    assay_logits_file bm = {0};
    int out_open = 0, bm_open = 0;

    assay_model_options mo;
    assay_engine_args_model_options(&ea, &mo);
    if (cli_read_text("perplexity", file, &text, &text_len) != 0) {
        cli_args_free(&args);
        return CLI_EXIT_ERROR;
    }
    if (assay_model_load(&m, path, &mo) != ASSAY_OK || assay_tokenizer_load(&tok, path) != ASSAY_OK) goto done;
    const int64_t train = assay_model_get_config(m)->n_ctx_train;
    if (train > 0 && n_ctx > train) {
        assay_fail(ASSAY_ERR_RANGE, "-c/--ctx-size %lld is longer than the model's context of %lld tokens", (long long)n_ctx,
                   (long long)train);
        goto done;
    }
    const int64_t V = assay_model_get_config(m)->n_vocab;
    int add_bos = !score_all && assay_tokenizer_add_bos(tok) && assay_tokenizer_bos(tok) >= 0;
    if (assay_tokenizer_encode(tok, text, text_len, score_all ? 0 : ASSAY_TOK_ADD_SPECIAL, &ids) != ASSAY_OK) goto done;
    int64_t T = ids.n, n_chunks;
    if (score_all) n_chunks = T > 1 ? (T - 1 + n_ctx - 1) / n_ctx : 0;
    else n_chunks = T / n_ctx;
    if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
    if (n_chunks < 1) {
        assay_fail(ASSAY_ERR_ARG, "%s: %lld tokens are not enough for one chunk of %lld", file, (long long)T, (long long)n_ctx);
        goto done;
    }
    /* chunk c feeds tokens [c*n_ctx, c*n_ctx + len) and scores positions first..last-1 of it on the next token */
    const int64_t first = score_all ? 0 : n_ctx / 2;
#define CHUNK_LEN(c) (score_all ? (T - 1 - (c) * n_ctx < n_ctx ? T - 1 - (c) * n_ctx : n_ctx) : n_ctx)
#define CHUNK_LAST(len) (score_all ? (len) : (len) - 1)
    int64_t n_scored = 0;
    for (int64_t c = 0; c < n_chunks; c++) n_scored += CHUNK_LAST(CHUNK_LEN(c)) - first;

    if (assay_engine_open_model(&e, m, tok, &ea) != ASSAY_OK) goto done;
    s = assay_engine_runner(e);
    /* which scales an 8-bit KV cache uses matters to its quality: always said; the rest only with -v */
    if (ec.verbose) fprintf(stderr, "assay perplexity: %s\n", assay_engine_describe(e));
    else if (assay_kv_dtype_scaled(kv_dtype)) fprintf(stderr, "assay perplexity: %s\n", assay_session_kv_scales_desc(s));
    logits = assay_xmalloc((size_t)(n_ctx * V) * sizeof(float));
    lp = assay_xmalloc((size_t)V * sizeof(double));
    lse = assay_xmalloc((size_t)n_ctx * sizeof(double));
    row = assay_xmalloc(assay_logits_row_bytes(V));
    assay_logits_header hdr = {{'A', 'S', 'K', 'L'}, ASSAY_LOGITS_VERSION, (uint32_t)V, (uint32_t)n_ctx, (uint32_t)score_all, 0, (uint64_t)T,
                     (uint64_t)n_scored};
    if (save) {
        if (assay_output_file_open(&out, save, 1) != ASSAY_OK) goto done;
        out_open = 1;
        if (fwrite(&hdr, sizeof hdr, 1, out.fp) != 1 || fwrite(ids.ids, 4, (size_t)T, out.fp) != (size_t)T) {
            assay_fail(ASSAY_ERR_IO, "%s: write failed", save);
            goto done;
        }
    }
    const uint8_t *brows = NULL;
    if (base) {
        if (assay_logits_file_open(&bm, base) != ASSAY_OK) goto done;
        bm_open = 1;
        const assay_logits_header bh = bm.h;
        if (bh.n_vocab != (uint32_t)V || bh.n_ctx != (uint32_t)n_ctx || bh.score_all != (uint32_t)score_all ||
            bh.n_tokens != (uint64_t)T || bh.n_scored < (uint64_t)n_scored) {
            assay_fail(ASSAY_ERR_ARG, "%s: baseline was made with vocab %u, ctx %u, %s, %llu tokens (%llu scored); this run "
                       "has vocab %lld, ctx %lld, %s, %lld tokens (%lld scored)", base, bh.n_vocab, bh.n_ctx,
                       bh.score_all ? "--score-all" : "llama.cpp convention", (unsigned long long)bh.n_tokens,
                       (unsigned long long)bh.n_scored, (long long)V, (long long)n_ctx,
                       score_all ? "--score-all" : "llama.cpp convention", (long long)T, (long long)n_scored);
            goto done;
        }
        if (memcmp(bm.tokens, ids.ids, 4 * (size_t)T) != 0) {
            assay_fail(ASSAY_ERR_ARG, "%s: the baseline's tokens differ from this model's tokenization of %s", base, file);
            goto done;
        }
        brows = bm.rows;
        lpb = assay_xmalloc((size_t)V * sizeof(double));
        klds = assay_xmalloc((size_t)n_scored * sizeof(float));
    }

    double nll = 0, nll2 = 0, bnll = 0, dnll = 0, dnll2 = 0, kld_sum = 0, kld2 = 0, dp_sum = 0, dp2 = 0, dp4 = 0;
    int64_t count = 0, same_top = 0;
    assay_progress bar;
    assay_progress_begin(&bar, "perplexity", n_chunks, "chunk");
    double t0 = assay_now_seconds();
    for (int64_t c = 0; c < n_chunks; c++) {
        int64_t start = c * n_ctx, len = CHUNK_LEN(c), last = CHUNK_LAST(len);
        int32_t *tk = ids.ids + start, saved = tk[0];
        if (add_bos) tk[0] = assay_tokenizer_bos(tok); /* llama.cpp: every chunk starts from BOS */
        /* one scoring request: tokens 0..last, the rows of positions first..last-1 (predicting tokens first+1..last) */
        assay_sampling_params sp;
        assay_sampling_params_default(&sp);
        sp.prompt_only = 1;
        sp.prompt_logprobs_from = first + 1;
        sp.prompt_logits = logits;
        int64_t id;
        assay_status st = assay_engine_add_request(e, tk, last + 1, &sp, &id);
        tk[0] = saved;
        while (st == ASSAY_OK && assay_engine_has_unfinished(e)) {
            const assay_request_output *o;
            int64_t n_out;
            st = assay_engine_step(e, &o, &n_out);
        }
        if (st) goto done;
        rows_logsumexp(logits, last - first, V, lse);
        for (int64_t i = first; i < last; i++) {
            const float *lg = logits + (i - first) * V;
            int32_t target = tk[i + 1];
            const int full_row = save || brows; /* the whole distribution; otherwise the target's alone */
            if (full_row) log_softmax(lg, lse[i - first], lp, V);
            else lp[target] = lg[target] - lse[i - first];
            double v = -lp[target];
            nll += v;
            nll2 += v * v;
            if (save) {
                assay_logits_row_encode(lp, V, row);
                if (fwrite(row, 1, assay_logits_row_bytes(V), out.fp) != assay_logits_row_bytes(V)) {
                    assay_fail(ASSAY_ERR_IO, "%s: write failed", save);
                    goto done;
                }
            }
            if (brows) {
                assay_logits_row_decode(assay_logits_file_row(&bm, count), V, lpb);
                double kl = 0;
                for (int64_t k = 0; k < V; k++) kl += exp(lpb[k]) * (lpb[k] - lp[k]);
                klds[count] = (float)kl;
                kld_sum += kl;
                kld2 += kl * kl;
                double bv = -lpb[target], d = v - bv;
                bnll += bv;
                dnll += d;
                dnll2 += d * d;
                double dp = exp(lp[target]) - exp(lpb[target]);
                dp_sum += dp;
                dp2 += dp * dp;
                dp4 += dp * dp * dp * dp;
                int64_t a1 = 0, a2 = 0;
                for (int64_t k = 1; k < V; k++) {
                    if (lp[k] > lp[a1]) a1 = k;
                    if (lpb[k] > lpb[a2]) a2 = k;
                }
                same_top += a1 == a2;
            }
            count++;
        }
        assay_progress_update(&bar, c + 1);
    }
    assay_progress_end(&bar);
    double secs = assay_now_seconds() - t0;
    if (out_open) {
        out_open = 0;
        if (assay_output_file_commit(&out) != ASSAY_OK) goto done;
    }
    if (calc_kv || strcmp(assay_session_kv_scales_kind(s), "checkpoint") == 0) {
        char line[4096];
        assay_session_kv_scales_format(s, line, sizeof line);
        fprintf(stderr, "assay perplexity: KV %s %s\n", assay_session_kv_scales_kind(s), line);
    }
    double N = (double)count, mean = nll / N;
    double ppl = exp(mean), ppl_err = count > 1 ? ppl * sqrt((nll2 / N - mean * mean) / (N - 1)) : 0;
    assay_strbuf js = {0};
    if (json) {
        assay_strbuf_puts(&js, "{\"model\": ");
        assay_strbuf_json_string(&js, path, strlen(path));
        assay_strbuf_puts(&js, ", \"file\": ");
        assay_strbuf_json_string(&js, file, strlen(file));
        assay_strbuf_printf(&js, ", \"convention\": \"%s\", \"ctx\": %lld, \"chunks\": %lld, \"kv_cache_dtype\": \"%s\"",
                            score_all ? "score-all" : "llama.cpp", (long long)n_ctx, (long long)n_chunks,
                            assay_kv_dtype_name(kv_dtype));
        assay_strbuf_printf(&js, ", \"tokens\": %lld, \"ppl\": ", (long long)count);
        assay_strbuf_json_number(&js, ppl);
        assay_strbuf_puts(&js, ", \"ppl_stderr\": ");
        assay_strbuf_json_number(&js, ppl_err);
        assay_strbuf_puts(&js, ", \"nll_mean\": ");
        assay_strbuf_json_number(&js, mean);
        assay_strbuf_printf(&js, ", \"kv_scales\": \"%s\"", assay_session_kv_scales_kind(s));
    } else {
        printf("%s: %s of %s, %s of %lld (%s), %lld scored, %.1f s (%.1f tok/s)\n", path,
               cli_count(T, "token", "tokens").s, strcmp(file, "-") == 0 ? "standard input" : file, cli_count(n_chunks, "chunk", "chunks").s, (long long)n_ctx,
               score_all ? "score-all" : "llama.cpp convention", (long long)count, secs, (double)(n_chunks * n_ctx) / secs);
        printf("PPL = %.4f +/- %.5f\n", ppl, ppl_err);
    }
    if (brows) {
        double bmean = bnll / N, ppl_b = exp(bmean);
        double dm = dnll / N, dsd = count > 1 ? sqrt((dnll2 / N - dm * dm) / (N - 1)) : 0;
        double ratio = exp(dm), ratio_err = ratio * dsd;
        double km = kld_sum / N, kerr = count > 1 ? sqrt((kld2 / N - km * km) / (N - 1)) : 0;
        double st_p = (double)same_top / N, st_err = sqrt(st_p * (1 - st_p) / N);
        double rms = sqrt(dp2 / N), dpm = dp_sum / N;
        /* uncertainty of the RMS from that of the mean square (delta method) */
        double ms = dp2 / N, rms_err = rms > 0 && count > 1 ? sqrt(fmax(0, dp4 / N - ms * ms) / (N - 1)) / (2 * rms) : 0;
        (void)dpm;
        qsort(klds, (size_t)count, sizeof(float), cmp_float);
        double kmed = percentile(klds, count, 0.5), k99 = percentile(klds, count, 0.99), kmax = klds[count - 1];
        if (json) {
            const char *keys[] = {"ppl_base", "ppl_ratio", "ppl_ratio_stderr", "kld_mean", "kld_stderr", "kld_median",
                                  "kld_p99", "kld_max", "same_top", "same_top_stderr", "rms_dp", "rms_dp_stderr"};
            double vals[] = {ppl_b, ratio, ratio_err, km, kerr, kmed, k99, kmax, st_p, st_err, rms, rms_err};
            for (int i = 0; i < 12; i++) {
                assay_strbuf_printf(&js, ", \"%s\": ", keys[i]);
                assay_strbuf_json_number(&js, vals[i]);
            }
        } else {
            printf("Mean PPL(Q)          : %.6f +/- %.6f\n", ppl, ppl_err);
            printf("Mean PPL(base)       : %.6f\n", ppl_b);
            printf("PPL(Q)/PPL(base)     : %.6f +/- %.6f\n", ratio, ratio_err);
            printf("Mean KLD             : %.6f +/- %.6f\n", km, kerr);
            printf("Median KLD           : %.6f\n", kmed);
            printf("99.0%% KLD            : %.6f\n", k99);
            printf("Maximum KLD          : %.6f\n", kmax);
            printf("Same top p           : %.3f +/- %.3f %%\n", 100 * st_p, 100 * st_err);
            printf("RMS delta-p          : %.3f +/- %.3f %%\n", 100 * rms, 100 * rms_err);
        }
    }
    if (json) {
        assay_strbuf_printf(&js, ", \"seconds\": ");
        assay_strbuf_json_number(&js, secs);
        assay_strbuf_puts(&js, "}\n");
        fputs(js.data, stdout);
        assay_strbuf_free(&js);
    }
    exit_code = CLI_EXIT_OK;
done:
    if (exit_code != CLI_EXIT_OK) cli_report_error("perplexity");
    if (out_open) assay_output_file_abort(&out);
    if (bm_open) assay_logits_file_close(&bm);
    free(logits); free(lp); free(lse); free(lpb); free(klds); free(row); free(text);
    assay_engine_close(e);
    assay_tokens_free(&ids);
    assay_tokenizer_free(tok);
    assay_model_free(m);
    cli_args_free(&args);
    return exit_code;
}
