/* model_file.h — one view of a model on disk, whether a GGUF file or a Hugging Face safetensors directory:
 * hyper-parameters, tensors under canonical (llama.cpp GGUF) names, and where the tokenizer lives.
 *
 *   assay_model_file *mf;
 *   if (assay_model_file_open(&mf, "../shared/models/house") != ASSAY_OK) ...   // or "model.gguf"
 *   const assay_model_config *c = assay_model_file_config(mf);                   // c->n_layer, c->n_head, ...
 *   const assay_tensor *wq = assay_model_file_find(mf, "blk.0.attn_q.weight");
 *   assay_tensor_copy_rows(wq, dst);        // raw bytes, with the Q/K row permutation applied when needed
 *   assay_model_file_close(mf);
 *
 * Quantized HF checkpoints (config.json with a "quantization_config": compressed-tensors, GPTQ, AWQ) keep their
 * extra tensors under canonical names built from the module's: "model.layers.0.self_attn.q_proj.qweight" becomes
 * "blk.0.attn_q.qweight", "...q_proj.weight_scale" becomes "blk.0.attn_q.weight_scale", "lm_head.input_scale"
 * becomes "output.input_scale". A quantized linear may then have no ".weight" at all (GPTQ/AWQ); turning those
 * tensors into weights is the model layer's job (model.h, "Quantized checkpoints").
 *
 * Tensor data stays in the mmapped files. HF q_proj/k_proj weights of the llama architecture are stored
 * un-permuted; `t->permute_heads` says so, and assay_tensor_copy_rows applies llama.cpp's permutation
 * (rows of each head reordered from [half0, half1] to interleaved pairs) so both sources feed one forward pass.
 */
#ifndef ASSAY_MODEL_FILE_H
#define ASSAY_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "assay/gguf.h"
#include "assay/json.h"
#include "assay/status.h"
#include "assay/weight_type.h"

typedef enum assay_model_format { ASSAY_MODEL_FORMAT_GGUF, ASSAY_MODEL_FORMAT_HF } assay_model_format;

typedef enum assay_rope_style {
    ASSAY_ROPE_NORM, /* rotate interleaved pairs (x0,x1),(x2,x3)... : llama in GGUF layout */
    ASSAY_ROPE_NEOX, /* rotate halves (x_i, x_{i+d/2}) : qwen2, qwen3, gemma */
} assay_rope_style;

typedef enum assay_rope_scaling {
    ASSAY_ROPE_SCALING_NONE,
    ASSAY_ROPE_SCALING_LINEAR,
    ASSAY_ROPE_SCALING_LLAMA3,
    ASSAY_ROPE_SCALING_YARN,
} assay_rope_scaling;

typedef enum assay_activation { ASSAY_ACT_SILU, ASSAY_ACT_GELU_TANH } assay_activation;

typedef struct assay_model_config {
    char arch[32];             /* "llama", "mistral", "qwen2", "qwen3", "gemma3" */
    int64_t n_vocab;
    int64_t n_embd;            /* hidden size */
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;          /* per-head size of q/k/v (may differ from n_embd / n_head) */
    int64_t n_ff;              /* MLP intermediate size */
    int64_t n_ctx_train;       /* max positions */
    double norm_eps;           /* RMSNorm epsilon */
    double rope_theta;
    assay_rope_style rope_style;
    assay_rope_scaling rope_scaling;
    double rope_factor;        /* linear / llama3 / yarn factor */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    int64_t rope_orig_ctx;     /* llama3/yarn original_max_position_embeddings */
    int tied_embeddings;       /* no output.weight: lm_head is token_embd */
    int has_qkv_bias;          /* qwen2 */
    int has_qk_norm;           /* qwen3, gemma3 */
    assay_activation activation;
    /* gemma3 */
    double rope_theta_local;   /* sliding-window layers' RoPE base */
    int64_t sliding_window;    /* 0: none */
    int64_t sliding_window_pattern; /* every Nth layer is global */
    double attn_scale;         /* query scaling; 0 means 1/sqrt(head_dim) */
    double final_logit_softcap;/* 0: none */
    int scale_embeddings;      /* multiply embeddings by sqrt(n_embd) */
    int has_post_norms;        /* gemma3 post-attention / post-ffw norms */
    /* special tokens from config/metadata (-1 if unknown) */
    int64_t bos_id, eos_id;
} assay_model_config;

typedef struct assay_tensor {
    const char *name;        /* canonical GGUF name */
    const char *source_name; /* as stored in the file */
    const char *source_file; /* the file holding it */
    assay_type type;
    int n_dims;
    int64_t ne[4];           /* ggml order: ne[0] innermost; unused dims are 1 */
    const void *data;        /* mmapped bytes as stored */
    size_t bytes;
    int64_t permute_heads;   /* >0: rows must be permuted for this many heads (HF llama q/k); 0: none */
} assay_tensor;

typedef struct assay_model_file assay_model_file;

/* `path` is a .gguf file or a directory with config.json + *.safetensors (single or sharded). */
assay_status assay_model_file_open(assay_model_file **out, const char *path);
/* An HF directory's config.json alone, read as assay_model_file_open reads it: the config, the quantization_config,
 * the dtype, the tokenizer and chat template when present, but no tensors (none is read, any safetensors are
 * ignored; find answers NULL). tied_embeddings is config.json's tie_word_embeddings. For dummy loads (model.h).
 * Errors: not a directory, no config.json, a config the HF reader refuses. */
assay_status assay_model_file_open_config(assay_model_file **out, const char *path);
void assay_model_file_close(assay_model_file *mf);

assay_model_format assay_model_file_format(const assay_model_file *mf);
const char *assay_model_file_path(const assay_model_file *mf);
const assay_model_config *assay_model_file_config(const assay_model_file *mf);
int64_t assay_model_file_tensor_count(const assay_model_file *mf);
const assay_tensor *assay_model_file_tensor(const assay_model_file *mf, int64_t i);
const assay_tensor *assay_model_file_find(const assay_model_file *mf, const char *canonical_name);
/* The GGUF handle (tokenizer.ggml.* metadata) or NULL for an HF directory. */
const assay_gguf *assay_model_file_gguf(const assay_model_file *mf);
/* For an HF directory: its tokenizer.json path (NULL if absent); for GGUF: NULL. */
const char *assay_model_file_tokenizer_json(const assay_model_file *mf);
/* HF: config.json's "quantization_config" object, NULL when absent (and always for GGUF). Valid until close. */
const assay_json *assay_model_file_quantization_config(const assay_model_file *mf);
/* HF: the weights' dtype config.json names (torch_dtype or dtype: F32, F16 or BF16); ASSAY_TYPE_COUNT when it names
 * none of those, and always for GGUF. */
assay_type assay_model_file_torch_dtype(const assay_model_file *mf);
/* 1 when opened by assay_model_file_open_config (no tensors). */
int assay_model_file_config_only(const assay_model_file *mf);
/* The chat template text (GGUF tokenizer.chat_template or HF tokenizer_config.json) or NULL. */
const char *assay_model_file_chat_template(const assay_model_file *mf);

/* Copies the tensor's raw bytes to dst (t->bytes), applying the head permutation when t->permute_heads > 0. */
void assay_tensor_copy_rows(const assay_tensor *t, void *dst);
int64_t assay_tensor_nelements(const assay_tensor *t);

#endif
