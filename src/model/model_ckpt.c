/* model_ckpt.c — loaders for quantized HF checkpoints (see model_ckpt.h and model.h): one row per format in
 * assay_ckpt_loaders[], detected from config.json's quantization_config. Each loader turns a linear layer's stored
 * tensors into the weight the engine multiplies by, using the format code of src/quant (quant_fp8.h for FP8
 * codes and scales, int_quant.h for the GPTQ / AWQ packing), and names how its input is quantized at run time.
 * FP8 / INT8 / FP4 weights are dequantized to f32 (their activations are fake-quantized, model.h); GPTQ and AWQ int4
 * weights stay packed, 4 bits plus an fp16 scale and a zero per group, in the CPU kernels' q4g rows (q4g.h). */
#include "model/model_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/dequant.h"
#include "assay/dtype.h"
#include "assay/int_quant.h"
#include "assay/quant_fp4.h"
#include "assay/quant_fp8.h"
#include "quant/q4g.h"

/* ---- helpers ---------------------------------------------------------------------------------------------- */

const assay_tensor *assay_ckpt_tensor(const assay_ckpt *ck, const char *module, const char *suffix) {
    char name[256];
    snprintf(name, sizeof name, "%s.%s", module, suffix);
    return assay_model_file_find(ck->mf, name);
}

static int is_float_type(assay_type t) { return t == ASSAY_TYPE_F32 || t == ASSAY_TYPE_F16 || t == ASSAY_TYPE_BF16; }

/* A tensor's ggml shape must be {ne0, ne1} (ne1 = 1 also accepts a 1-D tensor). */
static assay_status want_shape(const assay_ckpt *ck, const assay_tensor *t, int64_t ne0, int64_t ne1) {
    if (t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1) return ASSAY_OK;
    return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %s has shape [%lld, %lld] (ggml order), expected [%lld, %lld]",
                      assay_model_file_path(ck->mf), t->source_name, (long long)t->ne[0], (long long)t->ne[1],
                      (long long)ne0, (long long)ne1);
}

static assay_status want_type(const assay_ckpt *ck, const assay_tensor *t, int float_ok, assay_type exact) {
    if (float_ok ? is_float_type(t->type) : t->type == exact) return ASSAY_OK;
    return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %s is %s, expected %s", assay_model_file_path(ck->mf),
                      t->source_name, assay_type_name(t->type), float_ok ? "f32/f16/bf16" : assay_type_name(exact));
}

static const assay_tensor *need(const assay_ckpt *ck, const char *module, const char *suffix, assay_status *st) {
    const assay_tensor *t = assay_ckpt_tensor(ck, module, suffix);
    if (!t && *st == ASSAY_OK)
        *st = assay_fail(ASSAY_ERR_FORMAT, "%s: %s.%s is missing (a %s checkpoint stores it for every quantized linear)",
                         assay_model_file_path(ck->mf), module, suffix, ck->loader->label);
    return t;
}

/* A float tensor (f32/f16/bf16) widened to a new f32 array. */
static float *read_floats(const assay_tensor *t) {
    int64_t n = assay_tensor_nelements(t);
    float *v = assay_xmalloc((size_t)n * sizeof(float));
    ASSAY_ASSERT(assay_dequantize(t->type, t->data, v, n) == ASSAY_OK); /* callers checked the type */
    return v;
}

static const char *json_str(const assay_json *o, const char *key) { return assay_json_string(assay_json_get(o, key), NULL); }

/* ---- compressed-tensors: float-quantized (FP8) and int-quantized (INT8) ------------------------------------ */

static assay_status ct_bad(const assay_ckpt *ck, const char *what) {
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: quantization_config: %s (%s)", assay_model_file_path(ck->mf), what,
                      ck->loader->label);
}

