/* quantize_int.c — whole-model INT4 (RTN / GPTQ / AWQ) and W8A8 INT8 (SmoothQuant) into the safetensors layouts
 * transformers and vLLM load: GPTQ ("gptq" checkpoint format), AWQ GEMM, compressed-tensors int-quantized.
 *
 * Calibration chunks are spread evenly over the whole calibration corpus (assay_calib_text_spread), not taken from
 * its first file. What each method gathers per decoder layer: GPTQ the input Gram matrices (one per distinct
 * input: q/k/v share one, gate/up share one), AWQ mean |x| over every token, awq_tokens strided input rows (MLP
 * loss, clipping) and the first whole sequences of the q/k/v input (attention loss), SmoothQuant the per-channel
 * max |x|. AWQ and SmoothQuant take every layer's inputs from the full-precision model in one pass
 * (as AWQ's reference does); with awq_cached, AWQ instead computes them layer by layer on the cached residual
 * stream of every calibration token (iq_awq_layer_cached), so its scale search can score all of them.
 * Whatever is the model's forward (a decoder layer's attention block with its RoPE and scaling, norms, MLP) comes from
 * the model (model.h's assay_model_layer_*); this file keeps the calibration: the order of the passes, the caches,
 * the Gram matrices, the losses and grids. A model whose layers those functions do not implement yet is calibrated
 * through the engine's whole forward (GPTQ), scored per linear for q/k/v (AWQ's hooks route, with a note), or
 * refused with the feature's name (AWQ's cached route). GPTQ by
 * default calibrates layer by layer on the model as quantized so far, like the reference's sequential driver with
 * --true-sequential: one truncated pass per distinct input (q/k/v -> o -> gate/up -> down), the already-quantized
 * linears swapped into the engine (assay_model_set_weight_f32), so every Hessian sees the error of everything
 * before it. AWQ scores each scale candidate on the output AutoAWQ inspects:
 * the whole attention block (o_proj included) for q/k/v, the MLP block for gate/up, down_proj's output for down.
 * Scales that AWQ and SmoothQuant fold into the previous operation go into the RMSNorm weights
 * (input_layernorm for q/k/v, post_attention_layernorm for gate/up) and, for AWQ's down_proj, into up_proj's
 * output rows; the v_proj -> o_proj pair is skipped under GQA as in AWQ's auto_scale.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/backend.h"
#include "assay/calib.h"
#include "assay/dequant.h"
#include "assay/dtype.h"
#include "assay/file.h"
#include "assay/int_quant.h"
#include "assay/json.h"
#include "assay/model.h"
#include "assay/model_file.h"
#include "assay/progress.h"
#include "assay/quantize_int.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "quantize_gguf_internal.h"

/* the four distinct linear inputs of a llama decoder layer */
enum { IN_QKV, IN_O, IN_GATEUP, IN_DOWN, IN_COUNT };
static const char *const kLinears[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
static const int kLinearInput[] = {IN_QKV, IN_QKV, IN_QKV, IN_O, IN_GATEUP, IN_GATEUP, IN_DOWN};
static const int kStageLinear[] = {0, 3, 4, 6}; /* the first linear reading each input */
#define N_LINEARS 7

typedef struct {
    int64_t n_in;
    float *gram;     /* GPTQ: Σ x xᵀ (lower triangle filled as we go) */
    float *buf;      /* GPTQ: rows waiting to be added to gram */
    int64_t n_buf;
    float *sample;   /* AWQ: up to max_sample rows */
    int64_t n_sample, max_sample, seen;
    float *absmax;   /* SmoothQuant */
    double *abssum;  /* AWQ: Σ |x| per channel over every calibration token (n_abs of them) */
    int64_t n_abs;
    float *seqs;     /* AWQ: the first whole calibration sequences (attention block loss), n_seq_rows rows */
    int64_t n_seq_rows, max_seq_rows;
} iq_input;

typedef struct {
    const assay_intq_options *o;
    int64_t n_layer;
    iq_input *in;   /* [n_layer][IN_COUNT] */
    int64_t stride; /* AWQ subsampling stride over tokens */
    int64_t only_layer; /* >= 0: record only this layer's inputs (GPTQ's sequential passes) */
    int only_input;     /* >= 0: and only this input of it */
    assay_backend *be;  /* matmuls for the Gram matrices and AWQ's block losses */
} iq_calib;

#define GRAM_BATCH 512

/* gram += Σ_t x_t x_tᵀ over the buffered rows. With a backend this is one f32 matmul of the transposed batch with
 * itself (threaded, SIMD): (Xᵀ as weights [n][B]) · (Xᵀ as B-long rows) = XᵀX; the Gram matrix is the bulk of
 * GPTQ's calibration cost (n² per token). Without one, the plain loop (lower triangle). */
static void iq_gram_flush(iq_input *in, assay_backend *be) {
    int64_t n = in->n_in, B = in->n_buf;
    if (be) {
        float *xt = assay_xmalloc(sizeof(float) * (size_t)(n * B)), *g = assay_xmalloc(sizeof(float) * (size_t)(n * n));
        for (int64_t t = 0; t < B; t++)
            for (int64_t i = 0; i < n; i++) xt[i * B + t] = in->buf[t * n + i];
        assay_weight w = {.type = ASSAY_TYPE_F32, .data = xt, .n_in = B, .n_out = n,
                          .row_bytes = sizeof(float) * (size_t)B, .name = "gram"};
        be->ops->matmul(be, g, &w, xt, n);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j <= i; j++) in->gram[i * n + j] += g[i * n + j];
        free(xt);
        free(g);
    } else {
        for (int64_t i = 0; i < n; i++) {
            float *gi = in->gram + i * n;
            for (int64_t t = 0; t < B; t++) {
                const float *x = in->buf + t * n;
                float xi = x[i];
                if (xi == 0) continue;
                for (int64_t j = 0; j <= i; j++) gi[j] += xi * x[j];
            }
        }
    }
    in->n_buf = 0;
}

static int iq_parse(const char *name, int *layer, int *which) {
    int l;
    char kind[32];
    if (sscanf(name, "blk.%d.%31[a-z_].weight", &l, kind) != 2) return 0;
    for (int k = 0; k < N_LINEARS; k++)
        if (!strcmp(kind, kLinears[k])) {
            *layer = l;
            *which = kLinearInput[k];
            /* q, k, v share one input and gate/up another: record each input once */
            return k == 0 || k == 3 || k == 4 || k == 6;
        }
    return 0;
}

static void iq_hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    iq_calib *c = user;
    int l, w;
    if (!iq_parse(name, &l, &w) || l < 0 || l >= c->n_layer) return;
    if ((c->only_layer >= 0 && l != c->only_layer) || (c->only_input >= 0 && w != c->only_input)) return;
    iq_input *in = &c->in[l * IN_COUNT + w];
    if (!in->n_in) in->n_in = n_in;
    ASSAY_ASSERT(in->n_in == n_in);
    switch (c->o->method) {
    case ASSAY_INTQ_GPTQ:
        if (!in->gram) {
            in->gram = calloc((size_t)(n_in * n_in), sizeof(float));
            in->buf = assay_xmalloc(sizeof(float) * (size_t)(GRAM_BATCH * n_in));
            ASSAY_ASSERT(in->gram);
        }
        for (int64_t t = 0; t < n_tok; t++) {
            memcpy(in->buf + in->n_buf * n_in, x + t * n_in, sizeof(float) * (size_t)n_in);
            if (++in->n_buf == GRAM_BATCH) iq_gram_flush(in, c->be);
        }
        break;
    case ASSAY_INTQ_AWQ:
        if (!in->sample) {
            in->max_sample = c->o->awq_tokens > 0 ? c->o->awq_tokens : 512;
            in->sample = assay_xmalloc(sizeof(float) * (size_t)(in->max_sample * n_in));
        }
        for (int64_t t = 0; t < n_tok; t++, in->seen++)
            if (in->seen % c->stride == 0 && in->n_sample < in->max_sample)
                memcpy(in->sample + (in->n_sample++) * n_in, x + t * n_in, sizeof(float) * (size_t)n_in);
        if (!in->abssum) in->abssum = assay_xcalloc((size_t)n_in, sizeof(double));
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t i = 0; i < n_in; i++) in->abssum[i] += fabsf(x[t * n_in + i]);
        in->n_abs += n_tok;
        if (w == IN_QKV) {
            if (!in->seqs) {
                in->max_seq_rows = (c->o->awq_seqs > 0 ? c->o->awq_seqs : 8) * c->o->calib_seq_len;
                in->seqs = assay_xmalloc(sizeof(float) * (size_t)(in->max_seq_rows * n_in));
            }
            int64_t take = in->max_seq_rows - in->n_seq_rows < n_tok ? in->max_seq_rows - in->n_seq_rows : n_tok;
            memcpy(in->seqs + in->n_seq_rows * n_in, x, sizeof(float) * (size_t)(take * n_in));
            in->n_seq_rows += take;
        }
        break;
    case ASSAY_INTQ_W8A8:
        if (!in->absmax) in->absmax = calloc((size_t)n_in, sizeof(float));
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t i = 0; i < n_in; i++) {
                float a = fabsf(x[t * n_in + i]);
                if (a > in->absmax[i]) in->absmax[i] = a;
            }
        break;
    default:
        break;
    }
}

