/* shard.c — tensor parallelism's sharding rules (include/assay/shard.h): one table of weight roles (shape, split,
 * whether quantization applies), one table of linear storage formats (bytes a weight, how the scales are laid
 * out), the checks a tensor-parallel size must pass, and one rank's ranges and bytes. */
#include "assay/shard.h"

#include <stdio.h>
#include <string.h>

/* ---- the roles --------------------------------------------------------------------------------------------- */
/* A role's dimensions, in the model's terms. */
typedef enum { DIM_ONE, DIM_EMBD, DIM_Q, DIM_KV, DIM_FF, DIM_VOCAB, DIM_HEAD } shard_dim;
/* When a model has the tensor at all. */
typedef enum { HAS_ALWAYS, HAS_QKV_BIAS, HAS_QK_NORM, HAS_POST_NORMS, HAS_UNTIED_OUTPUT } shard_presence;

static const struct {
    const char *name;        /* GGUF name, without "blk.N." for a layer's tensors */
    assay_shard_split split;
    int linear;              /* a matmul weight: stored as the dtype's quant says */
    int per_layer;
    shard_dim out, in;       /* [n_out][n_in] */
    shard_presence when;
} roles[ASSAY_SHARD_ROLE_COUNT] = {
    [ASSAY_SHARD_ROLE_TOKEN_EMBD] = {"token_embd.weight", ASSAY_SHARD_VOCAB, 0, 0, DIM_VOCAB, DIM_EMBD, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_ATTN_NORM] = {"attn_norm.weight", ASSAY_SHARD_REPLICATED, 0, 1, DIM_EMBD, DIM_ONE, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_ATTN_Q] = {"attn_q.weight", ASSAY_SHARD_COLUMN, 1, 1, DIM_Q, DIM_EMBD, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_ATTN_K] = {"attn_k.weight", ASSAY_SHARD_COLUMN_KV, 1, 1, DIM_KV, DIM_EMBD, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_ATTN_V] = {"attn_v.weight", ASSAY_SHARD_COLUMN_KV, 1, 1, DIM_KV, DIM_EMBD, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_ATTN_Q_BIAS] = {"attn_q.bias", ASSAY_SHARD_COLUMN, 0, 1, DIM_Q, DIM_ONE, HAS_QKV_BIAS},
    [ASSAY_SHARD_ROLE_ATTN_K_BIAS] = {"attn_k.bias", ASSAY_SHARD_COLUMN_KV, 0, 1, DIM_KV, DIM_ONE, HAS_QKV_BIAS},
    [ASSAY_SHARD_ROLE_ATTN_V_BIAS] = {"attn_v.bias", ASSAY_SHARD_COLUMN_KV, 0, 1, DIM_KV, DIM_ONE, HAS_QKV_BIAS},
    [ASSAY_SHARD_ROLE_ATTN_Q_NORM] = {"attn_q_norm.weight", ASSAY_SHARD_REPLICATED, 0, 1, DIM_HEAD, DIM_ONE, HAS_QK_NORM},
    [ASSAY_SHARD_ROLE_ATTN_K_NORM] = {"attn_k_norm.weight", ASSAY_SHARD_REPLICATED, 0, 1, DIM_HEAD, DIM_ONE, HAS_QK_NORM},
    [ASSAY_SHARD_ROLE_ATTN_OUTPUT] = {"attn_output.weight", ASSAY_SHARD_ROW, 1, 1, DIM_EMBD, DIM_Q, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_POST_ATTN_NORM] = {"post_attention_norm.weight", ASSAY_SHARD_REPLICATED, 0, 1, DIM_EMBD, DIM_ONE,
                                         HAS_POST_NORMS},
    [ASSAY_SHARD_ROLE_FFN_NORM] = {"ffn_norm.weight", ASSAY_SHARD_REPLICATED, 0, 1, DIM_EMBD, DIM_ONE, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_FFN_GATE] = {"ffn_gate.weight", ASSAY_SHARD_COLUMN, 1, 1, DIM_FF, DIM_EMBD, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_FFN_UP] = {"ffn_up.weight", ASSAY_SHARD_COLUMN, 1, 1, DIM_FF, DIM_EMBD, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_FFN_DOWN] = {"ffn_down.weight", ASSAY_SHARD_ROW, 1, 1, DIM_EMBD, DIM_FF, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_POST_FFW_NORM] = {"post_ffw_norm.weight", ASSAY_SHARD_REPLICATED, 0, 1, DIM_EMBD, DIM_ONE,
                                        HAS_POST_NORMS},
    [ASSAY_SHARD_ROLE_OUTPUT_NORM] = {"output_norm.weight", ASSAY_SHARD_REPLICATED, 0, 0, DIM_EMBD, DIM_ONE, HAS_ALWAYS},
    [ASSAY_SHARD_ROLE_OUTPUT] = {"output.weight", ASSAY_SHARD_VOCAB, 0, 0, DIM_VOCAB, DIM_EMBD, HAS_UNTIED_OUTPUT},
};

