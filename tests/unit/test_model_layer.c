/* test_model_layer.c — the one-decoder-layer functions calibration runs (model.h: assay_model_embed,
 * assay_model_layer_*) compute what the model's own forward pass computes. On the house model's weights with a llama3
 * RoPE scaling written into its config (original context 16, factor 8: every frequency but the highest few is
 * changed at the positions used here), two sequences of 40 tokens go through assay_session_forward with a layer limit
 * of 3 and the calibration hook recording the inputs of every linear; the layer functions, chained from the
 * embeddings with the file's weights (HF row order) and norms, must give the same q/k/v, o_proj, gate/up and down
 * inputs for layers 0 and 1 and layer 2's q/k/v input (the hidden state after layer 1), within 1e-4 of the largest
 * value. The same attention computed with the unscaled model's RoPE (the house config as shipped) must miss the
 * scaled forward by far more: the comparison would catch a calibration forward that ignores the scaling. The model
 * is loaded as calibration loads it (f32_activations: the layer functions take f32 weights, the forward the file's
 * bf16 ones, whose activations the AVX512_BF16 kernels would otherwise round to bf16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/dequant.h"
#include "assay/model.h"
#include "assay/model_file.h"
#include "check.h"

enum { NSEQ = 2, T = 40, NL = 2 };
static const char *const kinds[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

/* the hook's copies: [layer][0 q/k/v input, 1 o_proj input, 2 gate/up input, 3 down input] */
static float *seen[NL + 1][4];
static void hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    (void)user;
    int l, which = -1;
    char kind[32];
    if (sscanf(name, "blk.%d.%31[a-z_].weight", &l, kind) != 2 || l > NL) return;
    if (!strcmp(kind, "attn_q")) which = 0;
    else if (!strcmp(kind, "attn_output")) which = 1;
    else if (!strcmp(kind, "ffn_gate")) which = 2;
    else if (!strcmp(kind, "ffn_down")) which = 3;
    if (which < 0) return;
    CHECK(n_tok == NSEQ * T); /* one step: both sequences */
    free(seen[l][which]);
    seen[l][which] = malloc(sizeof(float) * (size_t)(n_tok * n_in));
    memcpy(seen[l][which], x, sizeof(float) * (size_t)(n_tok * n_in));
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static float *file_f32(const assay_model_file *mf, const char *fmt, int l) {
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    const assay_tensor *t = assay_model_file_find(mf, name);
    CHECK(t != NULL);
    if (!t) exit(check_finish("model_layer"));
    int64_t n = assay_tensor_nelements(t);
    float *w = malloc(sizeof(float) * (size_t)n);
    CHECK_OK(assay_dequantize(t->type, t->data, w, n));
    return w;
}

/* a copy of the house model's directory with llama3 RoPE scaling in its config (weights linked, not copied) */
static int make_scaled_dir(char *dir) {
    const char *house = check_shared_path("models/house");
    strcpy(dir, "/tmp/assay_model_layer_XXXXXX");
    if (!mkdtemp(dir)) return 0;
    static const char *const links[] = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                        "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"};
    char src[4096], dst[4096];
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(src, sizeof src, "%s/%s", house, links[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, links[i]);
        if (symlink(src, dst) != 0) return 0;
    }
    snprintf(src, sizeof src, "%s/config.json", house);
    FILE *f = fopen(src, "rb");
    if (!f) return 0;
    static char cfg[1 << 16];
    size_t n = fread(cfg, 1, sizeof cfg - 1, f);
    fclose(f);
    cfg[n] = 0;
    const char *old = "\"rope_type\": \"default\"";
    char *at = strstr(cfg, old);
    if (!at) return 0;
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    f = fopen(dst, "wb");
    if (!f) return 0;
    fwrite(cfg, 1, (size_t)(at - cfg), f);
    fputs("\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
          "\"original_max_position_embeddings\": 16",
          f);
    fputs(at + strlen(old), f);
    fclose(f);
    return 1;
}