/* ---- output tensors --------------------------------------------------------------------------------------- */

typedef struct {
    assay_safetensors_writer *w;
    void **bufs;
    int64_t n, cap;
} iq_out;

static void *iq_keep(iq_out *o, void *p) {
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 256;
        o->bufs = realloc(o->bufs, sizeof(void *) * (size_t)o->cap);
        ASSAY_ASSERT(o->bufs);
    }
    o->bufs[o->n++] = p;
    return p;
}

static assay_status iq_add(iq_out *o, const char *name, const char *dtype, int nd, int64_t d0, int64_t d1,
                           void *data, size_t bytes) {
    int64_t shape[2] = {d0, d1};
    return assay_safetensors_writer_add(o->w, name, dtype, nd, shape, iq_keep(o, data), bytes);
}

/* f32 values back into the source dtype (bf16/f16/f32) for tensors we modify but do not quantize */
static assay_status iq_add_float(iq_out *o, const char *name, assay_type type, int nd, const int64_t *ne,
                                 const float *v, int64_t n) {
    int64_t shape[2] = {nd == 2 ? ne[1] : ne[0], ne[0]};
    if (type == ASSAY_TYPE_BF16 || type == ASSAY_TYPE_F16) {
        uint16_t *h = assay_xmalloc(sizeof(uint16_t) * (size_t)n);
        if (type == ASSAY_TYPE_BF16) assay_f32_to_bf16_row(v, h, n);
        else assay_f32_to_f16_row(v, h, n);
        return assay_safetensors_writer_add(o->w, name, type == ASSAY_TYPE_BF16 ? "BF16" : "F16", nd, shape,
                                            iq_keep(o, h), sizeof(uint16_t) * (size_t)n);
    }
    float *c = assay_xmalloc(sizeof(float) * (size_t)n);
    memcpy(c, v, sizeof(float) * (size_t)n);
    return assay_safetensors_writer_add(o->w, name, "F32", nd, shape, iq_keep(o, c), sizeof(float) * (size_t)n);
}

/* HF prefix of a weight: "model.layers.0.self_attn.q_proj" from its source name */
static void iq_prefix(const assay_tensor *t, char *out, size_t cap) {
    snprintf(out, cap, "%s", t->source_name);
    size_t l = strlen(out);
    if (l > 7 && !strcmp(out + l - 7, ".weight")) out[l - 7] = 0;
}

