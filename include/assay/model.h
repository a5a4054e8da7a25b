/* model.h — a loaded Llama-family model and sessions that run it (prefill and decode, several sequences).
 *
 *   assay_model_options mo; assay_model_options_default(&mo); mo.n_threads = 2;
 *   assay_model *m;
 *   if (assay_model_load(&m, "model.gguf", &mo) != ASSAY_OK) { fprintf(stderr, "%s\n", assay_last_error()); ... }
 *   assay_session_options so; assay_session_options_default(&so); so.n_ctx = 2048; so.kv_dtype = ASSAY_KV_F16;
 *   assay_session *s;
 *   assay_session_open(&s, m, &so);
 *   int32_t pos[3] = {0, 1, 2};
 *   assay_batch b = {.n_tokens = 3, .token = ids, .pos = pos};          // seq NULL: sequence 0; logits NULL: last token
 *   float *logits = malloc(n_vocab * sizeof(float));
 *   assay_session_forward(s, &b, logits);                              // one row of n_vocab per token that asked
 *   assay_session_seq_clear(s, 0);                                      // forget sequence 0's KV
 *   assay_session_close(s); assay_model_free(m);
 *
 * Architectures: llama (and mistral), qwen2 (q/k/v bias), qwen3 (q/k RMSNorm), gemma3 (GeGLU, post norms,
 * embedding scale, sliding-window layers with their own RoPE base, q/k norm, logit softcap). Weights are used as
 * stored (f32, f16, bf16, Q4_0 ... Q6_K) straight from the mmapped file; compute is float32.
 *
 * On-the-fly FP8 (options.quantization = "fp8", vLLM's `--quantization fp8` on a bf16/f16/f32 checkpoint),
 * emulated exactly in f32 on the CPU:
 *   - at load, every linear weight of the blocks (attn_q/k/v/output, ffn_gate/up/down; not the lm_head, not the
 *     embeddings, not the norms or biases) becomes E4M3 codes with ONE per-tensor scale = amax/448 (f32, as
 *     vLLM's scaled_fp8_quant(weight, scale=None)), and the engine keeps the exact values code*scale as f32;
 *   - at run time, the input of each of those layers is quantized to E4M3 with a dynamic PER-TOKEN scale
 *     (amax_row/448, clamped below by 1/(448*512)) and the matmul reads code*scale. That is what vLLM does on
 *     Hopper/Ada (Fp8LinearOp with use_per_token_if_dynamic = cutlass_fp8_supported()); vLLM's docs still say
 *     "per-tensor", which holds only for its torch._scaled_mm fallback.
 * Products and sums are f32 either way; the GPU's f32 accumulation order is not reproduced.
 * `--quantization fp8` on an already quantized checkpoint (GGUF blocks, the formats below) is refused, as in vLLM.
 *
 * Quantized checkpoints (HF directories whose config.json has a "quantization_config"), as `assay quantize` writes
 * them and vLLM / transformers load them, run natively. The loader is picked from quant_method (+ format) by the
 * table assay_ckpt_loaders[] in src/model/model_ckpt.c:
 *   compressed-tensors "float-quantized"  FP8 E4M3/E5M2 weights, weight_scale per tensor [1], per channel [out, 1] or
 *                                          per block (block_structure, e.g. 128x128); inputs: static per-tensor
 *                                          (input_scale), dynamic per token, or dynamic 1 x group_size (fp8-block);
 *   compressed-tensors "int-quantized"    INT8 weights with weight_scale per channel/tensor; inputs: dynamic
 *                                          per-token symmetric INT8 (w8a8-int8) or none;
 *   quant_method "fp8"                    the legacy FP8 layout (AutoFP8, DeepSeek/Qwen FP8; vLLM's Fp8Config):
 *                                          per-tensor weight_scale with activation_scheme static (input_scale) or
 *                                          dynamic (per token), or weight_block_size blocks with the multiplier
 *                                          named weight_scale_inv and dynamic 1 x block_n activation groups;
 *   quant_method "gptq"                   int4 qweight / qzeros / scales / g_idx (act-order), checkpoint_format
 *                                          "gptq" (stored zero = zero - 1, read back as nibble + 1 without wrapping,
 *                                          as transformers/AutoGPTQ/vLLM do) or "gptq_v2"; inputs not quantized;
 *   quant_method "awq"                    AWQ GEMM int4 (nibble order 0,2,4,6,1,3,5,7), zero points; inputs not
 *                                          quantized.
 *   compressed-tensors "pack-quantized"   int4 weight_packed [out, in/8] (signed code + 8), weight_scale [out, groups],
 *                                          weight_zero_point [out/8, groups] when asymmetric, weight_g_idx; strategy
 *                                          group or channel; weight-only (W4A16), inputs not quantized;
 *   compressed-tensors "nvfp4-pack-quantized" / "mxfp4-pack-quantized"   E2M1 weight_packed with FP8 scales per 16
 *                                          and a global scale (w = code * scale / global), or E8M0 scales per 32
 *                                          (quant_fp4.h); weight-only (A16) checkpoints, inputs not quantized;
 * What the engine does with them: the int4 formats (GPTQ, AWQ, pack-quantized) stay packed, 4 bits per weight plus
 * an fp16 scale and an integer zero per group, in assay's q4g rows (ASSAY_TYPE_Q4G32/64/128, 5.0 / 4.5 / 4.25 bits
 * per weight); the CPU kernels decode the nibbles in registers to the exact values scale * (q - zero) and multiply
 * with the f32 inputs in the same order as the f32 kernels, so results equal the dequantized weight's bit for bit.
 * Act-order (GPTQ desc_act, g_idx not monotone) is packed with the input columns sorted by group, and the forward
 * pass gathers each such linear's input in that order (as vLLM's Marlin kernels do; only the summation order
 * changes). A weight that cannot be packed (group not a multiple of 32, g_idx groups of unequal sizes, a scale that
 * is not an fp16 value) is dequantized to f32 and the load note says why; ASSAY_INT4_F32=1 in the environment
 * dequantizes every int4 weight to f32 (the earlier behaviour, for comparisons). The other formats' linears are
 * dequantized ONCE at load with the format code of src/quant (quant_fp8.h, quant_fp4.h) into exact f32 values
 * (code * scale); the forward pass then fake-quantizes each linear's input exactly as the GPU kernels quantize it
 * (the same per-linear mechanism as on-the-fly fp8) and multiplies in f32. llama Q/K rows are permuted like any HF
 * weight. Linears the checkpoint left in float (the lm_head, --ignore) run as stored. Load prints one note with the
 * layer count, the format, how the weights are held (packed type or f32), the activation treatment and the bytes
 * of matmul weights. The FP8 activation format follows the weights' (E5M2 schemes quantize inputs to E5M2;
 * compressed-tensors itself only says "float", i.e. E4M3).
 * Adding a format is one row in assay_ckpt_loaders[] and one function that turns a module's tensors into f32 or
 * packed weights and names its activation treatment (src/model/model_ckpt.h explains the contract). */
