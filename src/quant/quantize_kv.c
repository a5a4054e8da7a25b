/* quantize_kv.c — `--kv-cache-scheme fp8`: static per-layer KV-cache scales in an HF checkpoint, and the `none`
 * scheme (weights copied unchanged, so the KV scales can be added to an unquantized model).
 *
 * Calibration: the unquantized source model runs the calibration text (the same chunks as every calibrating
 * scheme: --calib, --calib-samples, --calib-seq-len) with an f32 KV cache; per layer, the absolute maximum of the
 * keys after RoPE (and the k norm where the model has one) — exactly what the cache stores — and of the values.
 * k_scale = amax(K) / 448 and v_scale = amax(V) / 448 (E4M3's largest finite value), the dequant multipliers of
 * vLLM's fp8 KV cache (stored = fp8(x / scale), read = code * scale): no calibration key or value saturates. No
 * percentile clipping (clipped KV scales are known to hurt badly), no moving average. The whole-tensor amax does
 * not depend on the order of K's rows, so the llama Q/K row permutation of our HF loader changes nothing (a
 * per-head scale would have to be permuted back).
 *
 * Written as vLLM names them in compressed-tensors checkpoints: model.layers.N.self_attn.k_scale / v_scale,
 * shape [1], in F32 (exact; compressed-tensors writes the model dtype, bf16 here, and vLLM upcasts either to
 * f32), plus quantization_config.kv_cache_scheme = {num_bits 8, type float, strategy tensor, dynamic false,
 * symmetric true}. The scales are added to the directory a scheme wrote (model.safetensors rewritten with the
 * extra tensors, config.json patched) before it is moved into place, so any HF-directory scheme can carry them. */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/calib.h"
#include "assay/file.h"
#include "assay/json.h"
#include "assay/model.h"
#include "assay/progress.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "quant/quantize_schemes.h"

#define KV_FP8_MAX 448.0f

typedef struct kv_amax {
    float *k, *v; /* [n_layer] */
} kv_amax;

static void kv_amax_hook(void *user, int64_t layer, const float *k, const float *v, int64_t n_tok, int64_t kv_dim) {
    kv_amax *a = user;
    float mk = a->k[layer], mv = a->v[layer];
    for (int64_t i = 0; i < n_tok * kv_dim; i++) {
        float x = k[i] < 0 ? -k[i] : k[i], y = v[i] < 0 ? -v[i] : v[i];
        if (x > mk) mk = x;
        if (y > mv) mv = y;
    }
    a->k[layer] = mk;
    a->v[layer] = mv;
}