/* Reads a tensor as float [rows][cols] in the file's row order (HF layout, no GGUF permutation). */
static float *iq_read_raw(const assay_tensor *t) {
    int64_t n = assay_tensor_nelements(t);
    float *v = assay_xmalloc(sizeof(float) * (size_t)n);
    if (assay_dequantize(t->type, t->data, v, n) != ASSAY_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* rows [r0, r0 + n) of a result as a result of their own (copies) */
static assay_int4_result iq_rows(const assay_int4_result *a, int64_t r0, int64_t n) {
    assay_int4_result r = *a;
    r.n_out = n;
    r.q = assay_xmalloc((size_t)(n * a->n_in));
    memcpy(r.q, a->q + r0 * a->n_in, (size_t)(n * a->n_in));
    r.scales = assay_xmalloc(sizeof(float) * (size_t)(n * a->n_groups));
    memcpy(r.scales, a->scales + r0 * a->n_groups, sizeof(float) * (size_t)(n * a->n_groups));
    r.zeros = assay_xmalloc(sizeof(int32_t) * (size_t)(n * a->n_groups));
    memcpy(r.zeros, a->zeros + r0 * a->n_groups, sizeof(int32_t) * (size_t)(n * a->n_groups));
    r.g_idx = assay_xmalloc(sizeof(int32_t) * (size_t)a->n_in);
    memcpy(r.g_idx, a->g_idx, sizeof(int32_t) * (size_t)a->n_in);
    return r;
}

static assay_status iq_write_int4(iq_out *o, const char *prefix, const assay_int4_result *r, int awq) {
    char name[512];
    int64_t ng = r->n_groups;
    int32_t *qw = assay_xmalloc(sizeof(int32_t) * (size_t)(r->n_in * r->n_out / 8));
    int32_t *qz = assay_xmalloc(sizeof(int32_t) * (size_t)(ng * r->n_out / 8));
    uint16_t *sc = assay_xmalloc(sizeof(uint16_t) * (size_t)(ng * r->n_out));
    assay_status st;
    if (awq) {
        assay_int4_pack_awq(r, qw, qz, sc);
        snprintf(name, sizeof name, "%s.qweight", prefix);
        st = iq_add(o, name, "I32", 2, r->n_in, r->n_out / 8, qw, sizeof(int32_t) * (size_t)(r->n_in * r->n_out / 8));
    } else {
        assay_int4_pack_gptq(r, qw, qz, sc);
        snprintf(name, sizeof name, "%s.qweight", prefix);
        st = iq_add(o, name, "I32", 2, r->n_in / 8, r->n_out, qw, sizeof(int32_t) * (size_t)(r->n_in * r->n_out / 8));
    }
    snprintf(name, sizeof name, "%s.qzeros", prefix);
    if (st == ASSAY_OK) st = iq_add(o, name, "I32", 2, ng, r->n_out / 8, qz, sizeof(int32_t) * (size_t)(ng * r->n_out / 8));
    snprintf(name, sizeof name, "%s.scales", prefix);
    if (st == ASSAY_OK) st = iq_add(o, name, "F16", 2, ng, r->n_out, sc, sizeof(uint16_t) * (size_t)(ng * r->n_out));
    if (!awq && st == ASSAY_OK) {
        int32_t *gi = assay_xmalloc(sizeof(int32_t) * (size_t)r->n_in);
        memcpy(gi, r->g_idx, sizeof(int32_t) * (size_t)r->n_in);
        snprintf(name, sizeof name, "%s.g_idx", prefix);
        st = iq_add(o, name, "I32", 1, r->n_in, 0, gi, sizeof(int32_t) * (size_t)r->n_in);
    }
    return st;
}

static assay_status iq_write_w8(iq_out *o, const char *prefix, const float *w, int64_t n_out, int64_t n_in) {
    char name[512];
    int8_t *q = assay_xmalloc((size_t)(n_out * n_in));
    float *s = assay_xmalloc(sizeof(float) * (size_t)n_out);
    assay_int8_quantize_rows(w, n_out, n_in, q, s);
    snprintf(name, sizeof name, "%s.weight", prefix);
    assay_status st = iq_add(o, name, "I8", 2, n_out, n_in, q, (size_t)(n_out * n_in));
    snprintf(name, sizeof name, "%s.weight_scale", prefix);
    if (st == ASSAY_OK) st = iq_add(o, name, "F32", 2, n_out, 1, s, sizeof(float) * (size_t)n_out);
    return st;
}

/* ---- config.json ------------------------------------------------------------------------------------------ */

static void iq_quant_config(assay_strbuf *b, const assay_intq_options *o, int64_t gs) {
    char tmp[256];
    if (o->method == ASSAY_INTQ_AWQ) {
        snprintf(tmp, sizeof tmp, "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": %lld, \"zero_point\": true, "
                 "\"version\": \"gemm\", \"modules_to_not_convert\": null}", (long long)gs);
        assay_strbuf_append(b, tmp, strlen(tmp));
    } else if (o->method == ASSAY_INTQ_W8A8) {
        const char *s = "{\"quant_method\": \"compressed-tensors\", \"format\": \"int-quantized\", "
                        "\"quantization_status\": \"compressed\", \"ignore\": [\"lm_head\"], \"config_groups\": "
                        "{\"group_0\": {\"targets\": [\"Linear\"], "
                        "\"weights\": {\"num_bits\": 8, \"type\": \"int\", \"symmetric\": true, \"strategy\": \"channel\", "
                        "\"dynamic\": false, \"group_size\": null, \"block_structure\": null, \"observer\": \"minmax\"}, "
                        "\"input_activations\": {\"num_bits\": 8, \"type\": \"int\", \"symmetric\": true, "
                        "\"strategy\": \"token\", \"dynamic\": true, \"group_size\": null, \"block_structure\": null, "
                        "\"observer\": null}, \"output_activations\": null}}, \"kv_cache_scheme\": null}";
        assay_strbuf_append(b, s, strlen(s));
    } else {
        snprintf(tmp, sizeof tmp, "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": %lld, \"desc_act\": %s, "
                 "\"sym\": %s, \"damp_percent\": %g, \"true_sequential\": false, \"static_groups\": false, "
                 "\"checkpoint_format\": \"gptq\"}", (long long)gs,
                 o->method == ASSAY_INTQ_GPTQ && o->act_order ? "true" : "false", o->sym ? "true" : "false", o->damp);
        assay_strbuf_append(b, tmp, strlen(tmp));
    }
}

/* Copies the source config.json with "quantization_config" inserted before the final '}'. */
static assay_status iq_write_config(const char *src_dir, const char *dst_dir, const assay_intq_options *o, int64_t gs) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", src_dir);
    char *data = NULL;
    size_t size = 0;
    assay_status st = assay_read_file(path, &data, &size);
    if (st != ASSAY_OK) return st;
    while (size && data[size - 1] != '}') size--;
    if (!size) {
        free(data);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: not a JSON object", path);
    }
    assay_strbuf b = {0};
    size_t body = size - 1;
    while (body && (data[body - 1] == ' ' || data[body - 1] == '\n' || data[body - 1] == '\r')) body--;
    assay_strbuf_append(&b, data, body);
    assay_strbuf_append(&b, ",\n  \"quantization_config\": ", 27);
    iq_quant_config(&b, o, gs);
    assay_strbuf_append(&b, "\n}\n", 3);
    free(data);
    snprintf(path, sizeof path, "%s/config.json", dst_dir);
    assay_output_file f;
    st = assay_output_file_open(&f, path, 1);
    if (st == ASSAY_OK) {
        if (fwrite(b.data, 1, b.len, f.fp) != b.len) st = assay_fail(ASSAY_ERR_IO, "%s: write failed", path);
        st = st == ASSAY_OK ? assay_output_file_commit(&f) : (assay_output_file_abort(&f), st);
    }
    if (st == ASSAY_OK && o->method != ASSAY_INTQ_AWQ && o->method != ASSAY_INTQ_W8A8) {
        /* AutoGPTQ also reads quantize_config.json */
        assay_strbuf q = {0};
        iq_quant_config(&q, o, gs);
        snprintf(path, sizeof path, "%s/quantize_config.json", dst_dir);
        st = assay_output_file_open(&f, path, 1);
        if (st == ASSAY_OK) {
            if (fwrite(q.data, 1, q.len, f.fp) != q.len) st = assay_fail(ASSAY_ERR_IO, "%s: write failed", path);
            st = st == ASSAY_OK ? assay_output_file_commit(&f) : (assay_output_file_abort(&f), st);
        }
        assay_strbuf_free(&q);
    }
    assay_strbuf_free(&b);
    return st;
}

static assay_status iq_copy_file(const char *src_dir, const char *dst_dir, const char *name) {
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/%s", src_dir, name);
    FILE *f = fopen(src, "rb");
    if (!f) return ASSAY_OK; /* optional file */
    fclose(f);
    char *data = NULL;
    size_t size = 0;
    assay_status st = assay_read_file(src, &data, &size);
    if (st != ASSAY_OK) return st;
    snprintf(dst, sizeof dst, "%s/%s", dst_dir, name);
    assay_output_file out;
    st = assay_output_file_open(&out, dst, 1);
    if (st == ASSAY_OK) {
        if (fwrite(data, 1, size, out.fp) != size) st = assay_fail(ASSAY_ERR_IO, "%s: write failed", dst);
        st = st == ASSAY_OK ? assay_output_file_commit(&out) : (assay_output_file_abort(&out), st);
    }
    free(data);
    return st;
}

static const assay_tensor *iq_find(const assay_model_file *mf, const char *fmt, int64_t l) {
    char name[128];
    snprintf(name, sizeof name, fmt, (int)l);
    return assay_model_file_find(mf, name);
}

static void assay_intq_free_calib(iq_calib *cal, int64_t L) {
    if (cal->be) assay_backend_close(cal->be);
    cal->be = NULL;
    for (int64_t i = 0; i < L * IN_COUNT; i++) {
        free(cal->in[i].gram);
        free(cal->in[i].buf);
        free(cal->in[i].sample);
        free(cal->in[i].absmax);
        free(cal->in[i].abssum);
        free(cal->in[i].seqs);
    }
    free(cal->in);
}

/* ---- AWQ block losses (AutoAWQ's module2inspect) --------------------------------------------------------- */

/* y[n][w_rows] = x[n][w_cols] · Wᵀ with f32 W through the engine's matmul */
static void iq_mm(assay_backend *be, float *y, const float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n) {
    assay_weight wt = {.type = ASSAY_TYPE_F32, .data = w, .n_in = n_in, .n_out = n_out,
                       .row_bytes = sizeof(float) * (size_t)n_in, .name = "awq"};
    be->ops->matmul(be, y, &wt, x, n);
}

static double iq_sq_diff(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        s += d * d;
    }
    return s;
}

/* MLP: y = down(act(x·gateᵀ) ⊙ x·upᵀ) on the sampled rows, down in full precision: the model's MLP of the layer */
typedef struct {
    const assay_model *m;
    int64_t layer;
    const float *x, *w_down;
    int64_t n, E;
    float *y, *y_ref;
} iq_mlp_loss;

static void iq_mlp_forward(iq_mlp_loss *c, const float *wg, const float *wu, float *y) {
    assay_layer_weights lw = {.w_gate = wg, .w_up = wu, .w_down = c->w_down};
    assay_model_layer_mlp(c->m, c->layer, &lw, c->x, c->n, y);
}

static double iq_mlp_loss_fn(void *ctx, const float *const *wq) {
    iq_mlp_loss *c = ctx;
    iq_mlp_forward(c, wq[0], wq[1], c->y);
    return iq_sq_diff(c->y, c->y_ref, c->n * c->E);
}

/* the same loss over many rows, IQ_MLP_BLOCK at a time (the gate/up/act temporaries stay small) */
#define IQ_MLP_BLOCK 2048
static double iq_mlp_loss_blocked_fn(void *ctx, const float *const *wq) {
    iq_mlp_loss *c = ctx;
    iq_mlp_loss b = *c;
    double s = 0;
    for (int64_t r0 = 0; r0 < c->n; r0 += IQ_MLP_BLOCK) {
        b.x = c->x + r0 * c->E;
        b.n = c->n - r0 < IQ_MLP_BLOCK ? c->n - r0 : IQ_MLP_BLOCK;
        iq_mlp_forward(&b, wq[0], wq[1], c->y);
        s += iq_sq_diff(c->y, c->y_ref + r0 * c->E, b.n * c->E);
    }
    return s;
}

/* Attention block loss over whole calibration sequences: the model's attention block of the layer
 * (assay_model_layer_attention), o_proj in full precision */
typedef struct {
    const assay_model *m;
    int64_t layer;
    const float *x, *w_o;
    int64_t n_seq, T, E;
    float *y, *y_ref;
} iq_attn_loss;

static void iq_attn_forward(iq_attn_loss *c, const float *wq, const float *wk, const float *wv, float *y) {
    assay_layer_weights lw = {.wq = wq, .wk = wk, .wv = wv, .wo = c->w_o};
    assay_model_layer_attention(c->m, c->layer, &lw, c->x, c->n_seq, c->T, y);
}

static double iq_attn_loss_fn(void *ctx, const float *const *wq) {
    iq_attn_loss *c = ctx;
    iq_attn_forward(c, wq[0], wq[1], wq[2], c->y);
    return iq_sq_diff(c->y, c->y_ref, c->n_seq * c->T * c->E);
}

