/* quantize_fp8.c — the fp8 / fp8-dynamic / fp8-block schemes (and their E5M2 variants): an HF safetensors model
 * in, a compressed-tensors "float-quantized" directory out, the layout vLLM's CompressedTensorsW8A8Fp8 loads:
 *
 *   <module>.weight        F8_E4M3 [out, in]
 *   <module>.weight_scale  BF16    [1] (tensor) | [out, 1] (channel) | [ceil(out/128), ceil(in/128)] (block)
 *   <module>.input_scale   BF16    [1]          (static per-tensor activations only)
 *   config.json            the source config + quantization_config (quant_method "compressed-tensors")
 *
 * Only the Linear layers of the decoder blocks are quantized (q/k/v/o, gate/up/down), minus any --ignore match;
 * embeddings, norms and the lm_head are copied unchanged (llm-compressor's ignore ["lm_head"]), and every Linear
 * left alone is named in the config's ignore list. Tensors keep their HF names and HF row order (no llama.cpp Q/K permutation: that is a
 * loader's business), so per-channel and block scales line up with the rows vLLM sees.
 * Scales are stored in bf16, as compressed-tensors does for a bf16 model; codes are computed from the bf16-rounded
 * scale so that code * stored_scale is exactly the dequantized weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/calib.h"
#include "assay/dtype.h"
#include "assay/file.h"
#include "assay/json.h"
#include "assay/progress.h"
#include "assay/quant_fp8.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "quant/quantize_schemes.h"

#define FP8_BLOCK 128

/* One QuantizationArgs object, every field compressed-tensors defines, in its order. */
static void quant_args(assay_strbuf *b, const char *ind, const char *strategy, int dynamic, int64_t group_size,
                       int block, const char *observer) {
    assay_strbuf_printf(b, "{\n%s  \"num_bits\": 8,\n%s  \"type\": \"float\",\n%s  \"symmetric\": true,\n", ind, ind, ind);
    if (group_size) assay_strbuf_printf(b, "%s  \"group_size\": %lld,\n", ind, (long long)group_size);
    else assay_strbuf_printf(b, "%s  \"group_size\": null,\n", ind);
    assay_strbuf_printf(b, "%s  \"strategy\": \"%s\",\n", ind, strategy);
    if (block) assay_strbuf_printf(b, "%s  \"block_structure\": [%d, %d],\n", ind, FP8_BLOCK, FP8_BLOCK);
    else assay_strbuf_printf(b, "%s  \"block_structure\": null,\n", ind);
    assay_strbuf_printf(b, "%s  \"dynamic\": %s,\n%s  \"actorder\": null,\n", ind, dynamic ? "true" : "false", ind);
    if (observer) assay_strbuf_printf(b, "%s  \"observer\": \"%s\",\n", ind, observer);
    else assay_strbuf_printf(b, "%s  \"observer\": null,\n", ind);
    assay_strbuf_printf(b, "%s  \"observer_kwargs\": {}\n%s}", ind, ind);
}

static void quantization_config(assay_strbuf *b, int gran, const assay_quantize_options *opt, char **ignored,
                                int n_ignored) {
    const char *ind = "        ";
    assay_strbuf_puts(b, "{\n    \"quant_method\": \"compressed-tensors\",\n    \"format\": \"float-quantized\",\n"
                         "    \"quantization_status\": \"compressed\",\n    \"global_compression_ratio\": null,\n"
                         "    \"config_groups\": {\n      \"group_0\": {\n        \"targets\": [\"Linear\"],\n"
                         "        \"weights\": ");
    if (gran == ASSAY_FP8_SCHEME_TENSOR) quant_args(b, ind, "tensor", 0, 0, 0, "minmax");
    else if (gran == ASSAY_FP8_SCHEME_CHANNEL) quant_args(b, ind, "channel", 0, 0, 0, "minmax");
    else quant_args(b, ind, "block", 0, 0, 1, "minmax");
    assay_strbuf_puts(b, ",\n        \"input_activations\": ");
    if (gran == ASSAY_FP8_SCHEME_TENSOR) quant_args(b, ind, "tensor", 0, 0, 0, "minmax");
    else if (gran == ASSAY_FP8_SCHEME_CHANNEL) quant_args(b, ind, "token", 1, 0, 0, NULL);
    else quant_args(b, ind, "group", 1, FP8_BLOCK, 0, NULL);
    assay_strbuf_puts(b, ",\n        \"output_activations\": null,\n        \"format\": \"float-quantized\"\n      }\n"
                         "    },\n    \"ignore\": [");
    for (int i = 0; i < n_ignored; i++) {
        if (i) assay_strbuf_puts(b, ", ");
        assay_strbuf_json_string(b, ignored[i], strlen(ignored[i]));
    }
    assay_strbuf_puts(b, "],\n    \"kv_cache_scheme\": null,\n    \"sparsity_config\": {}\n  }");
    (void)opt;
}