static assay_status ct_parse(assay_ckpt *ck, const assay_json *qc) {
    int int_fmt = strcmp(ck->loader->format, "int-quantized") == 0;
    const assay_json *groups = assay_json_get(qc, "config_groups");
    if (!assay_json_is(groups, ASSAY_JSON_OBJECT) || groups->count != 1)
        return ct_bad(ck, "exactly one entry in config_groups is supported");
    const assay_json *g = groups->first, *w = assay_json_get(g, "weights"), *a = assay_json_get(g, "input_activations");
    if (!assay_json_is(w, ASSAY_JSON_OBJECT)) return ct_bad(ck, "config group without weights");
    const char *wt = json_str(w, "type"), *ws = json_str(w, "strategy");
    if (assay_json_int(assay_json_get(w, "num_bits"), 0) != 8 || !wt || strcmp(wt, int_fmt ? "int" : "float") != 0)
        return ct_bad(ck, int_fmt ? "weights must be 8-bit int" : "weights must be 8-bit float");
    if (!assay_json_bool(assay_json_get(w, "symmetric"), 1)) return ct_bad(ck, "asymmetric weights (zero points)");
    if (!ws) return ct_bad(ck, "weights without a strategy");
    if (strcmp(ws, "tensor") == 0) ck->weight_strategy = 0;
    else if (strcmp(ws, "channel") == 0) ck->weight_strategy = 1;
    else if (strcmp(ws, "block") == 0 && !int_fmt) {
        const assay_json *bs = assay_json_get(w, "block_structure");
        ck->weight_strategy = 2;
        ck->block[0] = assay_json_int(assay_json_at(bs, 0), 0);
        ck->block[1] = assay_json_int(assay_json_at(bs, 1), 0);
        if (ck->block[0] <= 0 || ck->block[1] <= 0) return ct_bad(ck, "block strategy without a block_structure [m, n]");
    } else return ct_bad(ck, "this weight strategy is not supported");
    memset(&ck->act, 0, sizeof ck->act);
    if (!a || assay_json_is(a, ASSAY_JSON_NULL)) return ASSAY_OK; /* weight-only */
    const char *at = json_str(a, "type"), *as = json_str(a, "strategy");
    const assay_json *dyn = assay_json_get(a, "dynamic");
    if (assay_json_int(assay_json_get(a, "num_bits"), 0) != 8 || !at || !as || !dyn ||
        !(assay_json_is(dyn, ASSAY_JSON_TRUE) || assay_json_is(dyn, ASSAY_JSON_FALSE)))
        return ct_bad(ck, "input_activations must be 8-bit with a strategy and a boolean 'dynamic'");
    int dynamic = assay_json_is(dyn, ASSAY_JSON_TRUE);
    if (strcmp(at, "int") == 0) {
        if (!dynamic || strcmp(as, "token") != 0 || !assay_json_bool(assay_json_get(a, "symmetric"), 1))
            return ct_bad(ck, "int8 activations are supported as dynamic, symmetric, per token");
        ck->act.kind = ASSAY_ACT_QUANT_INT8_TOKEN;
    } else if (strcmp(at, "float") == 0) {
        if (dynamic && strcmp(as, "token") == 0) ck->act.kind = ASSAY_ACT_QUANT_FP8_TOKEN;
        else if (dynamic && strcmp(as, "group") == 0) {
            ck->act.kind = ASSAY_ACT_QUANT_FP8_GROUP;
            ck->act.group = assay_json_int(assay_json_get(a, "group_size"), 0);
            if (ck->act.group <= 0) return ct_bad(ck, "group activations without a group_size");
        } else if (!dynamic && strcmp(as, "tensor") == 0) ck->act.kind = ASSAY_ACT_QUANT_FP8_STATIC;
        else return ct_bad(ck, "fp8 activations are supported per token / per group (dynamic) or per tensor (static)");
    } else return ct_bad(ck, "activation type must be int or float");
    return ASSAY_OK;
}

/* One linear stored as 8-bit codes (FP8 or INT8) times scales of the parsed strategy; `scale_suffix` names the scale
 * tensor ("weight_scale"; legacy block FP8: "weight_scale_inv", a multiplier despite its name). */
