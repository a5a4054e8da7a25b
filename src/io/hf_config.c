/* hf_config.c — config.json -> assay_model_config, and HF <-> GGUF tensor names (see include/assay/hf_config.h).
 *
 * The name map follows llama.cpp's convert_hf_to_gguf.py / gguf-py tensor_mapping for the llama family, so a
 * model loaded from an HF directory presents the same tensors as the GGUF llama.cpp would have written.
 */
#include "assay/hf_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "assay/file.h"

/* Upper bounds that no real model reaches; they keep products like n_head * head_dim far from overflow. */
#define MAX_DIM (INT64_C(1) << 24)
#define MAX_LAYERS 4096

static void config_defaults(assay_model_config *c) {
    memset(c, 0, sizeof *c);
    c->rope_theta = 10000.0;
    c->norm_eps = 1e-6;
    c->rope_style = ASSAY_ROPE_NORM;
    c->rope_scaling = ASSAY_ROPE_SCALING_NONE;
    c->rope_factor = 1.0;
    c->activation = ASSAY_ACT_SILU;
    c->bos_id = c->eos_id = -1;
}

static int64_t first_int(const assay_json *v, int64_t fallback) {
    if (assay_json_is(v, ASSAY_JSON_ARRAY)) v = v->first;
    return assay_json_int(v, fallback);
}

/* Reads a rope description: either the newer rope_parameters object or the classic rope_scaling one. */
static assay_status read_rope(assay_model_config *c, const assay_json *r, const char *label) {
    if (!assay_json_is(r, ASSAY_JSON_OBJECT)) return ASSAY_OK;
    double theta = assay_json_number(assay_json_get(r, "rope_theta"), 0);
    if (theta > 0) c->rope_theta = theta;
    const char *type = assay_json_string(assay_json_get(r, "rope_type"), NULL);
    if (!type) type = assay_json_string(assay_json_get(r, "type"), "default");
    double factor = assay_json_number(assay_json_get(r, "factor"), 1.0);
    if (strcmp(type, "default") == 0) return ASSAY_OK;
    if (!(factor > 0 && factor < 1e6))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: rope scaling factor %g is out of range", label, factor);
    c->rope_factor = factor;
    c->rope_orig_ctx = assay_json_int(assay_json_get(r, "original_max_position_embeddings"), 0);
    if (strcmp(type, "linear") == 0) c->rope_scaling = ASSAY_ROPE_SCALING_LINEAR;
    else if (strcmp(type, "yarn") == 0) c->rope_scaling = ASSAY_ROPE_SCALING_YARN;
    else if (strcmp(type, "llama3") == 0) {
        c->rope_scaling = ASSAY_ROPE_SCALING_LLAMA3;
        c->rope_low_freq_factor = assay_json_number(assay_json_get(r, "low_freq_factor"), 1.0);
        c->rope_high_freq_factor = assay_json_number(assay_json_get(r, "high_freq_factor"), 4.0);
        if (c->rope_orig_ctx <= 0 || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
            !(c->rope_low_freq_factor > 0))
            return assay_fail(ASSAY_ERR_FORMAT,
                              "%s: llama3 rope scaling needs original_max_position_embeddings > 0 and "
                              "high_freq_factor > low_freq_factor > 0",
                              label);
    } else
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: rope type '%s' is not supported (default, linear, llama3, yarn)",
                          label, type);
    return ASSAY_OK;
}

static assay_status need_int(const assay_json *cfg, const char *key, int64_t lo, int64_t hi, int64_t *out,
                             const char *label) {
    const assay_json *v = assay_json_get(cfg, key);
    if (!v) return assay_fail(ASSAY_ERR_FORMAT, "%s: missing \"%s\"", label, key);
    int64_t n = assay_json_int(v, INT64_MIN);
    if (n < lo || n > hi)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: \"%s\" must be an integer in [%lld, %lld]", label, key, (long long)lo,
                          (long long)hi);
    *out = n;
    return ASSAY_OK;
}

