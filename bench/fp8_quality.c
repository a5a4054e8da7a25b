/* fp8_quality.c — quality of the FP8 schemes of `assay quantize` on one model, against its bf16 self.
 *
 *   bench_fp8_quality --model ../shared/models/house --text ../shared/models/house/heldout.txt \
 *       --work /tmp/fq --out bench/results/fp8_quality.json [--max-windows N] [--threads N] [--calib-samples N]
 *
 * For each scheme (fp8-dynamic, fp8-block, fp8 static, fp8-e5m2-dynamic): quantize the bf16 HF model (timed),
 * then run it in the CPU engine as the GPU would: weights are the exact f32 values code x scale of the written
 * compressed-tensors checkpoint (expanded into an f32 HF directory; written before the engine loaded FP8
 * checkpoints itself, which bench/quant_quality_cli.py now measures through the CLI), and every linear layer's
 * input is quantized in the engine's calibration hook exactly as vLLM's
 * kernels do (per token, 1x128 groups, or the static input_scale; quant_fp8.h) before the matmul reads it.
 * Text is scored in non-overlapping windows of --ctx tokens (default 512), every token after the first of a
 * window, no BOS (the house model's "--score-all" convention). Reported: bits per weight of the linear layers,
 * perplexity, its change against bf16, mean KL divergence and same-top-token % against bf16, time to quantize.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/dtype.h"
#include "assay/file.h"
#include "assay/hf_config.h"
#include "assay/model.h"
#include "assay/model_file.h"
#include "assay/progress.h"
#include "assay/quant_fp8.h"
#include "assay/quantize.h"
#include "assay/safetensors.h"
#include "assay/tokenizer.h"

#define MAX_LIN 1024

typedef struct act_quant {
    int mode; /* 0 none, 1 per token, 2 groups of 128, 3 static */
    assay_fp8_format fmt;
    int n;
    char names[MAX_LIN][96]; /* canonical weight names with a static input scale */
    float scales[MAX_LIN];
    uint8_t *q;
    float *s;
    int64_t cap;
} act_quant;

static void act_hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    act_quant *a = user;
    if (strncmp(name, "blk.", 4) != 0 || a->mode == 0) return; /* the lm_head stays bf16 */
    float *xm = (float *)x; /* the engine hands us the buffer the matmul is about to read */
    int64_t n = n_tok * n_in;
    if (n > a->cap) {
        a->cap = n;
        a->q = realloc(a->q, (size_t)n);
        a->s = realloc(a->s, sizeof(float) * (size_t)(n_tok * (n_in / 128 + 2)));
    }
    if (a->mode == 1) {
        assay_fp8_quantize_act_token(a->fmt, x, n_tok, n_in, a->q, a->s);
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t k = 0; k < n_in; k++) xm[t * n_in + k] = assay_fp8_decode(a->fmt, a->q[t * n_in + k]) * a->s[t];
    } else if (a->mode == 2) {
        int64_t ng = (n_in + 127) / 128;
        assay_fp8_quantize_act_group(a->fmt, x, n_tok, n_in, 128, a->q, a->s);
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t k = 0; k < n_in; k++)
                xm[t * n_in + k] = assay_fp8_decode(a->fmt, a->q[t * n_in + k]) * a->s[t * ng + k / 128];
    } else {
        float sc = -1;
        for (int i = 0; i < a->n; i++)
            if (strcmp(a->names[i], name) == 0) sc = a->scales[i];
        if (sc <= 0) {
            fprintf(stderr, "no input scale for %s\n", name);
            exit(1);
        }
        assay_fp8_quantize_act_static(a->fmt, x, n_tok, n_in, sc, a->q);
        for (int64_t i = 0; i < n; i++) xm[i] = assay_fp8_decode(a->fmt, a->q[i]) * sc;
    }
}

/* Expands a compressed-tensors FP8 directory into an f32 HF directory the engine loads; collects static input
 * scales under canonical names; counts the bytes and parameters of the quantized linear weights. */
