/* shard.h — tensor parallelism's sharding rules: which part of each weight, which attention heads and which slice of
 * the vocabulary one rank of a tensor-parallel group holds, and what that costs in bytes. Pure arithmetic on the
 * model's shapes: the multi-GPU engine slices weights with it and `assay plan` sizes deployments with it, so the
 * two cannot disagree.
 *
 *   assay_model_config c;  assay_model_config_from_hf_file(&c, "config.json");
 *   assay_shard_dtype d = {ASSAY_SHARD_QUANT_INT4_GROUP, 128, 2};     // AWQ/GPTQ linears, bf16 everything else
 *   assay_shard_model m;   assay_shard_model_from_config(&c, &d, &m);
 *   assay_shard s;
 *   if (assay_shard_plan(&m, 4, 1, &s) != ASSAY_OK) ... assay_last_error() names the rule and both numbers
 *   const assay_shard_weight *down = &s.w[ASSAY_SHARD_ROLE_FFN_DOWN];
 *   // rank 1 of 4 holds down_proj's input columns [down->in.begin, down->in.end), every output row, and
 *   // down->bytes bytes of it; its attention computes query heads s.q_heads with KV heads s.kv_heads
 *   assay_shard_bytes b;   assay_shard_rank_bytes(&m, 4, ASSAY_KV_BF16, 0, &b);   // b.weights, b.kv_per_token
 *
 * The rules are Megatron-LM's tensor parallelism as vLLM implements it (vllm/model_executor/layers/linear.py and
 * vocab_parallel_embedding.py); each weight role is one row of a table (src/parallel/shard.c):
 *   column-parallel  q, k, v, gate, up (and q/k/v biases): the output rows [n_out][n_in] are split; each rank's
 *                    output is its own slice, no communication
 *   row-parallel     attn_output, ffn_down: the input columns are split; each rank's output is a partial sum of the
 *                    whole output, and the all-reduce (a sum over ranks) completes it
 *   vocab-parallel   token_embd, output (lm_head): the vocabulary, padded to a multiple of 64, is split in equal
 *                    row ranges; the padded rows are allocated and never used (the embedding's all-reduce adds
 *                    zeros from the ranks that do not own a token; the lm_head's logits are gathered)
 *   replicated       norms (and q/k norms, post norms): every rank holds the whole tensor
 * Query heads split evenly: TP must divide n_head. KV heads split when n_head_kv >= TP (TP must divide them); with
 * fewer KV heads than ranks each rank holds the one KV head its query heads use, so every KV head is kept on
 * TP / n_head_kv ranks (n_head_kv must divide TP). Either way a rank runs ordinary GQA attention over its own
 * q_heads and kv_heads: its local query head j reads local KV head j / (query heads a rank / KV heads a rank).
 * The FFN width must divide by TP, and the padded vocabulary too (vLLM's divide() asserts it).
 *
 * Quantized linears carry scales that follow the weight:
 *   per output channel (fp8 / int8 W8A8): split with the rows of a column-parallel weight; a row-parallel weight
 *                    keeps every output row, so every rank holds the whole scale vector (replicated);
 *   per tensor (fp8): one scale, replicated;
 *   per group of inputs (int4 AWQ/GPTQ, groups of 32/64/128 along the input): split with the rows of a
 *                    column-parallel weight and with the input columns of a row-parallel one, which must therefore
 *                    fall on group boundaries: a rank's input columns must be a multiple of the group size (and its
 *                    output rows of the 8 nibbles an int32 packs), else vLLM refuses the model ("The input size is
 *                    not aligned with the quantized weight shape") and so does assay_shard_plan.
 *
 * Shapes are [n_out][n_in] (the PyTorch / Hugging Face order; GGUF's ne[0] is n_in, ne[1] is n_out); a 1-D tensor
 * (norm, bias) is [n][1]. Ranges are half-open [begin, end). Bytes are size_t, exact.
 */
#ifndef ASSAY_SHARD_H
#define ASSAY_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "assay/kv_type.h"
#include "assay/model_file.h"
#include "assay/status.h"

#define ASSAY_SHARD_VOCAB_PAD 64 /* vLLM's DEFAULT_VOCAB_PADDING_SIZE: the vocabulary is padded to a multiple of it */

