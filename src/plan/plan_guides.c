/* plan_guides.c — the deployment guides' sizing figures (see plan.h), each recomputed by the planner and judged.
 *
 * A row is one figure a guide quotes, the plan that checks it, and how to compare: within a relative tolerance,
 * inside a quoted range, or (for a measured throughput) at most the bandwidth bound. Figures that do not add up say
 * why in the row. The guides' arithmetic is plain capacity: weights and KV on the whole card, so the plans that
 * check their memory figures use --gpu-memory-utilization 1 and no reserve; the realistic plan for the same setup
 * (0.9 and a 2 GiB reserve) is what `assay plan` prints by default. GB = 10^9 bytes. */
#include <math.h>
#include <string.h>

#include "assay/plan.h"

typedef enum { M_WEIGHTS, M_WEIGHTS_PER_GPU, M_KV_POOL, M_KV_TOKENS, M_SEQS, M_DECODE32, M_DECODE1, M_BITS } metric;
typedef enum { CMP_NEAR, CMP_RANGE, CMP_BOUND, CMP_GROWTH } compare;

typedef struct {
    const char *model, *scheme, *gpu, *kv;
    int n, tp;
    double util, reserve_gib;
    int max_len;
} scenario;

typedef struct {
    const char *table, *claim, *setup, *unit;
    scenario s, s2;   /* s2: the second plan of a CMP_GROWTH row (growth from s to s2, in percent) */
    metric m;
    compare cmp;
    double quoted, quoted_hi, tol;
    const char *why;
} guide_spec;

/* plain capacity, as the guides count it */
#define CAP(model, scheme, gpu, kv, n) {model, scheme, gpu, kv, n, n, 1.0, 0, 8192}