static assay_status scaled_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out, float *w,
                                  assay_act_quant *act, int *found, int int_fmt, const char *scale_suffix) {
    /* w: the caller's f32 destination (these formats run dequantized: their activations are fake-quantized) */
    const assay_tensor *wt = assay_ckpt_tensor(ck, module, "weight"), *sc = assay_ckpt_tensor(ck, module, scale_suffix);
    assay_status st = ASSAY_OK;
    *found = 0;
    if (!wt) {
        need(ck, module, "weight", &st);
        return st;
    }
    if (!sc && is_float_type(wt->type)) return ASSAY_OK; /* in the ignore list: stored unquantized */
    need(ck, module, scale_suffix, &st);
    if (st) return st;
    *found = 1;
    if ((st = want_shape(ck, wt, n_in, n_out)) || (st = want_type(ck, sc, 1, 0))) return st;
    if (int_fmt ? wt->type != ASSAY_TYPE_I8 : (wt->type != ASSAY_TYPE_F8_E4M3 && wt->type != ASSAY_TYPE_F8_E5M2))
        return want_type(ck, wt, 0, int_fmt ? ASSAY_TYPE_I8 : ASSAY_TYPE_F8_E4M3);
    /* scale count of the configured strategy (tensor: [1]; channel: [out, 1]; block: [ceil(out/bm), ceil(in/bn)]) */
    static const assay_fp8_granularity gran[] = {ASSAY_FP8_GRAN_TENSOR, ASSAY_FP8_GRAN_CHANNEL, ASSAY_FP8_GRAN_BLOCK};
    assay_fp8_granularity g = gran[ck->weight_strategy];
    int64_t want = assay_fp8_weight_scale_count(g, ck->block[0], ck->block[1], n_out, n_in);
    if (assay_tensor_nelements(sc) != want)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s has %lld scales, a %s weight of [%lld, %lld] needs %lld",
                          assay_model_file_path(ck->mf), sc->source_name, (long long)assay_tensor_nelements(sc),
                          ck->weight_strategy == 0 ? "per-tensor" : ck->weight_strategy == 1 ? "per-channel" : "block",
                          (long long)n_out, (long long)n_in, (long long)want);
    float *s = read_floats(sc);
    if (int_fmt) {
        const int8_t *q = wt->data;
        for (int64_t o = 0; o < n_out; o++)
            for (int64_t i = 0; i < n_in; i++) w[o * n_in + i] = (float)q[o * n_in + i] * s[g == ASSAY_FP8_GRAN_TENSOR ? 0 : o];
    } else {
        assay_fp8_dequantize_weight(wt->type == ASSAY_TYPE_F8_E5M2 ? ASSAY_FP8_E5M2 : ASSAY_FP8_E4M3, g, ck->block[0],
                                    ck->block[1], wt->data, s, n_out, n_in, w);
    }
    free(s);
    *act = ck->act;
    /* compressed-tensors' "float" 8-bit is E4M3; our e5m2 schemes quantize the activations to the weights' E5M2 */
    act->fmt = wt->type == ASSAY_TYPE_F8_E5M2 ? ASSAY_FP8_E5M2 : ASSAY_FP8_E4M3;
    if (int_fmt && act->kind != ASSAY_ACT_QUANT_NONE && act->kind != ASSAY_ACT_QUANT_INT8_TOKEN)
        return ct_bad(ck, "fp8 activations with int8 weights");
    if (!int_fmt && act->kind == ASSAY_ACT_QUANT_INT8_TOKEN) return ct_bad(ck, "int8 activations with fp8 weights");
    if (act->kind == ASSAY_ACT_QUANT_FP8_STATIC) {
        const assay_tensor *is = need(ck, module, "input_scale", &st);
        if (st) return st;
        if ((st = want_type(ck, is, 1, 0))) return st;
        if (assay_tensor_nelements(is) != 1)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s must hold one scale", assay_model_file_path(ck->mf), is->source_name);
        float *v = read_floats(is);
        act->scale = v[0];
        free(v);
        if (!(act->scale > 0) || act->scale > 3.0e38f)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: %s = %g is not a usable scale", assay_model_file_path(ck->mf),
                              is->source_name, (double)act->scale);
    }
    return ASSAY_OK;
}

/* ---- compressed-tensors nvfp4-pack-quantized / mxfp4-pack-quantized: weight-only FP4 -------------------- */

/* The one config group of a weight-only (A16) compressed-tensors checkpoint: its weights object in *w, or an error
 * (more than one group, no weights, quantized input activations: a_error says why those do not run). */
static assay_status ct_weight_only_group(assay_ckpt *ck, const assay_json *qc, const char *a_error, const assay_json **w) {
    const assay_json *groups = assay_json_get(qc, "config_groups");
    if (!assay_json_is(groups, ASSAY_JSON_OBJECT) || groups->count != 1)
        return ct_bad(ck, "exactly one entry in config_groups is supported");
    const assay_json *g = groups->first, *a = assay_json_get(g, "input_activations");
    *w = assay_json_get(g, "weights");
    if (!assay_json_is(*w, ASSAY_JSON_OBJECT)) return ct_bad(ck, "config group without weights");
    if (a && !assay_json_is(a, ASSAY_JSON_NULL)) return ct_bad(ck, a_error);
    memset(&ck->act, 0, sizeof ck->act);
    return ASSAY_OK;
}

static int fp4_is_mx(const assay_ckpt *ck) { return strcmp(ck->loader->format, "mxfp4-pack-quantized") == 0; }

/* One config group of 4-bit float weights in the NVFP4A16 (tensor_group, 16, FP8 scales) or MXFP4A16 (group, 32,
 * E8M0 scales) shape; activations must be unquantized (W4A4 NVFP4 would need FP4 activation emulation). */
static assay_status fp4_parse(assay_ckpt *ck, const assay_json *qc) {
    const int mx = fp4_is_mx(ck);
    const assay_json *w;
    assay_status st =
        ct_weight_only_group(ck, qc, "FP4 input activations are not emulated; weight-only (A16) checkpoints run", &w);
    if (st != ASSAY_OK) return st;
    const char *wt = json_str(w, "type");
    if (assay_json_int(assay_json_get(w, "num_bits"), 0) != 4 || !wt || strcmp(wt, "float") != 0)
        return ct_bad(ck, "weights must be 4-bit float");
    ck->group_size = assay_json_int(assay_json_get(w, "group_size"), 0);
    if (ck->group_size != (mx ? ASSAY_MXFP4_BLOCK : ASSAY_NVFP4_BLOCK))
        return ct_bad(ck, mx ? "MXFP4 weights need group_size 32" : "NVFP4 weights need group_size 16");
    return ASSAY_OK;
}

