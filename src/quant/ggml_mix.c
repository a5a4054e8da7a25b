/* ggml_mix.c — llama.cpp's quantization mixes: which GGUF type each tensor gets under q4_k_m, q3_k_m, q2_k ...
 *
 * Follows llama_tensor_get_type in llama.cpp's src/llama-quant.cpp for the dense llama-family cases (no MoE,
 * no Falcon-specific branches, no IQ types): output.weight to q6_K, attn_v / ffn_down upgraded on the layers
 * use_more_bits picks, the q2_K/q3_K rules, and the fallback to a 32-element type when a row is not a multiple
 * of 256 (the house model's ffn_down rows of 1408 become q5_0 under q4_k_m, as llama-quantize does).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "assay/ggml_quant.h"

static const struct {
    const char *name;
    assay_ggml_ftype ftype;
    assay_type base;
} kq_ftypes[] = {
    {"q8_0", ASSAY_GGML_FTYPE_Q8_0, ASSAY_TYPE_Q8_0},     {"q4_0", ASSAY_GGML_FTYPE_Q4_0, ASSAY_TYPE_Q4_0},
    {"q4_1", ASSAY_GGML_FTYPE_Q4_1, ASSAY_TYPE_Q4_1},     {"q5_0", ASSAY_GGML_FTYPE_Q5_0, ASSAY_TYPE_Q5_0},
    {"q5_1", ASSAY_GGML_FTYPE_Q5_1, ASSAY_TYPE_Q5_1},     {"q2_k", ASSAY_GGML_FTYPE_Q2_K, ASSAY_TYPE_Q2_K},
    {"q3_k_s", ASSAY_GGML_FTYPE_Q3_K_S, ASSAY_TYPE_Q3_K}, {"q3_k_m", ASSAY_GGML_FTYPE_Q3_K_M, ASSAY_TYPE_Q3_K},
    {"q3_k_l", ASSAY_GGML_FTYPE_Q3_K_L, ASSAY_TYPE_Q3_K}, {"q4_k_s", ASSAY_GGML_FTYPE_Q4_K_S, ASSAY_TYPE_Q4_K},
    {"q4_k_m", ASSAY_GGML_FTYPE_Q4_K_M, ASSAY_TYPE_Q4_K}, {"q5_k_s", ASSAY_GGML_FTYPE_Q5_K_S, ASSAY_TYPE_Q5_K},
    {"q5_k_m", ASSAY_GGML_FTYPE_Q5_K_M, ASSAY_TYPE_Q5_K}, {"q6_k", ASSAY_GGML_FTYPE_Q6_K, ASSAY_TYPE_Q6_K},
    /* llama-quantize's aliases */
    {"q3_k", ASSAY_GGML_FTYPE_Q3_K_M, ASSAY_TYPE_Q3_K},   {"q4_k", ASSAY_GGML_FTYPE_Q4_K_M, ASSAY_TYPE_Q4_K},
    {"q5_k", ASSAY_GGML_FTYPE_Q5_K_M, ASSAY_TYPE_Q5_K},
};
#define KQ_NFTYPES (sizeof kq_ftypes / sizeof kq_ftypes[0])

int assay_ggml_ftype_from_name(const char *name, assay_ggml_ftype *out) {
    for (size_t i = 0; i < KQ_NFTYPES; i++)
        if (!strcasecmp(name, kq_ftypes[i].name)) {
            *out = kq_ftypes[i].ftype;
            return 1;
        }
    return 0;
}

const char *assay_ggml_ftype_name(assay_ggml_ftype ftype) {
    for (size_t i = 0; i < KQ_NFTYPES; i++)
        if (kq_ftypes[i].ftype == ftype) return kq_ftypes[i].name;
    return "unknown";
}

assay_type assay_ggml_ftype_base_type(assay_ggml_ftype ftype) {
    for (size_t i = 0; i < KQ_NFTYPES; i++)
        if (kq_ftypes[i].ftype == ftype) return kq_ftypes[i].base;
    return ASSAY_TYPE_F32;
}

