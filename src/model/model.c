/* model.c — the Llama-family forward pass over the backend ops (backend.h), and sessions with a paged KV cache.
 *
 * One forward serves llama/mistral, qwen2, qwen3 and gemma3: the differences are flags in the config (q/k/v
 * bias, q/k norm, GeGLU, post norms, embedding scale, sliding window, softcap), never separate code paths per
 * architecture. Q/K rows of HF llama checkpoints are permuted at load (assay_tensor_copy_rows) so the
 * interleaved ("normal") RoPE applies to both HF and GGUF sources. */
#include "assay/model.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/dequant.h"
#include "assay/dummy_weights.h"
#include "assay/progress.h"
#include "assay/quant_fp8.h"
#include "engine/block_manager.h"
#include "engine/kv_cache.h"
#include "model/model_ckpt.h"

typedef struct model_layer {
    assay_weight wq, wk, wv, wo, w_gate, w_up, w_down;
    /* how each linear's input is quantized before its matmul (quantized checkpoints, on-the-fly fp8) */
    assay_act_quant aq, ak, av, ao, a_gate, a_up, a_down;
    float *attn_norm, *ffn_norm, *post_attn_norm, *post_ffn_norm, *q_norm, *k_norm; /* f32, owned */
    float *bq, *bk, *bv;
    int sliding;     /* gemma3 local layer */
    float k_cache_scale, v_cache_scale; /* the checkpoint's KV-cache scales; 0: none */
} model_layer;

struct assay_model {
    assay_model_file *mf;
    assay_model_config c;
    assay_backend *be;
    assay_weight tok_embd, output;
    float *output_norm;
    model_layer *layers;
    float *inv_freq, *inv_freq_local; /* [head_dim/2] */
    void **owned;                     /* permuted copies */
    int n_owned;
    void **dev_owned;                 /* device copies of the vectors (a backend without host memory) */
    int n_dev_owned;
    size_t weight_bytes;
    int fp8; /* on-the-fly FP8 (model.h): block linear weights hold code*scale, their inputs are fake-quantized */
    assay_ckpt ck;            /* a quantized checkpoint's loader (ck.loader NULL: none) */
    assay_act_quant output_act;
    int n_ckpt_linears;       /* linears loaded through ck */
    int n_ckpt_packed, n_ckpt_f32, n_perm; /* of those: kept packed, dequantized to f32, with permuted inputs */
    assay_type ckpt_packed_type;
    char ckpt_f32_note[240];  /* the first reason a packable linear was dequantized to f32 */
    int64_t n_kv_scales; /* layers with both KV-cache scales in the checkpoint */
    int n_threads;       /* the load option (<= 0: every core), for the one-layer functions' attention */
    int tied;            /* output is the embedding table (no lm_head of its own) */
    int dummy;           /* load_format "dummy": seeded values instead of the files' (model.h) */
    uint64_t dummy_seed; /* the load's seed */
    assay_type dummy_type; /* the dtype the dummy weights are stored in */
};

struct assay_session {
    assay_model *m;
    assay_session_options o;
    assay_kv_cache kv;
    /* the sequence API (o.n_seq > 0): its own block bookkeeping over the pool, one table per sequence */
    assay_block_manager *bm;
    assay_block_table *tables;   /* [n_seq] */
    const int32_t **table_ids;   /* [n_seq] the step's block_tables */
    int32_t *seq_lens;           /* [n_seq] */
    int32_t *seq_of_tok;         /* [n_batch] */
    int64_t *slot;               /* [n_batch] */
    /* scratch, [n_batch][...] */
    float *x, *h, *q, *k, *v, *att, *gate, *up, *act;
    float *rows; /* [n_batch][n_embd]: hidden states of the tokens whose logits are wanted */
    float *logits_dev; /* [n_batch][n_vocab] on a device backend: logits before they are downloaded as f32 */
    int32_t *row_idx; /* [n_batch] host: which tokens those are */
    int8_t *mask; /* [n_batch] rows that want logits */
    assay_calib_fn calib;
    void *calib_user;
    assay_kv_fn kv_hook;
    void *kv_user;
    char kv_desc[256];
    const char *kv_kind;
    int64_t layer_limit; /* > 0: calibration passes stop after this many layers (no logits) */
    /* decode steps replayed from CUDA graphs (run_step_graph): the padded step's arrays, uses per bucket */
    int32_t *g_tok, *g_pos, *g_seq, *g_cu, *g_len;
    int64_t *g_slot;
    int8_t *g_want;
    const int32_t **g_tables;
    int graph_uses[257];
    int no_graphs;
};

void assay_model_options_default(assay_model_options *o) {
    o->n_threads = 0;
    o->quantization = NULL;
    o->device = "cpu";
    o->load_format = "auto";
    o->seed = 0;
    o->f32_activations = 0;
}

assay_status assay_model_load_format_check(const char *name) {
    if (!name || strcmp(name, "auto") == 0 || strcmp(name, "dummy") == 0) return ASSAY_OK;
    return assay_fail(ASSAY_ERR_ARG, "unknown load format '%s' (known: auto, dummy)", name);
}

assay_status assay_model_quantization_check(const char *name) {
    if (name && strcmp(name, "fp8") == 0) return ASSAY_OK;
    return assay_fail(ASSAY_ERR_ARG, "unknown quantization '%s' (known: fp8)", name ? name : "(null)");
}

void assay_session_options_default(assay_session_options *o) {
    o->kv_dtype = ASSAY_KV_F16;
    o->n_ctx = 0;
    o->n_seq = 1;
    o->n_batch = 512;
    o->kv_calc_tokens = 0;
    o->kv_blocks = 0;
}

/* ---- loading ---------------------------------------------------------------------------------------------- */

static void *own(assay_model *m, void *p) {
    m->owned = assay_xrealloc(m->owned, (size_t)(m->n_owned + 1) * sizeof(void *));
    m->owned[m->n_owned++] = p;
    return p;
}

/* A vector of n floats moved into the backend's memory (the host copy stays for the one-layer API). */
static assay_status device_vec(assay_model *m, float **v, int64_t n) {
    if (!*v) return ASSAY_OK;
    float *d = m->be->ops->alloc(m->be, (size_t)n * sizeof(float));
    if (!d) return assay_fail(ASSAY_ERR_NOMEM, "no device memory for a vector of %lld floats", (long long)n);
    m->be->ops->upload(m->be, d, *v, (size_t)n * sizeof(float));
    m->dev_owned = assay_xrealloc(m->dev_owned, (size_t)(m->n_dev_owned + 1) * sizeof(void *));
    m->dev_owned[m->n_dev_owned++] = d;
    *v = d;
    return ASSAY_OK;
}

/* A device backend: every vector into its memory, the embedding table prepared (get_rows reads it there; the caller
 * shares it with a tied output matrix). Of the quantized activations only --quantization fp8's (per-token e4m3 in
 * front of per-tensor e4m3 weights) run on the GPU yet; W8A8 checkpoints are refused with a message. */