assay_status assay_model_config_from_hf_json(assay_model_config *c, const assay_json *root, const char *label) {
    config_defaults(c);
    if (!assay_json_is(root, ASSAY_JSON_OBJECT)) return assay_fail(ASSAY_ERR_FORMAT, "%s: not a JSON object", label);
    const assay_json *cfg = root;
    const char *mt = assay_json_string(assay_json_get(root, "model_type"), NULL);
    /* Multimodal gemma3 keeps the language model's fields in text_config. */
    if (assay_json_is(assay_json_get(root, "text_config"), ASSAY_JSON_OBJECT) && mt && strcmp(mt, "gemma3") == 0) {
        cfg = assay_json_get(root, "text_config");
        mt = "gemma3_text";
    }
    if (!mt) {
        const char *cls = assay_json_string(assay_json_at(assay_json_get(root, "architectures"), 0), "");
        if (strcmp(cls, "LlamaForCausalLM") == 0) mt = "llama";
        else if (strcmp(cls, "MistralForCausalLM") == 0) mt = "mistral";
        else if (strcmp(cls, "Qwen2ForCausalLM") == 0) mt = "qwen2";
        else if (strcmp(cls, "Qwen3ForCausalLM") == 0) mt = "qwen3";
        else if (strcmp(cls, "Gemma3ForCausalLM") == 0) mt = "gemma3_text";
        else return assay_fail(ASSAY_ERR_FORMAT, "%s: no model_type and no known architectures entry", label);
    }
    if (strcmp(mt, "llama") == 0 || strcmp(mt, "mistral") == 0 || strcmp(mt, "qwen2") == 0 || strcmp(mt, "qwen3") == 0)
        snprintf(c->arch, sizeof c->arch, "%s", mt);
    else if (strcmp(mt, "gemma3_text") == 0 || strcmp(mt, "gemma3") == 0)
        snprintf(c->arch, sizeof c->arch, "gemma3");
    else
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: model_type '%s' is not supported (llama, mistral, qwen2, qwen3, gemma3)", label, mt);
    int gemma = strcmp(c->arch, "gemma3") == 0;
    int qwen = strncmp(c->arch, "qwen", 4) == 0;

    assay_status rc;
    if ((rc = need_int(cfg, "vocab_size", 1, INT64_C(1) << 31, &c->n_vocab, label)) ||
        (rc = need_int(cfg, "hidden_size", 1, MAX_DIM, &c->n_embd, label)) ||
        (rc = need_int(cfg, "num_hidden_layers", 1, MAX_LAYERS, &c->n_layer, label)) ||
        (rc = need_int(cfg, "num_attention_heads", 1, 65536, &c->n_head, label)) ||
        (rc = need_int(cfg, "intermediate_size", 1, MAX_DIM, &c->n_ff, label)))
        return rc;
    c->n_head_kv = c->n_head;
    if (assay_json_get(cfg, "num_key_value_heads") &&
        (rc = need_int(cfg, "num_key_value_heads", 1, c->n_head, &c->n_head_kv, label)))
        return rc;
    if (c->n_head % c->n_head_kv)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                          label, (long long)c->n_head, (long long)c->n_head_kv);
    /* head_dim may be absent or null: then hidden_size / heads, as transformers does. */
    const assay_json *hd = assay_json_get(cfg, "head_dim");
    if (hd && !assay_json_is(hd, ASSAY_JSON_NULL)) {
        if ((rc = need_int(cfg, "head_dim", 2, 65536, &c->head_dim, label))) return rc;
    } else {
        if (c->n_embd % c->n_head)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: hidden_size is not a multiple of num_attention_heads and no head_dim",
                              label);
        c->head_dim = c->n_embd / c->n_head;
    }
    if (c->head_dim % 2)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: head_dim %lld is odd (RoPE rotates pairs)", label, (long long)c->head_dim);
    c->n_ctx_train = assay_json_int(assay_json_get(cfg, "max_position_embeddings"), 0);
    if (c->n_ctx_train < 0 || c->n_ctx_train > (INT64_C(1) << 32))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: max_position_embeddings is out of range", label);
    c->norm_eps = assay_json_number(assay_json_get(cfg, "rms_norm_eps"), 1e-6);
    if (!(c->norm_eps >= 0 && c->norm_eps < 1))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: rms_norm_eps %g is out of range", label, c->norm_eps);

    /* RoPE: the newer rope_parameters (possibly split by attention type), else rope_theta + rope_scaling. */
    double theta = assay_json_number(assay_json_get(cfg, "rope_theta"), 0);
    if (theta > 0) c->rope_theta = theta;
    if (gemma) c->rope_theta_local = assay_json_number(assay_json_get(cfg, "rope_local_base_freq"), 10000.0);
    const assay_json *rp = assay_json_get(cfg, "rope_parameters");
    if (assay_json_is(rp, ASSAY_JSON_OBJECT)) {
        const assay_json *full = assay_json_get(rp, "full_attention");
        if ((rc = read_rope(c, full ? full : rp, label))) return rc;
        const assay_json *swa = assay_json_get(rp, "sliding_attention");
        double local = assay_json_number(assay_json_get(swa, "rope_theta"), 0);
        if (local > 0) c->rope_theta_local = local;
    } else if ((rc = read_rope(c, assay_json_get(cfg, "rope_scaling"), label)))
        return rc;
    if (!(c->rope_theta > 0 && isfinite(c->rope_theta)))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: rope_theta must be positive", label);

    c->tied_embeddings = assay_json_bool(assay_json_get(cfg, "tie_word_embeddings"), gemma ? 1 : 0);
    c->has_qkv_bias = strcmp(c->arch, "qwen2") == 0 || assay_json_bool(assay_json_get(cfg, "attention_bias"), 0);
    c->has_qk_norm = strcmp(c->arch, "qwen3") == 0 || gemma;
    c->rope_style = (qwen || gemma) ? ASSAY_ROPE_NEOX : ASSAY_ROPE_NORM;
    const char *act = assay_json_string(assay_json_get(cfg, "hidden_activation"), NULL);
    if (!act) act = assay_json_string(assay_json_get(cfg, "hidden_act"), gemma ? "gelu_pytorch_tanh" : "silu");
    if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0) c->activation = ASSAY_ACT_SILU;
    else if (strcmp(act, "gelu_pytorch_tanh") == 0 || strcmp(act, "gelu_tanh") == 0) c->activation = ASSAY_ACT_GELU_TANH;
    else return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: activation '%s' is not supported", label, act);

    if (gemma) {
        c->sliding_window = assay_json_int(assay_json_get(cfg, "sliding_window"), 0);
        c->sliding_window_pattern = assay_json_int(assay_json_get(cfg, "sliding_window_pattern"), 0);
        const assay_json *lt = assay_json_get(cfg, "layer_types");
        if (c->sliding_window_pattern <= 0 && assay_json_is(lt, ASSAY_JSON_ARRAY)) {
            /* layer_types lists "sliding_attention"/"full_attention": the pattern is the first full layer + 1. */
            int64_t i = 0;
            for (const assay_json *e = lt->first; e; e = e->next, i++)
                if (strcmp(assay_json_string(e, ""), "full_attention") == 0) {
                    c->sliding_window_pattern = i + 1;
                    break;
                }
        }
        if (c->sliding_window_pattern <= 0) c->sliding_window_pattern = 6;
        double q = assay_json_number(assay_json_get(cfg, "query_pre_attn_scalar"), 0);
        if (q > 0) c->attn_scale = 1.0 / sqrt(q);
        c->final_logit_softcap = assay_json_number(assay_json_get(cfg, "final_logit_softcapping"), 0);
        c->scale_embeddings = 1;
        c->has_post_norms = 1;
        if (c->sliding_window < 0) return assay_fail(ASSAY_ERR_FORMAT, "%s: sliding_window is negative", label);
    }
    c->bos_id = first_int(assay_json_get(cfg, "bos_token_id"), first_int(assay_json_get(root, "bos_token_id"), -1));
    c->eos_id = first_int(assay_json_get(cfg, "eos_token_id"), first_int(assay_json_get(root, "eos_token_id"), -1));
    return ASSAY_OK;
}