/* the linears' own outputs (module2inspect = the linear itself, or the fallback for other attention variants) */
typedef struct {
    assay_backend *be;
    const float *x;
    int64_t n, n_in;
    const int64_t *n_out;
    int n_lin;
    float *y, *y_ref[3];
} iq_lin_loss;

static double iq_lin_loss_fn(void *ctx, const float *const *wq) {
    iq_lin_loss *c = ctx;
    double s = 0;
    for (int k = 0; k < c->n_lin; k++) {
        iq_mm(c->be, c->y, wq[k], c->n_out[k], c->n_in, c->x, c->n);
        s += iq_sq_diff(c->y, c->y_ref[k], c->n * c->n_out[k]);
    }
    return s;
}

/* AWQ scale search for group g (0: q/k/v, 1: gate/up, 2: down) of layer l, the loss taken on the output AutoAWQ
 * inspects: the model's attention block (o_proj included) for q/k/v, its MLP block for gate/up, down_proj's own
 * output for down; with awq_block_loss off, or for a model whose layers assay_model_layer_* do not implement
 * (assay_model_layer_unsupported), the per-linear outputs. w_down: the layer's FP down_proj. */
static assay_status iq_awq_search(assay_backend *be, const assay_model *m, int64_t l, const assay_intq_options *o,
                                  const iq_input *in, int g, const float *const *ws, const int64_t *no, int nk,
                                  int64_t n_in, const float *w_down, const assay_int4_params *p, float *s,
                                  float *alpha) {
    float *xmean = assay_xmalloc(sizeof(float) * (size_t)n_in);
    for (int64_t i = 0; i < n_in; i++) xmean[i] = (float)(in->abssum[i] / (double)(in->n_abs > 0 ? in->n_abs : 1));
    assay_status st;
    int64_t T = o->calib_seq_len, n_seq = T > 0 ? in->n_seq_rows / T : 0;
    int layers_ok = !assay_model_layer_unsupported(m);
    if (o->awq_block_loss && g == 0 && nk == 3 && n_seq > 0 && layers_ok) {
        int64_t N = n_seq * T;
        /* o_proj is not in the group: its FP weights come in ws[3] */
        iq_attn_loss c = {m, l, in->seqs, ws[3], n_seq, T, n_in, NULL, NULL};
        c.y = assay_xmalloc(sizeof(float) * (size_t)(N * n_in));
        c.y_ref = assay_xmalloc(sizeof(float) * (size_t)(N * n_in));
        iq_attn_forward(&c, ws[0], ws[1], ws[2], c.y_ref);
        st = assay_awq_search_scale_fn(xmean, n_in, ws, no, nk, p, o->awq_grid, o->awq_duo, iq_attn_loss_fn, &c, s, alpha);
        free(c.y);
        free(c.y_ref);
    } else if (o->awq_block_loss && g == 1 && nk == 2) { /* the MLP half: every architecture */
        int64_t n = in->n_sample;
        iq_mlp_loss c = {m, l, in->sample, w_down, n, n_in, NULL, NULL};
        c.y = assay_xmalloc(sizeof(float) * (size_t)(n * n_in));
        c.y_ref = assay_xmalloc(sizeof(float) * (size_t)(n * n_in));
        iq_mlp_forward(&c, ws[0], ws[1], c.y_ref);
        st = assay_awq_search_scale_fn(xmean, n_in, ws, no, nk, p, o->awq_grid, o->awq_duo, iq_mlp_loss_fn, &c, s, alpha);
        free(c.y);
        free(c.y_ref);
    } else {
        int64_t n = in->n_sample;
        iq_lin_loss c = {be, in->sample, n, n_in, no, nk, NULL, {NULL, NULL, NULL}};
        int64_t mo = 0;
        for (int k = 0; k < nk; k++) {
            mo = no[k] > mo ? no[k] : mo;
            c.y_ref[k] = assay_xmalloc(sizeof(float) * (size_t)(n * no[k]));
            iq_mm(be, c.y_ref[k], ws[k], no[k], n_in, c.x, n);
        }
        c.y = assay_xmalloc(sizeof(float) * (size_t)(n * mo));
        st = assay_awq_search_scale_fn(xmean, n_in, ws, no, nk, p, o->awq_grid, o->awq_duo, iq_lin_loss_fn, &c, s, alpha);
        for (int k = 0; k < nk; k++) free(c.y_ref[k]);
        free(c.y);
    }
    free(xmean);
    return st;
}

/* ---- GPTQ's sequential calibration on cached layer inputs ------------------------------------------------- */

/* The reference's sequential driver: the residual stream entering layer l is kept for every calibration token
 * (x), and each stage of the layer is computed once from the stage before it with the weights as they are at that
 * moment (already-quantized linears dequantized), so the true-sequential order q/k/v -> o -> gate/up -> down
 * costs one layer forward per layer instead of one truncated model forward per input (the engine route, still
 * used for models whose layers assay_model_layer_* do not implement). Every stage is the model's own
 * (assay_model_layer_*: its RoPE with scaling, attention scale, activation); only the order and the caching are
 * calibration's. Stages: IN_QKV normalises x into h; IN_O computes the attention output att from h; IN_GATEUP adds
 * o_proj's output to x (x2) and normalises it into h; IN_DOWN computes the MLP activation act; IN_COUNT (final) sets
 * x = x2 + down(act) for the next layer. */
typedef struct {
    const assay_model *m;
    int64_t n_seq, T, N, E, F, qd;
    float *x, *x2, *h, *att, *act;
    int done; /* the last stage computed for the current layer (-1: none) */
} iq_seqcal;

static void iq_seqcal_free(iq_seqcal *c) {
    free(c->x);
    free(c->x2);
    free(c->h);
    free(c->att);
    free(c->act);
    memset(c, 0, sizeof *c);
}

/* embeddings of the calibration chunks (what assay_calib_run feeds the engine: BOS first when the tokenizer adds
 * one) into c->x, as the model embeds them */
static void iq_seqcal_init(iq_seqcal *c, const assay_model *m, const assay_calib_text *text, int64_t n_chunks,
                           int64_t T) {
    const assay_model_config *cfg = assay_model_get_config(m);
    memset(c, 0, sizeof *c);
    int64_t avail = T > 0 ? text->n / T : 0;
    if (n_chunks > avail || n_chunks <= 0) n_chunks = avail;
    c->m = m;
    c->n_seq = n_chunks;
    c->T = T;
    c->N = n_chunks * T;
    c->E = cfg->n_embd;
    c->F = cfg->n_ff;
    c->qd = cfg->n_head * cfg->head_dim;
    size_t N = (size_t)c->N;
    c->x = assay_xmalloc(sizeof(float) * N * (size_t)c->E);
    c->x2 = assay_xmalloc(sizeof(float) * N * (size_t)c->E);
    c->h = assay_xmalloc(sizeof(float) * N * (size_t)c->E);
    c->att = assay_xmalloc(sizeof(float) * N * (size_t)c->qd);
    c->act = assay_xmalloc(sizeof(float) * N * (size_t)c->F);
    c->done = -1;
    int32_t *ids = assay_xmalloc(sizeof(int32_t) * (N ? N : 1));
    for (int64_t sq = 0; sq < c->n_seq; sq++)
        for (int64_t t = 0; t < T; t++) {
            int32_t id = text->ids[sq * T + t];
            if (t == 0 && text->bos >= 0) id = text->bos;
            ids[sq * T + t] = id;
        }
    assay_model_embed(m, ids, c->N, c->x);
    free(ids);
}

/* Runs stage `stage` of layer l from the previous stage's cached values with the weights w[7] (HF [out][in] f32)
 * and norms; hook != NULL: the stage's linear input goes to it (named after the stage's first linear). */