/* ---- what a model's weights are ----------------------------------------------------------------------------- */
typedef enum assay_shard_role {
    ASSAY_SHARD_ROLE_TOKEN_EMBD,     /* [n_vocab][n_embd] */
    ASSAY_SHARD_ROLE_ATTN_NORM,      /* [n_embd] a layer */
    ASSAY_SHARD_ROLE_ATTN_Q,         /* [n_head x head_dim][n_embd] */
    ASSAY_SHARD_ROLE_ATTN_K,         /* [n_head_kv x head_dim][n_embd] */
    ASSAY_SHARD_ROLE_ATTN_V,         /* [n_head_kv x head_dim][n_embd] */
    ASSAY_SHARD_ROLE_ATTN_Q_BIAS,    /* [n_head x head_dim]      qwen2 */
    ASSAY_SHARD_ROLE_ATTN_K_BIAS,    /* [n_head_kv x head_dim]   qwen2 */
    ASSAY_SHARD_ROLE_ATTN_V_BIAS,    /* [n_head_kv x head_dim]   qwen2 */
    ASSAY_SHARD_ROLE_ATTN_Q_NORM,    /* [head_dim]               qwen3, gemma3 */
    ASSAY_SHARD_ROLE_ATTN_K_NORM,    /* [head_dim]               qwen3, gemma3 */
    ASSAY_SHARD_ROLE_ATTN_OUTPUT,    /* [n_embd][n_head x head_dim] */
    ASSAY_SHARD_ROLE_POST_ATTN_NORM, /* [n_embd]                 gemma3 */
    ASSAY_SHARD_ROLE_FFN_NORM,       /* [n_embd] */
    ASSAY_SHARD_ROLE_FFN_GATE,       /* [n_ff][n_embd] */
    ASSAY_SHARD_ROLE_FFN_UP,         /* [n_ff][n_embd] */
    ASSAY_SHARD_ROLE_FFN_DOWN,       /* [n_embd][n_ff] */
    ASSAY_SHARD_ROLE_POST_FFW_NORM,  /* [n_embd]                 gemma3 */
    ASSAY_SHARD_ROLE_OUTPUT_NORM,    /* [n_embd], once */
    ASSAY_SHARD_ROLE_OUTPUT,         /* [n_vocab][n_embd], once, absent when tied to the embedding */
    ASSAY_SHARD_ROLE_COUNT
} assay_shard_role;

typedef enum assay_shard_split {
    ASSAY_SHARD_REPLICATED, /* every rank holds all of it */
    ASSAY_SHARD_COLUMN,     /* output rows split evenly (by query head for q) */
    ASSAY_SHARD_COLUMN_KV,  /* output rows split by KV head, or one KV head kept on several ranks */
    ASSAY_SHARD_ROW,        /* input columns split evenly; the output is a partial sum to all-reduce */
    ASSAY_SHARD_VOCAB,      /* rows of the padded vocabulary split evenly */
} assay_shard_split;

/* How the linear layers are stored (the other tensors: embeddings, lm_head, norms, biases stay unquantized). */
typedef enum assay_shard_quant {
    ASSAY_SHARD_QUANT_NONE,        /* elem_bytes a weight, like everything else */
    ASSAY_SHARD_QUANT_FP8_CHANNEL, /* 1 byte a weight + an f32 scale per output channel (llm-compressor FP8_DYNAMIC) */
    ASSAY_SHARD_QUANT_FP8_TENSOR,  /* 1 byte a weight + one f32 scale per tensor (vLLM's --quantization fp8) */
    ASSAY_SHARD_QUANT_INT8_CHANNEL,/* 1 byte a weight + an f32 scale per output channel (W8A8 SmoothQuant) */
    ASSAY_SHARD_QUANT_INT4_GROUP,  /* AWQ/GPTQ: 4 bits a weight; per group of inputs and output an f16 scale and a
                                    * 4-bit zero (zeros packed 8 to an int32) */
    ASSAY_SHARD_QUANT_COUNT
} assay_shard_quant;

typedef struct assay_shard_dtype {
    assay_shard_quant quant; /* the linears */
    int64_t group;           /* INT4_GROUP: inputs per group (32, 64, 128) */
    size_t elem_bytes;       /* every unquantized tensor: 2 (bf16, f16) or 4 (f32) */
} assay_shard_dtype;

typedef struct assay_shard_model {
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    int tied_embeddings;     /* the lm_head is the embedding: no output tensor */
    int qkv_bias;            /* q/k/v biases (qwen2) */
    int qk_norm;             /* q/k RMSNorm over head_dim (qwen3, gemma3) */
    int post_norms;          /* norms after attention and the FFN (gemma3) */
    assay_shard_dtype dtype;
} assay_shard_model;

