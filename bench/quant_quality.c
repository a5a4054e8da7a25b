/* quant_quality.c — quality of every weight quantization scheme on one model, measured against its bf16 self
 * and against llama.cpp's q4_k_m of the same weights (the peer, run in the same process when llama-quantize is
 * given).
 *
 *   bench_quant_quality --model ../shared/models/house --text ../shared/models/house/heldout.txt \
 *       --work /tmp/qq --out bench/results/quant_quality.json [--llama-quantize PATH] [--max-windows N] [--threads N]
 *       [--only SCHEMES] [--calib-chunks N (128)] [--gptq-sequential 0|1|2] [--awq-block-loss 0|1] [--awq-duo 0|1]
 *       [--awq-tokens N]
 *
 * For each scheme: quantize the bf16 HF model (timed), load the result in the CPU engine, and score the text in
 * non-overlapping windows of --ctx tokens (default 512), every token after the first of a window scored, no BOS
 * (the house model's reference convention, "--score-all"). Reported: bits per weight and size of the written
 * weights, perplexity, mean KL divergence and same-top-token % against the bf16 model on the same windows, time to
 * quantize. GGUF schemes run from their packed blocks. The int4 schemes run from f32 weights dequantized from
 * exactly the codes and fp16 scales their GPTQ/AWQ checkpoints hold; w8a8-int8 additionally quantizes every linear
 * input per token to int8 inside the engine's calibration hook, which is how the W8A8 kernels see activations.
 * Since the engine loads those checkpoints itself (model.h, "Quantized checkpoints"), the recorded table
 * (bench/results/quant_quality_house.*) comes from bench/quant_quality_cli.py, which measures through the CLI;
 * this program stays for its llama.cpp q4_k_m peer row.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/convert.h"
#include "assay/file.h"
#include "assay/ggml_quant.h"
#include "assay/imatrix.h"
#include "assay/int_quant.h"
#include "assay/model.h"
#include "assay/model_file.h"
#include "assay/progress.h"
#include "assay/quantize_int.h"
#include "assay/tokenizer.h"

typedef struct {
    const char *name;
    int kind; /* 0 bf16, 1 gguf mix, 2 int (fake-quant dir), 3 llama.cpp peer */
    assay_ggml_ftype ftype;
    assay_intq_method method;
    int w8a8_act;
    char path[4096];
    double quant_seconds;
    double bytes, params;
    assay_model *m;
    assay_session *s;
    double nll;
    double kld;
    int64_t same_top, n;
} scheme;

static void act_int8_hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    (void)user;
    if (strncmp(name, "blk.", 4)) return;
    /* W8A8 emulation: the engine hands us the buffer the matmul is about to read; q/k/v (and gate/up) see the same
     * buffer, and re-quantizing values already on the grid leaves them unchanged */
    float *xm = (float *)x;
    int8_t *q = malloc((size_t)n_in);
    for (int64_t t = 0; t < n_tok; t++) {
        float s;
        assay_int8_quantize_token(xm + t * n_in, n_in, q, &s);
        for (int64_t i = 0; i < n_in; i++) xm[t * n_in + i] = q[i] * s;
    }
    free(q);
}

typedef struct {
    const float *L, *base;
    const int32_t *tk;
    int64_t i0, i1, V;
    int cmp;
    double nll, kld;
    int64_t same;
} stats_job;

/* log-softmax of the model and of the base at positions [i0, i1): NLL of the next token, KL(base || model),
 * whether the argmaxes agree */
static void *stats_worker(void *arg) {
    stats_job *j = arg;
    int64_t V = j->V;
    for (int64_t i = j->i0; i < j->i1; i++) {
        const float *x = j->L + i * V, *xb = j->base + i * V;
        double mx = -INFINITY, mb = -INFINITY;
        int64_t am = 0, ab = 0;
        for (int64_t v = 0; v < V; v++) {
            if (x[v] > mx) mx = x[v], am = v;
            if (xb[v] > mb) mb = xb[v], ab = v;
        }
        double z = 0, zb = 0;
        for (int64_t v = 0; v < V; v++) z += exp(x[v] - mx), zb += exp(xb[v] - mb);
        double lz = mx + log(z), lzb = mb + log(zb);
        j->nll += lz - x[j->tk[i + 1]];
        if (j->cmp) {
            double kl = 0;
            for (int64_t v = 0; v < V; v++) {
                double lpb = xb[v] - lzb;
                kl += exp(lpb) * (lpb - (x[v] - lz));
            }
            j->kld += kl;
            j->same += am == ab;
        }
    }
    return NULL;
}