static assay_status device_setup(assay_model *m) {
    const assay_model_config *c = &m->c;
    int64_t E = c->n_embd, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd;
    assay_status st = ASSAY_OK;
    for (int64_t l = 0; l < c->n_layer; l++) {
        model_layer *L = &m->layers[l];
        const assay_act_quant *acts[] = {&L->aq, &L->ak, &L->av, &L->ao, &L->a_gate, &L->a_up, &L->a_down};
        const assay_weight *lin[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (acts[i]->kind != ASSAY_ACT_QUANT_NONE &&
                !(acts[i]->kind == ASSAY_ACT_QUANT_FP8_TOKEN && acts[i]->fmt == ASSAY_FP8_E4M3 && lin[i]->fp8_scale > 0)) {
                char how[96];
                assay_act_quant_describe(acts[i], how, sizeof how);
                return assay_fail(ASSAY_ERR_UNSUPPORTED, "--device %s: quantized activations (%s) are not wired into "
                                  "the GPU backend yet; weight-only checkpoints and bf16 run", m->be->ops->name, how);
            }
        float **vecs[] = {&L->attn_norm, &L->ffn_norm, &L->post_attn_norm, &L->post_ffn_norm, &L->q_norm, &L->k_norm,
                          &L->bq, &L->bk, &L->bv};
        int64_t lens[] = {E, E, E, E, hd, hd, qd, kvd, kvd};
        for (int i = 0; i < 9 && st == ASSAY_OK; i++) st = device_vec(m, vecs[i], lens[i]);
    }
    if (st == ASSAY_OK) st = device_vec(m, &m->output_norm, E);
    if (st == ASSAY_OK) st = device_vec(m, &m->inv_freq, hd / 2);
    if (st == ASSAY_OK) st = device_vec(m, &m->inv_freq_local, hd / 2);
    if (st == ASSAY_OK) st = m->be->ops->prepare_weight(m->be, &m->tok_embd);
    return st;
}

/* llama / mistral HF q/k rows get llama.cpp's permutation (model_file.h); the heads to permute for, or 0. */
static int64_t permute_heads_of(const assay_model *m, const char *name) {
    if (m->dummy) return 0; /* no file rows: the values are made in the order the forward pass uses */
    if (strcmp(m->c.arch, "llama") != 0 && strcmp(m->c.arch, "mistral") != 0) return 0;
    if (assay_model_file_format(m->mf) != ASSAY_MODEL_FORMAT_HF) return 0;
    size_t n = strlen(name);
    if (n > 14 && strcmp(name + n - 14, ".attn_q.weight") == 0) return m->c.n_head;
    if (n > 14 && strcmp(name + n - 14, ".attn_k.weight") == 0) return m->c.n_head_kv;
    return 0;
}

/* A linear layer of a quantized checkpoint through its loader (model_ckpt.h): packed int4 rows or the dequantized f32
 * weight, Q/K rows permuted like any HF llama weight, and its activation treatment. *found = 0: stored unquantized. */
static assay_status load_ckpt_linear(assay_model *m, const char *name, assay_weight *w, assay_act_quant *act,
                                     int64_t n_in, int64_t n_out, int *found) {
    char module[128];
    size_t len = strlen(name);
    ASSAY_ASSERT(len > 7 && len < sizeof module && strcmp(name + len - 7, ".weight") == 0);
    memcpy(module, name, len - 7);
    module[len - 7] = 0;
    assay_ckpt_weight cw = {.f32 = assay_xmalloc((size_t)(n_in * n_out) * sizeof(float)), .type = ASSAY_TYPE_F32};
    assay_status st = m->ck.loader->linear(&m->ck, module, n_in, n_out, &cw, act, found);
    void *data = cw.f32;
    if (cw.type != ASSAY_TYPE_F32) {
        free(cw.f32);
        data = cw.data;
    }
    if (st || !*found) {
        free(data);
        free(cw.perm);
        return st ? assay_fail_context(st, "%s", name) : ASSAY_OK;
    }
    size_t bytes = assay_type_row_bytes(cw.type, n_in) * (size_t)n_out;
    int64_t heads = permute_heads_of(m, name);
    if (heads > 0) {
        if (n_out % (2 * heads)) {
            free(data);
            free(cw.perm);
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %lld rows are not a multiple of 2 x %lld heads", name,
                              (long long)n_out, (long long)heads);
        }
        /* whole rows move, so packed rows (and their input permutation, shared by all rows) permute the same way */
        assay_tensor t = {.name = name, .type = cw.type, .n_dims = 2, .ne = {n_in, n_out, 1, 1}, .data = data,
                          .bytes = bytes, .permute_heads = heads};
        void *p = assay_xmalloc(bytes);
        assay_tensor_copy_rows(&t, p);
        free(data);
        data = p;
    }
    if (cw.type == ASSAY_TYPE_F32) {
        m->n_ckpt_f32++;
        if (cw.note[0] && !m->ckpt_f32_note[0]) snprintf(m->ckpt_f32_note, sizeof m->ckpt_f32_note, "%s: %s", name, cw.note);
    } else {
        m->n_ckpt_packed++;
        m->ckpt_packed_type = cw.type;
    }
    w->type = cw.type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = assay_type_row_bytes(cw.type, n_in);
    w->name = own(m, assay_xstrdup(name));
    w->data = own(m, data);
    w->perm = cw.perm ? own(m, cw.perm) : NULL;
    if (w->perm) m->n_perm++;
    m->n_ckpt_linears++;
    return ASSAY_OK;
}

/* A dummy weight (model.h): no data; the backend's prepare_weight makes its seeded values. */
static void dummy_weight(assay_model *m, const char *name, assay_weight *w, int64_t n_in, int64_t n_out) {
    memset(w, 0, sizeof *w);
    w->type = m->dummy_type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = assay_type_row_bytes(w->type, n_in);
    w->name = own(m, assay_xstrdup(name));
    w->dummy_seed = assay_dummy_tensor_seed(m->dummy_seed, name);
    w->dummy_range = ASSAY_DUMMY_RANGE;
}

/* `act` is NULL for the embedding (not a linear layer), else receives the input's quantization. `optional`: the
 * lm_head, absent when the embeddings are tied. */
static assay_status load_weight(assay_model *m, const char *name, assay_weight *w, assay_act_quant *act, int64_t n_in,
                                int64_t n_out, int optional) {
    if (act) memset(act, 0, sizeof *act);
    if (m->dummy) {
        if (!(optional && m->c.tied_embeddings)) dummy_weight(m, name, w, n_in, n_out);
        return ASSAY_OK;
    }
    if (act && m->ck.loader) {
        int found = 0;
        assay_status st = load_ckpt_linear(m, name, w, act, n_in, n_out, &found);
        if (st || found) return st;
    }
    const assay_tensor *t = assay_model_file_find(m->mf, name);
    if (!t) {
        if (optional) return ASSAY_OK;
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %s is missing", assay_model_file_path(m->mf), name);
    }
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                          assay_model_file_path(m->mf), name, (long long)t->ne[0], (long long)t->ne[1],
                          (long long)n_in, (long long)n_out);
    if (!assay_type_row_ok(t->type, n_in) || !assay_dequant_row_get(t->type))
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which the CPU engine cannot run",
                          assay_model_file_path(m->mf), name, assay_type_name(t->type));
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = assay_type_row_bytes(t->type, n_in);
    w->name = t->name;
    w->data = t->data;
    if (t->permute_heads > 0) {
        void *p = assay_xmalloc(t->bytes);
        assay_tensor_copy_rows(t, p);
        w->data = own(m, p);
    }
    return ASSAY_OK;
}

static assay_status load_vec(assay_model *m, const char *name, float **out, int64_t n, int optional) {
    *out = NULL;
    if (m->dummy) {
        /* `optional` vectors are those this config does without; norms are 1, biases seeded like the linears */
        if (optional) return ASSAY_OK;
        float *v = own(m, assay_xmalloc((size_t)n * sizeof(float)));
        size_t len = strlen(name);
        int norm = len >= 11 && strcmp(name + len - 11, "norm.weight") == 0;
        uint64_t seed = assay_dummy_tensor_seed(m->dummy_seed, name);
        for (int64_t i = 0; i < n; i++) v[i] = norm ? 1.0f : assay_dummy_value(seed, (uint64_t)i, ASSAY_DUMMY_RANGE);
        *out = v;
        return ASSAY_OK;
    }
    const assay_tensor *t = assay_model_file_find(m->mf, name);
    if (!t) {
        if (optional) return ASSAY_OK;
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %s is missing", assay_model_file_path(m->mf), name);
    }
    if (assay_tensor_nelements(t) != n)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %s has %lld elements, expected %lld",
                          assay_model_file_path(m->mf), name, (long long)assay_tensor_nelements(t), (long long)n);
    float *v = own(m, assay_xmalloc((size_t)n * sizeof(float)));
    assay_status st = assay_dequantize(t->type, t->data, v, n);
    if (st) return assay_fail_context(st, "%s", name);
    *out = v;
    return ASSAY_OK;
}

/* RoPE frequencies with the model's scaling folded in (llama3: smooth blend between scaled and unscaled
 * frequencies by wavelength, as in Meta's reference; linear: all divided by the factor). */
static float *rope_freqs(const assay_model_config *c, double theta, int64_t n_rot) {
    float *f = assay_xmalloc((size_t)(n_rot / 2) * sizeof(float));
    for (int64_t i = 0; i < n_rot / 2; i++) {
        double inv = 1.0 / pow(theta, (double)(2 * i) / (double)n_rot);
        if (c->rope_scaling == ASSAY_ROPE_SCALING_LINEAR && c->rope_factor > 0) inv /= c->rope_factor;
        else if (c->rope_scaling == ASSAY_ROPE_SCALING_LLAMA3) {
            double wavelen = 2 * M_PI / inv, orig = (double)c->rope_orig_ctx;
            double low_wl = orig / c->rope_low_freq_factor, high_wl = orig / c->rope_high_freq_factor;
            if (wavelen > low_wl) inv /= c->rope_factor;
            else if (wavelen >= high_wl) {
                double smooth = (orig / wavelen - c->rope_low_freq_factor) / (c->rope_high_freq_factor - c->rope_low_freq_factor);
                inv = (1 - smooth) * inv / c->rope_factor + smooth * inv;
            }
        }
        f[i] = (float)inv;
    }
    return f;
}

/* On-the-fly FP8 of one linear weight (model.h): per-tensor E4M3 with scale amax/448 in f32 (no bf16 rounding:
 * vLLM keeps online scales in f32), codes from quant_fp8.h's reference (x / scale, rounded to nearest even).
 * For a host backend the exact f32 values code*scale replace the weight (the CPU emulates the FP8 GEMM); for a device
 * backend the codes themselves stay (one byte per weight, type F8_E4M3 with fp8_scale), which is what its FP8 GEMM
 * reads: a 70B model's weights then take 70 GB of host memory on the way, not 280. Rows are split over threads. */
typedef struct fp8_job {
    const assay_weight *w;
    float *f;
    uint8_t *q;
    int64_t r0, r1;
    float amax, scale;
    int exact_f32; /* phase 2: write code*scale back into f */
    assay_status st;
} fp8_job;