#ifndef ASSAY_MODEL_H
#define ASSAY_MODEL_H

#include <stdint.h>

#include "assay/backend.h"
#include "assay/model_file.h"
#include "assay/status.h"

typedef struct assay_model assay_model;
typedef struct assay_session assay_session;

typedef struct assay_model_options {
    int n_threads;            /* <= 0: every core */
    const char *quantization; /* NULL: weights as stored; "fp8": on-the-fly FP8, see below */
    const char *device;       /* the backend (backend.h's assay_backend_open): "cpu" (default) or "cuda" */
    const char *load_format;  /* NULL or "auto": the weights in the files; "dummy": see below */
    uint64_t seed;            /* "dummy": the seed of the weights' values (default 0) */
    int f32_activations;      /* CPU: f32 activations for bf16 weights even where AVX512_BF16 kernels would round them
                               * to bf16 (calibration passes, whose two routes and references compute in f32) */
} assay_model_options;

typedef struct assay_session_options {
    assay_kv_dtype kv_dtype; /* default ASSAY_KV_F16 */
    int64_t n_ctx;           /* positions per sequence; 0: the model's training context, at most 4096 */
    int n_seq;               /* sequences of the sequence API (assay_session_forward) live at once (default 1); 0: none,
                              * the caller (the engine) builds every step itself (assay_session_run_step) */
    int64_t n_batch;         /* tokens per internal step; longer batches are split (default 512) */
    int64_t kv_calc_tokens;  /* > 0: --calculate-kv-scales: per-layer static k/v scales from the running max of the
                              * first N real tokens (8-bit KV dtypes only; see assay_session_kv_scales_pause) */
    int64_t kv_blocks;       /* KV pool size in blocks of ASSAY_KV_BLOCK tokens; 0: n_seq x the blocks of n_ctx */
} assay_session_options;