assay_status assay_quantize_kv_calibrate(const assay_model_file *mf, const assay_quantize_options *opt,
                                         float *k_scale, float *v_scale) {
    const char *path = assay_model_file_path(mf);
    const int64_t L = assay_model_file_config(mf)->n_layer;
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = opt->threads;
    mo.f32_activations = 1; /* calibration sees f32 activations, whatever the CPU */
    assay_model *m = NULL;
    assay_status rc = assay_model_load(&m, path, &mo);
    if (rc != ASSAY_OK) return rc;
    char defpath[4096];
    const char *calib = opt->calib_path;
    if (!calib) {
        const char *sh = assay_shared_dir();
        if (!sh) {
            assay_model_free(m);
            return assay_fail(ASSAY_ERR_ARG, "no calibration text for the KV scales: pass --calib FILE (or set ASSAY_SHARED)");
        }
        snprintf(defpath, sizeof defpath, "%s/data/calibration", sh);
        calib = defpath;
        assay_note("calibration text: %s (the default; --calib FILE or DIR to use another)", calib);
    }
    assay_tokenizer *tok = NULL;
    assay_calib_text text = {0};
    rc = assay_tokenizer_load(&tok, path);
    if (rc == ASSAY_OK) rc = assay_calib_text_load(&text, tok, calib);
    int64_t seq_len = opt->calib_seq_len > 1 ? opt->calib_seq_len : 512;
    int64_t n_chunks = seq_len > 0 ? text.n / seq_len : 0;
    if (rc == ASSAY_OK && n_chunks < 1)
        rc = assay_fail(ASSAY_ERR_ARG, "calibration text has %lld tokens, fewer than one chunk of %lld", (long long)text.n,
                        (long long)seq_len);
    if (opt->calib_samples > 0 && n_chunks > opt->calib_samples) n_chunks = opt->calib_samples;
    assay_session *s = NULL;
    kv_amax a = {assay_xcalloc((size_t)L, sizeof(float)), assay_xcalloc((size_t)L, sizeof(float))};
    if (rc == ASSAY_OK) {
        assay_session_options so;
        assay_session_options_default(&so);
        so.n_ctx = seq_len;
        so.n_batch = seq_len;
        so.kv_dtype = ASSAY_KV_F32; /* the unquantized model's keys and values, nothing rounded on the way */
        rc = assay_session_open(&s, m, &so);
    }
    int32_t *ids = assay_xmalloc(sizeof(int32_t) * (size_t)seq_len), *pos = assay_xmalloc(sizeof(int32_t) * (size_t)seq_len);
    float *logits = assay_xmalloc(sizeof(float) * (size_t)assay_model_get_config(m)->n_vocab);
    if (rc == ASSAY_OK) {
        assay_session_set_kv_hook(s, kv_amax_hook, &a);
        assay_progress bar;
        assay_progress_begin(&bar, "kv scales", n_chunks, "chunk");
        /* the chunks assay_calib_run uses: consecutive windows, the first token replaced by BOS when the
         * tokenizer adds one */
        for (int64_t c = 0; c < n_chunks && rc == ASSAY_OK; c++) {
            memcpy(ids, text.ids + c * seq_len, sizeof(int32_t) * (size_t)seq_len);
            if (text.bos >= 0) ids[0] = text.bos;
            for (int64_t i = 0; i < seq_len; i++) pos[i] = (int32_t)i;
            assay_batch b = {.n_tokens = seq_len, .token = ids, .pos = pos};
            rc = assay_session_forward(s, &b, logits);
            assay_session_seq_clear(s, 0);
            assay_progress_update(&bar, c + 1);
        }
        assay_progress_end(&bar);
    }
    for (int64_t l = 0; l < L && rc == ASSAY_OK; l++) {
        if (!(a.k[l] > 0) || !(a.v[l] > 0))
            rc = assay_fail(ASSAY_ERR_ARG, "layer %lld: the calibration keys or values are all zero", (long long)l);
        k_scale[l] = a.k[l] / KV_FP8_MAX;
        v_scale[l] = a.v[l] / KV_FP8_MAX;
    }
    free(a.k);
    free(a.v);
    free(ids);
    free(pos);
    free(logits);
    assay_session_close(s);
    assay_calib_text_free(&text);
    assay_tokenizer_free(tok);
    assay_model_free(m);
    return rc;
}

/* ---- adding the scales to a written directory ---- */

static const char KV_SCHEME_JSON[] =
    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"tensor\", \"dynamic\": false, \"symmetric\": true, "
    "\"group_size\": null, \"block_structure\": null, \"actorder\": null, \"observer\": \"minmax\", "
    "\"observer_kwargs\": {}}";

/* config.json with quantization_config.kv_cache_scheme set. Patched as text so the rest of the file stays byte
 * for byte what the scheme wrote: `"kv_cache_scheme": null` replaced; else the key inserted first into an existing
 * quantization_config (GPTQ/AWQ configs: vLLM reads KV scales through compressed-tensors only, our engine reads
 * them anyway); else (scheme none) a compressed-tensors config with no weight groups. Checked by parsing after. */
