/* plan.h — the deployment planner behind `assay plan`: a model's weights sharded over tensor-parallel GPUs, its KV
 * cache per token, the tokens and sequences the memory left over holds, and a decode-throughput bound from memory
 * bandwidth.
 *
 *   assay_plan_request r;
 *   assay_plan_request_default(&r);      // 1 GPU, util 0.9, 2 GiB reserve, bf16 weights and KV, 8192 tokens
 *   assay_plan_preset("llama-3.1-70b", &r.model, &r.model_name);
 *   assay_plan_scheme_parse("fp8", &r.scheme);
 *   assay_plan_gpu_find("h100", &r.gpu);
 *   r.num_gpus = r.tensor_parallel = 4;
 *   assay_plan p;
 *   if (assay_plan_compute(&r, &p) != ASSAY_OK) ... assay_last_error() names the problem (TP vs heads, ...)
 *   if (!p.fits) ... p.short_bytes says how much memory per GPU is missing
 *   p.weight_bytes_per_gpu, p.kv_bytes_per_token_per_gpu, p.kv_tokens, p.concurrency, p.decode[1].tokens_per_s
 *
 * Sharding is shard.h's, the rules the tensor-parallel engine slices weights with (Megatron-LM's tensor parallelism
 * as vLLM implements it): q/k/v and gate/up are column-parallel (their output features split), o_proj and down_proj
 * row-parallel (their input features split), the embedding and lm_head vocab-parallel (the vocabulary padded to a
 * multiple of 64, then split), norms replicated. KV heads split across ranks; with fewer KV heads than ranks each
 * rank keeps one and every head is replicated TP / n_kv times. The tensor-parallel size must divide the attention
 * heads, the FFN width and the padded vocabulary, and the KV heads must divide it or be divisible by it, as vLLM
 * requires; an int4 group must not straddle two ranks' inputs. A refusal names the rule and the sizes that work.
 *
 * Memory per GPU: gpu_memory_utilization x capacity - the weights' shard - a reserve for what vLLM's profiling run
 * finds besides the weights (activation peak, CUDA context, NCCL buffers, CUDA graphs) = the KV pool, counted in
 * blocks of 16 tokens; concurrency is vLLM's: blocks / ceil(max_model_len / 16). GB below means 10^9 bytes.
 */
#ifndef ASSAY_PLAN_H
#define ASSAY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "assay/ggml_quant.h"
#include "assay/gguf.h"
#include "assay/kv_type.h"
#include "assay/model_file.h"
#include "assay/status.h"
#include "assay/weight_type.h"

#define ASSAY_PLAN_BLOCK 16 /* tokens per KV block, vLLM's CUDA default and the engine's ASSAY_KV_BLOCK */

/* ---- GPUs ------------------------------------------------------------------------------------------------- */
typedef struct assay_plan_gpu {
    char name[48];       /* "H100 SXM 80 GB", or "custom" for --gpu-memory */
    double memory_bytes; /* capacity as the vendor publishes it */
    double bandwidth;    /* memory bandwidth, bytes per second */
} assay_plan_gpu;

/* Case, spaces and dashes do not matter: "h100", "H100 SXM 80 GB", "rtx-4090", "4090", "b200". */
assay_status assay_plan_gpu_find(const char *name, assay_plan_gpu *out);
int assay_plan_gpu_count(void);
const assay_plan_gpu *assay_plan_gpu_at(int i);

/* "85520809984", "80GB" / "80 GB" (10^9), "79.6GiB" / "79.6G" (2^30), also K/M/T; a trailing "/s" is allowed (for
 * bandwidths: "3.35TB/s"). Returns -1 when the text is not a size. */
double assay_plan_parse_bytes(const char *s);

/* ---- named models ----------------------------------------------------------------------------------------- */
/* "llama-3.1-8b", "Llama 3.1 70B", "meta-llama/Llama-3.1-405B-Instruct", "qwen2.5-14b", "Qwen/Qwen2.5-72B-Instruct".
 * Fills the architecture numbers of the published config.json; *display gets "Llama 3.1 70B". */
assay_status assay_plan_preset(const char *name, assay_model_config *out, const char **display);
int assay_plan_preset_count(void);
const char *assay_plan_preset_name(int i); /* the canonical spelling, "llama-3.1-8b" */

/* ---- weight schemes --------------------------------------------------------------------------------------- */
typedef enum assay_plan_scheme_kind {
    ASSAY_PLAN_SCHEME_STORED, /* a GGUF file's own tensors, as they are */
    ASSAY_PLAN_SCHEME_DENSE,  /* every tensor in one plain type (bf16, f16, f32) */
    ASSAY_PLAN_SCHEME_W8,     /* fp8 / int8: linears 1 byte a weight + an f32 scale per output channel */
    ASSAY_PLAN_SCHEME_INT4,   /* AWQ / GPTQ: linears 4 bits + an f16 scale and a 4-bit zero per group of inputs */
    ASSAY_PLAN_SCHEME_GGUF,   /* one of llama.cpp's mixes (q8_0, q6_k, q4_k_m, ...) with its per-tensor rules */
} assay_plan_scheme_kind;

typedef struct assay_plan_scheme {
    assay_plan_scheme_kind kind;
    char name[24];          /* canonical: "bf16", "fp8", "int8", "int4-g128", "q4_k_m", "stored" */
    assay_type dense;       /* DENSE: the type */
    int64_t group;          /* INT4: inputs per scale */
    assay_ggml_ftype ftype; /* GGUF: the mix */
} assay_plan_scheme;

