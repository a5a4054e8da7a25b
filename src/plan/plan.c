/* plan.c — the deployment planner (include/assay/plan.h): the GPU and preset tables, weight schemes, and the plan.
 *
 * What one tensor-parallel rank holds (its part of every weight, its KV heads) and what the bf16 / fp8 / int8 / int4
 * schemes cost come from the sharding rules of include/assay/shard.h, the same the tensor-parallel engine slices
 * weights with. GGUF mixes price a list of the model's tensors in GGUF naming, whole and at the rank's shapes. Nothing
 * is loaded: a preset or a config.json gives the shapes, a GGUF file gives them and (scheme "stored") its real
 * tensor bytes. */
#include "assay/plan.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "assay/shard.h"

/* ---- GPUs: the vendors' published memory capacity and bandwidth ------------------------------------------- */
static const struct {
    const char *keys; /* normalized spellings (lowercase letters and digits), space-separated */
    assay_plan_gpu gpu;
} gpu_table[] = {
    /* NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 80 GB HBM3, 3.35 TB/s */
    {"h100 h100sxm h100sxm5 h10080gb h100sxm80gb h100sxm580gb", {"H100 SXM 80 GB", 80e9, 3.35e12}},
    /* NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: 141 GB HBM3e, 4.8 TB/s */
    {"h200 h200sxm h200141gb h200sxm141gb", {"H200 141 GB", 141e9, 4.8e12}},
    /* NVIDIA DGX B200 datasheet: 1,440 GB of HBM3e and 64 TB/s of HBM bandwidth over 8 GPUs, i.e. 180 GB and
     * 8 TB/s per GPU (HGX B200 likewise lists 180 GB per GPU; the 2024 announcement said 192 GB) */
    {"b200 b200180gb b200sxm", {"B200 180 GB", 180e9, 8e12}},
    /* NVIDIA L40S datasheet: 48 GB GDDR6 with ECC, 864 GB/s */
    {"l40s l40s48gb", {"L40S 48 GB", 48e9, 864e9}},
    /* NVIDIA GeForce RTX 4090 specifications: 24 GB GDDR6X at 21 Gbps on a 384-bit bus = 1,008 GB/s */
    {"rtx4090 4090 geforcertx4090 rtx409024gb 409024gb", {"RTX 4090 24 GB", 24e9, 1008e9}},
};
#define N_GPUS (int)(sizeof gpu_table / sizeof gpu_table[0])

/* lowercase letters and digits only: "H100 SXM-80GB" -> "h100sxm80gb" */
static void normalize(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        if (isalnum((unsigned char)*s)) out[n++] = (char)tolower((unsigned char)*s);
    out[n] = 0;
}

static int key_in(const char *keys, const char *k) {
    size_t n = strlen(k);
    for (const char *p = keys; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !memcmp(p, k, n)) return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

int assay_plan_gpu_count(void) { return N_GPUS; }
const assay_plan_gpu *assay_plan_gpu_at(int i) { return i >= 0 && i < N_GPUS ? &gpu_table[i].gpu : NULL; }

assay_status assay_plan_gpu_find(const char *name, assay_plan_gpu *out) {
    char k[64];
    normalize(name, k, sizeof k);
    for (int i = 0; i < N_GPUS; i++)
        if (key_in(gpu_table[i].keys, k)) {
            *out = gpu_table[i].gpu;
            return ASSAY_OK;
        }
    return assay_fail(ASSAY_ERR_ARG, "unknown GPU '%s' (known: h100 = H100 SXM 80 GB, h200 = H200 141 GB, b200 = B200 "
                                     "180 GB, l40s = L40S 48 GB, rtx4090 = RTX 4090 24 GB; or --gpu-memory BYTES)", name);
}

double assay_plan_parse_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || !isfinite(v)) return -1;
    while (*end == ' ') end++;
    const char *units = "kmgt";
    const char *u = *end ? strchr(units, tolower((unsigned char)*end)) : NULL;
    double scale = 1;
    if (u) {
        int e = (int)(u - units) + 1;
        end++;
        if (*end == 'i' || *end == 'I') { /* KiB, GiB: binary */
            scale = pow(1024.0, e);
            end++;
            if (*end == 'b' || *end == 'B') end++;
        } else if (*end == 'b' || *end == 'B') { /* KB, GB: decimal, as vendors write capacities */
            scale = pow(1000.0, e);
            end++;
        } else {
            scale = pow(1024.0, e); /* a bare G, as --kv-cache-memory reads it */
        }
    } else if (*end == 'b' || *end == 'B') {
        end++;
    }
    if (!strcmp(end, "/s")) end += 2;
    return *end ? -1 : v * scale;
}

