/* backend.h — the device-shaped table of ops a forward pass runs on: the CPU and CUDA implement it.
 *
 *   assay_backend *be;
 *   assay_backend_open(&be, "cpu", n_threads);              // the device comes from --device, never from model code
 *   const assay_backend_ops *op = be->ops;
 *   op->prepare_weight(be, &w);                             // once at load: the backend packs it its own way
 *   void *x = op->alloc(be, n_tok * n_in * assay_backend_act_size(be)), *y = ...;
 *   op->upload(be, x, host_x, bytes);
 *   op->linear(be, y, &w, &act_quant, x, n_tok, bias);      // y[n_tok][w.n_out] = quant(x)[n_tok][w.n_in] . W^T + bias
 *   op->download(be, host_y, y, bytes); op->synchronize(be);
 *   assay_backend_close(be);
 *
 * Model code (src/model) calls only these ops, so there is no `#ifdef CUDA` in it (DESIGN.md principle 3).
 * Memory: buffers passed to ops come from ops->alloc (device memory on a GPU); upload/download/copy move bytes
 * in order on the backend's stream, synchronize waits for all of it. Activations are row-major [rows][cols] of the
 * backend's activation type (be->act_type: f32 on the CPU, bf16 on CUDA); the float* in the op signatures below
 * are "activations of act_type". Vectors (norm weights, biases, RoPE frequencies) are f32 in backend memory.
 * Integer arrays (ids, positions, rows, the step's arrays, a weight's perm) are host memory: a device backend
 * copies them. Weights keep their stored type (any assay_type the backend has a kernel for) until prepare_weight
 * repacks them. Calibration hooks that read activations on the host need a host-memory f32 backend.
 */
#ifndef ASSAY_BACKEND_H
#define ASSAY_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/act_quant.h"
#include "assay/kv_type.h"
#include "assay/weight_type.h"

/* A weight matrix as stored: n_out rows of n_in elements (ggml ne = {n_in, n_out}); rows are row_bytes apart. */
typedef struct assay_weight {
    assay_type type;
    const void *data;
    int64_t n_in, n_out;
    size_t row_bytes;
    const char *name; /* canonical tensor name, for the calibration hook and messages */
    /* NULL, or [n_in]: the weight's input columns are stored in another order (act-order GPTQ packed by groups) and
     * column c multiplies x[perm[c]]; the backend's linear op gathers x in that order (matmul never sees it) */
    const int32_t *perm;
    void *prepared; /* the backend's own packing (prepare_weight), or NULL: data as stored */
    /* > 0: the (f32) values are e4m3 codes times this one per-tensor scale (on-the-fly fp8): a backend with FP8
     * tensor cores keeps the codes and multiplies them as they are; the CPU multiplies the values */
    float fp8_scale;
    /* A dummy weight (--load-format dummy): data NULL and dummy_range > 0. Element i of [n_out][n_in] (row-major)
     * is assay_dummy_value(dummy_seed, i, dummy_range) (dummy_weights.h) stored as `type` (f32, f16 or bf16);
     * prepare_weight makes it in the backend's own memory, so no host copy of the whole matrix is needed on a
     * device. */
    uint64_t dummy_seed;
    float dummy_range;
} assay_weight;

/* 1 when w holds no data yet and prepare_weight is to fill it with its seeded values. */
static inline int assay_weight_is_dummy(const assay_weight *w) { return !w->data && w->dummy_range > 0; }
/* Writes rows [row0, row0 + n_rows) of a dummy weight's stored bytes (row_bytes apart) to dst, on the host.
 * Types: f32, f16, bf16 (others: ASSAY_ERR_UNSUPPORTED). */
assay_status assay_weight_dummy_fill(const assay_weight *w, void *dst, int64_t row0, int64_t n_rows);

/* Paged KV storage of one layer, allocated by the KV pool (engine/kv_cache.h) through ops->alloc. Blocks hold
 * ASSAY_KV_BLOCK tokens; on the CPU the layout within a block is [n_head_kv][ASSAY_KV_BLOCK][head_dim], so one
 * head's keys of a block are contiguous. `k_scale`/`v_scale` ([n_blocks][n_head_kv][ASSAY_KV_BLOCK] floats, the
 * dequant multiplier of each slot) are used by the scaled dtypes only (kv_type.h); kv_store writes them and attention
 * reads them. `k_static`/`v_static` > 0: kv_store writes every slot with this per-layer scale (stored =
 * sat(x / scale), vLLM's k_scale/v_scale semantics); 0: each slot gets its own dynamic absmax scale. Either way
 * kv_store records the scale it used in the slot's k_scale/v_scale entry. */