typedef enum {
    KQ_CAT_TOKEN_EMBD,
    KQ_CAT_ATTN_Q,
    KQ_CAT_ATTN_K,
    KQ_CAT_ATTN_V, /* attn_v, fused attn_qkv and attn_kv_b: llama.cpp treats all three as "attn_v-like" */
    KQ_CAT_ATTN_OUTPUT,
    KQ_CAT_FFN_UP,
    KQ_CAT_FFN_GATE,
    KQ_CAT_FFN_DOWN,
    KQ_CAT_OUTPUT,
    KQ_CAT_OTHER,
} kq_category;

static kq_category kq_categorize(const char *name) {
    if (!strcmp(name, "output.weight")) return KQ_CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return KQ_CAT_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight"))
        return KQ_CAT_ATTN_V;
    if (strstr(name, "attn_k.weight")) return KQ_CAT_ATTN_K;
    if (strstr(name, "attn_q.weight")) return KQ_CAT_ATTN_Q;
    if (strstr(name, "attn_output.weight")) return KQ_CAT_ATTN_OUTPUT;
    if (strstr(name, "ffn_up")) return KQ_CAT_FFN_UP;
    if (strstr(name, "ffn_gate")) return KQ_CAT_FFN_GATE;
    if (strstr(name, "ffn_down")) return KQ_CAT_FFN_DOWN;
    return KQ_CAT_OTHER;
}

void assay_ggml_mix_init(assay_ggml_mix *mix, assay_ggml_ftype ftype, int n_layer, int n_head, int n_head_kv) {
    memset(mix, 0, sizeof *mix);
    mix->ftype = ftype;
    mix->n_layer = n_layer;
    mix->n_gqa = n_head_kv > 0 ? n_head / n_head_kv : 1;
    mix->has_tied_embeddings = 1; /* until pass 1 sees output.weight */
}

void assay_ggml_mix_count(assay_ggml_mix *mix, const char *name) {
    kq_category c = kq_categorize(name);
    if (c == KQ_CAT_ATTN_V) mix->n_attention_wv++;
    if (c == KQ_CAT_OUTPUT) mix->has_tied_embeddings = 0;
}

static int kq_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

int assay_ggml_mix_allows(const char *name, int n_dims) {
    if (n_dims < 2) return 0;
    if (!kq_ends_with(name, "weight")) return 0;
    if (strstr(name, "_norm.weight")) return 0;
    if (strstr(name, "ffn_gate_inp.weight")) return 0;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return 0;
    return 1;
}