static void *fp8_absmax_worker(void *arg) { /* phase 1: dequantize the rows, their max |x| */
    fp8_job *j = arg;
    const assay_weight *w = j->w;
    int64_t n = (j->r1 - j->r0) * w->n_in;
    float *f = j->f + j->r0 * w->n_in;
    j->st = assay_dequantize(w->type, (const uint8_t *)w->data + (size_t)j->r0 * w->row_bytes, f, n);
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) m = fabsf(f[i]) > m ? fabsf(f[i]) : m;
    j->amax = m;
    return NULL;
}

static void *fp8_encode_worker(void *arg) { /* phase 2: the codes (and the exact values) */
    fp8_job *j = arg;
    int64_t i0 = j->r0 * j->w->n_in, i1 = j->r1 * j->w->n_in;
    for (int64_t i = i0; i < i1; i++) {
        j->q[i] = assay_fp8_encode(ASSAY_FP8_E4M3, j->f[i] / j->scale);
        if (j->exact_f32) j->f[i] = assay_fp8_decode(ASSAY_FP8_E4M3, j->q[i]) * j->scale;
    }
    return NULL;
}

static assay_status fp8_weight(assay_model *m, assay_weight *w, int keep_codes) {
    if (w->type != ASSAY_TYPE_F32 && w->type != ASSAY_TYPE_F16 && w->type != ASSAY_TYPE_BF16)
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "--quantization fp8 needs an unquantized checkpoint (f32/f16/bf16), but %s is %s", w->name,
                          assay_type_name(w->type));
    int64_t n = w->n_in * w->n_out;
    float *f = assay_xmalloc((size_t)n * sizeof(float));
    uint8_t *q = assay_xmalloc((size_t)n);
    long nt = m->n_threads > 0 ? m->n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1) nt = 1;
    if (nt > 64) nt = 64;
    if (nt > w->n_out) nt = (long)w->n_out;
    fp8_job jobs[64];
    pthread_t th[64];
    for (long t = 0; t < nt; t++)
        jobs[t] = (fp8_job){w, f, q, w->n_out * t / nt, w->n_out * (t + 1) / nt, 0, 0, !keep_codes, ASSAY_OK};
    void *(*phase[2])(void *) = {fp8_absmax_worker, fp8_encode_worker};
    assay_status st = ASSAY_OK;
    for (int ph = 0; ph < 2 && st == ASSAY_OK; ph++) {
        for (long t = 1; t < nt; t++)
            if (pthread_create(&th[t], NULL, phase[ph], &jobs[t]) != 0) phase[ph](&jobs[t]), th[t] = 0;
        phase[ph](&jobs[0]);
        for (long t = 1; t < nt; t++)
            if (th[t]) pthread_join(th[t], NULL);
        if (ph == 0) { /* the per-tensor scale from every row's max (a max: the same in any order) */
            float amax = 0.0f;
            for (long t = 0; t < nt && st == ASSAY_OK; t++) {
                st = jobs[t].st;
                amax = jobs[t].amax > amax ? jobs[t].amax : amax;
            }
            float scale = assay_fp8_weight_scale(ASSAY_FP8_E4M3, amax, 0);
            for (long t = 0; t < nt; t++) jobs[t].scale = scale;
        }
    }
    if (st == ASSAY_OK) {
        w->fp8_scale = jobs[0].scale;
        if (keep_codes) {
            w->type = ASSAY_TYPE_F8_E4M3;
            w->row_bytes = (size_t)w->n_in;
            w->data = own(m, q);
            q = NULL;
        } else {
            w->type = ASSAY_TYPE_F32;
            w->row_bytes = assay_type_row_bytes(ASSAY_TYPE_F32, w->n_in);
            w->data = own(m, f);
            f = NULL;
        }
    }
    free(f);
    free(q);
    return st ? assay_fail_context(st, "%s", w->name) : ASSAY_OK;
}

/* One positive scalar tensor (any float dtype, one element), or 0 when absent. */
static assay_status load_scalar(assay_model *m, const char *name, float *out) {
    *out = 0;
    const assay_tensor *t = assay_model_file_find(m->mf, name);
    if (!t) return ASSAY_OK;
    float v = 0;
    assay_status st = assay_tensor_nelements(t) == 1 ? assay_dequantize(t->type, t->data, &v, 1)
                                                     : assay_fail(ASSAY_ERR_FORMAT, "has %lld elements, expected 1",
                                                                  (long long)assay_tensor_nelements(t));
    if (st == ASSAY_OK && !(v > 0 && isfinite(v))) st = assay_fail(ASSAY_ERR_FORMAT, "is %g, not a positive scale", v);
    if (st) return assay_fail_context(st, "%s: tensor %s", assay_model_file_path(m->mf), t->source_name);
    *out = v;
    return ASSAY_OK;
}

/* The KV-cache scales of layer l (canonical names from hf_config.c: k_cache_scale / v_cache_scale, or one legacy
 * kv_cache_scale serving both, as vLLM does). A layer holding only one of k/v gets the larger for both (vLLM). */
static assay_status load_kv_scales(assay_model *m, int64_t l, model_layer *L) {
    char nm[96];
    float k, v, kv;
    assay_status st;
    snprintf(nm, sizeof nm, "blk.%lld.k_cache_scale", (long long)l);
    if ((st = load_scalar(m, nm, &k))) return st;
    snprintf(nm, sizeof nm, "blk.%lld.v_cache_scale", (long long)l);
    if ((st = load_scalar(m, nm, &v))) return st;
    snprintf(nm, sizeof nm, "blk.%lld.kv_cache_scale", (long long)l);
    if ((st = load_scalar(m, nm, &kv))) return st;
    if (k == 0 && v == 0) k = v = kv;
    else if (k == 0 || v == 0) k = v = k > v ? k : v;
    L->k_cache_scale = k;
    L->v_cache_scale = v;
    m->n_kv_scales += k > 0;
    return ASSAY_OK;
}

/* a weight the model has: stored data, or a dummy weight still to be made */
static int weight_present(const assay_weight *w) { return w->data || assay_weight_is_dummy(w); }
static size_t weight_bytes(const assay_weight *w) { return weight_present(w) ? w->row_bytes * (size_t)w->n_out : 0; }

/* A dummy weight's values in host memory, for on-the-fly fp8 to quantize on the host: *tmp gets the buffer, which the
 * caller frees once the codes are made (NULL for a stored weight). */
static assay_status dummy_to_host(assay_weight *w, void **tmp) {
    *tmp = NULL;
    if (!assay_weight_is_dummy(w)) return ASSAY_OK;
    void *p = assay_xmalloc(w->row_bytes * (size_t)w->n_out);
    assay_status st = assay_weight_dummy_fill(w, p, 0, w->n_out);
    if (st == ASSAY_OK) w->data = *tmp = p;
    else free(p);
    return st;
}