assay_status assay_model_config_from_hf_file(assay_model_config *c, const char *path) {
    assay_json_doc *doc;
    assay_status rc = assay_json_parse_file(path, &doc);
    if (rc != ASSAY_OK) return rc;
    rc = assay_model_config_from_hf_json(c, assay_json_root(doc), path);
    assay_json_doc_free(doc);
    return rc;
}

const char *assay_model_config_gguf_arch(const assay_model_config *c) {
    return strcmp(c->arch, "mistral") == 0 ? "llama" : c->arch;
}

const char *assay_model_config_hf_class(const assay_model_config *c) {
    if (strcmp(c->arch, "mistral") == 0) return "MistralForCausalLM";
    if (strcmp(c->arch, "qwen2") == 0) return "Qwen2ForCausalLM";
    if (strcmp(c->arch, "qwen3") == 0) return "Qwen3ForCausalLM";
    if (strcmp(c->arch, "gemma3") == 0) return "Gemma3ForCausalLM";
    return "LlamaForCausalLM";
}

/* ---- tensor names -------------------------------------------------------------------------------------------- */

typedef struct name_pair {
    const char *hf;   /* suffix after "model.layers.N." (block tensors) or the full name */
    const char *gguf; /* suffix after "blk.N." or the full name */
} name_pair;