void assay_model_options_default(assay_model_options *o);
/* ASSAY_OK when `name` is an on-the-fly quantization the engine knows ("fp8"), else ASSAY_ERR_ARG with a message
 * that lists the known names (for usage errors before a model is loaded). */
assay_status assay_model_quantization_check(const char *name);
/* ASSAY_OK for NULL, "auto" and "dummy", else ASSAY_ERR_ARG with a message that lists them. */
assay_status assay_model_load_format_check(const char *name);
void assay_session_options_default(assay_session_options *o);

/* `path`: a .gguf file or a Hugging Face directory (see model_file.h).
 *
 * Dummy loads (load_format "dummy", vLLM's `--load-format dummy`, for measuring speed on shapes no weight file here
 * holds): `path` is an HF directory of which only config.json is read (assay_model_file_open_config; safetensors, if
 * any, are ignored). Every weight the config implies is made with seeded pseudo-random values (dummy_weights.h) of
 * the dtype config.json names (torch_dtype / dtype; bf16 when it names none): linears, the embedding table and an
 * untied lm_head uniform in [-0.02, 0.02), RMSNorm weights 1.0, biases uniform like the linears. The values depend
 * only on opt->seed and each tensor's name, never on the backend: the CPU backend fills host memory, a device fills
 * its own memory with a kernel (no host copy of the matrices), and both hold the same numbers. A config with a
 * quantization_config is refused; --quantization fp8 quantizes the dummy values like stored ones. The model's text
 * is meaningless; speed and memory are those of the real model (assay_model_weight_bytes is the real size). */
assay_status assay_model_load(assay_model **out, const char *path, const assay_model_options *opt);
/* 1 when the model's weights are dummy values (load_format "dummy"). */
int assay_model_is_dummy(const assay_model *m);
void assay_model_free(assay_model *m);
const assay_model_config *assay_model_get_config(const assay_model *m);
const assay_model_file *assay_model_get_file(const assay_model *m);
/* Bytes of weights one token's forward pass reads (every linear layer once, plus the one embedding row); for a dummy
 * load, the bytes the real checkpoint's weights would have in its dtype. */
size_t assay_model_weight_bytes(const assay_model *m);
/* The backend the model's weights live on (its ops run the model's forward passes). */
struct assay_backend *assay_model_backend(const assay_model *m);
const char *assay_model_kernels(const assay_model *m); /* "avx2" or "scalar" */
/* The values the engine multiplies by for linear weight `name` (canonical, e.g. "blk.0.ffn_down.weight", or
 * "output.weight"): sets *n_in, *n_out and, when out is not NULL, writes them dequantized to f32 in
 * out[n_out][n_in] (HF [out, in] order; llama Q/K rows permuted as loaded; packed int4 dequantized on read, act-order
 * columns put back in the checkpoint's order). For tests and inspection: with
 * quantization "fp8" these are the fake-quantized weights. Error: unknown name. */
assay_status assay_model_weight_f32(const assay_model *m, const char *name, int64_t *n_in, int64_t *n_out, float *out);

/* Replaces the weights of linear layer `name` (canonical, as above) by the f32 values w[n_out][n_in], given in the
 * file's row order (HF q/k rows as stored: the llama row permutation is applied here, as at load). For
 * layer-by-layer quantization, where later layers must see the outputs of the already-quantized earlier ones
 * (GPTQ's sequential calibration). Sessions opened on the model see the new weights from their next forward.
 * Error: unknown name. */
assay_status assay_model_set_weight_f32(assay_model *m, const char *name, const float *w);