static void remove_dir(const char *dir) {
    char p[4096];
    static const char *const names[] = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                        "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
                                        "config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

int main(void) {
    char dir[64];
    CHECK(make_scaled_dir(dir));
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = 2;
    mo.f32_activations = 1;
    assay_model *m = NULL, *plain = NULL;
    CHECK_OK(assay_model_load(&m, dir, &mo));
    CHECK_OK(assay_model_load(&plain, check_shared_path("models/house"), &mo));
    if (!m || !plain) {
        remove_dir(dir);
        return check_finish("model_layer");
    }
    const assay_model_config *c = assay_model_get_config(m);
    CHECK(c->rope_scaling == ASSAY_ROPE_SCALING_LLAMA3);
    CHECK(assay_model_layer_unsupported(m) == NULL);
    const int64_t E = c->n_embd, F = c->n_ff, qd = c->n_head * c->head_dim, N = NSEQ * T;

    /* the model's forward: both sequences in one step, stopped after layer NL */
    int32_t tok[NSEQ * T], pos[NSEQ * T], seq[NSEQ * T];
    for (int s = 0; s < NSEQ; s++)
        for (int t = 0; t < T; t++) {
            tok[s * T + t] = t == 0 ? 0 : (int32_t)((37 * (s * T + t) + 11 * s + 101) % 8000 + 5);
            pos[s * T + t] = t;
            seq[s * T + t] = s;
        }
    assay_session_options so;
    assay_session_options_default(&so);
    so.kv_dtype = ASSAY_KV_F32;
    so.n_ctx = 64;
    so.n_seq = NSEQ;
    assay_session *s = NULL;
    CHECK_OK(assay_session_open(&s, m, &so));
    if (s) {
        assay_session_set_calib_hook(s, hook, NULL);
        assay_session_set_layer_limit(s, NL + 1);
        assay_batch b = {N, tok, pos, seq, NULL};
        CHECK_OK(assay_session_forward(s, &b, NULL));
        assay_session_close(s);
    }

    /* the layer functions, chained from the embeddings */
    const assay_model_file *mf = assay_model_get_file(m);
    float *x = malloc(sizeof(float) * (size_t)(N * E)), *x2 = malloc(sizeof(float) * (size_t)(N * E));
    float *h = malloc(sizeof(float) * (size_t)(N * E)), *att = malloc(sizeof(float) * (size_t)(N * qd));
    float *act = malloc(sizeof(float) * (size_t)(N * F)), *att_plain = malloc(sizeof(float) * (size_t)(N * qd));
    assay_model_embed(m, tok, N, x);
    double worst = 0, plain_miss = 0;
    for (int l = 0; l < NL; l++) {
        float *w[7];
        for (int k = 0; k < 7; k++) {
            char fmt[64];
            snprintf(fmt, sizeof fmt, "blk.%%d.%s.weight", kinds[k]);
            w[k] = file_f32(mf, fmt, l);
        }
        float *an = file_f32(mf, "blk.%d.attn_norm.weight", l), *fn = file_f32(mf, "blk.%d.ffn_norm.weight", l);
        assay_layer_weights lw = {w[0], w[1], w[2], w[3], w[4], w[5], w[6], an, fn};
        assay_layer_weights no_o = lw, no_down = lw;
        no_o.wo = NULL;
        no_down.w_down = NULL;
        assay_model_layer_attn_norm(m, l, &lw, x, N, h);
        double d[4];
        d[0] = seen[l][0] ? rel_diff(h, seen[l][0], N * E) : 1;
        assay_model_layer_attention(m, l, &no_o, h, NSEQ, T, att);
        d[1] = seen[l][1] ? rel_diff(att, seen[l][1], N * qd) : 1;
        assay_model_layer_attention(plain, l, &no_o, h, NSEQ, T, att_plain);
        double miss = seen[l][1] ? rel_diff(att_plain, seen[l][1], N * qd) : 0;
        plain_miss = l == 0 || miss < plain_miss ? miss : plain_miss;
        assay_model_layer_attn_residual(m, l, &lw, x, att, N, x2, h);
        d[2] = seen[l][2] ? rel_diff(h, seen[l][2], N * E) : 1;
        assay_model_layer_mlp(m, l, &no_down, h, N, act);
        d[3] = seen[l][3] ? rel_diff(act, seen[l][3], N * F) : 1;
        assay_model_layer_mlp_residual(m, l, &lw, x2, act, N, x);
        printf("layer %d: max rel diff vs the forward pass: q/k/v input %.2g, o_proj input %.2g, gate/up input %.2g, "
               "down input %.2g; unscaled RoPE's o_proj input misses by %.2g\n",
               l, d[0], d[1], d[2], d[3], miss);
        for (int i = 0; i < 4; i++) {
            CHECK(d[i] <= 1e-4);
            worst = fmax(worst, d[i]);
        }
        for (int k = 0; k < 7; k++) free(w[k]);
        /* the next layer's q/k/v input: the hidden state after this layer, normalised */
        if (l == NL - 1) {
            float *an2 = file_f32(mf, "blk.%d.attn_norm.weight", l + 1);
            assay_layer_weights nx = {.attn_norm = an2};
            assay_model_layer_attn_norm(m, l + 1, &nx, x, N, h);
            double dn = seen[l + 1][0] ? rel_diff(h, seen[l + 1][0], N * E) : 1;
            printf("layer %d's q/k/v input from the chained layers: max rel diff %.2g\n", l + 1, dn);
            CHECK(dn <= 1e-4);
            free(an2);
        }
        free(an);
        free(fn);
    }
    /* the check above is sensitive to the scaling: without it the attention is far off */
    CHECK(plain_miss > 100 * fmax(worst, 1e-6));
    for (int l = 0; l <= NL; l++)
        for (int i = 0; i < 4; i++) free(seen[l][i]);
    free(x);
    free(x2);
    free(h);
    free(att);
    free(act);
    free(att_plain);
    assay_model_free(m);
    assay_model_free(plain);
    remove_dir(dir);
    return check_finish("model_layer");
}
