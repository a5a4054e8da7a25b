/* quantize.c — the table of `assay quantize` schemes and the helpers the rows share (ignore patterns, an output
 * directory that appears only when complete, copying the tokenizer files). The schemes themselves live in
 * their own files (quantize_fp8.c, ...). */
#define _XOPEN_SOURCE 700
#include "assay/quantize.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/cleanup.h"
#include "assay/dtype.h"
#include "assay/file.h"
#include "assay/json.h"
#include "assay/progress.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"
#include "assay/ggml_quant.h"
#include "assay/quantize_int.h"
#include "quant/quantize_schemes.h"

const assay_quantize_scheme assay_quantize_schemes[] = {
    /* name, summary, output, needs calibration, function, param */
    {"fp8", "FP8 E4M3 per-tensor weights, static per-tensor activation scales from calibration (compressed-tensors)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 1, assay_quantize_fp8, ASSAY_FP8_SCHEME_TENSOR},
    {"fp8-dynamic", "FP8 E4M3 per-channel weights, dynamic per-token activations (compressed-tensors)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_fp8, ASSAY_FP8_SCHEME_CHANNEL},
    {"fp8-block", "FP8 E4M3 128x128 weight blocks, dynamic 1x128 activation groups (compressed-tensors)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_fp8, ASSAY_FP8_SCHEME_BLOCK},
    {"fp8-e5m2", "as fp8, with FP8 E5M2 (more range, one mantissa bit less)", ASSAY_QUANTIZE_OUT_HF_DIR, 1,
     assay_quantize_fp8, ASSAY_FP8_SCHEME_TENSOR | ASSAY_FP8_SCHEME_E5M2},
    {"fp8-e5m2-dynamic", "as fp8-dynamic, with FP8 E5M2", ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_fp8,
     ASSAY_FP8_SCHEME_CHANNEL | ASSAY_FP8_SCHEME_E5M2},
    {"fp8-e5m2-block", "as fp8-block, with FP8 E5M2", ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_fp8,
     ASSAY_FP8_SCHEME_BLOCK | ASSAY_FP8_SCHEME_E5M2},
    {"w8a8-int8", "INT8 per-channel weights, dynamic per-token INT8 activations, SmoothQuant (--alpha) (compressed-tensors)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 1, assay_quantize_int, ASSAY_INTQ_W8A8},
    {"int4-rtn", "INT4 round-to-nearest, asymmetric, group 128 (--group-size) (GPTQ layout)", ASSAY_QUANTIZE_OUT_HF_DIR, 0,
     assay_quantize_int, ASSAY_INTQ_RTN},
    {"int4-gptq", "INT4 GPTQ, asymmetric g128, act-order with g_idx, damp 0.01 (GPTQ layout)", ASSAY_QUANTIZE_OUT_HF_DIR, 1,
     assay_quantize_int, ASSAY_INTQ_GPTQ},
    {"int4-awq", "INT4 AWQ: activation-aware scales and clipping, asymmetric g128 (AWQ GEMM layout)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 1, assay_quantize_int, ASSAY_INTQ_AWQ},
    {"nvfp4", "NVFP4 weights: E2M1, E4M3 scale per 16, f32 global scale (compressed-tensors nvfp4-pack-quantized)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_fp4, ASSAY_FP4_SCHEME_NVFP4},
    {"mxfp4", "MXFP4 weights: E2M1, E8M0 scale per 32 (compressed-tensors mxfp4-pack-quantized)", ASSAY_QUANTIZE_OUT_HF_DIR,
     0, assay_quantize_fp4, ASSAY_FP4_SCHEME_MXFP4},
    {"f32", "no quantization: an f32 safetensors directory (with --rotate: the rotated model)", ASSAY_QUANTIZE_OUT_HF_DIR,
     0, assay_quantize_plain, ASSAY_TYPE_F32},
    {"bf16", "no quantization: a bf16 safetensors directory (with --rotate: the rotated model, rounded)",
     ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_plain, ASSAY_TYPE_BF16},
    {"none", "weights unchanged (an HF copy); with --kv-cache-scheme fp8 it adds only the KV-cache scales",
     ASSAY_QUANTIZE_OUT_HF_DIR, 0, assay_quantize_none, 0},
    {"q8_0", "GGUF q8_0", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q8_0},
    {"q6_k", "GGUF q6_K", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q6_K},
    {"q5_k_m", "GGUF q5_K_M mix (llama.cpp's per-tensor rules; --imatrix)", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf,
     ASSAY_GGML_FTYPE_Q5_K_M},
    {"q5_k_s", "GGUF q5_K_S mix", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q5_K_S},
    {"q4_k_m", "GGUF q4_K_M mix (llama.cpp's per-tensor rules; --imatrix)", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf,
     ASSAY_GGML_FTYPE_Q4_K_M},
    {"q4_k_s", "GGUF q4_K_S mix", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q4_K_S},
    {"q3_k_l", "GGUF q3_K_L mix", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q3_K_L},
    {"q3_k_m", "GGUF q3_K_M mix", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q3_K_M},
    {"q3_k_s", "GGUF q3_K_S mix", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q3_K_S},
    {"q2_k", "GGUF q2_K mix", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q2_K},
    {"q5_1", "GGUF q5_1", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q5_1},
    {"q5_0", "GGUF q5_0", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q5_0},
    {"q4_1", "GGUF q4_1", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q4_1},
    {"q4_0", "GGUF q4_0", ASSAY_QUANTIZE_OUT_GGUF, 0, assay_quantize_gguf, ASSAY_GGML_FTYPE_Q4_0},
    {NULL, NULL, 0, 0, NULL, 0},
};

const assay_quantize_scheme *assay_quantize_scheme_find(const char *name) {
    for (const assay_quantize_scheme *s = assay_quantize_schemes; s->name; s++)
        if (strcmp(s->name, name) == 0) return s;
    return NULL;
}

void assay_quantize_options_init(assay_quantize_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->calib_samples = 128;
    opt->calib_seq_len = 512;
    opt->smoothquant_alpha = 0.5;
    opt->awq_seqs = -1;
    opt->awq_tokens = -1;
    opt->keep_lm_head = 1;
}

/* --kv-cache-scheme fp8 (quantize_kv.c): calibrate the KV scales first (a calibration problem shows before the
 * long part), let the scheme write its directory under our temporary name, add the scales there, then move the
 * whole directory into place: the output still appears only when complete. */
static assay_status quantize_with_kv(const assay_quantize_scheme *s, const assay_model_file *mf,
                                     const assay_quantize_options *opt, const char *out_path) {
    if (strcmp(opt->kv_cache_scheme, "fp8") != 0)
        return assay_fail(ASSAY_ERR_ARG, "unknown --kv-cache-scheme '%s' (known: fp8)", opt->kv_cache_scheme);
    if (s->output != ASSAY_QUANTIZE_OUT_HF_DIR)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "--kv-cache-scheme fp8 writes vLLM's k_scale/v_scale tensors into HF "
                          "directories; %s writes a GGUF file, which has no such tensors", s->name);
    int64_t L = assay_model_file_config(mf)->n_layer;
    float *k = assay_xmalloc(sizeof(float) * (size_t)L), *v = assay_xmalloc(sizeof(float) * (size_t)L);
    assay_status rc = assay_quantize_kv_calibrate(mf, opt, k, v);
    if (rc != ASSAY_OK) rc = assay_fail_context(rc, "calibrating KV-cache scales");
    assay_quantize_outdir d;
    if (rc == ASSAY_OK) rc = assay_quantize_outdir_begin(&d, out_path, opt->force);
    if (rc == ASSAY_OK) {
        assay_quantize_options o = *opt;
        o.force = 0;
        rmdir(d.temp_path); /* the scheme creates it itself, under its own temporary name */
        rc = s->run(s, mf, &o, d.temp_path);
        if (rc == ASSAY_OK) rc = assay_quantize_kv_write(d.temp_path, L, k, v);
        if (rc == ASSAY_OK) rc = assay_quantize_outdir_commit(&d);
        else assay_quantize_outdir_abort(&d);
    }
    free(k);
    free(v);
    return rc;
}

static assay_status run_scheme(const assay_quantize_scheme *s, const assay_model_file *mf,
                               const assay_quantize_options *opt, const char *out_path) {
    return opt->kv_cache_scheme ? quantize_with_kv(s, mf, opt, out_path) : s->run(s, mf, opt, out_path);
}

/* The output's name must say what it is: a GGUF scheme writes NAME.gguf, an HF scheme a directory. */
static assay_status check_output_kind(const assay_quantize_scheme *s, const char *out_path) {
    size_t n = strlen(out_path);
    int gguf_name = n > 5 && strcasecmp(out_path + n - 5, ".gguf") == 0;
    if (s->output == ASSAY_QUANTIZE_OUT_GGUF) {
        char stem[512];
        snprintf(stem, sizeof stem, "%.*s", (int)(n > 1 && out_path[n - 1] == '/' ? n - 1 : n), out_path);
        if (n && out_path[n - 1] == '/')
            return assay_fail(ASSAY_ERR_ARG, "%s writes one GGUF file, and '%s' names a directory: give a file name, "
                              "e.g. %s/model-%s.gguf", s->name, out_path, stem, s->name);
        if (assay_path_is_dir(out_path))
            return assay_fail(ASSAY_ERR_ARG, "%s writes one GGUF file, and %s is a directory: give a file name, e.g. "
                              "%s.gguf or %s/model-%s.gguf", s->name, out_path, stem, stem, s->name);
        if (!gguf_name)
            return assay_fail(ASSAY_ERR_ARG, "%s writes a GGUF file: name it %s.gguf (the name is used as given, nothing "
                              "is added to it)", s->name, stem);
    } else if (gguf_name) {
        return assay_fail(ASSAY_ERR_ARG, "%s writes an HF safetensors directory, not a GGUF file: give a directory name "
                          "without .gguf, e.g. %.*s (GGUF files come from the q*_ schemes)", s->name, (int)(n - 5), out_path);
    }
    return ASSAY_OK;
}

/* The first weight matrix of `mf` stored quantized (not f32/f16/bf16), or NULL. */
static const assay_tensor *quantized_weight(const assay_model_file *mf) {
    for (int64_t i = 0; i < assay_model_file_tensor_count(mf); i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        if (t->n_dims >= 2 && t->type != ASSAY_TYPE_F32 && t->type != ASSAY_TYPE_F16 && t->type != ASSAY_TYPE_BF16 &&
            t->type != ASSAY_TYPE_F64)
            return t;
    }
    return NULL;
}

assay_status assay_quantize(const assay_model_file *mf, const char *scheme, const assay_quantize_options *opt,
                            const char *out_path) {
    const assay_quantize_scheme *s = assay_quantize_scheme_find(scheme);
    if (!s) return assay_fail(ASSAY_ERR_ARG, "unknown scheme '%s' (assay quantize --help lists them)", scheme);
    assay_status kind = check_output_kind(s, out_path);
    if (kind != ASSAY_OK) return kind;
    const assay_tensor *q = quantized_weight(mf);
    if (q && !opt->allow_requantize)
        return assay_fail(ASSAY_ERR_ARG, "%s is quantized already (%s is %s): quantizing it again to %s rounds weights "
                          "that were rounded once, so it loses more quality than quantizing the original f16/bf16/f32 "
                          "model, and the file need not get smaller; start from the unquantized model, or pass "
                          "--allow-requantize to do it anyway", assay_model_file_path(mf), q->name,
                          assay_type_name(q->type), s->name);
    if (assay_path_exists(out_path) && !opt->force)
        return assay_fail(ASSAY_ERR_ARG, "%s already exists; pass --force to replace it", out_path);
    if (!opt->kv_cache_scheme && s->run == assay_quantize_none)
        return assay_fail(ASSAY_ERR_ARG, "scheme none changes nothing by itself: add --kv-cache-scheme fp8");
    if (s->output == ASSAY_QUANTIZE_OUT_GGUF) {
        /* the GGUF schemes write their file at the end: find out now, not after the work, that it cannot be made */
        assay_output_file probe;
        assay_status rc = assay_output_file_open(&probe, out_path, 1);
        if (rc != ASSAY_OK) return rc;
        assay_output_file_abort(&probe);
    }
    if (!opt->rotate) return run_scheme(s, mf, opt, out_path);
    /* --rotate: the scheme runs on the rotated model, written first as an f32 directory beside the output (so the
     * calibrated schemes, which load the model by path, see it too) and removed afterwards */
    char *tmp_name = assay_xmalloc(strlen(out_path) + 16);
    sprintf(tmp_name, "%s.rotated", out_path);
    assay_quantize_outdir tmp;
    assay_status rc = assay_quantize_outdir_begin(&tmp, tmp_name, 1);
    free(tmp_name);
    if (rc != ASSAY_OK) return rc;
    rc = assay_quantize_rotated_model(mf, opt, tmp.temp_path, s->run != assay_quantize_plain);
    assay_model_file *rotated = NULL;
    if (rc == ASSAY_OK) rc = assay_model_file_open(&rotated, tmp.temp_path);
    if (rc == ASSAY_OK) {
        assay_quantize_options o = *opt;
        o.rotate = NULL;
        rc = run_scheme(s, rotated, &o, out_path); /* KV scales, if asked, of the rotated model */
    }
    assay_model_file_close(rotated);
    assay_quantize_outdir_abort(&tmp);
    return rc;
}

/* ---- ignore patterns ---- */

static int match_one(const char *pattern, const char *name) {
    if (!name) return 0;
    if (fnmatch(pattern, name, 0) == 0) return 1;
    size_t n = strlen(name);
    if (n > 7 && strcmp(name + n - 7, ".weight") == 0) { /* "lm_head" matches "lm_head.weight" */
        char stem[256];
        if (n - 7 >= sizeof stem) return 0;
        memcpy(stem, name, n - 7);
        stem[n - 7] = 0;
        if (fnmatch(pattern, stem, 0) == 0) return 1;
    }
    return 0;
}

int assay_quantize_is_ignored(const assay_quantize_options *opt, const assay_tensor *t) {
    if (opt->keep_lm_head && (strcmp(t->name, "output.weight") == 0 ||
                              (t->source_name && strcmp(t->source_name, "lm_head.weight") == 0)))
        return 1;
    for (int i = 0; i < opt->n_ignore; i++)
        if (match_one(opt->ignore[i], t->name) || match_one(opt->ignore[i], t->source_name)) return 1;
    return 0;
}

/* ---- output directory ---- */

static void remove_tree(const char *path) { assay_remove_tree(path); }

static char *with_suffix(const char *path, const char *what) {
    size_t n = strlen(path) + 64;
    char *s = assay_xmalloc(n);
    snprintf(s, n, "%s.%s-%ld", path, what, (long)getpid());
    return s;
}

assay_status assay_quantize_outdir_begin(assay_quantize_outdir *d, const char *path, int force) {
    memset(d, 0, sizeof *d);
    if (assay_path_exists(path) && !force)
        return assay_fail(ASSAY_ERR_ARG, "%s already exists; pass --force to replace it", path);
    d->final_path = assay_xstrdup(path);
    d->temp_path = with_suffix(path, "tmp");
    d->force = force;
    remove_tree(d->temp_path); /* a leftover of an earlier crashed run with the same pid */
    if (mkdir(d->temp_path, 0755) != 0) {
        /* the message names the path the user gave: the temporary name is ours */
        assay_status rc = assay_fail(ASSAY_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        free(d->final_path), free(d->temp_path);
        memset(d, 0, sizeof *d);
        return rc;
    }
    assay_cleanup_add(d->temp_path, d->final_path);
    return ASSAY_OK;
}

char *assay_quantize_outdir_file(const assay_quantize_outdir *d, const char *name) {
    return assay_path_join(d->temp_path, name);
}

assay_status assay_quantize_outdir_commit(assay_quantize_outdir *d) {
    ASSAY_ASSERT(d->temp_path);
    char *old = NULL;
    if (assay_path_exists(d->final_path)) {
        if (!d->force) {
            assay_status rc = assay_fail(ASSAY_ERR_ARG, "%s appeared while quantizing; not replacing it", d->final_path);
            assay_quantize_outdir_abort(d);
            return rc;
        }
        old = with_suffix(d->final_path, "old");
        if (rename(d->final_path, old) != 0) {
            assay_status rc = assay_fail(ASSAY_ERR_IO, "cannot move %s aside: %s", d->final_path, strerror(errno));
            free(old);
            assay_quantize_outdir_abort(d);
            return rc;
        }
    }
    if (rename(d->temp_path, d->final_path) != 0) {
        assay_status rc = assay_fail(ASSAY_ERR_IO, "cannot put %s in place: %s", d->final_path, strerror(errno));
        if (old) rename(old, d->final_path); /* put the previous output back */
        free(old);
        assay_quantize_outdir_abort(d);
        return rc;
    }
    remove_tree(old);
    free(old);
    assay_cleanup_forget(d->temp_path);
    free(d->temp_path), free(d->final_path);
    memset(d, 0, sizeof *d);
    return ASSAY_OK;
}

void assay_quantize_outdir_abort(assay_quantize_outdir *d) {
    remove_tree(d->temp_path);
    assay_cleanup_forget(d->temp_path);
    free(d->temp_path), free(d->final_path);
    memset(d, 0, sizeof *d);
}

assay_status assay_quantize_copy_hf_extras(const char *src_dir, const char *dst_dir) {
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json", "chat_template.jinja", "tokenizer.model",
                                        "vocab.json", "merges.txt", NULL};
    for (int i = 0; names[i]; i++) {
        char *src = assay_path_join(src_dir, names[i]);
        assay_status rc = ASSAY_OK;
        if (assay_path_exists(src)) {
            char *data = NULL;
            size_t size = 0;
            rc = assay_read_file(src, &data, &size);
            if (rc == ASSAY_OK) {
                char *dst = assay_path_join(dst_dir, names[i]);
                FILE *f = fopen(dst, "wb");
                int ok = f && fwrite(data, 1, size, f) == size;
                if (f && fclose(f) != 0) ok = 0;
                if (!ok) rc = assay_fail(ASSAY_ERR_IO, "cannot write %s: %s", dst, strerror(errno));
                free(dst);
            }
            free(data);
        }
        free(src);
        if (rc != ASSAY_OK) return rc;
    }
    return ASSAY_OK;
}

/* ---- helpers shared by the HF-directory writers ---- */

assay_status assay_quantize_write_weights(const assay_model_file *mf, const assay_quantize_options *opt,
                                          const assay_quantize_outdir *od, assay_quantize_keep *keep,
                                          assay_quantize_linear_fn quantize, void *ctx, char ***ignored,
                                          int *n_ignored) {
    const assay_model_config *cfg = assay_model_file_config(mf);
    const int64_t nt = assay_model_file_tensor_count(mf);
    assay_safetensors_writer *w = assay_safetensors_writer_new();
    assay_safetensors_writer_set_metadata(w, "format", "pt");
    char **ign = NULL;
    int n_ign = 0;
    assay_status rc = ASSAY_OK;
    assay_progress bar;
    assay_progress_begin(&bar, "quantize", cfg->n_layer, "layer");
    for (int64_t layer = 0; layer <= cfg->n_layer && rc == ASSAY_OK; layer++) {
        int64_t want = layer < cfg->n_layer ? layer : -1; /* the blocks in order, then everything else */
        for (int64_t i = 0; i < nt && rc == ASSAY_OK; i++) {
            const assay_tensor *t = assay_model_file_tensor(mf, i);
            if (assay_quantize_layer_of(t->name) != want) continue;
            int block_linear = assay_quantize_is_block_linear(t->name);
            if (block_linear && t->n_dims == 2 && !assay_quantize_is_ignored(opt, t)) {
                rc = quantize(ctx, w, keep, t);
                continue;
            }
            if (block_linear || strcmp(t->name, "output.weight") == 0) { /* a Linear left alone: name its module */
                ign = assay_xrealloc(ign, (size_t)(n_ign + 1) * sizeof *ign);
                ign[n_ign++] = assay_quantize_module_name(keep, t->source_name, "");
            }
            rc = assay_quantize_copy_tensor(w, t);
        }
        if (layer < cfg->n_layer) assay_progress_update(&bar, layer + 1);
    }
    assay_progress_end(&bar);
    if (rc == ASSAY_OK) {
        char *p = assay_quantize_outdir_file(od, "model.safetensors");
        rc = assay_safetensors_writer_write(w, p, 0);
        free(p);
    }
    assay_safetensors_writer_free(w);
    if (n_ign == 0) { /* tied embeddings: no lm_head tensor, but the module exists and stays unquantized */
        ign = assay_xrealloc(ign, sizeof *ign);
        ign[n_ign++] = "lm_head";
    }
    *ignored = ign;
    *n_ignored = n_ign;
    return rc;
}

assay_status assay_quantize_copy_tensor(assay_safetensors_writer *w, const assay_tensor *t) {
    const char *dt = assay_safetensors_dtype_name(t->type);
    if (!dt)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor %s has type %s, not a safetensors dtype", t->source_file,
                          t->source_name, assay_type_name(t->type));
    int64_t shape[4]; /* safetensors lists the outermost dimension first, ggml order the innermost */
    for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
    return assay_safetensors_writer_add(w, t->source_name, dt, t->n_dims, shape, t->data, t->bytes);
}

int assay_quantize_is_block_linear(const char *name) {
    static const char *const kinds[] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                                        ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight", NULL};
    if (strncmp(name, "blk.", 4) != 0) return 0;
    size_t n = strlen(name);
    for (int i = 0; kinds[i]; i++) {
        size_t k = strlen(kinds[i]);
        if (n > k && strcmp(name + n - k, kinds[i]) == 0) return 1;
    }
    return 0;
}

int64_t assay_quantize_layer_of(const char *name) {
    return strncmp(name, "blk.", 4) == 0 ? strtoll(name + 4, NULL, 10) : -1;
}

assay_status assay_quantize_tensor_f32(const assay_tensor *t, float *dst, const char *scheme) {
    int64_t n = assay_tensor_nelements(t);
    switch (t->type) {
    case ASSAY_TYPE_F32: memcpy(dst, t->data, (size_t)n * 4); return ASSAY_OK;
    case ASSAY_TYPE_BF16: assay_bf16_to_f32_row(t->data, dst, n); return ASSAY_OK;
    case ASSAY_TYPE_F16: assay_f16_to_f32_row(t->data, dst, n); return ASSAY_OK;
    default: {
        const char *dt = assay_safetensors_dtype_name(t->type);
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor %s is %s; %s quantization reads f32/f16/bf16 weights",
                          t->source_file, t->source_name, dt ? dt : "a quantized block type", scheme);
    }
    }
}

void *assay_quantize_keep_add(assay_quantize_keep *k, void *p) {
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        k->p = assay_xrealloc(k->p, (size_t)k->cap * sizeof *k->p);
    }
    k->p[k->n++] = p;
    return p;
}

void assay_quantize_keep_free(assay_quantize_keep *k) {
    for (int i = 0; i < k->n; i++) free(k->p[i]);
    free(k->p);
    memset(k, 0, sizeof *k);
}

char *assay_quantize_module_name(assay_quantize_keep *k, const char *weight_name, const char *suffix) {
    size_t n = strlen(weight_name);
    if (n > 7 && strcmp(weight_name + n - 7, ".weight") == 0) n -= 7;
    char *s = assay_xmalloc(n + strlen(suffix) + 1);
    memcpy(s, weight_name, n);
    strcpy(s + n, suffix);
    return assay_quantize_keep_add(k, s);
}

/* JSON re-emission of the source config.json (numbers keep their literal spelling) */
static void json_indent(assay_strbuf *b, int depth) {
    assay_strbuf_putc(b, '\n');
    for (int i = 0; i < depth; i++) assay_strbuf_puts(b, "  ");
}

static void json_emit(assay_strbuf *b, const assay_json *v, int depth) {
    switch (v->type) {
    case ASSAY_JSON_NULL: assay_strbuf_puts(b, "null"); break;
    case ASSAY_JSON_TRUE: assay_strbuf_puts(b, "true"); break;
    case ASSAY_JSON_FALSE: assay_strbuf_puts(b, "false"); break;
    case ASSAY_JSON_NUMBER: assay_strbuf_append(b, v->str, v->str_len); break;
    case ASSAY_JSON_STRING: assay_strbuf_json_string(b, v->str, v->str_len); break;
    case ASSAY_JSON_ARRAY:
    case ASSAY_JSON_OBJECT: {
        int obj = v->type == ASSAY_JSON_OBJECT;
        assay_strbuf_putc(b, obj ? '{' : '[');
        for (const assay_json *c = v->first; c; c = c->next) {
            json_indent(b, depth + 1);
            if (obj) {
                assay_strbuf_json_string(b, c->key, c->key_len);
                assay_strbuf_puts(b, ": ");
            }
            json_emit(b, c, depth + 1);
            if (c->next) assay_strbuf_putc(b, ',');
        }
        if (v->count) json_indent(b, depth);
        assay_strbuf_putc(b, obj ? '}' : ']');
        break;
    }
    }
}

assay_status assay_quantize_write_hf_config(const char *src_dir, const char *dst_path, const char *const *keys,
                                            const char *const *values, int n) {
    char *src = assay_path_join(src_dir, "config.json");
    assay_json_doc *doc = NULL;
    assay_status rc = assay_json_parse_file(src, &doc);
    free(src);
    if (rc != ASSAY_OK) return rc;
    const assay_json *root = assay_json_root(doc);
    if (!assay_json_is(root, ASSAY_JSON_OBJECT)) {
        assay_json_doc_free(doc);
        return assay_fail(ASSAY_ERR_FORMAT, "%s/config.json: not a JSON object", src_dir);
    }
    for (int i = 0; i < n; i++)
        if (strcmp(keys[i], "quantization_config") == 0 && assay_json_get(root, "quantization_config")) {
            assay_json_doc_free(doc);
            return assay_fail(ASSAY_ERR_ARG, "%s is already quantized (config.json has a quantization_config)", src_dir);
        }
    assay_strbuf b = {0};
    char used[16] = {0};
    ASSAY_ASSERT(n <= 16);
    assay_strbuf_putc(&b, '{');
    int first = 1;
    for (const assay_json *c = root->first; c; c = c->next) {
        if (!first) assay_strbuf_putc(&b, ',');
        first = 0;
        json_indent(&b, 1);
        assay_strbuf_json_string(&b, c->key, c->key_len);
        assay_strbuf_puts(&b, ": ");
        int k = -1;
        for (int i = 0; i < n && k < 0; i++)
            if (strlen(keys[i]) == c->key_len && memcmp(keys[i], c->key, c->key_len) == 0) k = i;
        if (k >= 0) assay_strbuf_puts(&b, values[k]), used[k] = 1;
        else json_emit(&b, c, 1);
    }
    for (int i = 0; i < n; i++) {
        if (used[i]) continue;
        if (!first) assay_strbuf_putc(&b, ',');
        first = 0;
        json_indent(&b, 1);
        assay_strbuf_json_string(&b, keys[i], strlen(keys[i]));
        assay_strbuf_puts(&b, ": ");
        assay_strbuf_puts(&b, values[i]);
    }
    assay_strbuf_puts(&b, "\n}\n");
    assay_json_doc_free(doc);
    FILE *f = fopen(dst_path, "wb");
    int ok = f && fwrite(b.data, 1, b.len, f) == b.len;
    if (f && fclose(f) != 0) ok = 0;
    assay_strbuf_free(&b);
    return ok ? ASSAY_OK : assay_fail(ASSAY_ERR_IO, "cannot write %s", dst_path);
}