static assay_status fp4_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                               assay_ckpt_weight *out, assay_act_quant *act, int *found) {
    const int mx = fp4_is_mx(ck);
    float *w = out->f32;
    const int64_t gsz = ck->group_size;
    assay_status st = ASSAY_OK;
    const assay_tensor *qw = assay_ckpt_tensor(ck, module, "weight_packed");
    *found = 0;
    memset(act, 0, sizeof *act); /* weight-only: activations stay f32 */
    if (!qw) {
        const assay_tensor *dense = assay_ckpt_tensor(ck, module, "weight");
        if (dense && is_float_type(dense->type)) return ASSAY_OK; /* in the ignore list: stored unquantized */
        need(ck, module, "weight_packed", &st);
        return st;
    }
    *found = 1;
    const assay_tensor *sc = need(ck, module, "weight_scale", &st);
    const assay_tensor *gs = mx ? NULL : need(ck, module, "weight_global_scale", &st);
    if (st) return st;
    if (n_in % gsz)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s has %lld inputs, not a multiple of the group of %lld",
                          assay_model_file_path(ck->mf), module, (long long)n_in, (long long)gsz);
    if ((st = want_type(ck, qw, 0, ASSAY_TYPE_U8)) || (st = want_shape(ck, qw, n_in / 2, n_out)) ||
        (st = want_type(ck, sc, 0, mx ? ASSAY_TYPE_U8 : ASSAY_TYPE_F8_E4M3)) ||
        (st = want_shape(ck, sc, n_in / gsz, n_out)) || (gs && (st = want_type(ck, gs, 1, 0))))
        return st;
    if (gs && assay_tensor_nelements(gs) != 1)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s must hold one scale", assay_model_file_path(ck->mf), gs->source_name);
    if (mx) {
        assay_mxfp4_dequantize(sc->data, qw->data, n_in * n_out, w);
        return ASSAY_OK;
    }
    float *g = read_floats(gs);
    float global = g[0];
    free(g);
    if (!(global > 0) || global > 3.0e38f)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s = %g is not a usable global scale", assay_model_file_path(ck->mf),
                          gs->source_name, (double)global);
    assay_nvfp4_dequantize_ct(sc->data, qw->data, n_in * n_out, global, w);
    return ASSAY_OK;
}

static assay_status ct_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                              assay_ckpt_weight *w, assay_act_quant *act, int *found) {
    return scaled_linear(ck, module, n_in, n_out, w->f32, act, found, strcmp(ck->loader->format, "int-quantized") == 0,
                         "weight_scale");
}

/* ---- legacy "fp8" (AutoFP8 / DeepSeek / Qwen FP8: vLLM's Fp8Config) ---------------------------------------- */

static assay_status fp8_parse(assay_ckpt *ck, const assay_json *qc) {
    const char *as = json_str(qc, "activation_scheme");
    const assay_json *bs = assay_json_get(qc, "weight_block_size");
    memset(&ck->act, 0, sizeof ck->act);
    if (!as || (strcmp(as, "static") != 0 && strcmp(as, "dynamic") != 0))
        return ct_bad(ck, "activation_scheme must be \"static\" or \"dynamic\"");
    int dynamic = strcmp(as, "dynamic") == 0;
    if (bs && !assay_json_is(bs, ASSAY_JSON_NULL)) {
        ck->weight_strategy = 2;
        ck->block[0] = assay_json_int(assay_json_at(bs, 0), 0);
        ck->block[1] = assay_json_int(assay_json_at(bs, 1), 0);
        if (ck->block[0] <= 0 || ck->block[1] <= 0) return ct_bad(ck, "weight_block_size must be [m, n]");
        if (!dynamic) return ct_bad(ck, "block weights need activation_scheme \"dynamic\" (as in vLLM)");
        ck->act.kind = ASSAY_ACT_QUANT_FP8_GROUP; /* vLLM: per-token groups of block_n */
        ck->act.group = ck->block[1];
    } else {
        ck->weight_strategy = 0; /* one scale per tensor */
        /* dynamic: per token, vLLM's choice wherever CUTLASS FP8 runs (Hopper, Ada) */
        ck->act.kind = dynamic ? ASSAY_ACT_QUANT_FP8_TOKEN : ASSAY_ACT_QUANT_FP8_STATIC;
    }
    return ASSAY_OK;
}

static assay_status fp8_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                               assay_ckpt_weight *w, assay_act_quant *act, int *found) {
    return scaled_linear(ck, module, n_in, n_out, w->f32, act, found, 0,
                         ck->weight_strategy == 2 ? "weight_scale_inv" : "weight_scale");
}

/* ---- GPTQ ("gptq" / "gptq_v2" checkpoint formats) and AWQ GEMM --------------------------------------------- */