#define ASSAY_KV_BLOCK 16
typedef struct assay_kv_layer {
    void *k, *v;
    float *k_scale, *v_scale;
    float k_static, v_static;
    /* 1: every slot written so far carries the static scales (checkpoint scales set before any write, or calculated
     * scales after kv_requantize re-encoded the cache with them), so one per-layer scale decodes the whole layer */
    int static_uniform;
} assay_kv_layer;

/* The step descriptor: everything a forward pass needs to know about the batch, built once per step by the model
 * runner (the engine, or a session for its simple API). Attention and KV writes read only this.
 * Token t belongs to sequence seq_of_tok[t] of this step, sits at position pos[t] of it and writes its K/V to
 * physical slot slot[t] (block * ASSAY_KV_BLOCK + offset). Sequence i's logical block j lives in physical block
 * block_tables[i][j]; after this step it holds seq_lens[i] positions. When the tokens of each sequence are
 * contiguous and in position order (the engine's steps), cu_seqlens_q[i]..cu_seqlens_q[i+1] are sequence i's
 * tokens (varlen kernels need this); NULL otherwise. A token at position p attends to positions 0..p of its
 * sequence (restricted further by a sliding window). want_logits[t] != 0: the token's logits are computed,
 * n_logits rows in token order. */
typedef struct assay_step {
    int64_t n_tokens;
    const int32_t *token;        /* [n_tokens] */
    const int32_t *pos;          /* [n_tokens] */
    const int32_t *seq_of_tok;   /* [n_tokens] */
    const int64_t *slot;         /* [n_tokens] */
    const int8_t *want_logits;   /* [n_tokens] */
    int64_t n_logits;
    int64_t n_seqs;
    const int32_t *cu_seqlens_q; /* [n_seqs + 1] or NULL */
    const int32_t *seq_lens;     /* [n_seqs] */
    const int32_t *const *block_tables; /* [n_seqs] -> [blocks of the sequence] */
    /* > 0: the step is (or will be) replayed from a captured graph: a device backend lays the descriptor out for
     * contexts up to this many tokens whatever the sequences' lengths, so every step of its size has one layout;
     * rows with slot -1 are padding (no KV written). 0: laid out for this step alone. */
    int64_t graph_ctx;
} assay_step;

typedef struct assay_kv_geom {
    assay_kv_dtype dtype;
    int64_t n_head_kv, head_dim;
} assay_kv_geom;

typedef enum assay_rope_mode { ASSAY_ROPE_MODE_NORM, ASSAY_ROPE_MODE_NEOX } assay_rope_mode;

/* inv_freq[head_dim/2]: the per-pair rotation frequency, with any scaling (llama3, linear) already applied. */
typedef struct assay_rope_params {
    assay_rope_mode mode;
    int64_t n_rot; /* rotated dims per head (<= head_dim) */
    const float *inv_freq;
} assay_rope_params;

typedef struct assay_attn_params {
    int64_t n_head, n_head_kv, head_dim;
    float scale;          /* applied to q.k */
    int64_t window;       /* > 0: a query at position p sees keys at positions > p - window (sliding window) */
    float softcap;        /* > 0: scores = softcap * tanh(scores / softcap) */
} assay_attn_params;

typedef struct assay_backend assay_backend;