assay_status assay_model_load(assay_model **out, const char *path, const assay_model_options *opt) {
    *out = NULL;
    assay_model_options dflt;
    if (!opt) {
        assay_model_options_default(&dflt);
        opt = &dflt;
    }
    assay_status st = assay_model_load_format_check(opt->load_format);
    if (st) return st;
    assay_model *m = assay_xcalloc(1, sizeof *m);
    m->dummy = opt->load_format && strcmp(opt->load_format, "dummy") == 0;
    st = m->dummy ? assay_model_file_open_config(&m->mf, path) : assay_model_file_open(&m->mf, path);
    if (st) {
        free(m);
        return st;
    }
    m->c = *assay_model_file_config(m->mf);
    m->n_threads = opt->n_threads;
    const assay_model_config *c = &m->c;
    double t_load = assay_now_seconds();
    if ((st = assay_backend_check(opt->device))) goto fail;
    if (m->dummy) {
        if (assay_model_file_quantization_config(m->mf)) {
            st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: --load-format dummy makes unquantized weights; this config.json "
                            "has a quantization_config (remove it, and use --quantization fp8 for on-the-fly FP8)", path);
            goto fail;
        }
        m->dummy_seed = opt->seed;
        m->dummy_type = assay_model_file_torch_dtype(m->mf);
        if (m->dummy_type == ASSAY_TYPE_COUNT) m->dummy_type = ASSAY_TYPE_BF16;
    } else if ((st = assay_ckpt_open(&m->ck, m->mf)))
        goto fail;
    if (opt->quantization) {
        if ((st = assay_model_quantization_check(opt->quantization))) goto fail;
        if (m->ck.loader) {
            st = assay_fail(ASSAY_ERR_ARG, "%s is already quantized (%s); --quantization %s applies to unquantized "
                            "checkpoints", path, m->ck.loader->label, opt->quantization);
            goto fail;
        }
        m->fp8 = 1;
    }
    double t_quant = 0;
    int n_quant = 0;
    if (c->rope_scaling == ASSAY_ROPE_SCALING_YARN) {
        st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: YaRN rope scaling is not supported by the CPU engine yet", path);
        goto fail;
    }
    if (c->n_head <= 0 || c->n_head_kv <= 0 || c->n_head % c->n_head_kv || c->head_dim <= 0 || c->head_dim % 2) {
        st = assay_fail(ASSAY_ERR_FORMAT, "%s: head counts %lld/%lld with head_dim %lld are not usable", path,
                        (long long)c->n_head, (long long)c->n_head_kv, (long long)c->head_dim);
        goto fail;
    }
    int64_t E = c->n_embd, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd, F = c->n_ff;
    if ((st = load_weight(m, "token_embd.weight", &m->tok_embd, NULL, E, c->n_vocab, 0))) goto fail;
    if ((st = load_weight(m, "output.weight", &m->output, &m->output_act, E, c->n_vocab, 1))) goto fail;
    if (!weight_present(&m->output)) { /* tied embeddings */
        m->output = m->tok_embd;
        m->tied = 1;
    }
    if ((st = load_vec(m, "output_norm.weight", &m->output_norm, E, 0))) goto fail;
    m->layers = assay_xcalloc((size_t)c->n_layer, sizeof *m->layers);
    for (int64_t l = 0; l < c->n_layer; l++) {
        model_layer *L = &m->layers[l];
        char nm[128];
#define W(field, act, suffix, nin, nout)                                                           \
    snprintf(nm, sizeof nm, "blk.%lld." suffix, (long long)l);                                     \
    if ((st = load_weight(m, nm, &L->field, &L->act, nin, nout, 0))) goto fail;
#define V(field, suffix, n, opt)                                                                   \
    snprintf(nm, sizeof nm, "blk.%lld." suffix, (long long)l);                                     \
    if ((st = load_vec(m, nm, &L->field, n, opt))) goto fail;
        W(wq, aq, "attn_q.weight", E, qd);
        W(wk, ak, "attn_k.weight", E, kvd);
        W(wv, av, "attn_v.weight", E, kvd);
        W(wo, ao, "attn_output.weight", qd, E);
        W(w_gate, a_gate, "ffn_gate.weight", E, F);
        W(w_up, a_up, "ffn_up.weight", E, F);
        W(w_down, a_down, "ffn_down.weight", F, E);
        V(attn_norm, "attn_norm.weight", E, 0);
        V(ffn_norm, "ffn_norm.weight", E, 0);
        V(bq, "attn_q.bias", qd, !c->has_qkv_bias);
        V(bk, "attn_k.bias", kvd, !c->has_qkv_bias);
        V(bv, "attn_v.bias", kvd, !c->has_qkv_bias);
        V(q_norm, "attn_q_norm.weight", hd, !c->has_qk_norm);
        V(k_norm, "attn_k_norm.weight", hd, !c->has_qk_norm);
        V(post_attn_norm, "post_attention_norm.weight", E, !c->has_post_norms);
        V(post_ffn_norm, "post_ffw_norm.weight", E, !c->has_post_norms);
#undef W
#undef V
        if (m->fp8) {
            int on_device = opt->device && strcmp(opt->device, "cpu") != 0;
            double t0 = assay_now_seconds();
            assay_weight *lin[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            assay_act_quant *acts[] = {&L->aq, &L->ak, &L->av, &L->ao, &L->a_gate, &L->a_up, &L->a_down};
            for (int i = 0; i < 7; i++) {
                /* a device backend's FP8 GEMM reads the codes; its shapes need whole 16 x 16 tiles */
                int keep_codes = on_device && lin[i]->n_in % 16 == 0 && lin[i]->n_out % 16 == 0 && !lin[i]->perm;
                void *tmp = NULL;
                if ((st = dummy_to_host(lin[i], &tmp)) == ASSAY_OK) st = fp8_weight(m, lin[i], keep_codes);
                free(tmp);
                if (st) goto fail;
                acts[i]->kind = ASSAY_ACT_QUANT_FP8_TOKEN; /* vLLM's per-token dynamic scales on Hopper */
                acts[i]->fmt = ASSAY_FP8_E4M3;
            }
            n_quant += 7;
            t_quant += assay_now_seconds() - t0;
        }
        if ((st = load_kv_scales(m, l, L))) goto fail;
        L->sliding = c->sliding_window > 0 && c->sliding_window_pattern > 0 && (l + 1) % c->sliding_window_pattern != 0;
        m->weight_bytes += weight_bytes(&L->wq) + weight_bytes(&L->wk) + weight_bytes(&L->wv) + weight_bytes(&L->wo) +
                           weight_bytes(&L->w_gate) + weight_bytes(&L->w_up) + weight_bytes(&L->w_down);
    }
    m->weight_bytes += weight_bytes(&m->output) + m->tok_embd.row_bytes;
    m->inv_freq = own(m, rope_freqs(c, c->rope_theta, hd));
    m->inv_freq_local = own(m, rope_freqs(c, c->rope_theta_local > 0 ? c->rope_theta_local : c->rope_theta, hd));
    if ((st = assay_backend_open(&m->be, opt->device, opt->n_threads))) goto fail;
    if (opt->f32_activations && m->be->ops == assay_backend_cpu_ops()) assay_backend_cpu_f32_activations(m->be);
    if (!m->be->host_memory) st = device_setup(m);
    else if (assay_weight_is_dummy(&m->tok_embd)) st = m->be->ops->prepare_weight(m->be, &m->tok_embd); /* fills it */
    if (st) goto fail;
    if (m->tied) m->output = m->tok_embd; /* the one table, as prepared */
    /* every matmul weight once, packed the backend's way */
    for (int64_t l = 0; l < c->n_layer && st == ASSAY_OK; l++) {
        model_layer *L = &m->layers[l];
        assay_weight *lin[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7 && st == ASSAY_OK; i++) st = m->be->ops->prepare_weight(m->be, lin[i]);
    }
    if (st == ASSAY_OK) st = m->be->ops->prepare_weight(m->be, &m->output);
    if (st) goto fail;
    if (m->dummy) {
        double mib = (double)m->weight_bytes / 1048576.0;
        fprintf(stderr, "--load-format dummy: %s (%s, %lld layers, %s, seed %llu): %.*f %s of random weights made in "
                "%.2f s on %s\n", path, c->arch, (long long)c->n_layer, assay_type_name(m->dummy_type),
                (unsigned long long)m->dummy_seed, mib < 1024 ? 1 : 2, mib < 1024 ? mib : mib / 1024,
                mib < 1024 ? "MiB" : "GiB", assay_now_seconds() - t_load, m->be->ops->name);
    }
    /* a note like vLLM's load log: what on-the-fly quantization cost */
    if (m->fp8) assay_note("quantized %d linear layers to fp8 in %.2f s", n_quant, t_quant);
    if (m->ck.loader) {
        char how[96];
        assay_act_quant_describe(c->n_layer > 0 ? &m->layers[0].aq : &m->output_act, how, sizeof how);
        char kept[200] = "dequantized to f32";
        if (m->n_ckpt_packed > 0) {
            const assay_type_info *ti = assay_type_get(m->ckpt_packed_type);
            snprintf(kept, sizeof kept, "%d packed as %s, %.2f bits/weight%s%s", m->n_ckpt_packed, ti->name,
                     8.0 * (double)ti->block_bytes / (double)ti->block_elems,
                     m->n_perm ? ", act-order inputs gathered per matmul" : "",
                     m->n_ckpt_f32 ? "; others dequantized to f32" : "");
        }
        assay_note("loaded %d linear layers from the %s checkpoint in %.2f s (%s; inputs: %s; matmul weights %.2f MiB)",
                m->n_ckpt_linears, m->ck.loader->label, assay_now_seconds() - t_load, kept, how,
                (double)m->weight_bytes / 1048576.0);
        if (m->ckpt_f32_note[0]) assay_note("dequantized to f32 because %s", m->ckpt_f32_note);
    }
    *out = m;
    return ASSAY_OK;
fail:
    assay_model_free(m);
    return st;
}

void assay_model_free(assay_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_dev_owned; i++) m->be->ops->free(m->be, m->dev_owned[i]);
    free(m->dev_owned);
    assay_backend_close(m->be);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    assay_model_file_close(m->mf);
    free(m);
}

const assay_model_config *assay_model_get_config(const assay_model *m) { return &m->c; }
const assay_model_file *assay_model_get_file(const assay_model *m) { return m->mf; }
size_t assay_model_weight_bytes(const assay_model *m) { return m->weight_bytes; }
int assay_model_is_dummy(const assay_model *m) { return m->dummy; }
assay_backend *assay_model_backend(const assay_model *m) { return m->be; }
const char *assay_model_kernels(const assay_model *m) { return assay_backend_cpu_kernels(m->be); }
int64_t assay_model_kv_scale_layers(const assay_model *m) { return m->n_kv_scales; }

int assay_model_emulates_quantized_activations(const assay_model *m, char *how, size_t cap) {
    if (how && cap) how[0] = 0;
    if (!m->be->host_memory) return 0; /* a device backend runs its quantized kernels natively */
    for (int64_t l = 0; l < m->c.n_layer; l++) {
        const model_layer *L = &m->layers[l];
        const assay_act_quant *acts[] = {&L->aq, &L->ak, &L->av, &L->ao, &L->a_gate, &L->a_up, &L->a_down};
        for (int i = 0; i < 7; i++)
            if (acts[i]->kind != ASSAY_ACT_QUANT_NONE) {
                if (how) assay_act_quant_describe(acts[i], how, cap);
                return 1;
            }
    }
    return 0;
}