static const guide_spec specs[] = {
    /* ---- H100 SXM, Llama 3.1 70B, BF16 vs FP8 ---- */
    {"H100 70B", "model weights VRAM, BF16: 140 GB", "llama-3.1-70b bf16", "GB",
     CAP("llama-3.1-70b", "bf16", "h100", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 140, 0, 0.05, NULL},
    {"H100 70B", "model weights VRAM, FP8: 70 GB", "llama-3.1-70b fp8", "GB",
     CAP("llama-3.1-70b", "fp8", "h100", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 70, 0, 0.05,
     "72.7 GB: the embedding and lm_head stay bf16 under vLLM's fp8 (4.2 GB instead of 2.1)"},
    {"H100 70B", "KV cache VRAM available on 4xH100, BF16: 180 GB", "4 x H100, TP 4, bf16, util 1.0, no reserve", "GB",
     CAP("llama-3.1-70b", "bf16", "h100", "bf16", 4), {0}, M_KV_POOL, CMP_NEAR, 180, 0, 0.05, NULL},
    {"H100 70B", "KV cache VRAM available on 4xH100, FP8: 250 GB", "4 x H100, TP 4, fp8, util 1.0, no reserve", "GB",
     CAP("llama-3.1-70b", "fp8", "h100", "bf16", 4), {0}, M_KV_POOL, CMP_NEAR, 250, 0, 0.05, NULL},
    {"H100 70B", "KV cache VRAM available, FP8 vs BF16: +39%", "the two plans above", "%",
     CAP("llama-3.1-70b", "bf16", "h100", "bf16", 4), CAP("llama-3.1-70b", "fp8", "h100", "bf16", 4), M_KV_POOL,
     CMP_GROWTH, 39, 0, 0.05, NULL},
    {"H100 70B", "maximum concurrency at 8K context, BF16: ~22,500 tokens", "4 x H100, TP 4, bf16, bf16 KV", "tokens",
     CAP("llama-3.1-70b", "bf16", "h100", "bf16", 4), {0}, M_KV_TOKENS, CMP_NEAR, 22500, 0, 0.10,
     "22,500 is 180 GB / 8 with the units dropped; a token of 70B's cache is 327,680 bytes in bf16 (80 layers x 8 KV "
     "heads x 128 x K,V x 2 bytes), so 180 GB hold ~546K tokens = 66 sequences of 8K"},
    {"H100 70B", "maximum concurrency at 8K context, FP8: ~31,250 tokens", "4 x H100, TP 4, fp8, bf16 KV", "tokens",
     CAP("llama-3.1-70b", "fp8", "h100", "bf16", 4), {0}, M_KV_TOKENS, CMP_NEAR, 31250, 0, 0.10,
     "31,250 is 250 GB / 8; the pool holds ~755K tokens = 92 sequences of 8K (with an fp8 KV cache as well, twice "
     "that: 1.5M tokens, 184 sequences)"},
    {"H100 70B", "maximum concurrency at 8K, FP8 vs BF16: +39%", "the two plans above", "%",
     CAP("llama-3.1-70b", "bf16", "h100", "bf16", 4), CAP("llama-3.1-70b", "fp8", "h100", "bf16", 4), M_KV_TOKENS,
     CMP_GROWTH, 39, 0, 0.05, "the ratio holds (it is the ratio of the pools); the absolute figures do not"},
    {"H100 70B", "decode throughput at batch 32, BF16: ~1,800 tok/s", "4 x H100, TP 4, bf16, context 1,024", "tok/s",
     CAP("llama-3.1-70b", "bf16", "h100", "bf16", 4), {0}, M_DECODE32, CMP_BOUND, 1800, 0, 0,
     "the guide does not say on how many GPUs; on the 4 x H100 of its KV row the figure is 64% of the bound"},
    {"H100 70B", "decode throughput at batch 32, FP8: ~2,700 tok/s", "4 x H100, TP 4, fp8, context 1,024", "tok/s",
     CAP("llama-3.1-70b", "fp8", "h100", "bf16", 4), {0}, M_DECODE32, CMP_BOUND, 2700, 0, 0,
     "53% of the bound; the bound grows +82% from bf16 to fp8 weights, the quoted figures +50%"},

    /* ---- RTX 4090, a 14B model at Q4 (Qwen 2.5 14B, Q4_K_M), f16 vs fp8 KV ---- */
    {"RTX 4090 14B Q4", "KV cache VRAM: 15 GB", "qwen2.5-14b q4_k_m on one RTX 4090", "GB",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "f16", 1), {0}, M_KV_POOL, CMP_NEAR, 15, 0, 0.05, NULL},
    {"RTX 4090 14B Q4", "cache tokens at 8K context, f16 KV: ~46,000", "the same, f16 KV", "tokens",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "f16", 1), {0}, M_KV_TOKENS, CMP_NEAR, 46000, 0, 0.10,
     "46,000 is 15 GB / 327,680 bytes, the per-token cache of Llama 3.1 70B; a 14B token (48 layers x 8 KV heads x "
     "128 x K,V x 2 bytes) is 196,608 bytes, so 15 GB hold ~76K tokens"},
    {"RTX 4090 14B Q4", "cache tokens at 8K context, fp8 KV: ~92,000", "the same, fp8 KV", "tokens",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "fp8", 1), {0}, M_KV_TOKENS, CMP_NEAR, 92000, 0, 0.10,
     "twice the f16 figure, which is right, but of the wrong per-token size: ~153K tokens"},
    {"RTX 4090 14B Q4", "concurrent users at 8K, f16 KV: ~5", "the same, f16 KV", "sequences",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "f16", 1), {0}, M_SEQS, CMP_NEAR, 5, 0, 0.10,
     "follows from the 46,000 tokens; ~9 sequences of 8K fit"},
    {"RTX 4090 14B Q4", "concurrent users at 8K, fp8 KV: ~11", "the same, fp8 KV", "sequences",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "fp8", 1), {0}, M_SEQS, CMP_NEAR, 11, 0, 0.10, "~18 sequences of 8K fit"},
    {"RTX 4090 14B Q4", "concurrent users, fp8 vs f16 KV: +120%", "the two plans above", "%",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "f16", 1), CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "fp8", 1), M_SEQS,
     CMP_GROWTH, 120, 0, 0.05,
     "an fp8 cache doubles the tokens a byte holds: +100%; 5 -> 11 (+120%) comes from rounding 5.6 down and 11.2 up"},
    {"RTX 4090 14B Q4", "decode, f16 KV: ~45 tok/s", "the same, batch 1, context 1,024", "tok/s",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "f16", 1), {0}, M_DECODE1, CMP_BOUND, 45, 0, 0,
     "41% of the bound: the weights (9.0 GB) dominate each step, so an fp8 cache changes little at batch 1, as quoted"},
    {"RTX 4090 14B Q4", "decode, fp8 KV: ~47 tok/s", "the same, fp8 KV", "tok/s",
     CAP("qwen2.5-14b", "q4_k_m", "rtx4090", "fp8", 1), {0}, M_DECODE1, CMP_BOUND, 47, 0, 0, NULL},

    /* ---- rules of thumb ---- */
    {"rules of thumb", "Llama 3.1 8B AWQ-INT4: ~5 GB of weights", "llama-3.1-8b int4-g128", "GB",
     CAP("llama-3.1-8b", "int4", "rtx4090", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 5, 0, 0.10,
     "5.7 GB: the 4-bit linears are 3.6 GB, but the embedding and lm_head (1.05B parameters) stay bf16, 2.1 GB"},
    {"rules of thumb", "... on a 24 GB card leaves ~19 GB of KV", "the same on one RTX 4090", "GB",
     CAP("llama-3.1-8b", "int4", "rtx4090", "bf16", 1), {0}, M_KV_POOL, CMP_NEAR, 19, 0, 0.05, NULL},
    {"rules of thumb", "... for 4-8 sessions", "the same, sequences of 8K", "sequences",
     CAP("llama-3.1-8b", "int4", "rtx4090", "bf16", 1), {0}, M_SEQS, CMP_RANGE, 4, 8, 0,
     "at 8K it is ~17 sessions (131,072 bytes a token); 4-8 is right for 16K-32K contexts"},
    {"rules of thumb", "Llama 3.1 70B Q4_K_M: ~42 GB (needs CPU offload on one 4090)", "llama-3.1-70b q4_k_m", "GB",
     CAP("llama-3.1-70b", "q4_k_m", "rtx4090", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 42, 0, 0.05, NULL},
    {"rules of thumb", "70B AWQ, TP=2 on two 4090s: ~17 GB per GPU", "llama-3.1-70b int4-g128, 2 x RTX 4090, TP 2",
     "GB", CAP("llama-3.1-70b", "int4", "rtx4090", "bf16", 2), {0}, M_WEIGHTS_PER_GPU, CMP_NEAR, 17, 0, 0.10,
     "19.9 GB: 17 is half of the 35 GB the guides give 70B INT4, which leaves out the bf16 embedding and lm_head "
     "(4.2 GB) and the group scales; at utilization 0.9 with a 2 GiB reserve nothing is left for the KV cache"},
    {"rules of thumb", "70B FP8, TP=2 on H100s: ~35 GB per GPU", "llama-3.1-70b fp8, 2 x H100, TP 2", "GB",
     CAP("llama-3.1-70b", "fp8", "h100", "bf16", 2), {0}, M_WEIGHTS_PER_GPU, CMP_NEAR, 35, 0, 0.05, NULL},
    {"rules of thumb", "405B FP8, TP=4: \"~200 GB/GPU, just fits\"", "llama-3.1-405b fp8, 4 x H100, TP 4", "GB",
     CAP("llama-3.1-405b", "fp8", "h100", "bf16", 4), {0}, M_WEIGHTS_PER_GPU, CMP_NEAR, 200, 0, 0.10,
     "410 GB over 4 GPUs is 102.6 GB per GPU, about half the quoted figure; and it does not fit an 80 GB H100 (22.6 GB "
     "over at utilization 1.0). It fits 4 x H200 (22 GB of KV per GPU at 0.9) or 8 x H100 at TP 8 (51.3 GB per GPU)"},
    {"rules of thumb", "405B AWQ, TP=2: \"~100 GB/GPU\"", "llama-3.1-405b int4-g128, 2 x H100, TP 2", "GB",
     CAP("llama-3.1-405b", "int4", "h100", "bf16", 2), {0}, M_WEIGHTS_PER_GPU, CMP_NEAR, 100, 0, 0.10,
     "108.5 GB per GPU, near the quote, but more than an 80 GB card holds: two H200s (16 GB of KV each at 0.9) or "
     "four H100s"},

    /* ---- Llama 3.1 70B formats: weights VRAM ---- */
    {"70B formats", "INT8 SmoothQuant: 70 GB", "llama-3.1-70b int8", "GB",
     CAP("llama-3.1-70b", "int8", "h200", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 70, 0, 0.05, NULL},
    {"70B formats", "INT4 AWQ / GPTQ: 35 GB", "llama-3.1-70b int4-g128", "GB",
     CAP("llama-3.1-70b", "int4", "h200", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 35, 0, 0.05,
     "39.8 GB: 35 GB is 70B x 4 bits, but an AWQ/GPTQ checkpoint keeps the embedding and lm_head in bf16 (4.2 GB, not "
     "1.05) and gives every group of 128 weights an f16 scale and a 4-bit zero (1.3 GB)"},
    {"70B formats", "GGUF Q5_K_M: 49 GB", "llama-3.1-70b q5_k_m", "GB",
     CAP("llama-3.1-70b", "q5_k_m", "h200", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 49, 0, 0.05, NULL},
    {"70B formats", "GGUF Q3_K_M: 33 GB", "llama-3.1-70b q3_k_m", "GB",
     CAP("llama-3.1-70b", "q3_k_m", "h200", "bf16", 1), {0}, M_WEIGHTS, CMP_NEAR, 33, 0, 0.05, NULL},

    /* ---- GGUF effective bits per weight, on Llama 3.1 70B ---- */
    {"GGUF bits", "Q8_0: 8.5", "llama-3.1-70b q8_0", "bits",
     CAP("llama-3.1-70b", "q8_0", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 8.5, 0, 0.05, NULL},
    {"GGUF bits", "Q6_K: 6.6", "llama-3.1-70b q6_k", "bits",
     CAP("llama-3.1-70b", "q6_k", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 6.6, 0, 0.05, NULL},
    {"GGUF bits", "Q5_K_M: 5.7", "llama-3.1-70b q5_k_m", "bits",
     CAP("llama-3.1-70b", "q5_k_m", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 5.7, 0, 0.05, NULL},
    {"GGUF bits", "Q4_K_M: 4.8", "llama-3.1-70b q4_k_m", "bits",
     CAP("llama-3.1-70b", "q4_k_m", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 4.8, 0, 0.05, NULL},
    {"GGUF bits", "Q4_K_S: 4.5", "llama-3.1-70b q4_k_s", "bits",
     CAP("llama-3.1-70b", "q4_k_s", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 4.5, 0, 0.05, NULL},
    {"GGUF bits", "Q3_K_M: 3.9", "llama-3.1-70b q3_k_m", "bits",
     CAP("llama-3.1-70b", "q3_k_m", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 3.9, 0, 0.05, NULL},
    {"GGUF bits", "Q2_K: 3.3", "llama-3.1-70b q2_k", "bits",
     CAP("llama-3.1-70b", "q2_k", "h200", "bf16", 1), {0}, M_BITS, CMP_NEAR, 3.3, 0, 0.05,
     "2.98 on 70B: q2_K blocks are 2.625 bits, and the mix lifts only attn_v, attn_output, ffn_down and the output "
     "matrix; 3.3 is nearer an 8B model's 3.16, where the q6_K output matrix weighs more"},
};
#define N_SPECS (int)(sizeof specs / sizeof specs[0])

static assay_status plan_of(const scenario *s, assay_plan *p) {
    assay_plan_request r;
    assay_plan_request_default(&r);
    assay_status st;
    if ((st = assay_plan_preset(s->model, &r.model, &r.model_name)) || (st = assay_plan_scheme_parse(s->scheme, &r.scheme)) ||
        (st = assay_plan_gpu_find(s->gpu, &r.gpu)) || (st = assay_kv_dtype_from_name(s->kv, &r.kv_dtype)))
        return st;
    r.num_gpus = s->n;
    r.tensor_parallel = s->tp;
    r.gpu_memory_utilization = s->util;
    r.reserve_bytes = s->reserve_gib * 1073741824.0;
    r.max_model_len = s->max_len;
    return assay_plan_compute(&r, p);
}

static double value_of(const assay_plan *p, metric m) {
    double gpus = (double)(p->replicas * p->tensor_parallel);
    switch (m) {
    case M_WEIGHTS: return p->weight_bytes / 1e9;
    case M_WEIGHTS_PER_GPU: return p->weight_bytes_per_gpu / 1e9;
    case M_KV_POOL: return p->kv_pool_bytes_per_gpu * gpus / 1e9; /* over every GPU */
    case M_KV_TOKENS: return (double)p->kv_tokens * (double)p->replicas;
    case M_SEQS: return p->concurrency * (double)p->replicas;
    case M_DECODE32: return p->decode[1].tokens_per_s * (double)p->replicas;
    case M_DECODE1: return p->decode[0].tokens_per_s * (double)p->replicas;
    case M_BITS: return p->bits_per_weight;
    }
    return NAN;
}

static assay_plan_guide_row rows[N_SPECS];

assay_status assay_plan_guide_rows(const assay_plan_guide_row **out, int *n_rows) {
    for (int i = 0; i < N_SPECS; i++) {
        const guide_spec *g = &specs[i];
        assay_plan p, p2;
        assay_status st = plan_of(&g->s, &p);
        if (!st && g->cmp == CMP_GROWTH) st = plan_of(&g->s2, &p2);
        if (st) return assay_fail_context(st, "guide figure '%s'", g->claim);
        double v = value_of(&p, g->m);
        if (g->cmp == CMP_GROWTH) v = (value_of(&p2, g->m) / v - 1.0) * 100.0;
        assay_plan_guide_verdict verdict;
        switch (g->cmp) {
        case CMP_RANGE: verdict = v >= g->quoted && v <= g->quoted_hi ? ASSAY_PLAN_GUIDE_AGREES : ASSAY_PLAN_GUIDE_DISAGREES; break;
        case CMP_BOUND: verdict = g->quoted <= v ? ASSAY_PLAN_GUIDE_BELOW_BOUND : ASSAY_PLAN_GUIDE_DISAGREES; break;
        default: verdict = fabs(v / g->quoted - 1.0) <= g->tol ? ASSAY_PLAN_GUIDE_AGREES : ASSAY_PLAN_GUIDE_DISAGREES; break;
        }
        rows[i] = (assay_plan_guide_row){g->table, g->claim, g->setup, g->unit, g->quoted, g->quoted_hi, v, g->tol, verdict, g->why};
    }
    *out = rows;
    *n_rows = N_SPECS;
    return ASSAY_OK;
}