/* ---- presets: the architecture numbers of the published config.json files ---------------------------------- */
static const struct {
    const char *name, *display, *keys;
    const char *arch;
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    int tied, qkv_bias;
} presets[] = {
    /* meta-llama/Llama-3.1-{8B,70B,405B}: num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads,
     * head_dim (hidden / heads = 128), intermediate_size, vocab_size, max_position_embeddings; tie_word_embeddings
     * false */
    {"llama-3.1-8b", "Llama 3.1 8B", "llama318b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 131072, 0, 0},
    {"llama-3.1-70b", "Llama 3.1 70B", "llama3170b", "llama", 80, 8192, 64, 8, 128, 28672, 128256, 131072, 0, 0},
    {"llama-3.1-405b", "Llama 3.1 405B", "llama31405b", "llama", 126, 16384, 128, 8, 128, 53248, 128256, 131072, 0, 0},
    /* Qwen/Qwen2.5-{14B,72B}: the same keys; q/k/v carry biases (qwen2), tie_word_embeddings false, 32768 positions
     * without YaRN */
    {"qwen2.5-14b", "Qwen 2.5 14B", "qwen2514b", "qwen2", 48, 5120, 40, 8, 128, 13824, 152064, 32768, 0, 1},
    {"qwen2.5-72b", "Qwen 2.5 72B", "qwen2572b", "qwen2", 80, 8192, 64, 8, 128, 29568, 152064, 32768, 0, 1},
};
#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

int assay_plan_preset_count(void) { return N_PRESETS; }
const char *assay_plan_preset_name(int i) { return i >= 0 && i < N_PRESETS ? presets[i].name : NULL; }

assay_status assay_plan_preset(const char *name, assay_model_config *out, const char **display) {
    const char *slash = strrchr(name, '/');
    char k[96];
    normalize(slash ? slash + 1 : name, k, sizeof k);
    size_t n = strlen(k);
    if (n > 8 && !strcmp(k + n - 8, "instruct")) k[n - 8] = 0; /* the instruct models have the same shapes */
    const char *key = !strncmp(k, "meta", 4) ? k + 4 : k;         /* Meta-Llama-3.1-8B */
    for (int i = 0; i < N_PRESETS; i++) {
        if (!key_in(presets[i].keys, key)) continue;
        memset(out, 0, sizeof *out);
        snprintf(out->arch, sizeof out->arch, "%s", presets[i].arch);
        out->n_layer = presets[i].n_layer;
        out->n_embd = presets[i].n_embd;
        out->n_head = presets[i].n_head;
        out->n_head_kv = presets[i].n_head_kv;
        out->head_dim = presets[i].head_dim;
        out->n_ff = presets[i].n_ff;
        out->n_vocab = presets[i].n_vocab;
        out->n_ctx_train = presets[i].n_ctx;
        out->tied_embeddings = presets[i].tied;
        out->has_qkv_bias = presets[i].qkv_bias;
        out->bos_id = out->eos_id = -1;
        if (display) *display = presets[i].display;
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_ARG, "'%s' is neither a model file or directory nor a known preset (presets: "
                                     "llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, qwen2.5-14b, qwen2.5-72b)", name);
}

/* ---- weight schemes ----------------------------------------------------------------------------------------- */
assay_status assay_plan_scheme_parse(const char *name, assay_plan_scheme *out) {
    memset(out, 0, sizeof *out);
    char k[32];
    normalize(name, k, sizeof k);
    static const struct { const char *keys, *canon; assay_plan_scheme_kind kind; assay_type dense; int64_t group; } rows[] = {
        {"bf16 bfloat16", "bf16", ASSAY_PLAN_SCHEME_DENSE, ASSAY_TYPE_BF16, 0},
        {"f16 fp16 float16 half", "f16", ASSAY_PLAN_SCHEME_DENSE, ASSAY_TYPE_F16, 0},
        {"f32 fp32 float32", "f32", ASSAY_PLAN_SCHEME_DENSE, ASSAY_TYPE_F32, 0},
        {"fp8 fp8e4m3 f8e4m3 fp8dynamic w8a8fp8 fp8static", "fp8", ASSAY_PLAN_SCHEME_W8, ASSAY_TYPE_F8_E4M3, 0},
        {"int8 w8a8int8 w8a8 w8a16 smoothquant", "int8", ASSAY_PLAN_SCHEME_W8, ASSAY_TYPE_I8, 0},
        {"int4 int4g128 awq gptq w4a16 int4awq int4gptq int4rtn", "int4-g128", ASSAY_PLAN_SCHEME_INT4, ASSAY_TYPE_COUNT, 128},
        {"int4g64", "int4-g64", ASSAY_PLAN_SCHEME_INT4, ASSAY_TYPE_COUNT, 64},
        {"int4g32", "int4-g32", ASSAY_PLAN_SCHEME_INT4, ASSAY_TYPE_COUNT, 32},
        {"stored asstored", "stored", ASSAY_PLAN_SCHEME_STORED, ASSAY_TYPE_COUNT, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (key_in(rows[i].keys, k)) {
            out->kind = rows[i].kind;
            out->dense = rows[i].dense;
            out->group = rows[i].group;
            snprintf(out->name, sizeof out->name, "%s", rows[i].canon);
            return ASSAY_OK;
        }
    assay_ggml_ftype f;
    if (assay_ggml_ftype_from_name(name, &f)) {
        out->kind = ASSAY_PLAN_SCHEME_GGUF;
        out->ftype = f;
        snprintf(out->name, sizeof out->name, "%s", assay_ggml_ftype_name(f));
        for (char *c = out->name; *c; c++) *c = (char)tolower((unsigned char)*c);
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_ARG, "unknown weight scheme '%s' (bf16, f16, f32, fp8, int8, int4 = int4-g128 "
                                     "(AWQ/GPTQ), int4-g64, int4-g32, GGUF q8_0 q6_k q5_k_m q5_k_s q4_k_m q4_k_s q4_0 "
                                     "q3_k_m q3_k_l q3_k_s q2_k ...)", name);
}

const char *assay_plan_scheme_describe(const assay_plan_scheme *s) {
    switch (s->kind) {
    case ASSAY_PLAN_SCHEME_STORED: return "the file's own tensor types";
    case ASSAY_PLAN_SCHEME_DENSE: return "every tensor in one type";
    case ASSAY_PLAN_SCHEME_W8:
        return "linear layers 1 byte a weight + an f32 scale per output channel; embeddings, lm_head and norms stay "
               "bf16, as vLLM loads them";
    case ASSAY_PLAN_SCHEME_INT4:
        return "linear layers 4 bits a weight + per group an f16 scale and a 4-bit zero, as AWQ/GPTQ checkpoints "
               "store them; embeddings, lm_head and norms stay bf16";
    case ASSAY_PLAN_SCHEME_GGUF:
        return "llama.cpp's per-tensor mix by llama-quantize's rules, block sizes from the type table; norms and "
               "biases f32";
    }
    return "";
}

/* ---- the model as tensors ------------------------------------------------------------------------------------ */
typedef struct {
    char name[48];
    int n_dims;
    int64_t ne[2];  /* ggml order: ne[0] inputs (the row), ne[1] outputs; 1-D: ne[0] elements, ne[1] = 1 */
} plan_tensor;

typedef struct {
    plan_tensor *t;
    int n, cap;
} tensor_list;

static void add_tensor(tensor_list *l, const char *name, int n_dims, int64_t ne0, int64_t ne1) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->t = assay_xrealloc(l->t, (size_t)l->cap * sizeof *l->t);
    }
    plan_tensor *t = &l->t[l->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
}

/* A llama-family model's tensors in the order a GGUF file lists them (llama.cpp's mix counts attn_v in this order). */
static void model_tensors(const assay_model_config *c, tensor_list *l) {
    int64_t d = c->n_embd, q = c->n_head * c->head_dim, kv = c->n_head_kv * c->head_dim, ff = c->n_ff;
    char nm[48];
    add_tensor(l, "token_embd.weight", 2, d, c->n_vocab);
    for (int64_t i = 0; i < c->n_layer; i++) {
#define T(suffix, nd, a, b) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)i, suffix), add_tensor(l, nm, nd, a, b))
        T("attn_norm.weight", 1, d, 1);
        T("attn_q.weight", 2, d, q);
        T("attn_k.weight", 2, d, kv);
        T("attn_v.weight", 2, d, kv);
        if (c->has_qkv_bias) {
            T("attn_q.bias", 1, q, 1);
            T("attn_k.bias", 1, kv, 1);
            T("attn_v.bias", 1, kv, 1);
        }
        if (c->has_qk_norm) {
            T("attn_q_norm.weight", 1, c->head_dim, 1);
            T("attn_k_norm.weight", 1, c->head_dim, 1);
        }
        T("attn_output.weight", 2, q, d);
        if (c->has_post_norms) T("post_attention_norm.weight", 1, d, 1);
        T("ffn_norm.weight", 1, d, 1);
        T("ffn_gate.weight", 2, d, ff);
        T("ffn_up.weight", 2, d, ff);
        T("ffn_down.weight", 2, ff, d);
        if (c->has_post_norms) T("post_ffw_norm.weight", 1, d, 1);
#undef T
    }
    add_tensor(l, "output_norm.weight", 1, d, 1);
    if (!c->tied_embeddings) add_tensor(l, "output.weight", 2, d, c->n_vocab);
}

/* ---- pricing ---------------------------------------------------------------------------------------------- */
/* How the sharding rules (include/assay/shard.h) store a scheme's weights. GGUF mixes and stored files price their
 * own tensors and take only the ranges from the rules. */
static assay_shard_dtype scheme_dtype(const assay_plan_scheme *sc) {
    switch (sc->kind) {
    case ASSAY_PLAN_SCHEME_DENSE:
        return (assay_shard_dtype){ASSAY_SHARD_QUANT_NONE, 0, assay_type_get(sc->dense)->block_bytes};
    case ASSAY_PLAN_SCHEME_W8: /* llm-compressor's FP8_DYNAMIC / W8A8: an f32 scale per output channel */
        return (assay_shard_dtype){sc->dense == ASSAY_TYPE_I8 ? ASSAY_SHARD_QUANT_INT8_CHANNEL : ASSAY_SHARD_QUANT_FP8_CHANNEL,
                                   0, 2};
    case ASSAY_PLAN_SCHEME_INT4: return (assay_shard_dtype){ASSAY_SHARD_QUANT_INT4_GROUP, sc->group, 2};
    case ASSAY_PLAN_SCHEME_GGUF:
    case ASSAY_PLAN_SCHEME_STORED: break;
    }
    return (assay_shard_dtype){ASSAY_SHARD_QUANT_NONE, 0, 2}; /* embeddings, lm_head and norms stay bf16 */
}

/* One rank's shape of a tensor, from its role's ranges: ne[0] inputs, ne[1] outputs (a 1-D tensor: its elements in
 * ne[0]). s NULL, or a tensor the rules do not know: the whole tensor. */
static void rank_shape(const assay_shard *s, const plan_tensor *t, int64_t out[2]) {
    out[0] = t->ne[0];
    out[1] = t->ne[1];
    int role = s ? assay_shard_role_from_name(t->name) : -1;
    if (role < 0 || !s->w[role].present) return;
    const assay_shard_weight *w = &s->w[role];
    if (t->n_dims >= 2) {
        out[0] = w->in.end - w->in.begin;
        out[1] = w->rows;
    } else {
        out[0] = w->rows; /* biases and norms are [n][1] to the rules */
    }
}

/* A GGUF mix's bytes for the whole model (s NULL, no padding) or one rank. */
static double weigh_gguf(const assay_plan_request *r, const tensor_list *l, const assay_shard *s) {
    const assay_model_config *c = &r->model;
    assay_ggml_mix mix;
    assay_ggml_mix_init(&mix, r->scheme.ftype, (int)c->n_layer, (int)c->n_head, (int)c->n_head_kv);
    for (int i = 0; i < l->n; i++) assay_ggml_mix_count(&mix, l->t[i].name);
    double total = 0;
    for (int i = 0; i < l->n; i++) {
        const plan_tensor *t = &l->t[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], 1, 1}; /* the mix decides on the full tensor, as llama-quantize does */
        assay_type ty = assay_ggml_mix_tensor_type(&mix, t->name, t->n_dims, ne);
        const assay_type_info *ti = assay_type_get(ty);
        int64_t sh[2];
        rank_shape(s, t, sh);
        if (sh[0] % ti->block_elems == 0) total += (double)sh[1] * (double)assay_type_row_bytes(ty, sh[0]);
        else /* a row split off its block grid: the same bytes a weight, spread evenly */
            total += ceil((double)assay_type_row_bytes(ty, t->ne[0]) * (double)t->ne[1] * (double)(sh[0] * sh[1]) /
                          ((double)t->ne[0] * (double)t->ne[1]));
    }
    return total;
}

/* A GGUF file's own tensors: bytes as stored, a rank's share by the same rules (padding rows count). */
static void weigh_stored(const assay_plan_request *r, const assay_shard *s, double *total, double *per_gpu,
                         double *params) {
    *total = *per_gpu = *params = 0;
    for (int64_t i = 0; i < assay_gguf_tensor_count(r->gguf); i++) {
        const assay_gguf_tensor *t = assay_gguf_tensor_at(r->gguf, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 127 ? t->name.len : 127), t->name.ptr);
        double elems = 1, share = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) elems *= (double)t->ne[d];
        int role = assay_shard_role_from_name(name);
        if (role >= 0 && s->w[role].present) {
            const assay_shard_weight *w = &s->w[role];
            share = (double)w->rows * (double)(w->in.end - w->in.begin) / ((double)w->n_out * (double)w->n_in);
        }
        *total += (double)t->bytes;
        *per_gpu += ceil((double)t->bytes * share);
        *params += elems;
    }
}