/* ---- one decoder layer on given hidden states (calibration) -------------------------------------------------
 * GPTQ's sequential calibration and AWQ's scale and clip searches run the decoder layers one part at a time on hidden
 * states they keep, with weights they choose (scaled candidates, linears already quantized). These functions run
 * part of layer `layer` of THIS model: its RoPE (the frequencies with the config's scaling folded in, as the forward
 * pass uses them, and its rotation layout), its attention scale, norm epsilon and MLP activation. The caller gives
 * the linears as f32 [n_out][n_in] in the file's row order (HF q/k rows as stored: the functions rotate them the
 * way the forward pass rotates its permuted copies) and the two RMSNorm weights [n_embd]. Attention runs over
 * n_seq whole sequences of T tokens each, at positions 0..T-1; activations are host float32 rows. The functions
 * compute what assay_session_forward computes for the same tokens up to float rounding (a dense f32 causal
 * attention instead of the paged KV cache); tests/unit/test_model_layer.c holds them to it. */
typedef struct assay_layer_weights {
    const float *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
    const float *attn_norm, *ffn_norm;
} assay_layer_weights;

/* NULL when the functions below compute every layer of m as its forward pass does; else the name of the first
 * architecture feature they do not implement (e.g. "q/k norms"), for the caller's message or fallback. */
const char *assay_model_layer_unsupported(const assay_model *m);
/* x[n][n_embd]: the embeddings of ids as the forward pass starts from them. */
void assay_model_embed(const assay_model *m, const int32_t *ids, int64_t n, float *x);
/* h = attn_norm(x), the q/k/v input; n rows. */
void assay_model_layer_attn_norm(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *x,
                                 int64_t n, float *h);
/* The attention block on h [n_seq*T][n_embd]: q/k/v, RoPE, causal softmax attention with grouped KV heads; w->wo
 * NULL: y is the attention output [n_seq*T][n_head*head_dim] (o_proj's input), else o_proj's output [..][n_embd]. */
void assay_model_layer_attention(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *h,
                                 int64_t n_seq, int64_t T, float *y);
/* x2 = x + att . Wo^T (the residual after attention), h = ffn_norm(x2) (the gate/up input); n rows. */
void assay_model_layer_attn_residual(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *x,
                                     const float *att, int64_t n, float *x2, float *h);
/* The MLP on h [n][n_embd]: w->w_down NULL: y = act(h . Wgate^T) * (h . Wup^T) [n][n_ff] (down_proj's input), else
 * down_proj's output [n][n_embd]. */
void assay_model_layer_mlp(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *h, int64_t n,
                           float *y);
/* x = x2 + act . Wdown^T: the layer's output, the next layer's input; n rows. */
void assay_model_layer_mlp_residual(const assay_model *m, int64_t layer, const assay_layer_weights *w, const float *x2,
                                    const float *act, int64_t n, float *x);

assay_status assay_session_open(assay_session **out, assay_model *m, const assay_session_options *opt);
void assay_session_close(assay_session *s);
int64_t assay_session_n_ctx(const assay_session *s);

typedef struct assay_batch {
    int64_t n_tokens;
    const int32_t *token;  /* [n_tokens] */
    const int32_t *pos;    /* [n_tokens] position within the token's sequence */
    const int32_t *seq;    /* [n_tokens] sequence id < n_seq; NULL: all sequence 0 */
    const int8_t *logits;  /* [n_tokens] nonzero: return this token's logits; NULL: only the last token's */
} assay_batch;

/* Runs the batch, appending its keys/values to each sequence's cache, and writes one row of n_vocab logits per
 * token that asked for them, in batch order. A token at position p attends to positions 0..p of its sequence,
 * which must all be in the cache or in this batch. Errors: token id or position out of range, cache full. */
assay_status assay_session_forward(assay_session *s, const assay_batch *b, float *logits);
/* Forgets a sequence (its KV blocks return to the pool). */
void assay_session_seq_clear(assay_session *s, int seq);

/* The engine's entry (engine.h): runs one step the caller describes (backend.h's assay_step: slots and block tables
 * from the caller's own block manager over this session's pool of assay_session_kv_blocks blocks), at most
 * n_batch tokens, and writes step->n_logits rows of n_vocab logits. The sequence API above must not be used on
 * the same session. Errors: a token id outside the vocabulary, a step larger than n_batch. */
