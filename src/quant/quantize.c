/* quantize.c — the table of `assay quantize` schemes and the helpers the rows share (ignore patterns, an output
 * directory that appears only when complete, copying the tokenizer files). The schemes themselves live in
 * their own files (quantize_fp8.c, ...). */
#define _XOPEN_SOURCE 700
#include "assay/quantize.h"

#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/file.h"
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
    opt->keep_lm_head = 1;
}

assay_status assay_quantize(const assay_model_file *mf, const char *scheme, const assay_quantize_options *opt,
                            const char *out_path) {
    const assay_quantize_scheme *s = assay_quantize_scheme_find(scheme);
    if (!s) return assay_fail(ASSAY_ERR_ARG, "unknown scheme '%s' (assay quantize --help lists them)", scheme);
    if (assay_path_exists(out_path) && !opt->force)
        return assay_fail(ASSAY_ERR_ARG, "%s already exists; pass --force to replace it", out_path);
    return s->run(s, mf, opt, out_path);
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

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tree(const char *path) {
    if (path && assay_path_exists(path)) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

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
        assay_status rc = assay_fail(ASSAY_ERR_IO, "cannot create %s: %s", d->temp_path, strerror(errno));
        free(d->final_path), free(d->temp_path);
        memset(d, 0, sizeof *d);
        return rc;
    }
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
            assay_quantize_outdir_abort(d);
            return assay_fail(ASSAY_ERR_ARG, "%s appeared while quantizing; not replacing it", d->final_path);
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
        assay_status rc = assay_fail(ASSAY_ERR_IO, "cannot rename %s to %s: %s", d->temp_path, d->final_path,
                                     strerror(errno));
        if (old) rename(old, d->final_path); /* put the previous output back */
        free(old);
        assay_quantize_outdir_abort(d);
        return rc;
    }
    remove_tree(old);
    free(old);
    free(d->temp_path), free(d->final_path);
    memset(d, 0, sizeof *d);
    return ASSAY_OK;
}

void assay_quantize_outdir_abort(assay_quantize_outdir *d) {
    remove_tree(d->temp_path);
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