static const name_pair GLOBAL_NAMES[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

static const name_pair BLOCK_NAMES[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    /* KV-cache scales (compressed-tensors kv_cache_scheme; the first spelling is the one written back) and the
     * legacy spellings vLLM still maps onto them */
    {"self_attn.k_scale", "k_cache_scale"},
    {"self_attn.v_scale", "v_cache_scale"},
    {"self_attn.k_proj.output_scale", "k_cache_scale"},
    {"self_attn.v_proj.output_scale", "v_cache_scale"},
    {"self_attn.kv_scale", "kv_cache_scale"},
};

/* Gemma3 has four norms per block; HF's post_attention_layernorm is a post-norm there, not the FFN pre-norm. */
static const name_pair GEMMA_BLOCK_NAMES[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

static const char *map_block(const char *suffix, const char *arch, int to_gguf) {
    if (strcmp(arch, "gemma3") == 0)
        for (size_t i = 0; i < sizeof GEMMA_BLOCK_NAMES / sizeof GEMMA_BLOCK_NAMES[0]; i++)
            if (strcmp(suffix, to_gguf ? GEMMA_BLOCK_NAMES[i].hf : GEMMA_BLOCK_NAMES[i].gguf) == 0)
                return to_gguf ? GEMMA_BLOCK_NAMES[i].gguf : GEMMA_BLOCK_NAMES[i].hf;
    for (size_t i = 0; i < sizeof BLOCK_NAMES / sizeof BLOCK_NAMES[0]; i++)
        if (strcmp(suffix, to_gguf ? BLOCK_NAMES[i].hf : BLOCK_NAMES[i].gguf) == 0)
            return to_gguf ? BLOCK_NAMES[i].gguf : BLOCK_NAMES[i].hf;
    return NULL;
}

static int map_name(const char *name, const char *arch, int to_gguf, char *out, size_t out_size) {
    for (size_t i = 0; i < sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0]; i++)
        if (strcmp(name, to_gguf ? GLOBAL_NAMES[i].hf : GLOBAL_NAMES[i].gguf) == 0)
            return snprintf(out, out_size, "%s", to_gguf ? GLOBAL_NAMES[i].gguf : GLOBAL_NAMES[i].hf) < (int)out_size;
    const char *prefix = to_gguf ? "model.layers." : "blk.";
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0) return 0;
    const char *p = name + plen;
    long layer = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 6) layer = layer * 10 + (*p++ - '0'), digits++;
    if (digits == 0 || *p != '.' || (digits > 1 && name[plen] == '0')) return 0;
    const char *m = map_block(p + 1, arch, to_gguf);
    if (!m) return 0;
    int n = snprintf(out, out_size, "%s%ld.%s", to_gguf ? "blk." : "model.layers.", layer, m);
    return n > 0 && n < (int)out_size;
}

int assay_hf_to_gguf_name(const char *hf_name, const char *arch, char *out, size_t out_size) {
    return map_name(hf_name, arch, 1, out, out_size);
}

int assay_gguf_to_hf_name(const char *gguf_name, const char *arch, char *out, size_t out_size) {
    return map_name(gguf_name, arch, 0, out, out_size);
}