static assay_status int4_parse_common(assay_ckpt *ck, const assay_json *qc) {
    if (assay_json_int(assay_json_get(qc, "bits"), 0) != 4)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: %s checkpoints with bits != 4 are not supported",
                          assay_model_file_path(ck->mf), ck->loader->label);
    ck->group_size = assay_json_int(assay_json_get(qc, "group_size"), -1);
    if (ck->group_size == 0 || ck->group_size < -1)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: group_size %lld", assay_model_file_path(ck->mf), (long long)ck->group_size);
    return ASSAY_OK;
}

static assay_status gptq_parse(assay_ckpt *ck, const assay_json *qc) {
    assay_status st = int4_parse_common(ck, qc);
    if (st) return st;
    /* "gptq" (v1, what transformers / AutoGPTQ / vLLM read and this library writes) stores zero − 1 */
    const char *f = json_str(qc, "checkpoint_format");
    if (!f || strcmp(f, "gptq") == 0) ck->zero_offset = 1;
    else if (strcmp(f, "gptq_v2") == 0) ck->zero_offset = 0;
    else return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: GPTQ checkpoint_format '%s' is not supported (gptq, gptq_v2)",
                           assay_model_file_path(ck->mf), f);
    return ASSAY_OK;
}

static assay_status awq_parse(assay_ckpt *ck, const assay_json *qc) {
    assay_status st = int4_parse_common(ck, qc);
    if (st) return st;
    const char *v = json_str(qc, "version");
    if (v && strcmp(v, "gemm") != 0 && strcmp(v, "GEMM") != 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: AWQ version '%s' is not supported (gemm)", assay_model_file_path(ck->mf), v);
    if (!assay_json_bool(assay_json_get(qc, "zero_point"), 1))
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: AWQ without zero points is not supported", assay_model_file_path(ck->mf));
    if (ck->group_size < 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: AWQ needs a group_size", assay_model_file_path(ck->mf));
    return ASSAY_OK;
}

/* ---- packing into the CPU kernels' group-int4 rows (quant/q4g.h) ---- */

static uint32_t le_word(const void *p, int64_t i) { /* mmapped tensors may be unaligned */
    uint32_t v;
    memcpy(&v, (const uint8_t *)p + 4 * i, 4);
    return v;
}

/* Act-order (GPTQ desc_act): g_idx names each input column's group in any order. The columns sorted by group (stable)
 * make every group a run of gs consecutive columns again when each group holds exactly gs columns (the last one the
 * rest), which is what GPTQ's act-order writes; then perm[c] is the file column that packed column c holds, and the
 * matmul reads x[perm[c]] (vLLM's Marlin and ExLlama kernels reorder the same way). Returns 0 when g_idx has another
 * shape (the caller dequantizes to f32). *identity: g_idx is plain i / gs. */
static int int4_perm(const int32_t *g_idx, int64_t n_in, int64_t gs, int64_t ng, int32_t *perm, int *identity) {
    int64_t *start = assay_xcalloc((size_t)ng + 1, sizeof *start);
    for (int64_t i = 0; i < n_in; i++) start[g_idx[i] + 1]++;
    int ok = 1;
    *identity = 1;
    for (int64_t g = 0; g < ng; g++) {
        int64_t want = g + 1 < ng ? gs : n_in - g * gs;
        if (start[g + 1] != want) ok = 0;
        start[g + 1] += start[g];
    }
    for (int64_t i = 0; i < n_in && ok; i++) {
        perm[start[g_idx[i]]++] = (int32_t)i;
        if (g_idx[i] != i / gs) *identity = 0;
    }
    free(start);
    return ok;
}

enum { INT4_GPTQ, INT4_AWQ, INT4_CT }; /* the three int4 layouts */

/* One int4 linear's codes q [n_out][n_in] (0..15, file column order), zero points z [n_out][ng] (0..16) and scales
 * s [n_out][ng], read from its layout:
 *   GPTQ: qweight [n_in/8][n_out] int32, 8 inputs per word (input 8k+j at bits 4j); qzeros [ng][n_out/8], 8 outputs
 *         per word, holding zero - zero_offset (v1: a stored 15 reads back as 16, no wrap); scales [ng][n_out];
 *   AWQ GEMM: qweight [n_in][n_out/8], qzeros [ng][n_out/8], 8 outputs per word in the order 0, 2, 4, 6, 1, 3, 5, 7;
 *         scales [ng][n_out];
 *   compressed-tensors pack-quantized: weight_packed [n_out][n_in/8], input 8k+j at bits 4j, stored as the signed
 *         code + 8; weight_zero_point [n_out/8][ng], 8 outputs per word, signed + 8 (absent when symmetric: zero 0,
 *         i.e. 8 here); weight_scale [n_out][ng]. x = scale * (q_signed - zp_signed) = scale * (q - z). */
static void int4_codes(const assay_ckpt *ck, int layout, const assay_tensor *qw, const assay_tensor *qz,
                       const assay_tensor *sc, int64_t n_in, int64_t n_out, int64_t ng, uint8_t *q, uint8_t *z, float *s) {
    float *sf = read_floats(sc);
    for (int64_t o = 0; o < n_out; o++)
        for (int64_t g = 0; g < ng; g++) s[o * ng + g] = layout == INT4_CT ? sf[o * ng + g] : sf[g * n_out + o];
    free(sf);
    if (layout == INT4_AWQ) {
        static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
        int64_t n8 = n_out / 8;
        for (int64_t i = 0; i < n_in; i++)
            for (int64_t j = 0; j < n8; j++) {
                uint32_t v = le_word(qw->data, i * n8 + j);
                for (int k = 0; k < 8; k++) q[(8 * j + order[k]) * n_in + i] = (uint8_t)((v >> (4 * k)) & 0xF);
            }
        for (int64_t g = 0; g < ng; g++)
            for (int64_t j = 0; j < n8; j++) {
                uint32_t v = le_word(qz->data, g * n8 + j);
                for (int k = 0; k < 8; k++) z[(8 * j + order[k]) * ng + g] = (uint8_t)((v >> (4 * k)) & 0xF);
            }
        return;
    }
    for (int64_t i8 = 0; i8 < n_in / 8; i8++)
        for (int64_t o = 0; o < n_out; o++) {
            uint32_t v = le_word(qw->data, layout == INT4_CT ? o * (n_in / 8) + i8 : i8 * n_out + o);
            for (int k = 0; k < 8; k++) q[o * n_in + 8 * i8 + k] = (uint8_t)((v >> (4 * k)) & 0xF);
        }
    for (int64_t g = 0; g < ng; g++)
        for (int64_t o = 0; o < n_out; o++) {
            if (layout == INT4_CT && !qz) {
                z[o * ng + g] = 8;
                continue;
            }
            uint32_t v = le_word(qz->data, layout == INT4_CT ? (o / 8) * ng + g : g * (n_out / 8) + o / 8);
            z[o * ng + g] = (uint8_t)(((v >> (4 * (o % 8))) & 0xF) + (layout == INT4_GPTQ ? ck->zero_offset : 0));
        }
}

/* Packs the codes into q4g rows in out (type, data, perm), or says in out->note why not (the caller then
 * dequantizes to f32, exactly as before). */
static void int4_pack(const assay_ckpt *ck, const uint8_t *q, const uint8_t *z, const float *s, const int32_t *g_idx,
                      int64_t n_in, int64_t n_out, int64_t gs, int64_t ng, const char *scale_name,
                      assay_ckpt_weight *out) {
    assay_type t = assay_q4g_type(gs, n_in);
    if (ck->int4_f32) {
        snprintf(out->note, sizeof out->note, "ASSAY_INT4_F32 is set");
        return;
    }
    if (t == ASSAY_TYPE_COUNT) {
        snprintf(out->note, sizeof out->note, "groups of %lld over %lld inputs do not fill 32-element blocks",
                 (long long)gs, (long long)n_in);
        return;
    }
    int32_t *perm = assay_xmalloc((size_t)n_in * sizeof *perm);
    int identity = 1;
    if (!int4_perm(g_idx, n_in, gs, ng, perm, &identity)) {
        snprintf(out->note, sizeof out->note, "g_idx groups are not runs of %lld columns in any order", (long long)gs);
        free(perm);
        return;
    }
    /* the scales must survive fp16 bit for bit (f16 files always do; bf16 / f32 ones usually) */
    uint16_t *d = assay_xmalloc((size_t)(n_out * ng) * sizeof *d);
    for (int64_t i = 0; i < n_out * ng; i++) {
        d[i] = assay_f32_to_f16(s[i]);
        if (assay_f16_to_f32(d[i]) != s[i]) {
            snprintf(out->note, sizeof out->note, "%s: scale %g is not an fp16 value", scale_name, (double)s[i]);
            free(d);
            free(perm);
            return;
        }
    }
    out->type = t;
    out->data = assay_xmalloc(assay_type_row_bytes(t, n_in) * (size_t)n_out);
    assay_q4g_pack(t, q, z, d, n_out, n_in, gs, identity ? NULL : perm, out->data);
    if (identity) free(perm);
    else out->perm = perm;
    free(d);
}

/* One int4 linear in any of the three layouts, checked: packed when it can be, else dequantized to f32 (GPTQ and
 * AWQ through int_quant.h's unpackers, as every earlier version did). */
static assay_status int4_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                                assay_ckpt_weight *out, assay_act_quant *act, int *found, int layout) {
    assay_status st = ASSAY_OK;
    const int ct = layout == INT4_CT, awq = layout == INT4_AWQ;
    const assay_tensor *qw = assay_ckpt_tensor(ck, module, ct ? "weight_packed" : "qweight");
    *found = 0;
    memset(act, 0, sizeof *act); /* weight-only: activations stay f32 */
    if (!qw) {
        if (!ct) return ASSAY_OK; /* a module the quantizer skipped (modules_to_not_convert, lm_head) */
        const assay_tensor *dense = assay_ckpt_tensor(ck, module, "weight");
        if (dense && is_float_type(dense->type)) return ASSAY_OK; /* in the ignore list: stored unquantized */
        need(ck, module, "weight_packed", &st);
        return st;
    }
    *found = 1;
    const assay_tensor *qz = ct ? NULL : need(ck, module, "qzeros", &st);
    const assay_tensor *sc = need(ck, module, ct ? "weight_scale" : "scales", &st);
    if (ct && ck->int4_asym) qz = need(ck, module, "weight_zero_point", &st);
    if (st) return st;
    if (n_out % 8 || (!awq && n_in % 8))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s is [%lld, %lld]; packed int4 needs multiples of 8",
                          assay_model_file_path(ck->mf), module, (long long)n_out, (long long)n_in);
    int64_t ng = ct ? sc->ne[0] : sc->ne[1];
    if ((st = want_type(ck, qw, 0, ASSAY_TYPE_I32)) || (qz && (st = want_type(ck, qz, 0, ASSAY_TYPE_I32))) ||
        (st = want_type(ck, sc, 1, 0)))
        return st;
    if (ct) {
        if ((st = want_shape(ck, qw, n_in / 8, n_out)) || (qz && (st = want_shape(ck, qz, ng, n_out / 8))) ||
            (st = want_shape(ck, sc, ng, n_out)))
            return st;
    } else if ((st = want_shape(ck, qw, awq ? n_out / 8 : n_out, awq ? n_in : n_in / 8)) ||
               (st = want_shape(ck, qz, n_out / 8, ng)) || (st = want_shape(ck, sc, n_out, ng)))
        return st;
    int64_t gs = ck->group_size > 0 ? ck->group_size : n_in;
    int32_t *g_idx = assay_xmalloc((size_t)n_in * sizeof(int32_t));
    const assay_tensor *gi = awq ? NULL : assay_ckpt_tensor(ck, module, ct ? "weight_g_idx" : "g_idx");
    if (gi) { /* act-order: the group of each input column, in any order */
        if ((st = want_type(ck, gi, 0, ASSAY_TYPE_I32)) || (st = want_shape(ck, gi, n_in, 1))) {
            free(g_idx);
            return st;
        }
        memcpy(g_idx, gi->data, (size_t)n_in * sizeof(int32_t)); /* mmapped data may be unaligned */
    } else
        for (int64_t i = 0; i < n_in; i++) g_idx[i] = (int32_t)(i / gs);
    for (int64_t i = 0; i < n_in && st == ASSAY_OK; i++)
        if (g_idx[i] < 0 || g_idx[i] >= ng)
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: %s g_idx[%lld] = %d is outside the %lld groups of %s",
                            assay_model_file_path(ck->mf), module, (long long)i, g_idx[i], (long long)ng, sc->source_name);
    if (st == ASSAY_OK && !gi && ng != (n_in + gs - 1) / gs)
        st = assay_fail(ASSAY_ERR_FORMAT, "%s: %s has %lld groups; %lld inputs in groups of %lld need %lld",
                        assay_model_file_path(ck->mf), sc->source_name, (long long)ng, (long long)n_in, (long long)gs,
                        (long long)((n_in + gs - 1) / gs));
    if (st == ASSAY_OK) {
        uint8_t *q = assay_xmalloc((size_t)(n_out * n_in)), *z = assay_xmalloc((size_t)(n_out * ng));
        float *s = assay_xmalloc((size_t)(n_out * ng) * sizeof(float));
        int4_codes(ck, layout, qw, qz, sc, n_in, n_out, ng, q, z, s);
        int4_pack(ck, q, z, s, g_idx, n_in, n_out, gs, ng, sc->source_name, out);
        if (out->type == ASSAY_TYPE_F32) { /* not packable (out->note says why): f32 */
            float *sf = ct ? NULL : read_floats(sc);
            if (awq) assay_int4_unpack_awq(qw->data, qz->data, sf, n_in, n_out, gs, out->f32);
            else if (!ct) assay_int4_unpack_gptq(qw->data, qz->data, sf, g_idx, n_in, n_out, ck->zero_offset, out->f32);
            else
                for (int64_t o = 0; o < n_out; o++)
                    for (int64_t i = 0; i < n_in; i++) {
                        int64_t g = g_idx[i];
                        out->f32[o * n_in + i] = s[o * ng + g] * (float)(q[o * n_in + i] - z[o * ng + g]);
                    }
            free(sf);
        }
        free(q);
        free(z);
        free(s);
    }
    free(g_idx);
    return st;
}