/* bf16 f16 f32; fp8 (fp8_e4m3, fp8-dynamic, w8a8-fp8); int8 (w8a8-int8); int4 (awq, gptq, w4a16, int4-g128, int4-g64,
 * int4-g32); GGUF q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k; "stored". */
assay_status assay_plan_scheme_parse(const char *name, assay_plan_scheme *out);
/* One line on how the scheme is counted, for the report. */
const char *assay_plan_scheme_describe(const assay_plan_scheme *s);

/* ---- a plan ----------------------------------------------------------------------------------------------- */
typedef struct assay_plan_request {
    assay_model_config model;      /* the architecture */
    const char *model_name;        /* for the report */
    const assay_gguf *gguf;        /* SCHEME_STORED: the file whose tensors are counted; else NULL */
    assay_plan_scheme scheme;
    assay_kv_dtype kv_dtype;
    int kv_slot_scales;            /* 1: assay's engine layout (an f32 scale per token and KV head for 8-bit caches);
                                    * 0: vLLM's (per-layer scales, nothing per token) */
    assay_plan_gpu gpu;
    int64_t num_gpus;              /* a multiple of tensor_parallel; the rest are data-parallel replicas */
    int64_t tensor_parallel;
    int64_t max_model_len;
    double gpu_memory_utilization; /* (0, 1] */
    double reserve_bytes;          /* per GPU, on top of the weights */
    int64_t decode_context;        /* tokens in each sequence's KV for the decode bound */
} assay_plan_request;

void assay_plan_request_default(assay_plan_request *r);

typedef struct assay_plan_decode {
    int64_t batch;
    double bytes_per_step; /* per GPU: its weights + the batch's KV at decode_context */
    double tokens_per_s;   /* one replica: batch / (bytes_per_step / bandwidth) */
    int kv_fits;           /* batch x decode_context tokens fit the KV pool */
} assay_plan_decode;

typedef struct assay_plan {
    double params;                    /* parameters of the model (unpadded) */
    double weight_bytes;              /* the whole model once, unsharded and unpadded */
    double weight_bytes_per_gpu;      /* one rank's shard (every rank holds the same amount) */
    double bits_per_weight;           /* weight_bytes x 8 / params */
    int64_t vocab_per_gpu;            /* embedding / lm_head rows per rank (of the vocabulary padded to 64) */
    int64_t kv_heads_per_gpu, kv_head_copies; /* KV heads a rank holds; ranks holding each KV head */
    double kv_bytes_per_token;        /* the whole model, each head once */
    double kv_bytes_per_token_per_gpu;
    double usable_bytes_per_gpu;      /* gpu_memory_utilization x capacity */
    double kv_pool_bytes_per_gpu;     /* usable - weights - reserve; negative when the weights do not fit */
    int fits;                         /* the pool holds at least one sequence of max_model_len */
    double short_bytes;               /* !fits: memory per GPU missing for the weights, the reserve and one
                                       * sequence of max_model_len */
    int64_t tensor_parallel;
    int64_t replicas;                 /* num_gpus / tensor_parallel */
    int64_t kv_blocks;                /* per GPU */
    int64_t kv_tokens;                /* one replica */
    double concurrency;               /* one replica, vLLM's: blocks / ceil(max_model_len / 16) */
    int64_t max_seqs;                 /* all replicas: sequences of max_model_len that fit at once */
    assay_plan_decode decode[2];      /* batch 1 and batch 32 */
} assay_plan;

/* Errors (ASSAY_ERR_ARG): sizes out of range, a tensor-parallel size the model cannot be split by (shard.h's checks:
 * heads, KV heads, FFN, padded vocabulary, an INT4 group that does not divide a row-parallel input per rank),
 * max_model_len past the model's context. Weights that do not
 * fit are not an error here: fits = 0 and short_bytes say by how much. */
assay_status assay_plan_compute(const assay_plan_request *r, assay_plan *out);

/* ---- the deployment guides' figures, recomputed ------------------------------------------------------------ */
typedef enum assay_plan_guide_verdict {
    ASSAY_PLAN_GUIDE_AGREES,       /* within the row's tolerance */
    ASSAY_PLAN_GUIDE_BELOW_BOUND,  /* a measured throughput under the bandwidth bound: consistent */
    ASSAY_PLAN_GUIDE_DISAGREES,    /* the figure does not add up */
} assay_plan_guide_verdict;

typedef struct assay_plan_guide_row {
    const char *table;      /* "H100 70B", "RTX 4090 14B Q4", "rules of thumb", "70B formats", "GGUF bits" */
    const char *claim;      /* what the guide says */
    const char *setup;      /* the plan that checks it */
    const char *unit;       /* "GB", "tokens", "sequences", "tok/s", "bits" */
    double quoted;          /* the guide's number (a range: quoted .. quoted_hi) */
    double quoted_hi;       /* 0 unless a range */
    double computed;
    double tolerance;       /* relative, for a single figure */
    assay_plan_guide_verdict verdict;
    const char *why;        /* for a figure that does not add up: where it goes wrong; else NULL or a remark */
} assay_plan_guide_row;

/* Every row, computed; *n_rows gets the count. The array is static (not thread-safe), valid until the next call. */
assay_status assay_plan_guide_rows(const assay_plan_guide_row **rows, int *n_rows);

#endif