static void stats_window(const float *L, const float *base, const int32_t *tk, int64_t ctx, int64_t V, int cmp,
                         scheme *s, int threads) {
    int nt = threads > 0 ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nt > 64) nt = 64;
    if (nt < 1) nt = 1;
    stats_job jobs[64];
    pthread_t th[64];
    int64_t n = ctx - 1;
    for (int k = 0; k < nt; k++) {
        jobs[k] = (stats_job){L, base, tk, n * k / nt, n * (k + 1) / nt, V, cmp, 0, 0, 0};
        if (k) pthread_create(&th[k], NULL, stats_worker, &jobs[k]);
    }
    stats_worker(&jobs[0]);
    for (int k = 1; k < nt; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < nt; k++) {
        s->nll += jobs[k].nll;
        s->kld += jobs[k].kld;
        s->same_top += jobs[k].same;
    }
    s->n += n;
}

static double file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 ? (double)sb.st_size : 0;
}

static void weight_stats(const char *path, double *bytes, double *params) {
    assay_model_file *mf;
    *bytes = *params = 0;
    if (assay_model_file_open(&mf, path) != ASSAY_OK) return;
    for (int64_t i = 0; i < assay_model_file_tensor_count(mf); i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        *bytes += (double)t->bytes;
        *params += (double)assay_tensor_nelements(t);
    }
    assay_model_file_close(mf);
}

/* bits per weight of an int checkpoint: the packed files' bytes over the source's parameter count */
static double dir_bytes(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return file_size(p);
}