static int64_t dim_size(const assay_shard_model *m, shard_dim d) {
    switch (d) {
    case DIM_ONE: return 1;
    case DIM_EMBD: return m->n_embd;
    case DIM_Q: return m->n_head * m->head_dim;
    case DIM_KV: return m->n_head_kv * m->head_dim;
    case DIM_FF: return m->n_ff;
    case DIM_VOCAB: return m->n_vocab;
    case DIM_HEAD: return m->head_dim;
    }
    ASSAY_ASSERT(0);
    return 0;
}

static int role_present(const assay_shard_model *m, assay_shard_role r) {
    switch (roles[r].when) {
    case HAS_ALWAYS: return 1;
    case HAS_QKV_BIAS: return m->qkv_bias;
    case HAS_QK_NORM: return m->qk_norm;
    case HAS_POST_NORMS: return m->post_norms;
    case HAS_UNTIED_OUTPUT: return !m->tied_embeddings;
    }
    return 0;
}

/* ---- how linears are stored ------------------------------------------------------------------------------ */
typedef enum { SCALES_NONE, SCALES_PER_OUTPUT, SCALES_PER_TENSOR, SCALES_PER_GROUP } shard_scales;

static const struct {
    const char *name;
    size_t weight_bits;  /* 0: the dtype's elem_bytes */
    shard_scales scales;
    size_t scale_bytes;
    size_t zero_bits;    /* per group and output, packed */
    int64_t out_pack;    /* outputs packed into one int32 (a rank's output rows must be a multiple) */
} quants[ASSAY_SHARD_QUANT_COUNT] = {
    [ASSAY_SHARD_QUANT_NONE] = {"unquantized", 0, SCALES_NONE, 0, 0, 1},
    [ASSAY_SHARD_QUANT_FP8_CHANNEL] = {"fp8 (per channel)", 8, SCALES_PER_OUTPUT, 4, 0, 1},
    [ASSAY_SHARD_QUANT_FP8_TENSOR] = {"fp8 (per tensor)", 8, SCALES_PER_TENSOR, 4, 0, 1},
    [ASSAY_SHARD_QUANT_INT8_CHANNEL] = {"int8 (per channel)", 8, SCALES_PER_OUTPUT, 4, 0, 1},
    /* AWQ-GEMM: qweight [in][out/8] int32, scales [in/g][out] f16, qzeros [in/g][out/8] int32; GPTQ's is the same
     * size (its act-order g_idx, one int32 an input, is left out: vLLM's Marlin path drops it after reordering) */
    [ASSAY_SHARD_QUANT_INT4_GROUP] = {"int4", 4, SCALES_PER_GROUP, 2, 4, 8},
};