/* The first n/8 layers, the last n/8, and every third layer in between. */
static int kq_use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static assay_type kq_mix_rule(assay_ggml_mix *mix, kq_category cat, const char *name, const int64_t *ne,
                              assay_type t) {
    assay_ggml_ftype f = mix->ftype;
    int n = mix->n_layer;
    if (cat == KQ_CAT_OUTPUT || (mix->has_tied_embeddings && cat == KQ_CAT_TOKEN_EMBD)) {
        int64_t be = assay_ggml_quant_block_elems(t);
        if (be && ne[0] % be != 0) return ASSAY_TYPE_Q8_0;
        return t != ASSAY_TYPE_Q8_0 ? ASSAY_TYPE_Q6_K : t;
    }
    if (cat == KQ_CAT_TOKEN_EMBD) return t;
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    if (cat == KQ_CAT_ATTN_V) {
        /* llama.cpp counts attn_v tensors in file order; a GGUF lists them by layer, so with one per layer the
         * count is the layer number. Using the number keeps HF sources (listed in any order) on the same rule. */
        int i = layer >= 0 && mix->n_attention_wv == mix->n_layer ? layer : mix->i_attention_wv;
        if (f == ASSAY_GGML_FTYPE_Q2_K) t = mix->n_gqa >= 4 ? ASSAY_TYPE_Q4_K : ASSAY_TYPE_Q3_K;
        else if (f == ASSAY_GGML_FTYPE_Q3_K_M) t = i < 2 ? ASSAY_TYPE_Q5_K : ASSAY_TYPE_Q4_K;
        else if (f == ASSAY_GGML_FTYPE_Q3_K_L) t = ASSAY_TYPE_Q5_K;
        else if ((f == ASSAY_GGML_FTYPE_Q4_K_M || f == ASSAY_GGML_FTYPE_Q5_K_M) &&
                 kq_use_more_bits(i, mix->n_attention_wv))
            t = ASSAY_TYPE_Q6_K;
        else if (f == ASSAY_GGML_FTYPE_Q4_K_S && i < 4) t = ASSAY_TYPE_Q5_K;
        mix->i_attention_wv++;
        return t;
    }
    if (cat == KQ_CAT_FFN_DOWN) {
        /* dense models: llama.cpp's running count of ffn_down tensors, i.e. the layer number */
        int i = layer >= 0 ? layer : mix->i_ffn_down;
        if (f == ASSAY_GGML_FTYPE_Q2_K) t = ASSAY_TYPE_Q3_K;
        else if (f == ASSAY_GGML_FTYPE_Q3_K_M) t = i < n / 16 ? ASSAY_TYPE_Q5_K : ASSAY_TYPE_Q4_K;
        else if (f == ASSAY_GGML_FTYPE_Q3_K_L) t = ASSAY_TYPE_Q5_K;
        else if (f == ASSAY_GGML_FTYPE_Q4_K_M) {
            if (kq_use_more_bits(i, n)) t = ASSAY_TYPE_Q6_K;
        } else if (f == ASSAY_GGML_FTYPE_Q5_K_M && kq_use_more_bits(i, n)) t = ASSAY_TYPE_Q6_K;
        else if (f == ASSAY_GGML_FTYPE_Q4_K_S && i < n / 8) t = ASSAY_TYPE_Q5_K;
        else if ((f == ASSAY_GGML_FTYPE_Q4_0 || f == ASSAY_GGML_FTYPE_Q5_0) && mix->has_imatrix && i < n / 8)
            t = f == ASSAY_GGML_FTYPE_Q4_0 ? ASSAY_TYPE_Q4_1 : ASSAY_TYPE_Q5_1;
        mix->i_ffn_down++;
        return t;
    }
    if (cat == KQ_CAT_ATTN_OUTPUT) {
        if (f == ASSAY_GGML_FTYPE_Q2_K) t = ASSAY_TYPE_Q3_K;
        else if (f == ASSAY_GGML_FTYPE_Q3_K_M) t = ASSAY_TYPE_Q4_K;
        else if (f == ASSAY_GGML_FTYPE_Q3_K_L) t = ASSAY_TYPE_Q5_K;
        return t;
    }
    return t;
}

/* llama.cpp's tensor_type_fallback: a 256-block type on a row that is not a multiple of 256. */
static assay_type kq_fallback(assay_ggml_mix *mix, int64_t ncols, assay_type t) {
    int64_t be = assay_ggml_quant_block_elems(t);
    if (!be || ncols % be == 0) return t;
    mix->n_fallback++;
    assay_type r;
    switch (t) {
    case ASSAY_TYPE_Q2_K: case ASSAY_TYPE_Q3_K: r = ASSAY_TYPE_Q4_0; break;
    case ASSAY_TYPE_Q4_K: r = ASSAY_TYPE_Q5_0; break;
    case ASSAY_TYPE_Q5_K: r = ASSAY_TYPE_Q5_1; break;
    case ASSAY_TYPE_Q6_K: r = ASSAY_TYPE_Q8_0; break;
    default: r = ASSAY_TYPE_F16; break; /* a 32-element type on a row that is not a multiple of 32 */
    }
    if (r != ASSAY_TYPE_F16 && ncols % assay_ggml_quant_block_elems(r) != 0) r = ASSAY_TYPE_F16;
    return r;
}

assay_type assay_ggml_mix_tensor_type(assay_ggml_mix *mix, const char *name, int n_dims, const int64_t *ne) {
    if (!assay_ggml_mix_allows(name, n_dims)) return ASSAY_TYPE_F32;
    assay_type t = assay_ggml_ftype_base_type(mix->ftype);
    t = kq_mix_rule(mix, kq_categorize(name), name, ne, t);
    return kq_fallback(mix, ne[0], t);
}