static assay_status patch_config(const char *dir) {
    char *path = assay_path_join(dir, "config.json");
    char *data = NULL;
    size_t size = 0;
    assay_status rc = assay_read_file(path, &data, &size);
    assay_strbuf b = {0};
    if (rc == ASSAY_OK) {
        data = assay_xrealloc(data, size + 1);
        data[size] = 0;
        char *qc = strstr(data, "\"quantization_config\"");
        char *null_kv = qc ? strstr(qc, "\"kv_cache_scheme\": null") : NULL;
        char *brace = qc ? strchr(qc, '{') : NULL;
        if (null_kv) {
            size_t at = (size_t)(null_kv - data), key = strlen("\"kv_cache_scheme\": ");
            assay_strbuf_append(&b, data, at + key);
            assay_strbuf_puts(&b, KV_SCHEME_JSON);
            assay_strbuf_puts(&b, null_kv + strlen("\"kv_cache_scheme\": null"));
        } else if (qc && brace) {
            assay_strbuf_append(&b, data, (size_t)(brace - data) + 1);
            assay_strbuf_puts(&b, "\"kv_cache_scheme\": ");
            assay_strbuf_puts(&b, KV_SCHEME_JSON);
            assay_strbuf_puts(&b, ", ");
            assay_strbuf_puts(&b, brace + 1);
        } else {
            size_t end = size;
            while (end && data[end - 1] != '}') end--;
            if (!end) rc = assay_fail(ASSAY_ERR_FORMAT, "%s: not a JSON object", path);
            else {
                size_t body = end - 1;
                while (body && (data[body - 1] == ' ' || data[body - 1] == '\n' || data[body - 1] == '\r')) body--;
                assay_strbuf_append(&b, data, body);
                assay_strbuf_puts(&b, ",\n  \"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
                                      "\"format\": \"dense\", \"quantization_status\": \"compressed\", "
                                      "\"config_groups\": {}, \"ignore\": [], \"kv_cache_scheme\": ");
                assay_strbuf_puts(&b, KV_SCHEME_JSON);
                assay_strbuf_puts(&b, "}\n}\n");
            }
        }
    }
    if (rc == ASSAY_OK) {
        assay_json_doc *doc = NULL;
        rc = assay_json_parse(b.data, b.len, &doc);
        if (rc == ASSAY_OK) {
            const assay_json *kv = assay_json_get(assay_json_get(assay_json_root(doc), "quantization_config"), "kv_cache_scheme");
            if (!assay_json_is(kv, ASSAY_JSON_OBJECT))
                rc = assay_fail(ASSAY_ERR_FORMAT, "%s: kv_cache_scheme could not be added", path);
        } else rc = assay_fail_context(rc, "%s after adding kv_cache_scheme", path);
        assay_json_doc_free(doc);
    }
    if (rc == ASSAY_OK) {
        assay_output_file f;
        rc = assay_output_file_open(&f, path, 1);
        if (rc == ASSAY_OK) {
            if (fwrite(b.data, 1, b.len, f.fp) != b.len) rc = assay_fail(ASSAY_ERR_IO, "%s: write failed", path);
            rc = rc == ASSAY_OK ? assay_output_file_commit(&f) : (assay_output_file_abort(&f), rc);
        }
    }
    assay_strbuf_free(&b);
    free(data);
    free(path);
    return rc;
}