typedef struct assay_backend_ops {
    const char *name;
    void (*close)(assay_backend *be);
    void *(*alloc)(assay_backend *be, size_t bytes); /* zeroed; NULL when out of memory */
    void (*free)(assay_backend *be, void *p);
    /* host -> backend, backend -> host, backend -> backend; queued in order on the backend's stream */
    void (*upload)(assay_backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(assay_backend *be, void *dst, const void *src, size_t bytes);
    void (*copy)(assay_backend *be, void *dst, const void *src, size_t bytes);
    void (*synchronize)(assay_backend *be); /* every queued op and copy has finished */
    /* Once per weight at load: the backend may pack it (w->prepared) for its kernels; the weight's host data stays
     * valid. A dummy weight (assay_weight_is_dummy) is made here in the backend's memory: the CPU allocates and
     * fills host memory (w->data then points at it, freed at close), a device fills its own copy on the device.
     * Both count in be->weight_bytes. Error: a type the backend has no kernel for (the message names the weight),
     * or no memory for a dummy weight. */
    assay_status (*prepare_weight)(assay_backend *be, assay_weight *w);

    /* One linear layer: y[t][o] = sum_i W[o][i] * q(x)[t][perm(i)] + bias[o], where q is the input treatment
     * `act` (none, fp8 per-tensor static, fp8 per-token, fp8 1 x group, int8 per-token: act_quant.h), applied the
     * way the backend's kernel applies it (the CPU emulates it exactly with act_quant.h's reference). x is not
     * modified; bias may be NULL; y may not alias x. */
    void (*linear)(assay_backend *be, float *y, const assay_weight *w, const assay_act_quant *act, const float *x,
                   int64_t n_tok, const float *bias);
    /* y[t][o] = sum_i W[o][i] * x[t][i]  (x: [n_tok][n_in], y: [n_tok][n_out]); any weight type with a kernel. */
    void (*matmul)(assay_backend *be, float *y, const assay_weight *w, const float *x, int64_t n_tok);
    /* y[r] = x[r] / rms(x[r]) * gamma, rows of n; y may equal x. */
    void (*rmsnorm)(assay_backend *be, float *y, const float *x, const float *gamma, int64_t n, int64_t n_rows, float eps);
    /* Rotates each of n_head heads of each row in place; row t has position pos[t]; rows are row_stride floats apart. */
    void (*rope)(assay_backend *be, float *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride,
                 const int32_t *pos, const assay_rope_params *rp);
    /* Writes the step's k/v rows ([n_tokens][n_head_kv*head_dim]) into the cache at their slots (step->slot). */
    void (*kv_store)(assay_backend *be, const assay_kv_layer *layer, const assay_kv_geom *g, const float *k,
                     const float *v, const assay_step *step);
    /* out[t][h*head_dim..] = softmax(q.K^T * scale, causal to pos[t]) . V over the token's sequence in the cache,
     * computed tile by tile with an online softmax (no score matrix). q and out: [n_tokens][n_head*head_dim]. */
    void (*attention)(assay_backend *be, float *out, const float *q, const assay_attn_params *ap,
                      const assay_kv_layer *layer, const assay_kv_geom *g, const assay_step *step);
    /* Optional (NULL: the backend always decodes with the per-slot scales): re-encodes every slot of the layer whose
     * recorded scale differs from the layer's static scales with those (once, when calculated scales freeze). */
    void (*kv_requantize)(assay_backend *be, const assay_kv_layer *layer, const assay_kv_geom *g, int64_t n_blocks);
    /* Copies physical block src to dst in one layer (values and scales): copy-on-write of a shared block. */
    void (*kv_copy_block)(assay_backend *be, const assay_kv_layer *layer, const assay_kv_geom *g, int64_t src, int64_t dst);
    /* out[i] = act(gate[i]) * up[i] for rows of n; gate/up rows are `stride` floats apart, out rows n apart. */
    void (*swiglu)(assay_backend *be, float *out, const float *gate, const float *up, int64_t n, int64_t n_rows,
                   int64_t stride);
    void (*geglu)(assay_backend *be, float *out, const float *gate, const float *up, int64_t n, int64_t n_rows,
                  int64_t stride);
    void (*add)(assay_backend *be, float *y, const float *a, const float *b, int64_t n); /* y = a + b */
    void (*scale)(assay_backend *be, float *y, float s, int64_t n);
    /* rows of n: in-place softmax (probabilities), optional logit softcap first (0: none). */
    void (*softmax)(assay_backend *be, float *x, int64_t n, int64_t n_rows, float softcap);
    /* y[t] = dequantized row ids[t] of W (embedding lookup). */
    void (*get_rows)(assay_backend *be, float *y, const assay_weight *w, const int32_t *ids, int64_t n);
    /* dst[r] = src[rows[r]] for n_rows activation rows of `width` (the rows that need logits). */
    void (*gather_rows)(assay_backend *be, float *dst, const float *src, const int32_t *rows, int64_t n_rows, int64_t width);
    /* x[i] = cap * tanh(x[i] / cap) (a final logit softcap). */
    void (*tanh_cap)(assay_backend *be, float *x, int64_t n, float cap);
    /* ids[r] = the index of the largest of row r's n activations, the first on ties, returned to the host
     * (synchronizes): greedy decoding. */
    void (*argmax)(assay_backend *be, int32_t *ids, const float *x, int64_t n, int64_t n_rows);
    /* max |x[i]| over n values, returned to the host (synchronizes): KV-scale calibration. */
    float (*absmax)(assay_backend *be, const float *x, int64_t n);

    /* n activations (act_type) -> host f32 (logits); returns when they are there. */
    void (*download_f32)(assay_backend *be, float *dst, const float *src, int64_t n);

    /* Optional (NULL: nothing to do). Called once at the start of every forward step, before any op reads `step`:
     * a device backend copies the descriptor (and whatever it plans from it) to the device. The step's host arrays
     * stay valid until the step's logits are downloaded. */
    void (*begin_step)(assay_backend *be, const assay_step *step);
    /* Optional (NULL: host memory, not planned): device memory free and in total, in bytes. */
    void (*memory_info)(assay_backend *be, size_t *free_bytes, size_t *total_bytes);

    /* Optional CUDA-graph-like replay of whole steps (NULL: none). After begin_step, graph_launch(key) replays the
     * ops captured for key (returns 1), or returns 0 when there are none. graph_capture_begin/end record the ops
     * issued between them (they do not run) into key's graph; end then launches it and returns 1, or returns 0 when
     * the ops could not be captured (nothing ran: the caller runs them itself). graph_reset drops every graph (the
     * buffers they were captured on are going away). Captured steps must come after an eager step of the same shape
     * (buffers that grow on demand have grown) and use no host arrays beyond the step's own. */
    int (*graph_launch)(assay_backend *be, int64_t key);
    void (*graph_capture_begin)(assay_backend *be, int64_t key);
    int (*graph_capture_end)(assay_backend *be, int64_t key);
    void (*graph_reset)(assay_backend *be);

    /* Fused ops a backend may provide (NULL: the model runs the unfused ops). */
    /* x += h, then y = rmsnorm(x) * gamma: the residual add and the next layer's norm in one pass. */
    void (*add_rmsnorm)(assay_backend *be, float *y, float *x, const float *h, const float *gamma, int64_t n,
                        int64_t n_rows, float eps);
} assay_backend_ops;

struct assay_backend {
    const assay_backend_ops *ops;
    void *impl;
    assay_type act_type; /* the activations' element type: ASSAY_TYPE_F32 on the CPU, BF16 on CUDA */
    int host_memory;     /* 1: buffers are host memory (the model may hand ops host arrays of floats directly) */
    size_t weight_bytes; /* bytes prepare_weight put into backend memory (0 when weights stay where they are) */
};

/* Bytes of one activation element. */
size_t assay_backend_act_size(const assay_backend *be);

/* The CUDA backend (built when nvcc was found): device 0 of CUDA_VISIBLE_DEVICES. Error when there is no usable GPU. */
assay_status assay_backend_cuda_open(assay_backend **out, int n_threads);
/* The GPU's name for a CUDA backend, NULL for any other. */
const char *assay_backend_cuda_device_name(const assay_backend *be);

/* The backend for a device name ("cpu", "cuda"), as --device gives it: an unknown name or a device this build or
 * machine cannot run is an error with a one-line message, never a crash. */
assay_status assay_backend_open(assay_backend **out, const char *device, int n_threads);
/* The same check without opening anything (for usage errors before a model loads). */
assay_status assay_backend_check(const char *device);

/* CPU backend: n_threads workers (<= 0: all cores). The kernels (scalar, AVX2, AVX-512/VNNI, AVX-512 with
 * AVX512_BF16, that with AMX int8 tiles) are picked by cpuid at open; ASSAY_CPU_NO_SIMD=1 in the environment forces
 * the scalar kernels, ASSAY_CPU_NO_AVX512=1 the AVX2 ones, ASSAY_CPU_NO_BF16=1 f32 activations for bf16 weights (and
 * no AMX), ASSAY_CPU_NO_AMX=1 no AMX; ASSAY_CPU_EXACT=1 makes matmuls dequantize
 * weight rows to f32 and multiply f32 activations in double (the dequantize-then-dot spec, no activation
 * quantization; slow, for checking a quantized model against exact math). */
assay_status assay_backend_cpu_open(assay_backend **out, int n_threads);
void assay_backend_close(assay_backend *be);
/* "scalar", "avx2", "avx512", "avx512bf16" or "amx" for the CPU backend. */
const char *assay_backend_cpu_kernels(const assay_backend *be);
/* The CPU backend's op table (to tell a CPU backend from others). */
const struct assay_backend_ops *assay_backend_cpu_ops(void);
/* A CPU backend opened with the avx512bf16 or amx kernels (bf16 weights x bf16-rounded activations) switches to the
 * avx512 ones (f32 activations); any other is left as it is. Call before the first matmul. */
void assay_backend_cpu_f32_activations(assay_backend *be);
/* The CPU backend with a named kernel set, "scalar", "avx2", "avx512", "avx512bf16" or "amx", whatever the environment says (none of the
 * ASSAY_CPU_* switches apply); NULL or "auto" is assay_backend_cpu_open. ASSAY_ERR_UNSUPPORTED when this CPU or build
 * lacks the set's instructions, ASSAY_ERR_ARG for an unknown name. */
assay_status assay_backend_cpu_open_kernels(assay_backend **out, int n_threads, const char *kernels);
/* Every kernel set's name (NULL-terminated), and whether this CPU and build can run the named one. */
const char *const *assay_backend_cpu_kernel_sets(void);
int assay_backend_cpu_kernels_supported(const char *kernels);

#endif