static assay_status write_config(const char *src_dir, const char *dst_path, int gran, const assay_quantize_options *opt,
                                 char **ignored, int n_ignored) {
    assay_strbuf b = {0};
    quantization_config(&b, gran, opt, ignored, n_ignored);
    const char *key = "quantization_config", *val = b.data;
    assay_status rc = assay_quantize_write_hf_config(src_dir, dst_path, &key, &val, 1);
    assay_strbuf_free(&b);
    return rc;
}

/* ---- tensors ---- */

static assay_status add_bf16(assay_safetensors_writer *w, assay_quantize_keep *l, const char *name, int n_dims,
                             const int64_t *shape, const float *v, int64_t n) {
    uint16_t *b = assay_quantize_keep_add(l, assay_xmalloc((size_t)n * 2));
    assay_f32_to_bf16_row(v, b, n);
    return assay_safetensors_writer_add(w, name, "BF16", n_dims, shape, b, (size_t)n * 2);
}

static assay_status quantize_linear(assay_safetensors_writer *w, assay_quantize_keep *l, const assay_tensor *t, int gran,
                                    assay_fp8_format fmt, const float *input_amax) {
    const int64_t cols = t->ne[0], rows = t->ne[1];
    float *x = assay_xmalloc((size_t)(rows * cols) * sizeof(float));
    assay_status rc = assay_quantize_tensor_f32(t, x, "fp8");
    if (rc != ASSAY_OK) {
        free(x);
        return rc;
    }
    assay_fp8_granularity g = gran == ASSAY_FP8_SCHEME_TENSOR    ? ASSAY_FP8_GRAN_TENSOR
                              : gran == ASSAY_FP8_SCHEME_CHANNEL ? ASSAY_FP8_GRAN_CHANNEL
                                                                 : ASSAY_FP8_GRAN_BLOCK;
    int64_t ns = assay_fp8_weight_scale_count(g, FP8_BLOCK, FP8_BLOCK, rows, cols);
    uint8_t *q = assay_quantize_keep_add(l, assay_xmalloc((size_t)(rows * cols)));
    float *s = assay_xmalloc((size_t)ns * sizeof(float));
    assay_fp8_quantize_weight(fmt, g, FP8_BLOCK, FP8_BLOCK, 1, x, rows, cols, q, s);
    free(x);
    int64_t wshape[2] = {rows, cols};
    rc = assay_safetensors_writer_add(w, t->source_name, fmt == ASSAY_FP8_E5M2 ? "F8_E5M2" : "F8_E4M3", 2, wshape, q,
                                      (size_t)(rows * cols));
    int64_t sshape[2];
    int sdims;
    if (g == ASSAY_FP8_GRAN_TENSOR) sdims = 1, sshape[0] = 1;
    else if (g == ASSAY_FP8_GRAN_CHANNEL) sdims = 2, sshape[0] = rows, sshape[1] = 1;
    else sdims = 2, sshape[0] = (rows + FP8_BLOCK - 1) / FP8_BLOCK, sshape[1] = (cols + FP8_BLOCK - 1) / FP8_BLOCK;
    if (rc == ASSAY_OK) rc = add_bf16(w, l, assay_quantize_module_name(l, t->source_name, ".weight_scale"), sdims, sshape, s, ns);
    free(s);
    if (rc == ASSAY_OK && input_amax) {
        float is = assay_fp8_act_static_scale(fmt, *input_amax);
        int64_t one = 1;
        rc = add_bf16(w, l, assay_quantize_module_name(l, t->source_name, ".input_scale"), 1, &one, &is, 1);
    }
    return rc;
}

/* ---- static activation scales: max |x| of every linear layer's input over the calibration text ---- */
typedef struct act_amax {
    const assay_model_file *mf;
    float *amax; /* indexed like the model file's tensors */
} act_amax;

static void amax_hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    act_amax *a = user;
    const assay_tensor *t = assay_model_file_find(a->mf, name);
    if (!t) return;
    int64_t i = t - assay_model_file_tensor(a->mf, 0);
    float m = a->amax[i];
    for (int64_t k = 0; k < n_tok * n_in; k++) {
        float v = x[k] < 0 ? -x[k] : x[k];
        if (v > m) m = v;
    }
    a->amax[i] = m;
}

/* Runs the calibration text through the CPU engine (the unquantized model) and records, per Linear weight, the
 * absolute maximum of its input: the whole range, no percentile clipping and no moving average, so no
 * calibration activation saturates. amax[i] < 0 means the layer never ran. */