static assay_status gptq_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                                assay_ckpt_weight *w, assay_act_quant *act, int *found) {
    return int4_linear(ck, module, n_in, n_out, w, act, found, INT4_GPTQ);
}

static assay_status awq_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                               assay_ckpt_weight *w, assay_act_quant *act, int *found) {
    return int4_linear(ck, module, n_in, n_out, w, act, found, INT4_AWQ);
}

/* ---- compressed-tensors pack-quantized: int4 weights, 16-bit activations (W4A16, vLLM's CompressedTensorsWNA16) */

static assay_status packq_parse(assay_ckpt *ck, const assay_json *qc) {
    const assay_json *w;
    assay_status st = ct_weight_only_group(
        ck, qc, "int4 weights with quantized input activations are not supported; weight-only (A16) runs", &w);
    if (st != ASSAY_OK) return st;
    const char *wt = json_str(w, "type"), *ws = json_str(w, "strategy");
    if (assay_json_int(assay_json_get(w, "num_bits"), 0) != 4 || !wt || strcmp(wt, "int") != 0)
        return ct_bad(ck, "weights must be 4-bit int (W4A16)");
    if (ws && strcmp(ws, "group") == 0) {
        ck->group_size = assay_json_int(assay_json_get(w, "group_size"), 0);
        if (ck->group_size <= 0) return ct_bad(ck, "group strategy without a positive group_size");
    } else if (ws && strcmp(ws, "channel") == 0) ck->group_size = -1;
    else return ct_bad(ck, "int4 weights need strategy \"group\" or \"channel\"");
    ck->int4_asym = !assay_json_bool(assay_json_get(w, "symmetric"), 1);
    return ASSAY_OK;
}