static void iq_seqcal_stage1(iq_seqcal *c, int64_t l, int stage, const float *const *w, const float *attn_norm,
                             const float *ffn_norm, const char *name, assay_calib_fn hook, void *user) {
    int64_t N = c->N, E = c->E, F = c->F, T = c->T;
    assay_layer_weights lw = {w[0], w[1], w[2], w[3], w[4], w[5], w[6], attn_norm, ffn_norm};
    switch (stage) {
    case IN_QKV:
        assay_model_layer_attn_norm(c->m, l, &lw, c->x, N, c->h);
        if (hook) hook(user, name, c->h, N, E);
        break;
    case IN_O:
        assay_model_layer_attn_norm(c->m, l, &lw, c->x, N, c->h);
        lw.wo = NULL; /* the attention output itself */
        assay_model_layer_attention(c->m, l, &lw, c->h, c->n_seq, T, c->att);
        if (hook) hook(user, name, c->att, N, c->qd);
        break;
    case IN_GATEUP:
        assay_model_layer_attn_residual(c->m, l, &lw, c->x, c->att, N, c->x2, c->h);
        if (hook) hook(user, name, c->h, N, E);
        break;
    case IN_DOWN:
        lw.w_down = NULL; /* the activation, down_proj's input; one sequence at a time (small temporaries) */
        for (int64_t sq = 0; sq < c->n_seq; sq++)
            assay_model_layer_mlp(c->m, l, &lw, c->h + sq * T * E, T, c->act + sq * T * F);
        if (hook) hook(user, name, c->act, N, F);
        break;
    default: /* the layer's output: the next layer's input */
        assay_model_layer_mlp_residual(c->m, l, &lw, c->x2, c->act, N, c->x);
        break;
    }
    c->done = stage;
}

/* stage `stage`, after whichever earlier stages of the layer have not run yet (a group of ignored linears) */
static void iq_seqcal_stage(iq_seqcal *c, int64_t l, int stage, const float *const *w, const float *attn_norm,
                            const float *ffn_norm, const char *name, assay_calib_fn hook, void *user) {
    for (int s = c->done + 1; s < stage; s++) iq_seqcal_stage1(c, l, s, w, attn_norm, ffn_norm, NULL, NULL, NULL);
    iq_seqcal_stage1(c, l, stage, w, attn_norm, ffn_norm, name, hook, user);
}

/* ---- AWQ on cached layer inputs ------------------------------------------------------------------------ */

/* x[t][j] /= s[j] for n rows: the cached activations after s was folded into their producer */
static void iq_div_cols(float *x, int64_t n, int64_t n_in, const float *s) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < n_in; j++) x[t * n_in + j] /= s[j];
}

/* every stride-th of n rows (stride = n / want, at least 1; at most `want` rows), as AWQ's clip search takes
 * input_feat[::n / 512] */
static float *iq_strided_rows(const float *x, int64_t n, int64_t n_in, int64_t want, int64_t *n_rows) {
    int64_t stride = n / want > 1 ? n / want : 1, r = (n + stride - 1) / stride;
    if (r > want) r = want;
    float *o = assay_xmalloc(sizeof(float) * (size_t)(r * n_in));
    for (int64_t t = 0; t < r; t++) memcpy(o + t * n_in, x + t * stride * n_in, sizeof(float) * (size_t)n_in);
    *n_rows = r;
    return o;
}

/* AWQ for one layer (the model's own, assay_model_layer_*) on the cached residual stream sc->x of every calibration token, as the reference
 * drives it: mean |x| over all calibration tokens, each scale candidate scored on the output of the block it feeds
 * (the attention block with o_proj for q/k/v, the MLP block for gate/up, down_proj's own output for down), each
 * stage's input computed from the one before with the scaled full-precision weights (scaling is exact there: these
 * are the full-precision model's activations, divided by the scales), and only after every scale of the layer is
 * folded in, the clipping search on o->awq_tokens strided rows of each linear's (scaled) input. w[7]: the layer's linears
 * (HF [out][in] f32) modified in place; attn_norm / ffn_norm take 1/s of q/k/v and gate/up, up_proj's rows 1/s of
 * down. Scoring uses the first o->awq_seqs sequences (<= 0: all). o_proj is only clipped: its v_proj pair is
 * skipped under GQA, and for llama this path takes the reference's three other groups. On return sc->x holds the
 * next layer's input. */
static assay_status iq_awq_layer_cached(iq_seqcal *sc, assay_backend *be, int64_t l, const assay_intq_options *o,
                                        const assay_int4_params *p, float *const *w, const int64_t *n_out,
                                        const int64_t *n_in, float *attn_norm, float *ffn_norm, const char *skip_clip,
                                        float *alpha3) {
    int64_t N = sc->N, E = sc->E, F = sc->F, T = sc->T;
    int64_t ns = o->awq_seqs > 0 && o->awq_seqs < sc->n_seq ? o->awq_seqs : sc->n_seq, NS = ns * T;
    int64_t want = o->awq_tokens > 0 ? o->awq_tokens : 512;
    const float *cur[N_LINEARS];
    for (int k = 0; k < N_LINEARS; k++) cur[k] = w[k];
    float *rows[N_LINEARS] = {NULL}; /* each linear's clip-search input */
    int64_t nr[N_LINEARS] = {0};
    int64_t wmax = E > F ? E : F;
    float *s = assay_xmalloc(sizeof(float) * (size_t)wmax), *xmean = assay_xmalloc(sizeof(float) * (size_t)wmax);
    assay_status st;
#define IQ_FOLD_COLS(k, n)                                                                   \
    for (int64_t r = 0; r < n_out[k]; r++)                                                   \
        for (int64_t j = 0; j < (n); j++) w[k][r * (n) + j] *= s[j]

    /* q/k/v */
    iq_seqcal_stage1(sc, l, IN_QKV, cur, attn_norm, ffn_norm, NULL, NULL, NULL);
    assay_awq_absmean(sc->h, N, E, xmean);
    {
        iq_attn_loss c = {sc->m, l, sc->h, w[3], ns, T, E, NULL, NULL};
        c.y = assay_xmalloc(sizeof(float) * (size_t)(NS * E));
        c.y_ref = assay_xmalloc(sizeof(float) * (size_t)(NS * E));
        iq_attn_forward(&c, w[0], w[1], w[2], c.y_ref);
        const float *ws[3] = {w[0], w[1], w[2]};
        st = assay_awq_search_scale_fn(xmean, E, ws, n_out, 3, p, o->awq_grid, o->awq_duo, iq_attn_loss_fn, &c, s,
                                       &alpha3[0]);
        free(c.y);
        free(c.y_ref);
    }
    if (st == ASSAY_OK) {
        for (int64_t j = 0; j < E; j++) attn_norm[j] /= s[j];
        for (int k = 0; k < 3; k++) IQ_FOLD_COLS(k, E);
        iq_div_cols(sc->h, N, E, s);
        rows[2] = iq_strided_rows(sc->h, N, E, want, &nr[2]);
        rows[0] = rows[1] = rows[2]; /* q, k and v share their input */
        nr[0] = nr[1] = nr[2];
        /* o_proj's input */
        iq_seqcal_stage1(sc, l, IN_O, cur, attn_norm, ffn_norm, NULL, NULL, NULL);
        rows[3] = iq_strided_rows(sc->att, N, sc->qd, want, &nr[3]);
        /* gate/up */
        iq_seqcal_stage1(sc, l, IN_GATEUP, cur, attn_norm, ffn_norm, NULL, NULL, NULL);
        assay_awq_absmean(sc->h, N, E, xmean);
        iq_mlp_loss c = {sc->m, l, sc->h, w[6], NS, E, NULL, NULL};
        int64_t nb = NS < IQ_MLP_BLOCK ? NS : IQ_MLP_BLOCK;
        c.y = assay_xmalloc(sizeof(float) * (size_t)(nb * E));
        c.y_ref = assay_xmalloc(sizeof(float) * (size_t)(NS * E));
        for (int64_t r0 = 0; r0 < NS; r0 += IQ_MLP_BLOCK) {
            iq_mlp_loss b = c;
            b.x = c.x + r0 * E;
            b.n = NS - r0 < IQ_MLP_BLOCK ? NS - r0 : IQ_MLP_BLOCK;
            iq_mlp_forward(&b, w[4], w[5], c.y_ref + r0 * E);
        }
        const float *ws[2] = {w[4], w[5]};
        st = assay_awq_search_scale_fn(xmean, E, ws, n_out + 4, 2, p, o->awq_grid, o->awq_duo, iq_mlp_loss_blocked_fn,
                                       &c, s, &alpha3[1]);
        free(c.y);
        free(c.y_ref);
    }
    if (st == ASSAY_OK) {
        for (int64_t j = 0; j < E; j++) ffn_norm[j] /= s[j];
        for (int k = 4; k < 6; k++) IQ_FOLD_COLS(k, E);
        iq_div_cols(sc->h, N, E, s);
        rows[4] = iq_strided_rows(sc->h, N, E, want, &nr[4]);
        rows[5] = rows[4];
        nr[5] = nr[4];
        /* down */
        iq_seqcal_stage1(sc, l, IN_DOWN, cur, attn_norm, ffn_norm, NULL, NULL, NULL);
        assay_awq_absmean(sc->act, N, F, xmean);
        iq_lin_loss c = {be, sc->act, NS, F, n_out + 6, 1, NULL, {NULL, NULL, NULL}};
        c.y = assay_xmalloc(sizeof(float) * (size_t)(NS * E));
        c.y_ref[0] = assay_xmalloc(sizeof(float) * (size_t)(NS * E));
        iq_mm(be, c.y_ref[0], w[6], E, F, c.x, NS);
        const float *ws[1] = {w[6]};
        st = assay_awq_search_scale_fn(xmean, F, ws, n_out + 6, 1, p, o->awq_grid, o->awq_duo, iq_lin_loss_fn, &c, s,
                                       &alpha3[2]);
        free(c.y);
        free(c.y_ref[0]);
    }
    if (st == ASSAY_OK) {
        for (int64_t r = 0; r < F; r++)
            for (int64_t j = 0; j < E; j++) w[5][r * E + j] /= s[r];
        IQ_FOLD_COLS(6, F);
        iq_div_cols(sc->act, N, F, s);
        rows[6] = iq_strided_rows(sc->act, N, F, want, &nr[6]);
        /* the next layer's input, from the scaled full-precision weights (not yet clipped) */
        iq_seqcal_stage1(sc, l, IN_COUNT, cur, attn_norm, ffn_norm, NULL, NULL, NULL);
        /* clipping, once every scale of the layer is in the weights (the reference's order) */
        for (int k = 0; k < N_LINEARS; k++)
            if (!skip_clip[k]) assay_awq_clip(w[k], n_out[k], n_in[k], rows[k], nr[k], p);
    }
#undef IQ_FOLD_COLS
    for (int k = 2; k < N_LINEARS; k++) /* rows[0..1] are rows[2], rows[5] is rows[4] */
        if (k != 5) free(rows[k]);
    free(s);
    free(xmean);
    return st;
}