assay_status assay_session_run_step(assay_session *s, const assay_step *step, float *logits);
/* The same step, but only the index of each wanted row's largest logit (the first on ties) comes back, in `ids`
 * ([n_logits]): greedy decoding without the logits' download (on a GPU, the argmax runs there). */
assay_status assay_session_run_step_argmax(assay_session *s, const assay_step *step, int32_t *ids);
/* Copies KV block src to dst in every layer (copy-on-write of a shared block, before the step that writes dst). */
void assay_session_copy_block(assay_session *s, int64_t src, int64_t dst);
int64_t assay_session_n_batch(const assay_session *s);
int64_t assay_session_kv_blocks(const assay_session *s);
/* Bytes one KV block takes over all layers (what a pool sized in bytes divides by). */
size_t assay_session_kv_block_bytes(const assay_session *s);

/* Calibration: called with the input activations of every linear layer, before the matmul, in forward order.
 * x is [n_tok][n_in] float32, valid during the call; `name` is the canonical weight name ("blk.3.ffn_down.weight").
 * Used by GPTQ/AWQ/SmoothQuant/imatrix. NULL removes the hook. */
typedef void (*assay_calib_fn)(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in);
void assay_session_set_calib_hook(assay_session *s, assay_calib_fn fn, void *user);
/* Calibration passes that only need the first n_layers decoder layers' inputs: forward stops after them and
 * returns no logits (the logits buffer is left untouched). 0 restores full passes. */
void assay_session_set_layer_limit(assay_session *s, int64_t n_layers);

/* KV calibration: called per layer with the keys (after RoPE and any k norm, exactly what the cache stores) and
 * values of the batch, [n_tok][kv_dim] float32 each, valid during the call. NULL removes the hook. */
typedef void (*assay_kv_fn)(void *user, int64_t layer, const float *k, const float *v, int64_t n_tok, int64_t kv_dim);
void assay_session_set_kv_hook(assay_session *s, assay_kv_fn fn, void *user);

/* KV cache scales (8-bit KV dtypes). Where they come from, decided at assay_session_open:
 *   1. opt.kv_calc_tokens > 0 (--calculate-kv-scales): from real traffic (kv_cache.h states the semantics);
 *   2. else, for fp8_e4m3 / fp8_e5m2, the checkpoint's per-layer k_scale / v_scale when it has them (HF
 *      model.layers.N.self_attn.k_scale / v_scale, or the legacy k_proj/v_proj.output_scale and kv_scale), as a
 *      static scale: stored = sat(x / scale), read = code * scale (vLLM's semantics);
 *   3. else a dynamic scale per (token, KV head) slot.
 * One line saying which, for a log. */
const char *assay_session_kv_scales_desc(const assay_session *s);
/* The same in one word: "checkpoint", "calculated", "dynamic" or "none" (not an 8-bit cache). */
const char *assay_session_kv_scales_kind(const assay_session *s);
/* The static scales in use, "k/v per layer: 0.00876/0.00325 ..." into *out (appended); for logs and --json. */
void assay_session_kv_scales_format(const assay_session *s, char *out, size_t cap);
/* Marks the following forwards as warm-up (nonzero) or real traffic (0): warm-up never calibrates. */
void assay_session_kv_scales_pause(assay_session *s, int paused);
/* The static scales layer `layer` writes with now; 0 when the layer uses dynamic per-slot scales. */
void assay_session_kv_scales_get(const assay_session *s, int64_t layer, float *k_scale, float *v_scale);
/* Number of layers whose k_scale and v_scale the checkpoint holds (0: none). */
int64_t assay_model_kv_scale_layers(const assay_model *m);
/* 1 when a host (CPU) backend emulates quantized activations of this model exactly (FP8 / INT8 W8A8: every
 * activation quantized and dequantized in f32 before a float matmul), which makes it slower than the unquantized model
 * where the real kernel is faster; `how` gets the first such scheme. 0 on a device backend or without them. */
int assay_model_emulates_quantized_activations(const assay_model *m, char *how, size_t cap);

#endif