assay_status assay_model_weight_f32(const assay_model *m, const char *name, int64_t *n_in, int64_t *n_out, float *out) {
    const assay_weight *w = NULL;
    if (strcmp(name, "output.weight") == 0) w = &m->output;
    for (int64_t l = 0; l < m->c.n_layer && !w; l++) {
        const model_layer *L = &m->layers[l];
        const assay_weight *lin[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (strcmp(lin[i]->name, name) == 0) w = lin[i];
    }
    if (!w) return assay_fail(ASSAY_ERR_ARG, "no linear weight named %s", name);
    *n_in = w->n_in;
    *n_out = w->n_out;
    if (!out) return ASSAY_OK;
    if (assay_weight_is_dummy(w)) { /* made on a device only: the same values, made again on the host */
        void *tmp = assay_xmalloc(w->row_bytes * (size_t)w->n_out);
        assay_status st = assay_weight_dummy_fill(w, tmp, 0, w->n_out);
        if (st == ASSAY_OK) st = assay_dequantize(w->type, tmp, out, w->n_in * w->n_out);
        free(tmp);
        return st;
    }
    if (!w->perm) return assay_dequantize(w->type, w->data, out, w->n_in * w->n_out);
    /* packed in group order: dequantize, then put every column back where the checkpoint has it */
    float *row = assay_xmalloc((size_t)w->n_in * sizeof(float));
    assay_status st = ASSAY_OK;
    for (int64_t o = 0; o < w->n_out && st == ASSAY_OK; o++) {
        st = assay_dequantize(w->type, (const uint8_t *)w->data + (size_t)o * w->row_bytes, row, w->n_in);
        for (int64_t c = 0; c < w->n_in; c++) out[o * w->n_in + w->perm[c]] = row[c];
    }
    free(row);
    return st;
}

assay_status assay_model_set_weight_f32(assay_model *m, const char *name, const float *w) {
    assay_weight *wt = NULL;
    for (int64_t l = 0; l < m->c.n_layer && !wt; l++) {
        model_layer *L = &m->layers[l];
        assay_weight *lin[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (strcmp(lin[i]->name, name) == 0) wt = lin[i];
    }
    if (!wt) return assay_fail(ASSAY_ERR_ARG, "no block linear weight named %s", name);
    const assay_tensor *t = assay_model_file_find(m->mf, name);
    if (!t || assay_tensor_nelements(t) != wt->n_in * wt->n_out)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: only a float checkpoint's linears can be replaced", name);
    size_t bytes = sizeof(float) * (size_t)(wt->n_in * wt->n_out);
    /* the same row order as load_weight: copy through a view of w shaped and flagged like the file's tensor */
    assay_tensor view = *t;
    view.type = ASSAY_TYPE_F32;
    view.data = w;
    view.bytes = bytes;
    float *f = assay_xmalloc(bytes);
    assay_tensor_copy_rows(&view, f);
    wt->type = ASSAY_TYPE_F32;
    wt->row_bytes = assay_type_row_bytes(ASSAY_TYPE_F32, wt->n_in);
    wt->data = own(m, f);
    wt->perm = NULL;
    return m->be->ops->prepare_weight(m->be, wt);
}

/* ---- sessions --------------------------------------------------------------------------------------------- */

/* Where the KV scales come from (model.h, assay_session_kv_scales_desc), and the line that says so. */
static assay_status kv_scales_setup(assay_session *s) {
    const assay_model *m = s->m;
    assay_kv_dtype dt = s->o.kv_dtype;
    const char *dn = assay_kv_dtype_name(dt);
    int fp8 = dt == ASSAY_KV_FP8_E4M3 || dt == ASSAY_KV_FP8_E5M2;
    if (s->o.kv_calc_tokens > 0) {
        if (!assay_kv_dtype_scaled(dt))
            return assay_fail(ASSAY_ERR_ARG, "--calculate-kv-scales needs an 8-bit KV cache (--kv-cache-dtype fp8), not %s", dn);
        assay_kv_cache_calc_begin(&s->kv, s->o.kv_calc_tokens);
        s->kv_kind = "calculated";
        snprintf(s->kv_desc, sizeof s->kv_desc,
                 "KV cache %s: per-layer k/v scales calculated from the running max of the first %lld tokens of real "
                 "traffic (per-slot dynamic scales until then)%s", dn, (long long)s->o.kv_calc_tokens,
                 m->n_kv_scales ? "; the checkpoint's k_scale/v_scale are not used" : "");
    } else if (fp8 && m->n_kv_scales > 0) {
        for (int64_t l = 0; l < m->c.n_layer; l++)
            if (m->layers[l].k_cache_scale > 0)
                assay_kv_cache_set_static(&s->kv, l, m->layers[l].k_cache_scale, m->layers[l].v_cache_scale);
        s->kv_kind = "checkpoint";
        snprintf(s->kv_desc, sizeof s->kv_desc,
                 "KV cache %s: static per-layer k_scale/v_scale from the checkpoint (%lld of %lld layers%s)", dn,
                 (long long)m->n_kv_scales, (long long)m->c.n_layer,
                 m->n_kv_scales < m->c.n_layer ? "; the others: per-slot dynamic scales" : "");
    } else if (assay_kv_dtype_scaled(dt)) {
        s->kv_kind = "dynamic";
        snprintf(s->kv_desc, sizeof s->kv_desc, "KV cache %s: dynamic scale per (token, KV head) slot (%s)", dn,
                 !fp8 ? "a checkpoint's fp8 k_scale/v_scale do not apply to int8"
                      : "the checkpoint has no k_scale/v_scale");
    } else {
        s->kv_kind = "none";
        snprintf(s->kv_desc, sizeof s->kv_desc, "KV cache %s: no scales%s", dn,
                 m->n_kv_scales ? " (the checkpoint's fp8 k_scale/v_scale apply to --kv-cache-dtype fp8 only)" : "");
    }
    return ASSAY_OK;
}

const char *assay_session_kv_scales_desc(const assay_session *s) { return s->kv_desc; }
const char *assay_session_kv_scales_kind(const assay_session *s) { return s->kv_kind; }

void assay_session_kv_scales_format(const assay_session *s, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "k/v scale per layer:");
    for (int64_t l = 0; l < s->kv.n_layer && n < cap; l++)
        n += (size_t)snprintf(out + n, cap - n, " %.6g/%.6g", s->kv.layers[l].k_static, s->kv.layers[l].v_static);
}
void assay_session_kv_scales_pause(assay_session *s, int paused) { assay_kv_cache_calc_pause(&s->kv, paused); }
void assay_session_kv_scales_get(const assay_session *s, int64_t layer, float *k_scale, float *v_scale) {
    ASSAY_ASSERT(layer >= 0 && layer < s->kv.n_layer);
    *k_scale = s->kv.layers[layer].k_static;
    *v_scale = s->kv.layers[layer].v_static;
}

void assay_session_set_kv_hook(assay_session *s, assay_kv_fn fn, void *user) {
    s->kv_hook = fn;
    s->kv_user = user;
}

assay_status assay_session_open(assay_session **out, assay_model *m, const assay_session_options *opt) {
    *out = NULL;
    assay_session_options o;
    if (opt) o = *opt;
    else assay_session_options_default(&o);
    const assay_model_config *c = &m->c;
    if (o.n_ctx <= 0) o.n_ctx = c->n_ctx_train > 0 && c->n_ctx_train < 4096 ? c->n_ctx_train : 4096;
    if (o.n_seq < 0) o.n_seq = 0;
    if (o.n_batch <= 0) o.n_batch = 512;
    if ((int)o.kv_dtype < 0 || o.kv_dtype >= ASSAY_KV_DTYPE_COUNT) return assay_fail(ASSAY_ERR_ARG, "bad KV cache dtype");
    if (o.n_seq == 0 && o.kv_blocks <= 0)
        return assay_fail(ASSAY_ERR_ARG, "a session without sequences needs its KV pool size (kv_blocks)");
    int64_t n_blocks = o.kv_blocks > 0 ? o.kv_blocks : o.n_seq * assay_blocks_for(o.n_ctx);
    assay_session *s = assay_xcalloc(1, sizeof *s);
    s->m = m;
    s->o = o;
    assay_kv_geom g = {o.kv_dtype, c->n_head_kv, c->head_dim};
    assay_status st = assay_kv_cache_init(&s->kv, m->be, &g, c->n_layer, n_blocks);
    if (st) {
        free(s);
        return st;
    }
    if ((st = kv_scales_setup(s))) {
        assay_kv_cache_free(&s->kv);
        free(s);
        return st;
    }
    int64_t B = o.n_batch, E = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    if (o.n_seq > 0) {
        s->bm = assay_block_manager_new(n_blocks, 0);
        s->tables = assay_xcalloc((size_t)o.n_seq, sizeof *s->tables);
        s->table_ids = assay_xcalloc((size_t)o.n_seq, sizeof *s->table_ids);
        s->seq_lens = assay_xcalloc((size_t)o.n_seq, sizeof *s->seq_lens);
        s->seq_of_tok = assay_xmalloc((size_t)B * sizeof *s->seq_of_tok);
        s->slot = assay_xmalloc((size_t)B * sizeof *s->slot);
    }
    /* activations live in backend memory, of the backend's activation type */
    assay_backend *be = m->be;
    size_t as = assay_backend_act_size(be);
    float **bufs[] = {&s->x, &s->h, &s->rows, &s->q, &s->att, &s->k, &s->v, &s->gate, &s->up, &s->act, &s->logits_dev};
    int64_t widths[] = {E, E, E, qd, qd, kvd, kvd, c->n_ff, c->n_ff, c->n_ff, c->n_vocab};
    for (int i = 0; i < (be->host_memory ? 10 : 11); i++)
        if (!(*bufs[i] = be->ops->alloc(be, (size_t)(B * widths[i]) * as))) {
            assay_session_close(s);
            return assay_fail(ASSAY_ERR_NOMEM, "session: no memory for activations of %lld tokens", (long long)B);
        }
    s->mask = assay_xmalloc((size_t)B);
    s->row_idx = assay_xmalloc((size_t)B * sizeof(int32_t));
    *out = s;
    return ASSAY_OK;
}

void assay_session_close(assay_session *s) {
    if (!s) return;
    for (int i = 0; s->tables && i < s->o.n_seq; i++) assay_block_manager_free_table(s->bm, &s->tables[i]);
    assay_block_manager_free(s->bm);
    free(s->tables); free(s->table_ids); free(s->seq_lens); free(s->seq_of_tok); free(s->slot);
    if (s->kv.layers) assay_kv_cache_free(&s->kv);
    assay_backend *be = s->m->be;
    /* logits_dev: made at open on a device backend, on the first argmax-only step on a host one */
    float *bufs[] = {s->x, s->h, s->rows, s->q, s->att, s->k, s->v, s->gate, s->up, s->act, s->logits_dev};
    for (int i = 0; i < 11; i++)
        if (bufs[i]) be->ops->free(be, bufs[i]);
    free(s->mask);
    free(s->row_idx);
    free(s->g_tok); free(s->g_pos); free(s->g_seq); free(s->g_cu); free(s->g_len); free(s->g_slot); free(s->g_want);
    free(s->g_tables);
    if (s->m->be->ops->graph_reset) s->m->be->ops->graph_reset(s->m->be);
    free(s);
}

int64_t assay_session_n_ctx(const assay_session *s) { return s->o.n_ctx; }
int64_t assay_session_n_batch(const assay_session *s) { return s->o.n_batch; }
int64_t assay_session_kv_blocks(const assay_session *s) { return s->kv.n_blocks; }
size_t assay_session_kv_block_bytes(const assay_session *s) { return assay_kv_cache_block_bytes(&s->kv.geom, s->kv.n_layer); }

void assay_session_seq_clear(assay_session *s, int seq) {
    ASSAY_ASSERT(s->bm && seq >= 0 && seq < s->o.n_seq);
    assay_block_manager_free_table(s->bm, &s->tables[seq]);
}

void assay_session_copy_block(assay_session *s, int64_t src, int64_t dst) {
    ASSAY_ASSERT(src >= 0 && src < s->kv.n_blocks && dst >= 0 && dst < s->kv.n_blocks);
    assay_backend *be = s->m->be;
    for (int64_t l = 0; l < s->kv.n_layer; l++) be->ops->kv_copy_block(be, &s->kv.layers[l], &s->kv.geom, src, dst);
}

void assay_session_set_calib_hook(assay_session *s, assay_calib_fn fn, void *user) {
    s->calib = fn;
    s->calib_user = user;
}

void assay_session_set_layer_limit(assay_session *s, int64_t n_layers) { s->layer_limit = n_layers > 0 ? n_layers : 0; }

static void linear(assay_session *s, float *y, const assay_weight *w, const assay_act_quant *act, const float *x,
                   int64_t n, const float *bias) {
    assay_backend *be = s->m->be;
    if (s->calib) s->calib(s->calib_user, w->name, x, n, w->n_in);
    be->ops->linear(be, y, w, act, x, n, bias);
}

/* The ops of one step after begin_step: the layers, then the logits of the rows that want them into `out` (backend
 * memory, or the host buffer on a host-memory backend). Returns the number of logits rows (-1: a truncated pass). */
static int64_t forward_ops(assay_session *s, const assay_step *step, float *out) {
    assay_model *m = s->m;
    const assay_model_config *c = &m->c;
    assay_backend *be = m->be;
    const assay_backend_ops *op = be->ops;
    int64_t E = c->n_embd, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd, F = c->n_ff;
    int64_t n = step->n_tokens;
    const int32_t *tok = step->token, *pos = step->pos;
    const int8_t *want = step->want_logits;
    float *x = s->x, *h = s->h;
    op->get_rows(be, x, &m->tok_embd, tok, n);
    if (c->scale_embeddings) op->scale(be, x, sqrtf((float)E), n * E);
    float eps = (float)c->norm_eps;
    float attn_scale = c->attn_scale > 0 ? (float)c->attn_scale : 1.0f / sqrtf((float)hd);
    assay_rope_params rp = {c->rope_style == ASSAY_ROPE_NEOX ? ASSAY_ROPE_MODE_NEOX : ASSAY_ROPE_MODE_NORM, hd, NULL};
    int64_t n_run = s->layer_limit > 0 && s->layer_limit < c->n_layer ? s->layer_limit : c->n_layer;
    for (int64_t l = 0; l < n_run; l++) {
        const model_layer *L = &m->layers[l];
        op->rmsnorm(be, h, x, L->attn_norm, E, n, eps);
        linear(s, s->q, &L->wq, &L->aq, h, n, L->bq);
        linear(s, s->k, &L->wk, &L->ak, h, n, L->bk);
        linear(s, s->v, &L->wv, &L->av, h, n, L->bv);
        if (L->q_norm) op->rmsnorm(be, s->q, s->q, L->q_norm, hd, n * c->n_head, eps);
        if (L->k_norm) op->rmsnorm(be, s->k, s->k, L->k_norm, hd, n * c->n_head_kv, eps);
        rp.inv_freq = L->sliding ? m->inv_freq_local : m->inv_freq;
        op->rope(be, s->q, n, c->n_head, hd, qd, pos, &rp);
        op->rope(be, s->k, n, c->n_head_kv, hd, kvd, pos, &rp);
        if (s->kv_hook) s->kv_hook(s->kv_user, l, s->k, s->v, n, kvd);
        assay_kv_cache_observe(&s->kv, l, s->k, s->v, n);
        op->kv_store(be, &s->kv.layers[l], &s->kv.geom, s->k, s->v, step);
        assay_attn_params ap = {c->n_head, c->n_head_kv, hd, attn_scale, L->sliding ? c->sliding_window : 0, 0};
        op->attention(be, s->att, s->q, &ap, &s->kv.layers[l], &s->kv.geom, step);
        linear(s, h, &L->wo, &L->ao, s->att, n, NULL);
        if (L->post_attn_norm) op->rmsnorm(be, h, h, L->post_attn_norm, E, n, eps);
        if (op->add_rmsnorm) op->add_rmsnorm(be, h, x, h, L->ffn_norm, E, n, eps); /* x += h; h = norm(x) */
        else {
            op->add(be, x, x, h, n * E);
            op->rmsnorm(be, h, x, L->ffn_norm, E, n, eps);
        }
        linear(s, s->gate, &L->w_gate, &L->a_gate, h, n, NULL);
        linear(s, s->up, &L->w_up, &L->a_up, h, n, NULL);
        if (c->activation == ASSAY_ACT_GELU_TANH) op->geglu(be, s->act, s->gate, s->up, F, n, F);
        else op->swiglu(be, s->act, s->gate, s->up, F, n, F);
        linear(s, h, &L->w_down, &L->a_down, s->act, n, NULL);
        if (L->post_ffn_norm) op->rmsnorm(be, h, h, L->post_ffn_norm, E, n, eps);
        op->add(be, x, x, h, n * E);
    }
    if (n_run < c->n_layer) return -1; /* a truncated calibration pass */
    /* only the rows that asked for logits go through the final norm and the (large) output matrix */
    int64_t r = 0;
    for (int64_t t = 0; t < n; t++)
        if (want[t]) s->row_idx[r++] = (int32_t)t;
    if (r == 0) return 0;
    float *rows = x;
    if (r < n) {
        op->gather_rows(be, s->rows, x, s->row_idx, r, E);
        rows = s->rows;
    }
    op->rmsnorm(be, s->rows, rows, m->output_norm, E, r, eps);
    linear(s, out, &m->output, &m->output_act, s->rows, r, NULL);
    if (c->final_logit_softcap > 0) op->tanh_cap(be, out, r * c->n_vocab, (float)c->final_logit_softcap);
    return r;
}

/* Buckets of decode batch sizes that get a CUDA graph each (vLLM's capture sizes): 1, 2, 4, then multiples of 8. */
static int64_t graph_bucket(int64_t n) {
    if (n <= 2) return n;
    if (n <= 4) return 4;
    return (n + 7) / 8 * 8;
}
enum { GRAPH_MAX_BATCH = 256 };

/* A decode step (one new token for each sequence, every row wanting logits) padded to its bucket and replayed from a
 * graph captured on the bucket's second use (the first runs eagerly and sizes every buffer). Padding rows write no KV
 * (slot -1) and see an empty sequence. Returns 1 when the step ran this way. */
static int run_step_graph(assay_session *s, const assay_step *step, float *logits, int32_t *ids) {
    assay_backend *be = s->m->be;
    const assay_backend_ops *op = be->ops;
    int64_t n = step->n_tokens, V = s->m->c.n_vocab;
    if (!op->graph_launch || s->no_graphs || s->calib || s->kv_hook || s->layer_limit > 0 || !step->cu_seqlens_q ||
        n != step->n_seqs || step->n_logits != n || n > GRAPH_MAX_BATCH || (s->kv.calc.target > 0 && !assay_kv_cache_calc_frozen(&s->kv)))
        return 0;
    for (int64_t i = 0; i <= n; i++)
        if (step->cu_seqlens_q[i] != i) return 0;
    int64_t B = graph_bucket(n);
    if (B > s->o.n_batch) return 0;
    if (!s->g_tok) {
        s->g_tok = assay_xmalloc(GRAPH_MAX_BATCH * sizeof(int32_t));
        s->g_pos = assay_xmalloc(GRAPH_MAX_BATCH * sizeof(int32_t));
        s->g_seq = assay_xmalloc(GRAPH_MAX_BATCH * sizeof(int32_t));
        s->g_cu = assay_xmalloc((GRAPH_MAX_BATCH + 1) * sizeof(int32_t));
        s->g_len = assay_xmalloc(GRAPH_MAX_BATCH * sizeof(int32_t));
        s->g_slot = assay_xmalloc(GRAPH_MAX_BATCH * sizeof(int64_t));
        s->g_want = assay_xmalloc(GRAPH_MAX_BATCH);
        s->g_tables = assay_xmalloc(GRAPH_MAX_BATCH * sizeof(int32_t *));
    }
    static const int32_t empty_table[1] = {0};
    for (int64_t i = 0; i < B; i++) {
        int real = i < n;
        s->g_tok[i] = real ? step->token[i] : 0;
        s->g_pos[i] = real ? step->pos[i] : 0;
        s->g_seq[i] = (int32_t)i;
        s->g_cu[i] = (int32_t)i;
        s->g_len[i] = real ? step->seq_lens[i] : 0;
        s->g_slot[i] = real ? step->slot[i] : -1;
        s->g_want[i] = 1;
        s->g_tables[i] = real ? step->block_tables[i] : empty_table;
    }
    s->g_cu[B] = (int32_t)B;
    assay_step g = {.n_tokens = B, .token = s->g_tok, .pos = s->g_pos, .seq_of_tok = s->g_seq, .slot = s->g_slot,
                    .want_logits = s->g_want, .n_logits = B, .n_seqs = B, .cu_seqlens_q = s->g_cu, .seq_lens = s->g_len,
                    .block_tables = (const int32_t *const *)s->g_tables, .graph_ctx = s->o.n_ctx};
    op->begin_step(be, &g);
    int uses = s->graph_uses[B]++;
    if (!op->graph_launch(be, B)) {
        if (uses == 0) forward_ops(s, &g, s->logits_dev); /* warm-up: every buffer reaches its size */
        else {
            op->graph_capture_begin(be, B);
            forward_ops(s, &g, s->logits_dev);
            if (!op->graph_capture_end(be, B)) { /* not capturable here: run it, and no graphs from now on */
                s->no_graphs = 1;
                forward_ops(s, &g, s->logits_dev);
            }
        }
    }
    if (ids) op->argmax(be, ids, s->logits_dev, V, n);
    else if (logits) op->download_f32(be, logits, s->logits_dev, n * V);
    return 1;
}

/* One step: the wanted rows' logits into `logits` (host f32, in token order), or only their argmax into `ids`. */
static assay_status run_step(assay_session *s, const assay_step *step, float *logits, int32_t *ids) {
    assay_model *m = s->m;
    const assay_model_config *c = &m->c;
    assay_backend *be = m->be;
    const assay_backend_ops *op = be->ops;
    int64_t n = step->n_tokens;
    if (n > s->o.n_batch)
        return assay_fail(ASSAY_ERR_ARG, "a step of %lld tokens exceeds the session's batch of %lld", (long long)n,
                          (long long)s->o.n_batch);
    for (int64_t t = 0; t < n; t++)
        if (step->token[t] < 0 || step->token[t] >= c->n_vocab)
            return assay_fail(ASSAY_ERR_RANGE, "token id %d is outside the vocabulary (%lld)", step->token[t],
                              (long long)c->n_vocab);
    if (!be->host_memory && run_step_graph(s, step, logits, ids)) return ASSAY_OK;
    if (op->begin_step) op->begin_step(be, step);
    /* the host buffer is written directly by a host-memory backend, unless only the argmax is wanted */
    if (ids && !s->logits_dev)
        s->logits_dev = be->ops->alloc(be, (size_t)(s->o.n_batch * c->n_vocab) * assay_backend_act_size(be));
    if (ids && !s->logits_dev) return assay_fail(ASSAY_ERR_NOMEM, "no memory for a step's logits");
    float *out = be->host_memory && !ids ? logits : s->logits_dev;
    int64_t r = forward_ops(s, step, out);
    if (r > 0 && ids) op->argmax(be, ids, out, c->n_vocab, r);
    else if (r > 0 && !be->host_memory && logits) op->download_f32(be, logits, out, r * c->n_vocab);
    return ASSAY_OK;
}

assay_status assay_session_run_step(assay_session *s, const assay_step *step, float *logits) {
    return run_step(s, step, logits, NULL);
}

assay_status assay_session_run_step_argmax(assay_session *s, const assay_step *step, int32_t *ids) {
    return run_step(s, step, NULL, ids);
}

/* The sequence API: reserves blocks for the chunk's positions in each token's sequence table, then runs it. */
static assay_status forward_chunk(assay_session *s, const int32_t *tok, const int32_t *pos, const int32_t *seq,
                                  int64_t n, float *logits, int64_t *n_written) {
    for (int64_t t = 0; t < n; t++) {
        int sq = seq ? seq[t] : 0;
        if (sq < 0 || sq >= s->o.n_seq) return assay_fail(ASSAY_ERR_RANGE, "sequence id %d is outside 0..%d", sq, s->o.n_seq - 1);
        if (pos[t] < 0 || pos[t] >= s->o.n_ctx)
            return assay_fail(ASSAY_ERR_RANGE, "position %d is outside the context of %lld tokens", pos[t], (long long)s->o.n_ctx);
        if (assay_block_manager_append(s->bm, &s->tables[sq], (int64_t)pos[t] + 1, NULL) != ASSAY_OK)
            return assay_fail(ASSAY_ERR_RANGE, "KV cache is full (%lld blocks of %d tokens)", (long long)s->kv.n_blocks,
                              ASSAY_KV_BLOCK);
        s->seq_of_tok[t] = sq;
        s->slot[t] = (int64_t)s->tables[sq].ids[pos[t] / ASSAY_KV_BLOCK] * ASSAY_KV_BLOCK + pos[t] % ASSAY_KV_BLOCK;
    }
    int64_t n_logits = 0;
    for (int64_t t = 0; t < n; t++) n_logits += s->mask[t] != 0;
    for (int i = 0; i < s->o.n_seq; i++) {
        s->table_ids[i] = s->tables[i].ids;
        s->seq_lens[i] = (int32_t)s->tables[i].n_tokens;
    }
    assay_step step = {.n_tokens = n, .token = tok, .pos = pos, .seq_of_tok = s->seq_of_tok, .slot = s->slot,
                       .want_logits = s->mask, .n_logits = n_logits, .n_seqs = s->o.n_seq, .cu_seqlens_q = NULL,
                       .seq_lens = s->seq_lens, .block_tables = s->table_ids};
    assay_status st = assay_session_run_step(s, &step, logits ? logits + *n_written * s->m->c.n_vocab : NULL);
    if (st == ASSAY_OK) *n_written += n_logits;
    return st;
}

assay_status assay_session_forward(assay_session *s, const assay_batch *b, float *logits) {
    if (!s->bm) return assay_fail(ASSAY_ERR_ARG, "this session has no sequences (n_seq 0): its steps come from an engine");
    int64_t written = 0, B = s->o.n_batch;
    for (int64_t t0 = 0; t0 < b->n_tokens; t0 += B) {
        int64_t n = b->n_tokens - t0 < B ? b->n_tokens - t0 : B;
        for (int64_t t = 0; t < n; t++) s->mask[t] = b->logits ? (b->logits[t0 + t] != 0) : (t0 + t == b->n_tokens - 1);
        assay_status st = forward_chunk(s, b->token + t0, b->pos + t0, b->seq ? b->seq + t0 : NULL, n, logits, &written);
        if (st) return st;
    }
    return ASSAY_OK;
}

/* ---- one decoder layer on given hidden states (model.h) ------------------------------------------------------- */

const char *assay_model_layer_unsupported(const assay_model *m) {
    const assay_model_config *c = &m->c;
    if (strcmp(m->be->ops->name, "cpu") != 0) return "a device backend (the layer functions take host f32 rows)";
    if (c->has_qkv_bias) return "q/k/v biases";
    if (c->has_qk_norm) return "q/k norms";
    if (c->has_post_norms) return "post-attention / post-MLP norms";
    if (c->sliding_window > 0) return "sliding-window attention";
    if (c->activation != ASSAY_ACT_SILU) return "a GeGLU MLP";
    if (c->scale_embeddings) return "scaled embeddings";
    return NULL;
}

/* y[n][n_out] = x[n][n_in] . W^T for f32 W [n_out][n_in] */
static void layer_mm(assay_backend *be, float *y, const float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n) {
    assay_weight wt = {.type = ASSAY_TYPE_F32, .data = w, .n_in = n_in, .n_out = n_out,
                       .row_bytes = sizeof(float) * (size_t)n_in, .name = "layer"};
    be->ops->matmul(be, y, &wt, x, n);
}

/* The rotation layout for q/k rows in the file's order: the forward pass permutes HF llama q/k rows at load and
 * rotates its copies pairwise (interleaved), which on the rows as stored is rotate-half; otherwise the rows are
 * used as stored with the config's layout. */
static assay_rope_mode layer_rope_mode(const assay_model *m) {
    if (permute_heads_of(m, "blk.0.attn_q.weight") > 0) return ASSAY_ROPE_MODE_NEOX;
    return m->c.rope_style == ASSAY_ROPE_NEOX ? ASSAY_ROPE_MODE_NEOX : ASSAY_ROPE_MODE_NORM;
}

static float layer_dot(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    float t = 0;
    for (; i < n; i++) t += a[i] * b[i];
    return t + ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

typedef struct {
    const float *q, *k, *v;
    float *att;
    int64_t T, n_head, n_kv, hd, j0, j1;
    float scale;
} layer_attn_job;

/* causal softmax attention for the (sequence, head) pairs [j0, j1) */
static void *layer_attn_worker(void *arg) {
    layer_attn_job *j = arg;
    int64_t T = j->T, hd = j->hd, qd = j->n_head * hd, kvd = j->n_kv * hd;
    float *p = assay_xmalloc(sizeof(float) * (size_t)T);
    for (int64_t jj = j->j0; jj < j->j1; jj++) {
        int64_t sq = jj / j->n_head, h = jj % j->n_head, kh = h / (j->n_head / j->n_kv);
        const float *Q = j->q + sq * T * qd + h * hd, *K = j->k + sq * T * kvd + kh * hd, *V = j->v + sq * T * kvd + kh * hd;
        float *O = j->att + sq * T * qd + h * hd;
        for (int64_t t = 0; t < T; t++) {
            float mx = -INFINITY;
            for (int64_t u = 0; u <= t; u++) {
                p[u] = layer_dot(Q + t * qd, K + u * kvd, hd) * j->scale;
                mx = p[u] > mx ? p[u] : mx;
            }
            double z = 0;
            for (int64_t u = 0; u <= t; u++) z += p[u] = expf(p[u] - mx);
            float *restrict o = O + t * qd;
            for (int64_t i = 0; i < hd; i++) o[i] = 0;
            for (int64_t u = 0; u <= t; u++) {
                float wgt = (float)(p[u] / z);
                const float *restrict vu = V + u * kvd;
                /* restrict + blocks of 8: the compiler vectorizes this (the same sums in the same order per i) */
                int64_t i = 0;
                for (; i + 8 <= hd; i += 8)
                    for (int k = 0; k < 8; k++) o[i + k] += wgt * vu[i + k];
                for (; i < hd; i++) o[i] += wgt * vu[i];
            }
        }
    }
    free(p);
    return NULL;
}

void assay_model_embed(const assay_model *m, const int32_t *ids, int64_t n, float *x) {
    m->be->ops->get_rows(m->be, x, &m->tok_embd, ids, n);
    if (m->c.scale_embeddings) m->be->ops->scale(m->be, x, sqrtf((float)m->c.n_embd), n * m->c.n_embd);
}

void assay_model_layer_attn_norm(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *x,
                                 int64_t n, float *h) {
    ASSAY_ASSERT(layer >= 0 && layer < m->c.n_layer);
    m->be->ops->rmsnorm(m->be, h, x, w->attn_norm, m->c.n_embd, n, (float)m->c.norm_eps);
}

void assay_model_layer_attention(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *h,
                                 int64_t n_seq, int64_t T, float *y) {
    const assay_model_config *c = &m->c;
    assay_backend *be = m->be;
    ASSAY_ASSERT(layer >= 0 && layer < c->n_layer);
    int64_t E = c->n_embd, hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv;
    int64_t N = n_seq * T, qd = nh * hd, kvd = nkv * hd;
    float *q = assay_xmalloc(sizeof(float) * (size_t)(N * qd)), *att = assay_xmalloc(sizeof(float) * (size_t)(N * qd));
    float *k = assay_xmalloc(sizeof(float) * (size_t)(N * kvd)), *v = assay_xmalloc(sizeof(float) * (size_t)(N * kvd));
    int32_t *pos = assay_xmalloc(sizeof(int32_t) * (size_t)N);
    for (int64_t t = 0; t < N; t++) pos[t] = (int32_t)(t % T);
    layer_mm(be, q, w->wq, qd, E, h, N);
    layer_mm(be, k, w->wk, kvd, E, h, N);
    layer_mm(be, v, w->wv, kvd, E, h, N);
    assay_rope_params rp = {layer_rope_mode(m), hd, m->layers[layer].sliding ? m->inv_freq_local : m->inv_freq};
    be->ops->rope(be, q, N, nh, hd, qd, pos, &rp);
    be->ops->rope(be, k, N, nkv, hd, kvd, pos, &rp);
    float scale = c->attn_scale > 0 ? (float)c->attn_scale : 1.0f / sqrtf((float)hd);
    long nt = m->n_threads > 0 ? m->n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    int64_t pairs = n_seq * nh;
    if (nt > pairs) nt = (long)pairs;
    if (nt > 64) nt = 64;
    if (nt < 1) nt = 1;
    layer_attn_job jobs[64];
    pthread_t th[64];
    for (long t = 0; t < nt; t++) {
        jobs[t] = (layer_attn_job){q, k, v, att, T, nh, nkv, hd, pairs * t / nt, pairs * (t + 1) / nt, scale};
        if (t) pthread_create(&th[t], NULL, layer_attn_worker, &jobs[t]);
    }
    layer_attn_worker(&jobs[0]);
    for (long t = 1; t < nt; t++) pthread_join(th[t], NULL);
    if (w->wo) layer_mm(be, y, w->wo, E, qd, att, N);
    else memcpy(y, att, sizeof(float) * (size_t)(N * qd));
    free(q);
    free(att);
    free(k);
    free(v);
    free(pos);
}

void assay_model_layer_attn_residual(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *x,
                                     const float *att, int64_t n, float *x2, float *h) {
    const assay_model_config *c = &m->c;
    assay_backend *be = m->be;
    ASSAY_ASSERT(layer >= 0 && layer < c->n_layer);
    int64_t E = c->n_embd;
    float *o = assay_xmalloc(sizeof(float) * (size_t)(n * E));
    layer_mm(be, o, w->wo, E, c->n_head * c->head_dim, att, n);
    be->ops->add(be, x2, x, o, n * E);
    be->ops->rmsnorm(be, h, x2, w->ffn_norm, E, n, (float)c->norm_eps);
    free(o);
}

void assay_model_layer_mlp(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *h, int64_t n,
                           float *y) {
    const assay_model_config *c = &m->c;
    assay_backend *be = m->be;
    ASSAY_ASSERT(layer >= 0 && layer < c->n_layer);
    int64_t E = c->n_embd, F = c->n_ff;
    float *gate = assay_xmalloc(sizeof(float) * (size_t)(n * F)), *up = assay_xmalloc(sizeof(float) * (size_t)(n * F));
    float *act = w->w_down ? assay_xmalloc(sizeof(float) * (size_t)(n * F)) : y;
    layer_mm(be, gate, w->w_gate, F, E, h, n);
    layer_mm(be, up, w->w_up, F, E, h, n);
    if (c->activation == ASSAY_ACT_GELU_TANH) be->ops->geglu(be, act, gate, up, F, n, F);
    else be->ops->swiglu(be, act, gate, up, F, n, F);
    if (w->w_down) {
        layer_mm(be, y, w->w_down, E, F, act, n);
        free(act);
    }
    free(gate);
    free(up);
}

void assay_model_layer_mlp_residual(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *x2,
                                    const float *act, int64_t n, float *x) {
    const assay_model_config *c = &m->c;
    assay_backend *be = m->be;
    ASSAY_ASSERT(layer >= 0 && layer < c->n_layer);
    int64_t E = c->n_embd;
    float *d = assay_xmalloc(sizeof(float) * (size_t)(n * E));
    layer_mm(be, d, w->w_down, E, c->n_ff, act, n);
    be->ops->add(be, x, x2, d, n * E);
    free(d);
}