void assay_intq_options_default(assay_intq_options *o, assay_intq_method method) {
    memset(o, 0, sizeof *o);
    o->method = method;
    o->group_size = 128;
    o->act_order = 1;
    o->damp = 0.01;
    o->alpha = 0.5f;
    o->calib_chunks = 32;
    o->calib_seq_len = 512;
    o->awq_tokens = 4096;
    o->awq_clip = ASSAY_AWQ_CLIP_TWO_SIDED;
    o->awq_grid = 20;
    o->sequential = 2;
    o->awq_seqs = 0;
    o->awq_cached = 0;
    o->awq_block_loss = 1;
    o->awq_duo = 1;
    o->mse = 1;
    o->keep_lm_head = 1;
}

assay_status assay_intq_quantize_model(const char *model_path, const char *out_dir, const assay_intq_options *o,
                                       assay_intq_report *rep) {
    double t0 = assay_now_seconds();
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = o->threads;
    mo.f32_activations = 1; /* calibration sees f32 activations, whatever the CPU */
    assay_model *m = NULL;
    assay_status st = assay_model_load(&m, model_path, &mo);
    if (st != ASSAY_OK) return st;
    const assay_model_file *mf = assay_model_get_file(m);
    const assay_model_config *cfg = assay_model_get_config(m);
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF) {
        assay_model_free(m);
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the int4/int8 schemes write HF checkpoints and need an HF "
                          "safetensors directory as the source (assay convert turns a GGUF into one)", model_path);
    }
    int64_t L = cfg->n_layer;
    iq_calib cal = {.o = o, .n_layer = L, .stride = 1, .only_layer = -1, .only_input = -1};
    cal.in = calloc((size_t)(L * IN_COUNT), sizeof(iq_input));
    ASSAY_ASSERT(cal.in);
    /* GPTQ's sequential modes calibrate inside the layer loop, each pass on the model as quantized so far */
    int seq_mode = o->method == ASSAY_INTQ_GPTQ ? o->sequential : 0;
    /* the model's layers on cached hidden states (assay_model_layer_*), or NULL: why they cannot run this model */
    const char *layers_unsupported = assay_model_layer_unsupported(m);
    /* AWQ on cached layer inputs: every calibration token scores the scales, no engine pass */
    int awq_cached = o->method == ASSAY_INTQ_AWQ && o->awq_cached && o->awq_block_loss && !o->seq_engine;
    if (awq_cached && layers_unsupported) {
        assay_intq_free_calib(&cal, L);
        assay_model_free(m);
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: AWQ's cached route runs the model's decoder layers on cached "
                          "inputs, which do not implement %s yet (--awq-route hooks runs the whole model)",
                          model_path, layers_unsupported);
    }
    if (o->method == ASSAY_INTQ_AWQ && !awq_cached && o->awq_block_loss && layers_unsupported)
        assay_note("note: AWQ scores the q/k/v scales on their own outputs, not the attention block's: the model's "
                   "one-layer functions do not implement %s yet", layers_unsupported);
    if (o->method == ASSAY_INTQ_GPTQ || o->method == ASSAY_INTQ_AWQ) {
        /* the Gram matrices' and AWQ losses' matmuls: the CPU backend through the backend table */
        st = assay_backend_open(&cal.be, "cpu", o->threads);
        if (st != ASSAY_OK) {
            assay_intq_free_calib(&cal, L);
            assay_model_free(m);
            return st;
        }
    }
    assay_tokenizer *tok = NULL;
    assay_calib_text text = {0};
    if (o->method != ASSAY_INTQ_RTN) {
        const char *calib = o->calib_path;
        char defpath[4096];
        if (!calib) {
            const char *sh = assay_shared_dir();
            if (!sh) {
                assay_intq_free_calib(&cal, L);
                assay_model_free(m);
                return assay_fail(ASSAY_ERR_ARG, "no calibration text: pass --calib FILE (or set ASSAY_SHARED)");
            }
            snprintf(defpath, sizeof defpath, "%s/data/calibration", sh);
            calib = defpath;
            assay_note("calibration text: %s (the default; --calib FILE or DIR to use another)", calib);
        }
        st = assay_tokenizer_load(&tok, model_path);
        if (st == ASSAY_OK) st = assay_calib_text_load(&text, tok, calib);
        if (st == ASSAY_OK) {
            /* chunks spread over the whole corpus, not only its first file */
            assay_calib_text_spread(&text, o->calib_chunks, o->calib_seq_len);
            int64_t total = o->calib_chunks * o->calib_seq_len;
            int64_t want = o->awq_tokens > 0 ? o->awq_tokens : 512;
            cal.stride = total / want > 1 ? total / want : 1;
            if (!seq_mode && !awq_cached) st = assay_calib_run(m, &text, o->calib_chunks, o->calib_seq_len, iq_hook, &cal, NULL, NULL);
        }
        for (int64_t i = 0; i < L * IN_COUNT; i++)
            if (cal.in[i].gram && cal.in[i].n_buf) iq_gram_flush(&cal.in[i], cal.be);
    }
    double t_calib = assay_now_seconds() - t0;
    assay_backend *be = cal.be;

    iq_out out = {.w = assay_safetensors_writer_new()};
    int64_t gs_used = o->group_size;
    char prefix[512];
    int64_t nt = assay_model_file_tensor_count(mf);
    /* float copies of everything we write, modified in place by AWQ / SmoothQuant folding */
    float **val = calloc((size_t)nt, sizeof(float *));
    for (int64_t i = 0; i < nt && st == ASSAY_OK; i++) {
        val[i] = iq_read_raw(assay_model_file_tensor(mf, i));
        if (!val[i]) st = assay_fail(ASSAY_ERR_UNSUPPORTED, "tensor %s cannot be read as float", assay_model_file_tensor(mf, i)->name);
    }