static void dtype_name(const assay_shard_dtype *d, char *buf, size_t cap) {
    if (d->quant == ASSAY_SHARD_QUANT_INT4_GROUP) snprintf(buf, cap, "int4-g%lld", (long long)d->group);
    else snprintf(buf, cap, "%s", quants[d->quant].name);
}

/* Bytes of `rows` x `cols` of a tensor whose scale ranges are given. */
static size_t tensor_bytes(const assay_shard_model *m, int linear, int64_t rows, int64_t cols,
                           const assay_shard_range *scale_out, const assay_shard_range *scale_in) {
    size_t n = (size_t)rows * (size_t)cols;
    if (!linear || m->dtype.quant == ASSAY_SHARD_QUANT_NONE) return n * m->dtype.elem_bytes;
    size_t bytes = n * quants[m->dtype.quant].weight_bits / 8;
    size_t s_out = (size_t)(scale_out->end - scale_out->begin), s_in = (size_t)(scale_in->end - scale_in->begin);
    bytes += s_out * s_in * quants[m->dtype.quant].scale_bytes;
    size_t zero_bits = quants[m->dtype.quant].zero_bits;
    if (zero_bits) { /* packed along the outputs into int32s, per group */
        size_t per_word = 32 / zero_bits;
        bytes += s_in * ((s_out + per_word - 1) / per_word) * 4;
    }
    return bytes;
}

/* ---- the checks ----------------------------------------------------------------------------------------------- */
int64_t assay_shard_kv_heads_per_rank(int64_t n_head_kv, int64_t tp) {
    ASSAY_ASSERT(n_head_kv > 0 && tp > 0);
    return n_head_kv >= tp ? n_head_kv / tp : 1;
}

static int64_t pad_vocab(int64_t n_vocab) {
    return (n_vocab + ASSAY_SHARD_VOCAB_PAD - 1) / ASSAY_SHARD_VOCAB_PAD * ASSAY_SHARD_VOCAB_PAD;
}

/* A linear's input columns and output rows on one rank (the model has passed the head and FFN checks). */
static void linear_extent(const assay_shard_model *m, assay_shard_role r, int64_t tp, int64_t *in, int64_t *out) {
    int64_t n_out = dim_size(m, roles[r].out), n_in = dim_size(m, roles[r].in);
    *in = roles[r].split == ASSAY_SHARD_ROW ? n_in / tp : n_in;
    switch (roles[r].split) {
    case ASSAY_SHARD_COLUMN: *out = n_out / tp; break;
    case ASSAY_SHARD_COLUMN_KV: *out = assay_shard_kv_heads_per_rank(m->n_head_kv, tp) * m->head_dim; break;
    default: *out = n_out; break;
    }
}