int main(int argc, char **argv) {
    const char *model = NULL, *text_path = NULL, *work = "/tmp/quant_quality", *out = NULL, *llq = NULL, *only = NULL;
    int64_t ctx = 512, max_windows = 0, calib_chunks = 128, awq_tokens = 0;
    int sequential = -1, awq_block = -1, awq_duo = -1; /* quantize_int.h options; -1: the library default */
    int threads = 0, reuse = 0; /* --reuse: keep outputs already in --work (their time to quantize is not measured) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model")) model = v, i++;
        else if (!strcmp(a, "--text")) text_path = v, i++;
        else if (!strcmp(a, "--work")) work = v, i++;
        else if (!strcmp(a, "--out")) out = v, i++;
        else if (!strcmp(a, "--llama-quantize")) llq = v, i++;
        else if (!strcmp(a, "--only")) only = v, i++;
        else if (!strcmp(a, "--ctx")) ctx = atoll(v), i++;
        else if (!strcmp(a, "--max-windows")) max_windows = atoll(v), i++;
        else if (!strcmp(a, "--calib-chunks")) calib_chunks = atoll(v), i++;
        else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
        else if (!strcmp(a, "--gptq-sequential")) sequential = atoi(v), i++;
        else if (!strcmp(a, "--awq-tokens")) awq_tokens = atoll(v), i++;
        else if (!strcmp(a, "--awq-block-loss")) awq_block = atoi(v), i++;
        else if (!strcmp(a, "--awq-duo")) awq_duo = atoi(v), i++;
        else if (!strcmp(a, "--reuse")) reuse = 1;
        else return fprintf(stderr, "unknown argument %s\n", a), 2;
    }
    if (!model || !text_path) return fprintf(stderr, "usage: --model HF_DIR --text FILE [--work DIR] [--out JSON]\n"), 2;
    mkdir(work, 0755);
    scheme sc[] = {
        {.name = "bf16", .kind = 0},
        {.name = "q8_0", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q8_0},
        {.name = "q6_k", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q6_K},
        {.name = "q5_k_m", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q5_K_M},
        {.name = "q4_k_m", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q4_K_M},
        {.name = "q4_k_s", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q4_K_S},
        {.name = "q4_0", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q4_0},
        {.name = "q3_k_m", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q3_K_M},
        {.name = "q2_k", .kind = 1, .ftype = ASSAY_GGML_FTYPE_Q2_K},
        {.name = "int4-rtn", .kind = 2, .method = ASSAY_INTQ_RTN},
        {.name = "int4-gptq", .kind = 2, .method = ASSAY_INTQ_GPTQ},
        {.name = "int4-awq", .kind = 2, .method = ASSAY_INTQ_AWQ},
        {.name = "w8a8-int8", .kind = 2, .method = ASSAY_INTQ_W8A8, .w8a8_act = 1},
        {.name = "llama.cpp-q4_k_m", .kind = 3},
    };
    int ns = (int)(sizeof sc / sizeof sc[0]);
    assay_model_file *src;
    if (assay_model_file_open(&src, model) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    double src_bytes, src_params;
    weight_stats(model, &src_bytes, &src_params);

    /* ---- quantize ---- */
    for (int k = 0; k < ns; k++) {
        scheme *s = &sc[k];
        if (only && k && s->kind != 0 && !strstr(only, s->name)) { s->path[0] = 0; continue; }
        double t0 = assay_now_seconds();
        assay_status st = ASSAY_OK;
        if (s->kind == 0) {
            snprintf(s->path, sizeof s->path, "%s", model);
            s->bytes = src_bytes;
            s->params = src_params;
        } else if (s->kind == 1) {
            snprintf(s->path, sizeof s->path, "%s/house-%s.gguf", work, s->name);
            if (reuse && file_size(s->path) > 0) {
                weight_stats(s->path, &s->bytes, &s->params);
                s->quant_seconds = -1;
                continue;
            }
            assay_ggml_model_options o = {.ftype = s->ftype, .threads = threads, .overwrite = 1};
            st = assay_ggml_quantize_model(src, s->path, &o, NULL);
            weight_stats(s->path, &s->bytes, &s->params);
        } else if (s->kind == 2) {
            snprintf(s->path, sizeof s->path, "%s/house-%s", work, s->name);
            char done_f[4200], packed_f[4200];
            snprintf(done_f, sizeof done_f, "%s/config.json", s->path);
            snprintf(packed_f, sizeof packed_f, "%s-packed/model.safetensors", s->path);
            if (reuse && file_size(done_f) > 0) {
                static double rtn_reused;
                s->bytes = file_size(packed_f) > 0 ? file_size(packed_f) : rtn_reused;
                if (s->method == ASSAY_INTQ_RTN) rtn_reused = s->bytes;
                s->params = src_params;
                s->quant_seconds = -1;
                continue;
            }
            mkdir(s->path, 0755);
            assay_intq_options o;
            assay_intq_options_default(&o, s->method);
            o.threads = threads;
            o.calib_chunks = calib_chunks;
            o.calib_seq_len = 512;
            if (sequential >= 0) o.sequential = sequential;
            if (awq_tokens > 0) o.awq_tokens = awq_tokens;
            if (awq_block >= 0) o.awq_block_loss = awq_block;
            if (awq_duo >= 0) o.awq_duo = awq_duo;
            /* timed: the dequantized f32 checkpoint the engine scores (same codes and fp16 scales as the packed one) */
            o.fake_quant = 1;
            st = assay_intq_quantize_model(model, s->path, &o, NULL);
            s->quant_seconds = assay_now_seconds() - t0;
            /* sizes from packed checkpoints: rtn's layout (GPTQ) also gives gptq's size (AWQ's lacks g_idx, n_in int32
             * per linear less: negligible here), so only rtn and w8a8 are written packed */
            static double rtn_bytes;
            if (st == ASSAY_OK && (s->method == ASSAY_INTQ_RTN || s->method == ASSAY_INTQ_W8A8 || !rtn_bytes)) {
                char packed[4200];
                snprintf(packed, sizeof packed, "%s-packed", s->path);
                mkdir(packed, 0755);
                assay_intq_options po;
                assay_intq_options_default(&po, s->method == ASSAY_INTQ_W8A8 ? ASSAY_INTQ_W8A8 : ASSAY_INTQ_RTN);
                po.threads = threads;
                po.calib_chunks = calib_chunks;
                st = assay_intq_quantize_model(model, packed, &po, NULL);
                s->bytes = dir_bytes(packed);
                if (s->method != ASSAY_INTQ_W8A8) rtn_bytes = s->bytes;
            } else {
                s->bytes = rtn_bytes;
            }
            s->params = src_params;
        } else if (s->kind == 3) {
            if (!llq) { s->path[0] = 0; continue; }
            char f32[4200], cmd[9000];
            snprintf(f32, sizeof f32, "%s/house-f32.gguf", work);
            assay_convert_options co = {.dtype = ASSAY_TYPE_F32, .overwrite = 1, .quiet = 1};
            st = assay_convert_hf_to_gguf(src, f32, &co);
            snprintf(s->path, sizeof s->path, "%s/house-llamacpp-q4_k_m.gguf", work);
            t0 = assay_now_seconds();
            snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' Q4_K_M > '%s/llama-quantize.log' 2>&1", llq, f32, s->path, work);
            if (st == ASSAY_OK && system(cmd) != 0) st = assay_fail(ASSAY_ERR_IO, "llama-quantize failed (see %s)", work);
            weight_stats(s->path, &s->bytes, &s->params);
        }
        if (s->kind != 2 && s->kind != 0) s->quant_seconds = assay_now_seconds() - t0;
        if (st != ASSAY_OK) return fprintf(stderr, "%s: %s\n", s->name, assay_last_error()), 1;
        fprintf(stderr, "quantized %-18s %.1f s\n", s->name, s->quant_seconds);
    }

    /* ---- evaluate ---- */
    assay_tokenizer *tok;
    if (assay_tokenizer_load(&tok, model) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    char *txt;
    size_t len;
    if (assay_read_file(text_path, &txt, &len) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    assay_tokens ids = {0};
    assay_tokenizer_encode(tok, txt, len, 0, &ids);
    int64_t nw = ids.n / ctx;
    if (max_windows > 0 && nw > max_windows) nw = max_windows;
    int64_t V = assay_model_file_config(src)->n_vocab;
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = threads;
    assay_session_options so;
    assay_session_options_default(&so);
    so.n_ctx = ctx;
    so.kv_dtype = ASSAY_KV_F32;
    for (int k = 0; k < ns; k++) {
        if (!sc[k].path[0]) continue;
        if (assay_model_load(&sc[k].m, sc[k].path, &mo) != ASSAY_OK ||
            assay_session_open(&sc[k].s, sc[k].m, &so) != ASSAY_OK)
            return fprintf(stderr, "%s: %s\n", sc[k].name, assay_last_error()), 1;
        if (sc[k].w8a8_act) assay_session_set_calib_hook(sc[k].s, act_int8_hook, NULL);
    }
    float *base = malloc(sizeof(float) * (size_t)(ctx * V)), *lg = malloc(sizeof(float) * (size_t)(ctx * V));
    int8_t *want = malloc((size_t)ctx);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)ctx);
    for (int64_t i = 0; i < ctx; i++) want[i] = 1, pos[i] = (int32_t)i;
    double t_eval = assay_now_seconds();
    assay_progress bar;
    assay_progress_begin(&bar, "evaluate", nw, "window");
    for (int64_t w = 0; w < nw; w++) {
        const int32_t *tk = ids.ids + w * ctx;
        assay_batch b = {.n_tokens = ctx, .token = tk, .pos = pos, .logits = want};
        for (int k = 0; k < ns; k++) {
            scheme *s = &sc[k];
            if (!s->m) continue;
            float *L = k == 0 ? base : lg;
            if (assay_session_forward(s->s, &b, L) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
            assay_session_seq_clear(s->s, 0);
            stats_window(L, base, tk, ctx, V, k != 0, s, threads);
        }
        assay_progress_update(&bar, w + 1);
    }
    assay_progress_end(&bar);
    t_eval = assay_now_seconds() - t_eval;

    double ppl0 = exp(sc[0].nll / sc[0].n);
    FILE *jf = out ? fopen(out, "w") : NULL;
    if (jf)
        fprintf(jf, "{\n  \"model\": \"%s\",\n  \"text\": \"%s\",\n  \"ctx\": %lld,\n  \"windows\": %lld,\n  \"tokens_scored\": %lld,\n"
                    "  \"eval_seconds\": %.1f,\n  \"schemes\": [\n", model, text_path, (long long)ctx, (long long)nw,
                (long long)sc[0].n, t_eval);
    printf("%-18s %7s %9s %10s %8s %9s %8s %9s\n", "scheme", "bpw", "MB", "PPL", "dPPL%", "meanKLD", "same%", "quant_s");
    int first = 1;
    for (int k = 0; k < ns; k++) {
        scheme *s = &sc[k];
        if (!s->m) continue;
        double ppl = exp(s->nll / s->n), bpw = s->params ? 8 * s->bytes / s->params : 0;
        double kld = k ? s->kld / s->n : 0, same = k ? 100.0 * s->same_top / s->n : 100;
        printf("%-18s %7.3f %9.2f %10.4f %+8.3f %9.5f %8.2f %9.1f\n", s->name, bpw, s->bytes / 1e6, ppl,
               100 * (ppl / ppl0 - 1), kld, same, s->quant_seconds);
        if (jf)
            fprintf(jf, "%s    {\"scheme\": \"%s\", \"bits_per_weight\": %.4f, \"weight_bytes\": %.0f, \"ppl\": %.5f, "
                        "\"ppl_delta_pct\": %.4f, \"mean_kld\": %.6f, \"same_top_pct\": %.3f, \"quantize_seconds\": %.2f}",
                    first ? "" : ",\n", s->name, bpw, s->bytes, ppl, 100 * (ppl / ppl0 - 1), kld, same, s->quant_seconds);
        first = 0;
    }
    if (jf) fprintf(jf, "\n  ]\n}\n"), fclose(jf);
    for (int k = 0; k < ns; k++)
        if (sc[k].m) assay_session_close(sc[k].s), assay_model_free(sc[k].m);
    assay_tokens_free(&ids);
    free(txt);
    free(base);
    free(lg);
    free(want);
    free(pos);
    assay_tokenizer_free(tok);
    assay_model_file_close(src);
    return 0;
}