static assay_status calibrate_inputs(const assay_model_file *mf, const assay_quantize_options *opt, float *amax) {
    const char *path = assay_model_file_path(mf);
    for (int64_t i = 0; i < assay_model_file_tensor_count(mf); i++) amax[i] = -1.0f;
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = opt->threads;
    mo.f32_activations = 1; /* calibration sees f32 activations, whatever the CPU */
    assay_model *m = NULL;
    assay_status rc = assay_model_load(&m, path, &mo);
    if (rc != ASSAY_OK) return rc;
    assay_tokenizer *tok = NULL;
    assay_calib_text text = {0};
    char defpath[4096];
    const char *calib = opt->calib_path;
    if (!calib) {
        const char *sh = assay_shared_dir();
        snprintf(defpath, sizeof defpath, "%s/data/calibration", sh ? sh : "../shared");
        calib = defpath;
        assay_note("calibration text: %s (the default; --calib FILE or DIR to use another)", calib);
    }
    rc = assay_tokenizer_load(&tok, path);
    if (rc == ASSAY_OK) rc = assay_calib_text_load(&text, tok, calib);
    /* The engine hands inputs to the hook under the model file it loaded; names are canonical in both. */
    act_amax a = {.mf = assay_model_get_file(m), .amax = NULL};
    int64_t n = assay_model_file_tensor_count(a.mf);
    a.amax = assay_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) a.amax[i] = -1.0f;
    if (rc == ASSAY_OK) rc = assay_calib_run(m, &text, opt->calib_samples, opt->calib_seq_len, amax_hook, &a, NULL, NULL);
    if (rc == ASSAY_OK)
        for (int64_t i = 0; i < n; i++) {
            const assay_tensor *t = assay_model_file_tensor(a.mf, i);
            const assay_tensor *u = assay_model_file_find(mf, t->name);
            if (u) amax[u - assay_model_file_tensor(mf, 0)] = a.amax[i];
        }
    free(a.amax);
    assay_calib_text_free(&text);
    assay_tokenizer_free(tok);
    assay_model_free(m);
    return rc;
}

typedef struct fp8_linear_ctx {
    const assay_model_file *mf;
    int gran;
    assay_fp8_format fmt;
    const float *in_amax; /* [tensor index] calibrated input amax (static activation scales), else NULL */
} fp8_linear_ctx;

static assay_status fp8_linear(void *ctx, assay_safetensors_writer *w, assay_quantize_keep *k, const assay_tensor *t) {
    const fp8_linear_ctx *c = ctx;
    const float *am = c->in_amax ? &c->in_amax[t - assay_model_file_tensor(c->mf, 0)] : NULL;
    if (am && *am < 0) return assay_fail(ASSAY_ERR_ARG, "no calibration activations reached %s", t->name);
    return quantize_linear(w, k, t, c->gran, c->fmt, am);
}

assay_status assay_quantize_fp8(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                const assay_quantize_options *opt, const char *out_path) {
    const int gran = (int)(scheme->param & 0xf);
    const assay_fp8_format fmt = (scheme->param & ASSAY_FP8_SCHEME_E5M2) ? ASSAY_FP8_E5M2 : ASSAY_FP8_E4M3;
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF)
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: the %s scheme writes a compressed-tensors directory from an HF safetensors model; "
                          "convert the GGUF first (assay convert MODEL -o DIR)",
                          assay_model_file_path(mf), scheme->name);
    const int64_t nt = assay_model_file_tensor_count(mf);

    assay_quantize_outdir od;
    assay_status rc = assay_quantize_outdir_begin(&od, out_path, opt->force);
    if (rc != ASSAY_OK) return rc;
    float *in_amax = NULL;
    if (gran == ASSAY_FP8_SCHEME_TENSOR) {
        in_amax = assay_xmalloc((size_t)nt * sizeof(float));
        double t0 = assay_now_seconds();
        rc = calibrate_inputs(mf, opt, in_amax);
        if (rc != ASSAY_OK) {
            free(in_amax);
            assay_quantize_outdir_abort(&od);
            return assay_fail_context(rc, "calibrating activation scales");
        }
        if (getenv("ASSAY_PROGRESS") == NULL || strcmp(getenv("ASSAY_PROGRESS"), "0") != 0)
            assay_note("fp8: calibrated %lld x %lld tokens in %.1f s", (long long)opt->calib_samples,
                    (long long)opt->calib_seq_len, assay_now_seconds() - t0);
    }

    assay_quantize_keep owned = {0};
    char **ignored = NULL; /* module names left unquantized, for the config's ignore list */
    int n_ignored = 0;
    fp8_linear_ctx ctx = {mf, gran, fmt, in_amax};
    rc = assay_quantize_write_weights(mf, opt, &od, &owned, fp8_linear, &ctx, &ignored, &n_ignored);
    if (rc == ASSAY_OK) {
        char *p = assay_quantize_outdir_file(&od, "config.json");
        rc = write_config(assay_model_file_path(mf), p, gran, opt, ignored, n_ignored);
        free(p);
    }
    if (rc == ASSAY_OK) rc = assay_quantize_copy_hf_extras(assay_model_file_path(mf), od.temp_path);
    assay_quantize_keep_free(&owned);
    free(ignored);
    free(in_amax);
    if (rc == ASSAY_OK) rc = assay_quantize_outdir_commit(&od);
    else assay_quantize_outdir_abort(&od);
    return rc;
}