void assay_plan_request_default(assay_plan_request *r) {
    memset(r, 0, sizeof *r);
    assay_plan_scheme_parse("bf16", &r->scheme);
    r->kv_dtype = ASSAY_KV_BF16;
    assay_plan_gpu_find("h100", &r->gpu);
    r->num_gpus = r->tensor_parallel = 1;
    r->max_model_len = 8192;
    r->gpu_memory_utilization = 0.9;
    r->reserve_bytes = 2.0 * 1073741824.0;
    r->decode_context = 1024;
}

assay_status assay_plan_compute(const assay_plan_request *r, assay_plan *out) {
    memset(out, 0, sizeof *out);
    const assay_model_config *c = &r->model;
    int64_t tp = r->tensor_parallel, ng = r->num_gpus;
    if (tp < 1 || ng < 1) return assay_fail(ASSAY_ERR_ARG, "--num-gpus and --tensor-parallel-size must be at least 1");
    if (ng % tp)
        return assay_fail(ASSAY_ERR_ARG, "--num-gpus %lld is not a multiple of --tensor-parallel-size %lld (the GPUs "
                          "beyond one tensor-parallel group run whole data-parallel replicas)", (long long)ng, (long long)tp);
    if (!(r->gpu_memory_utilization > 0 && r->gpu_memory_utilization <= 1))
        return assay_fail(ASSAY_ERR_ARG, "--gpu-memory-utilization must be in (0, 1], got %g", r->gpu_memory_utilization);
    if (!(r->gpu.memory_bytes > 0) || !(r->gpu.bandwidth > 0) || !(r->reserve_bytes >= 0))
        return assay_fail(ASSAY_ERR_ARG, "GPU memory and bandwidth must be positive and the reserve not negative");
    if (r->max_model_len < 1 || r->decode_context < 1)
        return assay_fail(ASSAY_ERR_ARG, "--max-model-len and --decode-context must be at least 1");
    if (c->n_ctx_train > 0 && r->max_model_len > c->n_ctx_train)
        return assay_fail(ASSAY_ERR_ARG, "--max-model-len %lld is longer than the model's context of %lld tokens",
                          (long long)r->max_model_len, (long long)c->n_ctx_train);
    if (r->scheme.kind == ASSAY_PLAN_SCHEME_STORED && !r->gguf)
        return assay_fail(ASSAY_ERR_ARG, "weight scheme 'stored' needs a GGUF file");

    /* what one rank holds, by the rules the tensor-parallel engine shards with (they also refuse a size that does
     * not split the model: heads, KV heads, FFN, vocabulary, int4 groups) */
    assay_shard_dtype dtype = scheme_dtype(&r->scheme);
    assay_shard_model sm;
    assay_shard_model_from_config(c, &dtype, &sm);
    assay_shard s;
    assay_shard_bytes rank, whole;
    assay_status st = assay_shard_plan(&sm, tp, 0, &s);
    if (!st) st = assay_shard_rank_bytes(&sm, tp, r->kv_dtype, r->kv_slot_scales, &rank);
    if (!st) st = assay_shard_rank_bytes(&sm, 1, r->kv_dtype, r->kv_slot_scales, &whole);
    if (st) return st;
    out->kv_heads_per_gpu = s.kv_heads.end - s.kv_heads.begin;
    out->kv_head_copies = s.kv_head_copies;
    out->vocab_per_gpu = s.vocab.end - s.vocab.begin;

    if (r->scheme.kind == ASSAY_PLAN_SCHEME_STORED) {
        weigh_stored(r, &s, &out->weight_bytes, &out->weight_bytes_per_gpu, &out->params);
    } else {
        tensor_list l = {0};
        model_tensors(c, &l);
        for (int i = 0; i < l.n; i++) out->params += (double)l.t[i].ne[0] * (double)l.t[i].ne[1];
        if (r->scheme.kind == ASSAY_PLAN_SCHEME_GGUF) {
            out->weight_bytes = weigh_gguf(r, &l, NULL);
            out->weight_bytes_per_gpu = weigh_gguf(r, &l, &s);
        } else {
            out->weight_bytes = (double)s.full_weight_bytes;
            out->weight_bytes_per_gpu = (double)rank.weights;
        }
        free(l.t);
    }
    out->bits_per_weight = out->params > 0 ? out->weight_bytes * 8.0 / out->params : 0;

    out->kv_bytes_per_token = (double)whole.kv_per_token;
    out->kv_bytes_per_token_per_gpu = (double)rank.kv_per_token;
    out->usable_bytes_per_gpu = r->gpu_memory_utilization * r->gpu.memory_bytes;
    out->kv_pool_bytes_per_gpu = out->usable_bytes_per_gpu - out->weight_bytes_per_gpu - r->reserve_bytes;
    out->tensor_parallel = tp;
    out->replicas = ng / tp;
    double block_bytes = out->kv_bytes_per_token_per_gpu * ASSAY_PLAN_BLOCK;
    out->kv_blocks = out->kv_pool_bytes_per_gpu > 0 ? (int64_t)floor(out->kv_pool_bytes_per_gpu / block_bytes) : 0;
    out->kv_tokens = out->kv_blocks * ASSAY_PLAN_BLOCK;
    int64_t seq_blocks = (r->max_model_len + ASSAY_PLAN_BLOCK - 1) / ASSAY_PLAN_BLOCK;
    out->concurrency = (double)out->kv_blocks / (double)seq_blocks;
    out->max_seqs = (out->kv_blocks / seq_blocks) * out->replicas;
    out->fits = out->kv_blocks >= seq_blocks;
    if (!out->fits) /* per GPU: what the weights overshoot by, plus one sequence of max_model_len */
        out->short_bytes = (double)seq_blocks * block_bytes - out->kv_pool_bytes_per_gpu;

    static const int64_t batches[2] = {1, 32};
    for (int i = 0; i < 2; i++) {
        assay_plan_decode *d = &out->decode[i];
        d->batch = batches[i];
        double kv = (double)d->batch * (double)r->decode_context * out->kv_bytes_per_token_per_gpu;
        d->bytes_per_step = out->weight_bytes_per_gpu + kv;
        d->tokens_per_s = (double)d->batch * r->gpu.bandwidth / d->bytes_per_step;
        d->kv_fits = d->batch * r->decode_context <= out->kv_tokens;
    }
    return ASSAY_OK;
}
