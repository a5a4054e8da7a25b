/* quantize_kquant.c — the `assay quantize` rows for the GGUF mixes (q8_0 ... q6_k, llama.cpp's per-tensor rules)
 * and for int4-rtn / int4-gptq / int4-awq / w8a8-int8 (GPTQ, AWQ and compressed-tensors checkpoints). */
#include <stdlib.h>
#include <string.h>

#include "assay/ggml_quant.h"
#include "assay/imatrix.h"
#include "assay/quantize_int.h"
#include "quant/quantize_schemes.h"

typedef struct {
    assay_quantize_options opt;
} kq_ignore_ctx;

static int kq_is_ignored(void *ctx, const char *name, const char *source_name) {
    kq_ignore_ctx *c = ctx;
    assay_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.source_name = source_name ? source_name : name;
    return assay_quantize_is_ignored(&c->opt, &t);
}

assay_status assay_quantize_gguf(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                 const assay_quantize_options *opt, const char *out_path) {
    kq_ignore_ctx ic = {*opt};
    ic.opt.keep_lm_head = 0; /* llama.cpp's mixes decide output.weight's type themselves (q6_K, q8_0) */
    assay_ggml_model_options o = {.ftype = (assay_ggml_ftype)scheme->param, .threads = opt->threads,
                                  .overwrite = opt->force, .is_ignored = kq_is_ignored, .ignore_ctx = &ic};
    assay_imatrix *im = NULL;
    if (opt->imatrix_path) {
        assay_status st = assay_imatrix_load(&im, opt->imatrix_path);
        if (st != ASSAY_OK) return st;
        o.imatrix = im;
        o.imatrix_path = opt->imatrix_path;
    }
    assay_ggml_model_report rep;
    assay_status st = assay_ggml_quantize_model(mf, out_path, &o, &rep);
    if (st == ASSAY_OK && rep.n_fallback)
        assay_note("%d tensor%s took a fallback type (row length not a multiple of 256)", rep.n_fallback,
                   rep.n_fallback == 1 ? "" : "s");
    assay_imatrix_free(im);
    return st;
}

/* AWQ's driver, scale grid and clipping (--awq-route / --awq-seqs / --awq-grid / --awq-clip / --awq-tokens); an
 * error when given for another scheme, so a typo'd experiment does not silently run the default. */
static assay_status kq_awq_options(const assay_quantize_scheme *scheme, const assay_quantize_options *opt,
                                   assay_intq_options *o) {
    int given = opt->awq_route || opt->awq_grid || opt->awq_seqs >= 0 || opt->awq_clip || opt->awq_tokens >= 0;
    if (!given) return ASSAY_OK;
    if (o->method != ASSAY_INTQ_AWQ)
        return assay_fail(ASSAY_ERR_ARG, "the --awq-* options apply to int4-awq, not %s", scheme->name);
    static const struct {
        const char *name;
        assay_awq_clip_mode mode;
    } clip_modes[] = {{"two-sided", ASSAY_AWQ_CLIP_TWO_SIDED}, {"all", ASSAY_AWQ_CLIP_ALL}, {"autoawq", ASSAY_AWQ_CLIP_AUTOAWQ}};
    if (opt->awq_clip) {
        size_t i = 0, n = sizeof clip_modes / sizeof clip_modes[0];
        while (i < n && strcmp(opt->awq_clip, clip_modes[i].name) != 0) i++;
        if (i == n) return assay_fail(ASSAY_ERR_ARG, "unknown --awq-clip '%s' (known: two-sided, all, autoawq)", opt->awq_clip);
        o->awq_clip = clip_modes[i].mode;
    }
    if (opt->awq_tokens == 0) return assay_fail(ASSAY_ERR_ARG, "--awq-tokens must be at least 1");
    if (opt->awq_tokens > 0) o->awq_tokens = opt->awq_tokens;
    if (opt->awq_route) {
        if (strcmp(opt->awq_route, "cached") == 0) o->awq_cached = 1;
        else if (strcmp(opt->awq_route, "hooks") == 0) o->awq_cached = 0;
        else return assay_fail(ASSAY_ERR_ARG, "unknown --awq-route '%s' (known: hooks, cached)", opt->awq_route);
    }
    if (opt->awq_grid) {
        if (strcmp(opt->awq_grid, "llm-compressor") == 0) o->awq_duo = 2;
        else if (strcmp(opt->awq_grid, "autoawq") == 0) o->awq_duo = 1;
        else return assay_fail(ASSAY_ERR_ARG, "unknown --awq-grid '%s' (known: autoawq, llm-compressor)", opt->awq_grid);
    }
    if (opt->awq_seqs >= 0) o->awq_seqs = opt->awq_seqs;
    return ASSAY_OK;
}

assay_status assay_quantize_int(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                const assay_quantize_options *opt, const char *out_path) {
    if (opt->rotate) return assay_fail(ASSAY_ERR_UNSUPPORTED, "--rotate is not supported by %s", scheme->name);
    if (opt->imatrix_path) return assay_fail(ASSAY_ERR_ARG, "--imatrix applies to the GGUF schemes, not %s", scheme->name);
    assay_intq_options o;
    assay_intq_options_default(&o, (assay_intq_method)scheme->param);
    kq_ignore_ctx ic = {*opt};
    o.is_ignored = kq_is_ignored;
    o.ignore_ctx = &ic;
    if (opt->group_size > 0) o.group_size = opt->group_size;
    o.calib_path = opt->calib_path;
    if (opt->calib_samples > 0) o.calib_chunks = opt->calib_samples;
    if (opt->calib_seq_len > 0) o.calib_seq_len = opt->calib_seq_len;
    o.alpha = (float)opt->smoothquant_alpha;
    o.threads = opt->threads;
    assay_status st = kq_awq_options(scheme, opt, &o);
    if (st != ASSAY_OK) return st;
    assay_quantize_outdir d;
    st = assay_quantize_outdir_begin(&d, out_path, opt->force);
    if (st != ASSAY_OK) return st;
    st = assay_intq_quantize_model(assay_model_file_path(mf), d.temp_path, &o, NULL);
    if (st == ASSAY_OK) st = assay_quantize_copy_hf_extras(assay_model_file_path(mf), d.temp_path);
    if (st == ASSAY_OK) st = assay_quantize_outdir_commit(&d);
    else assay_quantize_outdir_abort(&d);
    return st;
}