#define IDX(t) ((t) - assay_model_file_tensor(mf, 0))
#define IGNORED(t) (o->is_ignored && o->is_ignored(o->ignore_ctx, (t)->name, (t)->source_name))
    char *is_linear = calloc((size_t)nt, 1);
    iq_seqcal sc = {0};
    assay_progress bar;
    assay_progress_begin(&bar, "quantize", L, "layer");
    for (int64_t l = 0; l < L && st == ASSAY_OK; l++) {
        const assay_tensor *lin[N_LINEARS];
        for (int k = 0; k < N_LINEARS; k++) {
            char fmt[64];
            snprintf(fmt, sizeof fmt, "blk.%%d.%s.weight", kLinears[k]);
            lin[k] = iq_find(mf, fmt, l);
            if (!lin[k]) {
                st = assay_fail(ASSAY_ERR_UNSUPPORTED, "layer %lld has no %s: not a llama-family model", (long long)l, kLinears[k]);
                break;
            }
            is_linear[IDX(lin[k])] = 1;
        }
        if (st != ASSAY_OK) break;
        const assay_tensor *attn_norm = iq_find(mf, "blk.%d.attn_norm.weight", l);
        const assay_tensor *ffn_norm = iq_find(mf, "blk.%d.ffn_norm.weight", l);
        if (o->method == ASSAY_INTQ_W8A8) {
            /* SmoothQuant on the two norm-fed groups; o_proj and down_proj inputs are not smoothed */
            for (int g = 0; g < 2 && attn_norm && ffn_norm; g++) {
                const assay_tensor *norm = g ? ffn_norm : attn_norm;
                int k0 = g ? 4 : 0, nk = g ? 2 : 3;
                iq_input *in = &cal.in[l * IN_COUNT + (g ? IN_GATEUP : IN_QKV)];
                if (!in->absmax) continue;
                const float *ws[3];
                int64_t no[3];
                for (int k = 0; k < nk; k++) {
                    ws[k] = val[IDX(lin[k0 + k])];
                    no[k] = lin[k0 + k]->ne[1];
                }
                int64_t n_in = lin[k0]->ne[0];
                float *s = assay_xmalloc(sizeof(float) * (size_t)n_in);
                assay_smoothquant_scales(in->absmax, n_in, ws, no, nk, o->alpha, s);
                float *nv = val[IDX(norm)];
                for (int64_t j = 0; j < n_in; j++) nv[j] /= s[j];
                for (int k = 0; k < nk; k++) {
                    float *w = val[IDX(lin[k0 + k])];
                    for (int64_t r = 0; r < no[k]; r++)
                        for (int64_t j = 0; j < n_in; j++) w[r * n_in + j] *= s[j];
                }
                free(s);
            }
            for (int k = 0; k < N_LINEARS && st == ASSAY_OK; k++) {
                if (IGNORED(lin[k])) continue; /* written in the source dtype with the other tensors */
                if (o->fake_quant) {
                    /* the int8 weights as f32, written with the other tensors */
                    int64_t no = lin[k]->ne[1], ni = lin[k]->ne[0];
                    float *w = val[IDX(lin[k])], *sc = assay_xmalloc(sizeof(float) * (size_t)no);
                    int8_t *q = assay_xmalloc((size_t)(no * ni));
                    assay_int8_quantize_rows(w, no, ni, q, sc);
                    for (int64_t r = 0; r < no; r++)
                        for (int64_t j = 0; j < ni; j++) w[r * ni + j] = q[r * ni + j] * sc[r];
                    free(q);
                    free(sc);
                    continue;
                }
                iq_prefix(lin[k], prefix, sizeof prefix);
                st = iq_write_w8(&out, prefix, val[IDX(lin[k])], lin[k]->ne[1], lin[k]->ne[0]);
            }
        } else {
            assay_int4_params p = assay_int4_params_default();
            p.group_size = o->group_size > 0 ? o->group_size : 128;
            p.sym = o->sym;
            p.damp = o->damp > 0 ? o->damp : 0.01;
            p.act_order = o->method == ASSAY_INTQ_GPTQ && o->act_order;
            p.mse = o->method == ASSAY_INTQ_GPTQ && o->mse;
            p.awq_clip_two_sided = o->awq_clip == ASSAY_AWQ_CLIP_TWO_SIDED;
            gs_used = p.group_size;
            if (o->method == ASSAY_INTQ_AWQ && awq_cached) {
                if (l == 0) iq_seqcal_init(&sc, m, &text, o->calib_chunks, o->calib_seq_len);
                float *w[N_LINEARS];
                int64_t no[N_LINEARS], ni[N_LINEARS];
                char skip_clip[N_LINEARS];
                for (int k = 0; k < N_LINEARS; k++) {
                    w[k] = val[IDX(lin[k])];
                    no[k] = lin[k]->ne[1];
                    ni[k] = lin[k]->ne[0];
                    /* AutoAWQ does not clip q/k (their error is judged through q·k); ignored linears stay as they are */
                    skip_clip[k] = (k < 2 && o->awq_clip == ASSAY_AWQ_CLIP_AUTOAWQ) || IGNORED(lin[k]);
                }
                float alpha3[3] = {0, 0, 0};
                st = iq_awq_layer_cached(&sc, be, l, o, &p, w, no, ni, val[IDX(attn_norm)], val[IDX(ffn_norm)], skip_clip,
                                         alpha3);
                if (rep && l < 64)
                    for (int g = 0; g < 3; g++) rep->awq_alpha[l][g] = alpha3[g];
            } else if (o->method == ASSAY_INTQ_AWQ) {
                /* groups: (norm -> q,k,v), (norm -> gate,up), (up rows -> down); o_proj only clipped (GQA) */
                for (int g = 0; g < 3 && st == ASSAY_OK; g++) {
                    int k0 = g == 0 ? 0 : g == 1 ? 4 : 6, nk = g == 0 ? 3 : g == 1 ? 2 : 1;
                    iq_input *in = &cal.in[l * IN_COUNT + (g == 0 ? IN_QKV : g == 1 ? IN_GATEUP : IN_DOWN)];
                    if (!in->n_sample) continue;
                    if (g == 0 && cfg->n_head_kv != cfg->n_head) { /* fine: q,k,v scaling does not need v==o */ }
                    const float *ws[4];
                    int64_t no[3];
                    for (int k = 0; k < nk; k++) {
                        ws[k] = val[IDX(lin[k0 + k])];
                        no[k] = lin[k0 + k]->ne[1];
                    }
                    ws[3] = val[IDX(lin[3])]; /* o_proj, for the attention block loss */
                    int64_t n_in = lin[k0]->ne[0];
                    float *s = assay_xmalloc(sizeof(float) * (size_t)n_in), alpha = 0;
                    st = iq_awq_search(be, m, l, o, in, g, ws, no, nk, n_in, val[IDX(lin[6])], &p, s, &alpha);
                    if (st == ASSAY_OK) {
                        /* fold 1/s into the producer of the input */
                        if (g < 2) {
                            float *nv = val[IDX(g == 0 ? attn_norm : ffn_norm)];
                            for (int64_t j = 0; j < n_in; j++) nv[j] /= s[j];
                        } else {
                            float *up = val[IDX(lin[5])];
                            for (int64_t r = 0; r < n_in; r++)
                                for (int64_t j = 0; j < lin[5]->ne[0]; j++) up[r * lin[5]->ne[0] + j] /= s[r];
                        }
                        for (int k = 0; k < nk; k++) {
                            float *w = val[IDX(lin[k0 + k])];
                            for (int64_t r = 0; r < no[k]; r++)
                                for (int64_t j = 0; j < n_in; j++) w[r * n_in + j] *= s[j];
                        }
                        for (int64_t t = 0; t < in->n_sample; t++)
                            for (int64_t j = 0; j < n_in; j++) in->sample[t * n_in + j] /= s[j];
                        if (rep && l < 64) rep->awq_alpha[l][g] = alpha;
                    }
                    free(s);
                }
                /* clipping (q/k only outside ASSAY_AWQ_CLIP_AUTOAWQ: AutoAWQ judges their error through q·k and
                 * skips them; on the house model clipping them on their own output error lowers the PPL) */
                for (int k = o->awq_clip == ASSAY_AWQ_CLIP_AUTOAWQ ? 2 : 0; k < N_LINEARS && st == ASSAY_OK; k++) {
                    iq_input *in = &cal.in[l * IN_COUNT + kLinearInput[k]];
                    if (!in->n_sample || IGNORED(lin[k])) continue;
                    assay_awq_clip(val[IDX(lin[k])], lin[k]->ne[1], lin[k]->ne[0], in->sample, in->n_sample, &p);
                }
            }
            /* GPTQ's sequential modes on cached layer inputs (the model's layers, assay_model_layer_*): the weights each stage uses */
            float *cur[N_LINEARS], *curq[N_LINEARS] = {NULL};
            for (int k = 0; k < N_LINEARS; k++) cur[k] = val[IDX(lin[k])];
            if (o->method == ASSAY_INTQ_GPTQ && seq_mode && !o->seq_engine && l == 0 && attn_norm && ffn_norm &&
                !layers_unsupported)
                iq_seqcal_init(&sc, m, &text, o->calib_chunks, o->calib_seq_len);
            for (int k = 0; k < N_LINEARS && st == ASSAY_OK; k++) {
                const assay_tensor *t = lin[k];
                int64_t n_out = t->ne[1], n_in = t->ne[0];
                assay_int4_result r;
                if (IGNORED(t)) continue;
                if (o->method == ASSAY_INTQ_GPTQ) {
                    iq_input *in = &cal.in[l * IN_COUNT + kLinearInput[k]];
                    if (seq_mode == 2 || (seq_mode == 1 && !in->gram)) {
                        /* H from the model with every earlier linear already quantized: 1 = per layer (gptq.py),
                         * 2 = per input within the layer too (its --true-sequential) */
                        cal.only_layer = l;
                        cal.only_input = seq_mode == 2 ? kLinearInput[k] : -1;
                        if (sc.x && seq_mode == 2)
                            iq_seqcal_stage(&sc, l, kLinearInput[k], (const float *const *)cur, val[IDX(attn_norm)],
                                            val[IDX(ffn_norm)], lin[k]->name, iq_hook, &cal);
                        else if (sc.x)
                            for (int sg = IN_QKV; sg < IN_COUNT; sg++)
                                iq_seqcal_stage(&sc, l, sg, (const float *const *)cur, val[IDX(attn_norm)],
                                                val[IDX(ffn_norm)], lin[kStageLinear[sg]]->name, iq_hook, &cal);
                        else
                            st = assay_calib_run_layers(m, &text, o->calib_chunks, o->calib_seq_len, l + 1, iq_hook,
                                                        &cal, NULL, NULL);
                        for (int ii = 0; ii < IN_COUNT; ii++) {
                            iq_input *c2 = &cal.in[l * IN_COUNT + ii];
                            if (c2->gram && c2->n_buf) iq_gram_flush(c2, cal.be);
                        }
                        if (st != ASSAY_OK) break;
                    }
                    if (!in->gram) {
                        st = assay_fail(ASSAY_ERR_ARG, "no calibration activations reached %s", t->name);
                        break;
                    }
                    /* linears sharing this input (q/k/v, gate/up) are stacked into one GPTQ call: the rows are
                     * independent and share H, so this equals separate calls at a third of the factorisations */
                    int k1 = k + 1;
                    while (k1 < N_LINEARS && kLinearInput[k1] == kLinearInput[k] && !IGNORED(lin[k1])) k1++;
                    int64_t rows = 0;
                    for (int kk = k; kk < k1; kk++) rows += lin[kk]->ne[1];
                    float *stack = assay_xmalloc(sizeof(float) * (size_t)(rows * n_in));
                    for (int64_t kk = k, off = 0; kk < k1; off += lin[kk]->ne[1], kk++)
                        memcpy(stack + off * n_in, val[IDX(lin[kk])], sizeof(float) * (size_t)(lin[kk]->ne[1] * n_in));
                    double *h = assay_xmalloc(sizeof(double) * (size_t)(n_in * n_in));
                    for (int64_t i = 0; i < n_in; i++)
                        for (int64_t j = 0; j <= i; j++) h[i * n_in + j] = h[j * n_in + i] = in->gram[i * n_in + j];
                    assay_int4_result all;
                    st = assay_int4_gptq(stack, rows, n_in, h, &p, &all);
                    free(h);
                    free(stack);
                    free(in->gram); /* not needed again: keeps one layer's Gram matrices in memory at a time */
                    in->gram = NULL;
                    for (int64_t kk = k, off = 0; kk < k1 && st == ASSAY_OK; off += lin[kk]->ne[1], kk++) {
                        assay_int4_result part = iq_rows(&all, off, lin[kk]->ne[1]);
                        if (seq_mode) {
                            /* later passes run on the quantized weights */
                            float *deq = assay_xmalloc(sizeof(float) * (size_t)(part.n_out * part.n_in));
                            assay_int4_dequantize(&part, deq);
                            if (sc.x) {
                                free(curq[kk]);
                                cur[kk] = curq[kk] = deq;
                            } else {
                                st = assay_model_set_weight_f32(m, lin[kk]->name, deq);
                                free(deq);
                            }
                        }
                        if (o->fake_quant) assay_int4_dequantize(&part, val[IDX(lin[kk])]);
                        else {
                            iq_prefix(lin[kk], prefix, sizeof prefix);
                            st = iq_write_int4(&out, prefix, &part, 0);
                        }
                        assay_int4_result_free(&part);
                    }
                    assay_int4_result_free(&all);
                    k = k1 - 1;
                    continue;
                } else {
                    /* RTN; AWQ's final quantization is RTN of the scaled, clipped weights with AWQ's own quantizer
                     * (range not widened to 0: the ranges its clipping search scored) */
                    assay_int4_params pr = p;
                    pr.awq_range = o->method == ASSAY_INTQ_AWQ;
                    st = assay_int4_rtn(val[IDX(t)], n_out, n_in, &pr, &r);
                }
                if (st != ASSAY_OK) break;
                if (o->fake_quant) assay_int4_dequantize(&r, val[IDX(t)]);
                else {
                    iq_prefix(t, prefix, sizeof prefix);
                    st = iq_write_int4(&out, prefix, &r, o->method == ASSAY_INTQ_AWQ);
                }
                assay_int4_result_free(&r);
            }
            if (sc.x && st == ASSAY_OK && o->method == ASSAY_INTQ_GPTQ) {
                /* the next layer's input from this layer with its quantized weights (per-layer mode: the stages so
                 * far ran with the full-precision ones) */
                if (seq_mode == 1) sc.done = IN_QKV;
                iq_seqcal_stage(&sc, l, IN_COUNT, (const float *const *)cur, val[IDX(attn_norm)], val[IDX(ffn_norm)],
                                NULL, NULL, NULL);
                sc.done = -1;
            }
            for (int k = 0; k < N_LINEARS; k++) free(curq[k]);
        }
        assay_progress_update(&bar, l + 1);
    }
    assay_progress_end(&bar);
    iq_seqcal_free(&sc);
    /* everything else (and, with fake_quant, the dequantized linears) in its source dtype */
    for (int64_t i = 0; i < nt && st == ASSAY_OK; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        if (is_linear[i] && !o->fake_quant && !IGNORED(t)) continue;
        assay_type ty = t->type;
        if (o->fake_quant) ty = ASSAY_TYPE_F32; /* exact values: dequantized linears, folded norms unrounded */
        st = iq_add_float(&out, t->source_name, ty, t->n_dims, t->ne, val[i], assay_tensor_nelements(t));
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    if (st == ASSAY_OK) st = assay_safetensors_writer_write(out.w, path, 1);
    if (st == ASSAY_OK && !o->fake_quant) st = iq_write_config(assay_model_file_path(mf), out_dir, o, gs_used);
    if (st == ASSAY_OK && o->fake_quant) st = iq_copy_file(assay_model_file_path(mf), out_dir, "config.json");
    const char *extras[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof extras / sizeof extras[0] && st == ASSAY_OK; i++)
        st = iq_copy_file(assay_model_file_path(mf), out_dir, extras[i]);
    if (rep) {
        rep->seconds = assay_now_seconds() - t0;
        rep->calib_seconds = t_calib;
    }
    assay_calib_text_free(&text);
    assay_tokenizer_free(tok);
    if (be) assay_backend_close(be);
    assay_safetensors_writer_free(out.w);
    for (int64_t i = 0; i < out.n; i++) free(out.bufs[i]);
    free(out.bufs);
    for (int64_t i = 0; i < nt; i++) free(val[i]);
    free(val);
    free(is_linear);
    for (int64_t i = 0; i < L * IN_COUNT; i++) {
        free(cal.in[i].gram);
        free(cal.in[i].buf);
        free(cal.in[i].sample);
        free(cal.in[i].absmax);
        free(cal.in[i].abssum);
        free(cal.in[i].seqs);
    }
    free(cal.in);
    assay_model_free(m);
    return st;
}
