/* gguf_config.c — assay_model_config from GGUF metadata (<arch>.block_count, ...), the keys llama.cpp's
 * loader reads (see include/assay/hf_config.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "assay/hf_config.h"

/* A per-layer array (some models store head counts per layer): its first element; else the scalar. */
static int64_t get_int(const assay_gguf *g, const char *arch, const char *key, int64_t fallback) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    const assay_gguf_kv *kv = assay_gguf_find(g, k);
    if (kv && kv->type == ASSAY_GGUF_ARRAY) {
        if (kv->array_len == 0 || kv->array_type == ASSAY_GGUF_STRING || kv->array_type == ASSAY_GGUF_ARRAY ||
            kv->array_type == ASSAY_GGUF_FLOAT32 || kv->array_type == ASSAY_GGUF_FLOAT64)
            return fallback;
        return assay_gguf_array_int(kv, 0);
    }
    return assay_gguf_get_int(g, k, fallback);
}

static double get_float(const assay_gguf *g, const char *arch, const char *key, double fallback) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return assay_gguf_get_float(g, k, fallback);
}

assay_status assay_model_config_from_gguf(assay_model_config *c, const assay_gguf *g) {
    memset(c, 0, sizeof *c);
    const char *path = assay_gguf_path(g);
    assay_gguf_str s;
    if (!assay_gguf_get_string(g, "general.architecture", &s) || s.len == 0 || s.len >= sizeof c->arch ||
        memchr(s.ptr, 0, s.len))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: general.architecture is missing or not a short string", path);
    memcpy(c->arch, s.ptr, s.len);
    c->arch[s.len] = 0;
    const char *a = c->arch;
    c->n_layer = get_int(g, a, "block_count", -1);
    c->n_embd = get_int(g, a, "embedding_length", -1);
    c->n_head = get_int(g, a, "attention.head_count", -1);
    if (c->n_layer <= 0 || c->n_layer > 4096 || c->n_embd <= 0 || c->n_embd > (1 << 24) || c->n_head <= 0 ||
        c->n_head > 65536)
        return assay_fail(ASSAY_ERR_FORMAT,
                          "%s: %s.block_count, .embedding_length and .attention.head_count must be present and positive",
                          path, a);
    c->n_head_kv = get_int(g, a, "attention.head_count_kv", c->n_head);
    if (c->n_head_kv <= 0 || c->n_head % c->n_head_kv)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: head_count_kv %lld does not divide head_count %lld", path,
                          (long long)c->n_head_kv, (long long)c->n_head);
    c->head_dim = get_int(g, a, "attention.key_length", c->n_embd / c->n_head);
    if (c->head_dim <= 0 || c->head_dim > 65536)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: %s.attention.key_length is out of range", path, a);
    c->n_ff = get_int(g, a, "feed_forward_length", 0);
    c->n_ctx_train = get_int(g, a, "context_length", 0);
    c->n_vocab = get_int(g, a, "vocab_size", 0);
    if (c->n_vocab <= 0) {
        const assay_gguf_kv *t = assay_gguf_find(g, "tokenizer.ggml.tokens");
        if (t && t->type == ASSAY_GGUF_ARRAY) c->n_vocab = (int64_t)t->array_len;
    }
    c->norm_eps = get_float(g, a, "attention.layer_norm_rms_epsilon", 1e-5);
    c->rope_theta = get_float(g, a, "rope.freq_base", 10000.0);
    c->rope_factor = 1.0;
    char k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", a);
    if (assay_gguf_get_string(g, k, &s)) {
        if (s.len == 6 && memcmp(s.ptr, "linear", 6) == 0) c->rope_scaling = ASSAY_ROPE_SCALING_LINEAR;
        else if (s.len == 4 && memcmp(s.ptr, "yarn", 4) == 0) c->rope_scaling = ASSAY_ROPE_SCALING_YARN;
        c->rope_factor = get_float(g, a, "rope.scaling.factor", 1.0);
    } else if (get_float(g, a, "rope.scale_linear", 0) > 0) {
        c->rope_scaling = ASSAY_ROPE_SCALING_LINEAR;
        c->rope_factor = get_float(g, a, "rope.scale_linear", 1.0);
    }
    c->rope_orig_ctx = get_int(g, a, "rope.scaling.original_context_length", 0);
    if (!(c->rope_theta > 0 && isfinite(c->rope_theta)) || !(c->rope_factor > 0 && isfinite(c->rope_factor)) ||
        !(c->norm_eps >= 0 && c->norm_eps < 1))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: rope or norm parameters out of range", path);
    int gemma = strcmp(a, "gemma3") == 0;
    /* llama.cpp's rope type per architecture: llama rotates interleaved pairs, the others halves. */
    c->rope_style = (strcmp(a, "llama") == 0) ? ASSAY_ROPE_NORM : ASSAY_ROPE_NEOX;
    c->has_qkv_bias = strcmp(a, "qwen2") == 0;
    c->has_qk_norm = strcmp(a, "qwen3") == 0 || gemma;
    c->activation = gemma ? ASSAY_ACT_GELU_TANH : ASSAY_ACT_SILU;
    if (gemma) {
        c->sliding_window = get_int(g, a, "attention.sliding_window", 0);
        c->sliding_window_pattern = 6; /* fixed for gemma3 in llama.cpp; no GGUF key */
        c->rope_theta_local = get_float(g, a, "rope.freq_base_swa", 10000.0);
        c->final_logit_softcap = get_float(g, a, "final_logit_softcapping", 0);
        c->scale_embeddings = 1;
        c->has_post_norms = 1;
    }
    c->bos_id = assay_gguf_get_int(g, "tokenizer.ggml.bos_token_id", -1);
    c->eos_id = assay_gguf_get_int(g, "tokenizer.ggml.eos_token_id", -1);
    return ASSAY_OK;
}