/* 1 when tensor-parallel size tp splits the model; else 0 and, when `why`, the rule it breaks. */
static int split_ok(const assay_shard_model *m, int64_t tp, char *why, size_t cap) {
    char d[32];
    if (m->n_head % tp) {
        if (why)
            snprintf(why, cap, "tensor-parallel size %lld does not divide the model's %lld attention heads (each rank "
                     "computes whole query heads)", (long long)tp, (long long)m->n_head);
        return 0;
    }
    if (m->n_head_kv >= tp ? m->n_head_kv % tp : tp % m->n_head_kv) {
        if (why)
            snprintf(why, cap, "tensor-parallel size %lld and the model's %lld KV heads: one must divide the other "
                     "(each rank holds whole KV heads, or one KV head that TP / n_head_kv ranks share)", (long long)tp,
                     (long long)m->n_head_kv);
        return 0;
    }
    if (m->n_ff % tp) {
        if (why)
            snprintf(why, cap, "tensor-parallel size %lld does not divide the FFN width %lld (gate/up/down split it "
                     "evenly)", (long long)tp, (long long)m->n_ff);
        return 0;
    }
    int64_t vp = pad_vocab(m->n_vocab);
    if (vp % tp) {
        if (why)
            snprintf(why, cap, "the vocabulary of %lld tokens, padded to %lld (a multiple of %d, as vLLM pads it), does "
                     "not split evenly over tensor-parallel size %lld", (long long)m->n_vocab, (long long)vp,
                     ASSAY_SHARD_VOCAB_PAD, (long long)tp);
        return 0;
    }
    const assay_shard_dtype *dt = &m->dtype;
    if (quants[dt->quant].scales == SCALES_PER_GROUP || quants[dt->quant].out_pack > 1) { /* the packed formats */
        for (int r = 0; r < ASSAY_SHARD_ROLE_COUNT; r++) {
            if (!roles[r].linear || !role_present(m, (assay_shard_role)r)) continue;
            int64_t in, out;
            linear_extent(m, (assay_shard_role)r, tp, &in, &out);
            if (quants[dt->quant].scales == SCALES_PER_GROUP && in % dt->group) {
                if (why) {
                    dtype_name(dt, d, sizeof d);
                    snprintf(why, cap, "%s: %s has %lld inputs per GPU at tensor-parallel size %lld, not a multiple of "
                             "the group size %lld: a rank's shard would cut a group in two (vLLM refuses this split: "
                             "\"The input size is not aligned with the quantized weight shape\")", d, roles[r].name,
                             (long long)in, (long long)tp, (long long)dt->group);
                }
                return 0;
            }
            if (out % quants[dt->quant].out_pack) {
                if (why) {
                    dtype_name(dt, d, sizeof d);
                    snprintf(why, cap, "%s: %s has %lld outputs per GPU at tensor-parallel size %lld, not a multiple of "
                             "the %lld packed into an int32 (vLLM refuses this split: \"The output size is not aligned "
                             "with the quantized weight shape\")", d, roles[r].name, (long long)out, (long long)tp,
                             (long long)quants[dt->quant].out_pack);
                }
                return 0;
            }
        }
    }
    return 1;
}

assay_status assay_shard_check(const assay_shard_model *m, int64_t tp) {
    if (m->n_layer <= 0 || m->n_embd <= 0 || m->n_ff <= 0 || m->n_head <= 0 || m->n_head_kv <= 0 || m->head_dim <= 0 ||
        m->n_vocab <= 0)
        return assay_fail(ASSAY_ERR_ARG, "the model's layers, hidden size, FFN width, heads, KV heads, head_dim and "
                                         "vocabulary must all be known and positive");
    if (m->n_head % m->n_head_kv)
        return assay_fail(ASSAY_ERR_ARG, "the model's %lld attention heads are not a multiple of its %lld KV heads",
                          (long long)m->n_head, (long long)m->n_head_kv);
    if ((int)m->dtype.quant < 0 || m->dtype.quant >= ASSAY_SHARD_QUANT_COUNT || m->dtype.elem_bytes == 0 ||
        (m->dtype.quant == ASSAY_SHARD_QUANT_INT4_GROUP && m->dtype.group <= 0))
        return assay_fail(ASSAY_ERR_ARG, "the weights' storage is not described (quantization %d, group %lld, %zu bytes "
                          "an element)", (int)m->dtype.quant, (long long)m->dtype.group, m->dtype.elem_bytes);
    if (tp < 1) return assay_fail(ASSAY_ERR_ARG, "the tensor-parallel size must be at least 1, got %lld", (long long)tp);
    char why[512];
    if (split_ok(m, tp, why, sizeof why)) return ASSAY_OK;
    /* the sizes that would work, so the message says what to do */
    char sizes[256] = "";
    size_t n = 0;
    for (int64_t t = 1; t <= m->n_head && n + 24 < sizeof sizes; t++)
        if (split_ok(m, t, NULL, 0)) n += (size_t)snprintf(sizes + n, sizeof sizes - n, "%s%lld", n ? ", " : "", (long long)t);
    if (!n) return assay_fail(ASSAY_ERR_ARG, "%s; no tensor-parallel size splits this model", why);
    return assay_fail(ASSAY_ERR_ARG, "%s; sizes that split this model: %s", why, sizes);
}