/* The shapes and flags of a config, with the weights stored as `dtype` (NULL: bf16 throughout). */
void assay_shard_model_from_config(const assay_model_config *c, const assay_shard_dtype *dtype, assay_shard_model *out);

/* ---- one rank's shard ---------------------------------------------------------------------------------------- */
typedef struct assay_shard_range {
    int64_t begin, end; /* [begin, end) */
} assay_shard_range;

typedef struct assay_shard_weight {
    int present;                /* the model has this tensor (biases, q/k norms, post norms, an untied lm_head) */
    assay_shard_split split;
    int linear;                 /* a matmul weight, stored as dtype.quant says */
    int64_t n_out, n_in;        /* the whole tensor, [n_out][n_in]; vocab-parallel: n_out = n_vocab (unpadded) */
    assay_shard_range out;      /* the rank's output rows (vocab-parallel: the real tokens among its rows) */
    assay_shard_range in;       /* the rank's input columns */
    int64_t rows;               /* rows the rank allocates: out's length, or vocab-parallel the padded partition */
    /* the rank's part of the weight's scales, laid out [n_out][n_in / group] (per group), [n_out] (per channel: in =
     * [0,1)) or [1] (per tensor); both empty for an unquantized tensor */
    assay_shard_range scale_out, scale_in;
    size_t bytes;               /* the rank's bytes of one such tensor (one layer's) */
    size_t full_bytes;          /* the whole tensor, unsharded and unpadded */
} assay_shard_weight;

typedef struct assay_shard {
    int64_t tp, rank;
    assay_shard_range q_heads;  /* the query heads the rank computes */
    assay_shard_range kv_heads; /* the KV heads it holds and caches */
    int64_t kv_head_copies;     /* ranks holding each KV head: 1, or TP / n_head_kv when replicated */
    int64_t vocab_padded;       /* n_vocab rounded up to ASSAY_SHARD_VOCAB_PAD */
    assay_shard_range vocab;    /* the rank's rows of the padded vocabulary */
    assay_shard_weight w[ASSAY_SHARD_ROLE_COUNT];
    size_t weight_bytes;        /* the rank's weights over all layers */
    size_t full_weight_bytes;   /* the whole model once, unsharded and unpadded */
} assay_shard;

/* Checks that tensor-parallel size `tp` can split the model (heads, KV heads, FFN, padded vocabulary, the int4
 * groups) and fills rank `rank`'s shard. Errors (ASSAY_ERR_ARG) name the rule and both numbers. */
assay_status assay_shard_plan(const assay_shard_model *m, int64_t tp, int64_t rank, assay_shard *out);

/* The checks alone. */
assay_status assay_shard_check(const assay_shard_model *m, int64_t tp);

/* KV heads one rank holds at a tensor-parallel size the model accepts: n_head_kv / tp, or 1 when replicated. */
int64_t assay_shard_kv_heads_per_rank(int64_t n_head_kv, int64_t tp);

/* One rank's memory (every rank holds the same amount): its weights, and its KV cache a token over all layers
 * (KV heads a rank x head_dim x K,V x layers x the dtype's bytes, plus the engine's per-slot scales when
 * kv_slot_scales; assay_kv_token_bytes). tp = 1: the whole model, the vocabulary padded as a single GPU pads it. */
typedef struct assay_shard_bytes {
    size_t weights;
    size_t kv_per_token;
} assay_shard_bytes;
assay_status assay_shard_rank_bytes(const assay_shard_model *m, int64_t tp, assay_kv_dtype kv, int kv_slot_scales,
                                    assay_shard_bytes *out);

/* ---- names ----------------------------------------------------------------------------------------------------- */
/* The role of a GGUF tensor name ("blk.3.ffn_down.weight" -> FFN_DOWN, "output.weight" -> OUTPUT); -1 for a tensor
 * the rules do not know (which a caller keeps whole on every rank). */
int assay_shard_role_from_name(const char *gguf_name);
const char *assay_shard_role_name(assay_shard_role role);  /* "ffn_down.weight" */
const char *assay_shard_split_name(assay_shard_split split); /* "column-parallel" */
int assay_shard_role_per_layer(assay_shard_role role);      /* one a layer (else one a model) */

#endif