static assay_status packq_linear(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                                 assay_ckpt_weight *w, assay_act_quant *act, int *found) {
    return int4_linear(ck, module, n_in, n_out, w, act, found, INT4_CT);
}

/* ---- the table -------------------------------------------------------------------------------------------- */

const assay_ckpt_loader assay_ckpt_loaders[] = {
    /* quant_method, format, label, parse, linear */
    {"compressed-tensors", "float-quantized", "compressed-tensors float-quantized (fp8)", ct_parse, ct_linear},
    {"compressed-tensors", "int-quantized", "compressed-tensors int-quantized (int8)", ct_parse, ct_linear},
    {"compressed-tensors", "nvfp4-pack-quantized", "compressed-tensors nvfp4-pack-quantized (weight-only)", fp4_parse,
     fp4_linear},
    {"compressed-tensors", "mxfp4-pack-quantized", "compressed-tensors mxfp4-pack-quantized (weight-only)", fp4_parse,
     fp4_linear},
    {"compressed-tensors", "pack-quantized", "compressed-tensors pack-quantized (int4 weight-only)", packq_parse,
     packq_linear},
    {"fp8", NULL, "fp8 (vLLM Fp8Config)", fp8_parse, fp8_linear},
    {"gptq", NULL, "GPTQ int4", gptq_parse, gptq_linear},
    {"awq", NULL, "AWQ GEMM int4", awq_parse, awq_linear},
    {NULL, NULL, NULL, NULL, NULL},
};