/* ---- one rank ---------------------------------------------------------------------------------------------------- */
static assay_shard_range even_part(int64_t n, int64_t tp, int64_t rank) {
    assay_shard_range r = {rank * (n / tp), (rank + 1) * (n / tp)};
    return r;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

assay_status assay_shard_plan(const assay_shard_model *m, int64_t tp, int64_t rank, assay_shard *out) {
    memset(out, 0, sizeof *out);
    assay_status st = assay_shard_check(m, tp);
    if (st) return st;
    if (rank < 0 || rank >= tp)
        return assay_fail(ASSAY_ERR_ARG, "rank %lld is outside a tensor-parallel group of %lld", (long long)rank, (long long)tp);
    out->tp = tp;
    out->rank = rank;
    out->q_heads = even_part(m->n_head, tp, rank);
    int64_t kv = assay_shard_kv_heads_per_rank(m->n_head_kv, tp);
    out->kv_head_copies = m->n_head_kv >= tp ? 1 : tp / m->n_head_kv;
    /* replicated: rank r's query heads all read KV head r / copies (vLLM's shard_rank = tp_rank // replicas) */
    int64_t first_kv = rank / out->kv_head_copies * kv;
    out->kv_heads = (assay_shard_range){first_kv, first_kv + kv};
    out->vocab_padded = pad_vocab(m->n_vocab);
    out->vocab = even_part(out->vocab_padded, tp, rank);

    int64_t layers = m->n_layer;
    for (int r = 0; r < ASSAY_SHARD_ROLE_COUNT; r++) {
        assay_shard_weight *w = &out->w[r];
        if (!role_present(m, (assay_shard_role)r)) continue;
        w->present = 1;
        w->split = roles[r].split;
        w->linear = roles[r].linear;
        w->n_out = dim_size(m, roles[r].out);
        w->n_in = dim_size(m, roles[r].in);
        w->out = (assay_shard_range){0, w->n_out};
        w->in = (assay_shard_range){0, w->n_in};
        switch (w->split) {
        case ASSAY_SHARD_REPLICATED: break;
        case ASSAY_SHARD_COLUMN: w->out = even_part(w->n_out, tp, rank); break;
        case ASSAY_SHARD_COLUMN_KV:
            w->out = (assay_shard_range){out->kv_heads.begin * m->head_dim, out->kv_heads.end * m->head_dim};
            break;
        case ASSAY_SHARD_ROW: w->in = even_part(w->n_in, tp, rank); break;
        case ASSAY_SHARD_VOCAB:
            /* the padded rows past the real vocabulary belong to no token */
            w->out = (assay_shard_range){min64(out->vocab.begin, w->n_out), min64(out->vocab.end, w->n_out)};
            break;
        }
        w->rows = w->split == ASSAY_SHARD_VOCAB ? out->vocab.end - out->vocab.begin : w->out.end - w->out.begin;

        /* the scales follow the weight: per output channel with its rows (whole for row-parallel, which keeps every
         * output), per group with its rows and its input columns in groups, per tensor one for every rank */
        shard_scales sc = w->linear ? quants[m->dtype.quant].scales : SCALES_NONE;
        assay_shard_range full_out = {0, w->n_out}, one = {0, 1}, none = {0, 0};
        assay_shard_range full_groups = none;
        switch (sc) {
        case SCALES_NONE: w->scale_out = w->scale_in = none; break;
        case SCALES_PER_TENSOR: w->scale_out = w->scale_in = one; full_out = one; full_groups = one; break;
        case SCALES_PER_OUTPUT: w->scale_out = w->out; w->scale_in = one; full_groups = one; break;
        case SCALES_PER_GROUP:
            w->scale_out = w->out;
            w->scale_in = (assay_shard_range){w->in.begin / m->dtype.group, w->in.end / m->dtype.group};
            full_groups = (assay_shard_range){0, w->n_in / m->dtype.group};
            break;
        }
        w->bytes = tensor_bytes(m, w->linear, w->rows, w->in.end - w->in.begin, &w->scale_out, &w->scale_in);
        w->full_bytes = tensor_bytes(m, w->linear, w->n_out, w->n_in, &full_out, &full_groups);
        size_t count = roles[r].per_layer ? (size_t)layers : 1;
        out->weight_bytes += count * w->bytes;
        out->full_weight_bytes += count * w->full_bytes;
    }
    return ASSAY_OK;
}

assay_status assay_shard_rank_bytes(const assay_shard_model *m, int64_t tp, assay_kv_dtype kv, int kv_slot_scales,
                                    assay_shard_bytes *out) {
    memset(out, 0, sizeof *out);
    assay_shard s;
    assay_status st = assay_shard_plan(m, tp, 0, &s);
    if (st) return st;
    out->weights = s.weight_bytes;
    out->kv_per_token = (size_t)m->n_layer * assay_kv_token_bytes(kv, s.kv_heads.end - s.kv_heads.begin, m->head_dim,
                                                                  kv_slot_scales);
    return ASSAY_OK;
}

void assay_shard_model_from_config(const assay_model_config *c, const assay_shard_dtype *dtype, assay_shard_model *out) {
    memset(out, 0, sizeof *out);
    out->n_layer = c->n_layer;
    out->n_embd = c->n_embd;
    out->n_ff = c->n_ff;
    out->n_head = c->n_head;
    out->n_head_kv = c->n_head_kv;
    out->head_dim = c->head_dim;
    out->n_vocab = c->n_vocab;
    out->tied_embeddings = c->tied_embeddings;
    out->qkv_bias = c->has_qkv_bias;
    out->qk_norm = c->has_qk_norm;
    out->post_norms = c->has_post_norms;
    if (dtype) out->dtype = *dtype;
    else out->dtype = (assay_shard_dtype){ASSAY_SHARD_QUANT_NONE, 0, 2};
}

/* ---- names ------------------------------------------------------------------------------------------------------- */
int assay_shard_role_from_name(const char *gguf_name) {
    const char *s = gguf_name;
    int layer = 0;
    if (!strncmp(s, "blk.", 4)) { /* "blk.<n>." */
        const char *p = s + 4;
        while (*p >= '0' && *p <= '9') p++;
        if (p == s + 4 || *p != '.') return -1;
        s = p + 1;
        layer = 1;
    }
    for (int r = 0; r < ASSAY_SHARD_ROLE_COUNT; r++)
        if (roles[r].per_layer == layer && !strcmp(s, roles[r].name)) return r;
    return -1;
}

const char *assay_shard_role_name(assay_shard_role role) {
    return (int)role >= 0 && role < ASSAY_SHARD_ROLE_COUNT ? roles[role].name : "unknown";
}

int assay_shard_role_per_layer(assay_shard_role role) {
    ASSAY_ASSERT((int)role >= 0 && role < ASSAY_SHARD_ROLE_COUNT);
    return roles[role].per_layer;
}

const char *assay_shard_split_name(assay_shard_split split) {
    static const char *const names[] = {
        [ASSAY_SHARD_REPLICATED] = "replicated",
        [ASSAY_SHARD_COLUMN] = "column-parallel",
        [ASSAY_SHARD_COLUMN_KV] = "column-parallel by KV head",
        [ASSAY_SHARD_ROW] = "row-parallel",
        [ASSAY_SHARD_VOCAB] = "vocab-parallel",
    };
    return (int)split >= 0 && split <= ASSAY_SHARD_VOCAB ? names[split] : "unknown";
}
