/* quantize_fp4.c — the nvfp4 and mxfp4 schemes: weight-only FP4 (E2M1) checkpoints in the compressed-tensors
 * layouts llm-compressor writes and vLLM loads (its NVFP4A16 / MXFP4A16 presets):
 *
 *   nvfp4 (format "nvfp4-pack-quantized", strategy tensor_group, group_size 16):
 *     <module>.weight_packed        U8      [out, in/2]   two E2M1 codes per byte, element 2i in the low nibble
 *     <module>.weight_scale         F8_E4M3 [out, in/16]  one block scale per 16 inputs
 *     <module>.weight_global_scale  F32     [1]           gs = 448 * 6 / amax(W); w = code * scale / gs
 *   mxfp4 (format "mxfp4-pack-quantized", strategy group, group_size 32):
 *     <module>.weight_packed        U8      [out, in/2]
 *     <module>.weight_scale         U8      [out, in/32]  E8M0 exponents (bias 127); w = code * 2^(scale - 127)
 *
 * The arithmetic is compressed-tensors' (quant_fp4.h: assay_nvfp4_quantize_ct, ASSAY_MX_SCALE_CT), elements
 * round to nearest-even. Only the Linear layers of the decoder blocks are quantized; embeddings, norms and the
 * lm_head are copied unchanged and every Linear left alone is named in the config's ignore list. Tensors keep
 * their HF names and row order. Activations are not quantized (input_activations null). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/progress.h"
#include "assay/quant_fp4.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"
#include "quant/quantize_schemes.h"

static void quantization_config(assay_strbuf *b, int mx, char **ignored, int n_ignored) {
    const char *format = mx ? "mxfp4-pack-quantized" : "nvfp4-pack-quantized";
    assay_strbuf_printf(b,
                        "{\n    \"quant_method\": \"compressed-tensors\",\n    \"format\": \"%s\",\n"
                        "    \"quantization_status\": \"compressed\",\n    \"global_compression_ratio\": null,\n"
                        "    \"config_groups\": {\n      \"group_0\": {\n        \"targets\": [\"Linear\"],\n"
                        "        \"weights\": {\n"
                        "          \"num_bits\": 4,\n          \"type\": \"float\",\n          \"symmetric\": true,\n"
                        "          \"group_size\": %d,\n          \"strategy\": \"%s\",\n"
                        "          \"block_structure\": null,\n          \"dynamic\": false,\n"
                        "          \"actorder\": null,\n          \"scale_dtype\": \"%s\",\n          \"zp_dtype\": null,\n"
                        "          \"observer\": \"minmax\",\n          \"observer_kwargs\": {}\n        },\n"
                        "        \"input_activations\": null,\n        \"output_activations\": null,\n"
                        "        \"format\": \"%s\"\n      }\n    },\n    \"ignore\": [",
                        format, mx ? ASSAY_MXFP4_BLOCK : ASSAY_NVFP4_BLOCK, mx ? "group" : "tensor_group",
                        mx ? "torch.uint8" : "torch.float8_e4m3fn", format);
    for (int i = 0; i < n_ignored; i++) {
        if (i) assay_strbuf_puts(b, ", ");
        assay_strbuf_json_string(b, ignored[i], strlen(ignored[i]));
    }
    assay_strbuf_puts(b, "],\n    \"kv_cache_scheme\": null,\n    \"sparsity_config\": {}\n  }");
}

static assay_status quantize_linear(assay_safetensors_writer *w, assay_quantize_keep *k, const assay_tensor *t, int mx,
                                    const char *scheme) {
    const int64_t cols = t->ne[0], rows = t->ne[1], n = rows * cols;
    const int64_t group = mx ? ASSAY_MXFP4_BLOCK : ASSAY_NVFP4_BLOCK;
    if (cols % group != 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: %s has rows of %lld inputs, not a multiple of %s's group of %lld; leave it out with "
                          "--ignore",
                          t->source_file, t->source_name, (long long)cols, scheme, (long long)group);
    float *x = assay_xmalloc((size_t)n * sizeof(float));
    assay_status rc = assay_quantize_tensor_f32(t, x, scheme);
    if (rc != ASSAY_OK) {
        free(x);
        return rc;
    }
    uint8_t *codes = assay_quantize_keep_add(k, assay_xmalloc((size_t)(n / 2)));
    uint8_t *scales = assay_quantize_keep_add(k, assay_xmalloc((size_t)(n / group)));
    if (mx) {
        assay_mxfp4_quantize(x, n, ASSAY_MX_SCALE_CT, scales, codes);
    } else {
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            float a = x[i] < 0 ? -x[i] : x[i];
            if (a > amax) amax = a;
        }
        float *gs = assay_quantize_keep_add(k, assay_xmalloc(sizeof(float)));
        *gs = assay_nvfp4_ct_global_scale(amax);
        assay_nvfp4_quantize_ct(x, n, *gs, scales, codes);
        int64_t one = 1;
        rc = assay_safetensors_writer_add(w, assay_quantize_module_name(k, t->source_name, ".weight_global_scale"), "F32",
                                          1, &one, gs, sizeof(float));
    }
    free(x);
    int64_t pshape[2] = {rows, cols / 2}, sshape[2] = {rows, cols / group};
    if (rc == ASSAY_OK)
        rc = assay_safetensors_writer_add(w, assay_quantize_module_name(k, t->source_name, ".weight_packed"), "U8", 2,
                                          pshape, codes, (size_t)(n / 2));
    if (rc == ASSAY_OK)
        rc = assay_safetensors_writer_add(w, assay_quantize_module_name(k, t->source_name, ".weight_scale"),
                                          mx ? "U8" : "F8_E4M3", 2, sshape, scales, (size_t)(n / group));
    return rc;
}

typedef struct fp4_linear_ctx {
    int mx;
    const char *scheme;
} fp4_linear_ctx;

static assay_status fp4_linear(void *ctx, assay_safetensors_writer *w, assay_quantize_keep *k, const assay_tensor *t) {
    const fp4_linear_ctx *c = ctx;
    return quantize_linear(w, k, t, c->mx, c->scheme);
}

assay_status assay_quantize_fp4(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                const assay_quantize_options *opt, const char *out_path) {
    const int mx = scheme->param == ASSAY_FP4_SCHEME_MXFP4;
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF)
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: the %s scheme writes a compressed-tensors directory from an HF safetensors model; "
                          "convert the GGUF first (assay convert MODEL -o DIR)",
                          assay_model_file_path(mf), scheme->name);
    if (opt->group_size && opt->group_size != (mx ? ASSAY_MXFP4_BLOCK : ASSAY_NVFP4_BLOCK))
        return assay_fail(ASSAY_ERR_ARG, "%s has a fixed group size of %d (got --group-size %lld)", scheme->name,
                          mx ? ASSAY_MXFP4_BLOCK : ASSAY_NVFP4_BLOCK, (long long)opt->group_size);
    assay_quantize_outdir od;
    assay_status rc = assay_quantize_outdir_begin(&od, out_path, opt->force);
    if (rc != ASSAY_OK) return rc;

    assay_quantize_keep keep = {0};
    char **ignored = NULL; /* module names left unquantized, for the config's ignore list */
    int n_ignored = 0;
    fp4_linear_ctx ctx = {mx, scheme->name};
    rc = assay_quantize_write_weights(mf, opt, &od, &keep, fp4_linear, &ctx, &ignored, &n_ignored);
    if (rc == ASSAY_OK) {
        assay_strbuf b = {0};
        quantization_config(&b, mx, ignored, n_ignored);
        char *p = assay_quantize_outdir_file(&od, "config.json");
        const char *key = "quantization_config", *val = b.data;
        rc = assay_quantize_write_hf_config(assay_model_file_path(mf), p, &key, &val, 1);
        free(p);
        assay_strbuf_free(&b);
    }
    if (rc == ASSAY_OK) rc = assay_quantize_copy_hf_extras(assay_model_file_path(mf), od.temp_path);
    assay_quantize_keep_free(&keep);
    free(ignored);
    if (rc == ASSAY_OK) rc = assay_quantize_outdir_commit(&od);
    else assay_quantize_outdir_abort(&od);
    return rc;
}