assay_status assay_quantize_kv_write(const char *dir, int64_t n_layer, const float *k_scale, const float *v_scale) {
    char *path = assay_path_join(dir, "model.safetensors");
    assay_safetensors *st = NULL;
    assay_status rc = assay_safetensors_open(&st, path);
    if (rc != ASSAY_OK) {
        free(path);
        return assay_fail_context(rc, "adding KV-cache scales (the scheme must write one model.safetensors)");
    }
    assay_safetensors_writer *w = assay_safetensors_writer_new();
    const assay_json *meta = assay_safetensors_metadata(st);
    for (const assay_json *c = meta ? meta->first : NULL; c; c = c->next) {
        char key[128], val[256];
        snprintf(key, sizeof key, "%.*s", (int)c->key_len, c->key);
        snprintf(val, sizeof val, "%s", assay_json_string(c, ""));
        assay_safetensors_writer_set_metadata(w, key, val);
    }
    for (int64_t i = 0; i < assay_safetensors_tensor_count(st) && rc == ASSAY_OK; i++) {
        const assay_safetensors_tensor *t = assay_safetensors_tensor_at(st, i);
        if (strstr(t->name, ".self_attn.k_scale") || strstr(t->name, ".self_attn.v_scale"))
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s already holds KV-cache scales (%s)", path, t->name);
        else rc = assay_safetensors_writer_add(w, t->name, t->dtype, t->n_dims, t->shape, t->data, t->bytes);
    }
    char (*names)[64] = assay_xmalloc((size_t)(2 * n_layer) * sizeof *names);
    const int64_t one = 1;
    for (int64_t l = 0; l < n_layer && rc == ASSAY_OK; l++) {
        snprintf(names[2 * l], sizeof names[0], "model.layers.%lld.self_attn.k_scale", (long long)l);
        snprintf(names[2 * l + 1], sizeof names[0], "model.layers.%lld.self_attn.v_scale", (long long)l);
        rc = assay_safetensors_writer_add(w, names[2 * l], "F32", 1, &one, &k_scale[l], sizeof(float));
        if (rc == ASSAY_OK) rc = assay_safetensors_writer_add(w, names[2 * l + 1], "F32", 1, &one, &v_scale[l], sizeof(float));
    }
    /* the writer goes through a temporary file and a rename, so reading the old mapping while writing is safe */
    if (rc == ASSAY_OK) rc = assay_safetensors_writer_write(w, path, 1);
    assay_safetensors_writer_free(w);
    assay_safetensors_close(st);
    free(names);
    free(path);
    if (rc == ASSAY_OK) rc = patch_config(dir);
    return rc;
}

/* ---- the `none` scheme: every tensor as stored (KV scales are what --kv-cache-scheme adds) ---- */

assay_status assay_quantize_none(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                 const assay_quantize_options *opt, const char *out_path) {
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the %s scheme copies an HF safetensors directory; convert the GGUF "
                          "first (assay convert MODEL -o DIR)", assay_model_file_path(mf), scheme->name);
    if (opt->rotate || opt->n_ignore || opt->imatrix_path || opt->group_size)
        return assay_fail(ASSAY_ERR_ARG, "the %s scheme quantizes no weight: --rotate, --ignore, --imatrix and "
                          "--group-size do not apply", scheme->name);
    assay_quantize_outdir od;
    assay_status rc = assay_quantize_outdir_begin(&od, out_path, opt->force);
    if (rc != ASSAY_OK) return rc;
    assay_safetensors_writer *w = assay_safetensors_writer_new();
    assay_safetensors_writer_set_metadata(w, "format", "pt");
    const assay_model_config *cfg = assay_model_file_config(mf);
    assay_progress bar;
    assay_progress_begin(&bar, "copy", cfg->n_layer, "layer");
    for (int64_t i = 0; i < assay_model_file_tensor_count(mf) && rc == ASSAY_OK; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        rc = assay_quantize_copy_tensor(w, t);
    }
    assay_progress_update(&bar, cfg->n_layer);
    assay_progress_end(&bar);
    if (rc == ASSAY_OK) {
        char *p = assay_quantize_outdir_file(&od, "model.safetensors");
        rc = assay_safetensors_writer_write(w, p, 0);
        free(p);
    }
    assay_safetensors_writer_free(w);
    if (rc == ASSAY_OK) {
        char *src = assay_path_join(assay_model_file_path(mf), "config.json"), *dst = assay_quantize_outdir_file(&od, "config.json");
        char *data = NULL;
        size_t size = 0;
        rc = assay_read_file(src, &data, &size);
        if (rc == ASSAY_OK) {
            FILE *f = fopen(dst, "wb");
            int ok = f && fwrite(data, 1, size, f) == size;
            if (f && fclose(f) != 0) ok = 0;
            if (!ok) rc = assay_fail(ASSAY_ERR_IO, "cannot write %s", dst);
        }
        free(data);
        free(src);
        free(dst);
    }
    if (rc == ASSAY_OK) rc = assay_quantize_copy_hf_extras(assay_model_file_path(mf), od.temp_path);
    if (rc == ASSAY_OK) rc = assay_quantize_outdir_commit(&od);
    else assay_quantize_outdir_abort(&od);
    return rc;
}