static int expand(const char *qdir, const char *fdir, act_quant *a, const char *arch, double *bytes, double *params) {
    char *p = assay_path_join(qdir, "model.safetensors");
    assay_safetensors *st;
    if (assay_safetensors_open(&st, p) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    free(p);
    assay_safetensors_writer *w = assay_safetensors_writer_new();
    void **own = calloc((size_t)assay_safetensors_tensor_count(st) + 1, sizeof(void *));
    int nown = 0;
    for (int64_t i = 0; i < assay_safetensors_tensor_count(st); i++) {
        const assay_safetensors_tensor *t = assay_safetensors_tensor_at(st, i);
        size_t L = strlen(t->name);
        if (L > 13 && strcmp(t->name + L - 13, ".weight_scale") == 0) continue;
        if (L > 12 && strcmp(t->name + L - 12, ".input_scale") == 0) {
            char wn[200], cn[96];
            snprintf(wn, sizeof wn, "%.*s.weight", (int)(L - 12), t->name);
            if (!assay_hf_to_gguf_name(wn, arch, cn, sizeof cn)) continue;
            snprintf(a->names[a->n], sizeof a->names[0], "%s", cn);
            a->scales[a->n++] = assay_bf16_to_f32(*(const uint16_t *)t->data);
            continue;
        }
        if (t->type != ASSAY_TYPE_F8_E4M3 && t->type != ASSAY_TYPE_F8_E5M2) {
            assay_safetensors_writer_add(w, t->name, t->dtype, t->n_dims, t->shape, t->data, t->bytes);
            continue;
        }
        char sn[200];
        snprintf(sn, sizeof sn, "%.*s.weight_scale", (int)(L - 7), t->name);
        const assay_safetensors_tensor *s = assay_safetensors_find(st, sn);
        int64_t rows = t->shape[0], cols = t->shape[1];
        int64_t ns = 1;
        for (int d = 0; d < s->n_dims; d++) ns *= s->shape[d];
        float *sc = malloc(sizeof(float) * (size_t)ns);
        assay_bf16_to_f32_row(s->data, sc, ns);
        assay_fp8_granularity g = ns == 1 ? ASSAY_FP8_GRAN_TENSOR : (s->shape[1] == 1 && ns == rows) ? ASSAY_FP8_GRAN_CHANNEL
                                                                                                   : ASSAY_FP8_GRAN_BLOCK;
        float *wf = malloc(sizeof(float) * (size_t)(rows * cols));
        assay_fp8_dequantize_weight(t->type == ASSAY_TYPE_F8_E5M2 ? ASSAY_FP8_E5M2 : ASSAY_FP8_E4M3, g, 128, 128, t->data,
                                    sc, rows, cols, wf);
        free(sc);
        own[nown++] = wf;
        assay_safetensors_writer_add(w, t->name, "F32", 2, t->shape, wf, sizeof(float) * (size_t)(rows * cols));
        *bytes += (double)t->bytes + (double)s->bytes;
        *params += (double)(rows * cols);
    }
    mkdir(fdir, 0755);
    p = assay_path_join(fdir, "model.safetensors");
    assay_status rc = assay_safetensors_writer_write(w, p, 1);
    free(p);
    assay_safetensors_writer_free(w);
    for (int i = 0; i < nown; i++) free(own[i]);
    free(own);
    assay_safetensors_close(st);
    if (rc != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    return 0;
}

typedef struct scheme {
    const char *name;
    int act_mode;
    assay_fp8_format fmt;
    char qdir[4096], fdir[4096];
    const char *path;
    double quant_seconds, bytes, params;
    act_quant *aq;
    assay_model *m;
    assay_session *s;
    double nll, kld;
    int64_t same, n;
} scheme;

static void score(const float *L, const float *base, const int32_t *tk, int64_t ctx, int64_t V, int cmp, scheme *s) {
    for (int64_t i = 0; i + 1 < ctx; i++) {
        const float *x = L + i * V, *xb = base + i * V;
        double mx = -INFINITY, mb = -INFINITY;
        int64_t am = 0, ab = 0;
        for (int64_t v = 0; v < V; v++) {
            if (x[v] > mx) mx = x[v], am = v;
            if (xb[v] > mb) mb = xb[v], ab = v;
        }
        double z = 0, zb = 0;
        for (int64_t v = 0; v < V; v++) z += exp(x[v] - mx), zb += exp(xb[v] - mb);
        double lz = mx + log(z), lzb = mb + log(zb);
        s->nll += lz - x[tk[i + 1]];
        if (cmp) {
            double kl = 0;
            for (int64_t v = 0; v < V; v++) {
                double lpb = xb[v] - lzb;
                kl += exp(lpb) * (lpb - (x[v] - lz));
            }
            s->kld += kl;
            s->same += am == ab;
        }
        s->n++;
    }
}

int main(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *work = "/tmp/fp8_quality", *out = NULL;
    int64_t max_windows = 0, ctx = 512, calib_samples = 32;
    int threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--text")) text = argv[i + 1];
        else if (!strcmp(argv[i], "--work")) work = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else if (!strcmp(argv[i], "--max-windows")) max_windows = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--ctx")) ctx = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calib-samples")) calib_samples = atoll(argv[i + 1]);
        else return fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    if (!model || !text) return fprintf(stderr, "usage: bench_fp8_quality --model DIR --text FILE [--work DIR] [--out JSON]\n"), 2;
    mkdir(work, 0755);
    assay_model_file *src;
    if (assay_model_file_open(&src, model) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    const char *arch = assay_model_file_config(src)->arch;
    scheme sc[] = {{.name = "bf16", .path = model},
                   {.name = "fp8-dynamic", .act_mode = 1},
                   {.name = "fp8-block", .act_mode = 2},
                   {.name = "fp8", .act_mode = 3},
                   {.name = "fp8-e5m2-dynamic", .act_mode = 1, .fmt = ASSAY_FP8_E5M2}};
    int ns = (int)(sizeof sc / sizeof sc[0]);
    for (int k = 1; k < ns; k++) {
        scheme *s = &sc[k];
        snprintf(s->qdir, sizeof s->qdir, "%s/%s", work, s->name);
        snprintf(s->fdir, sizeof s->fdir, "%s/%s-f32", work, s->name);
        assay_quantize_options o;
        assay_quantize_options_init(&o);
        o.force = 1;
        o.threads = threads;
        o.calib_samples = calib_samples;
        double t0 = assay_now_seconds();
        if (assay_quantize(src, s->name, &o, s->qdir) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
        s->quant_seconds = assay_now_seconds() - t0;
        s->aq = calloc(1, sizeof(act_quant));
        s->aq->mode = s->act_mode;
        s->aq->fmt = s->fmt;
        if (expand(s->qdir, s->fdir, s->aq, arch, &s->bytes, &s->params)) return 1;
        char cfg_src[4200], cfg_dst[4200];
        snprintf(cfg_src, sizeof cfg_src, "%s/config.json", model);
        snprintf(cfg_dst, sizeof cfg_dst, "cp '%s' '%s/config.json'", cfg_src, s->fdir);
        if (system(cfg_dst) != 0) return 1;
        if (assay_quantize_copy_hf_extras(model, s->fdir) != ASSAY_OK) return 1;
        s->path = s->fdir;
        fprintf(stderr, "%s quantized in %.1f s\n", s->name, s->quant_seconds);
    }

    assay_tokenizer *tok;
    if (assay_tokenizer_load(&tok, model) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
    char *txt;
    size_t len;
    if (assay_read_file(text, &txt, &len) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
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
        if (assay_model_load(&sc[k].m, sc[k].path, &mo) != ASSAY_OK || assay_session_open(&sc[k].s, sc[k].m, &so) != ASSAY_OK)
            return fprintf(stderr, "%s: %s\n", sc[k].name, assay_last_error()), 1;
        if (sc[k].aq) assay_session_set_calib_hook(sc[k].s, act_hook, sc[k].aq);
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
            float *L = k == 0 ? base : lg;
            if (assay_session_forward(sc[k].s, &b, L) != ASSAY_OK) return fprintf(stderr, "%s\n", assay_last_error()), 1;
            assay_session_seq_clear(sc[k].s, 0);
            score(L, base, tk, ctx, V, k != 0, &sc[k]);
        }
        assay_progress_update(&bar, w + 1);
    }
    assay_progress_end(&bar);
    t_eval = assay_now_seconds() - t_eval;
    double ppl0 = exp(sc[0].nll / sc[0].n);
    FILE *jf = out ? fopen(out, "w") : NULL;
    if (jf)
        fprintf(jf, "{\n  \"model\": \"%s\",\n  \"text\": \"%s\",\n  \"ctx\": %lld,\n  \"windows\": %lld,\n  \"tokens_scored\": %lld,\n"
                    "  \"calib_samples\": %lld,\n  \"eval_seconds\": %.1f,\n  \"schemes\": [\n",
                model, text, (long long)ctx, (long long)nw, (long long)sc[0].n, (long long)calib_samples, t_eval);
    printf("%-18s %7s %10s %8s %9s %8s %8s\n", "scheme", "bpw", "PPL", "dPPL%", "meanKLD", "same%", "quant_s");
    for (int k = 0; k < ns; k++) {
        scheme *s = &sc[k];
        double ppl = exp(s->nll / s->n), bpw = s->params ? 8 * s->bytes / s->params : 16;
        double kld = k ? s->kld / s->n : 0, same = k ? 100.0 * s->same / s->n : 100;
        printf("%-18s %7.3f %10.4f %+8.3f %9.5f %8.2f %8.1f\n", s->name, bpw, ppl, 100 * (ppl / ppl0 - 1), kld, same,
               s->quant_seconds);
        if (jf)
            fprintf(jf, "%s    {\"scheme\": \"%s\", \"linear_bits_per_weight\": %.4f, \"ppl\": %.5f, \"ppl_delta_pct\": %.4f, "
                        "\"mean_kld\": %.6f, \"same_top_pct\": %.3f, \"quantize_seconds\": %.2f}",
                    k ? ",\n" : "", s->name, bpw, ppl, 100 * (ppl / ppl0 - 1), kld, same, s->quant_seconds);
    }
    if (jf) fprintf(jf, "\n  ]\n}\n"), fclose(jf);
    for (int k = 0; k < ns; k++) assay_session_close(sc[k].s), assay_model_free(sc[k].m);
    assay_tokens_free(&ids);
    assay_tokenizer_free(tok);
    assay_model_file_close(src);
    free(txt), free(base), free(lg), free(want), free(pos);
    return 0;
}