assay_status assay_ckpt_open(assay_ckpt *ck, const assay_model_file *mf) {
    memset(ck, 0, sizeof *ck);
    ck->mf = mf;
    const char *f32 = getenv("ASSAY_INT4_F32"); /* the previous f32 path, for comparisons */
    ck->int4_f32 = f32 && *f32 && *f32 != '0';
    const assay_json *qc = assay_model_file_quantization_config(mf);
    if (!qc) return ASSAY_OK;
    const char *method = json_str(qc, "quant_method"), *format = json_str(qc, "format");
    if (!method)
        return assay_fail(ASSAY_ERR_FORMAT, "%s/config.json: quantization_config has no quant_method", assay_model_file_path(mf));
    /* compressed-tensors with no weight groups (format "dense"): only a kv_cache_scheme, the weights are as stored
     * (assay quantize --scheme none --kv-cache-scheme fp8); model.c reads the KV scales */
    const assay_json *groups = assay_json_get(qc, "config_groups");
    if (strcmp(method, "compressed-tensors") == 0 && (!groups || (assay_json_is(groups, ASSAY_JSON_OBJECT) && groups->count == 0)))
        return ASSAY_OK;
    for (const assay_ckpt_loader *l = assay_ckpt_loaders; l->quant_method; l++) {
        if (strcmp(l->quant_method, method) != 0) continue;
        if (l->format && (!format || strcmp(l->format, format) != 0)) continue;
        ck->loader = l;
        return l->parse(ck, qc);
    }
    return assay_fail(ASSAY_ERR_UNSUPPORTED,
                      "%s: the engine cannot run quant_method '%s'%s%s%s (it runs compressed-tensors float-quantized / "
                      "int-quantized / pack-quantized (int4) / nvfp4-pack-quantized / mxfp4-pack-quantized, fp8, gptq, awq)",
                      assay_model_file_path(mf), method, format ? " with format '" : "", format ? format : "",
                      format ? "'" : "");
}
