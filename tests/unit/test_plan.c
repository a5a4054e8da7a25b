/* test_plan.c — the deployment planner (plan.h):
 *   - three presets against numbers worked out by hand below (the arithmetic is in the comments): Llama 3.1 8B bf16
 *     on one H100, Llama 3.1 70B fp8 at TP 4 on H100s, Qwen 2.5 14B int4-g128 at TP 2 on L40S with an fp8 cache;
 *   - KV head replication past n_kv ranks, the vocabulary padding, data-parallel replicas, scheme and size parsing;
 *   - the deployment guides' figures: every row's verdict, and the computed values against hand numbers;
 *   - bad input: unknown preset / GPU / scheme, TP that does not divide heads or the FFN, an INT4 group that does not
 *     divide a row-parallel input, GPUs that are not a multiple of TP, max-model-len past the context, weights that
 *     do not fit (and by how much);
 *   - the planner and the engine agree on the house model: KV bytes a token x 16 = the engine's block bytes for f16 and
 *     fp8 caches, and the KV pool the engine builds from a byte budget has the blocks the planner predicts. */
#include <stdio.h>
#include <string.h>

#include "assay/engine.h"
#include "assay/hf_config.h"
#include "assay/plan.h"
#include "check.h"
#include "engine/kv_cache.h"

static assay_plan_request req(const char *model, const char *scheme, const char *gpu, int64_t n, int64_t tp, assay_kv_dtype kv) {
    assay_plan_request r;
    assay_plan_request_default(&r);
    CHECK_OK(assay_plan_preset(model, &r.model, &r.model_name));
    CHECK_OK(assay_plan_scheme_parse(scheme, &r.scheme));
    CHECK_OK(assay_plan_gpu_find(gpu, &r.gpu));
    r.num_gpus = n;
    r.tensor_parallel = tp;
    r.kv_dtype = kv;
    return r;
}

static void test_llama_8b_bf16(void) {
    /* Llama 3.1 8B: 32 layers, hidden 4096, 32 heads, 8 KV heads x 128, FFN 14336, vocab 128256, untied.
     *   embedding and lm_head: 2 x 128256 x 4096                          = 1,050,673,152
     *   a layer: q 4096x4096 16,777,216 + k, v 4096x1024 4,194,304 each + o 16,777,216
     *            + gate, up, down 4096x14336 58,720,256 each + 2 norms of 4096 = 218,112,000
     *   32 layers 6,979,584,000 + final norm 4096 + 1,050,673,152        = 8,030,261,248 parameters
     *   bf16: x 2                                                         = 16,060,522,496 bytes
     * KV bf16: 32 layers x K,V x 8 heads x 128 x 2 bytes                  = 131,072 bytes a token
     * one H100 (80e9), util 0.9, reserve 2 GiB: 72e9 - 16,060,522,496 - 2,147,483,648 = 53,791,993,856 bytes
     *   blocks of 16 tokens (2,097,152 bytes): 25,650 (25,650 x 2,097,152 = 53,791,948,800) = 410,400 tokens
     *   concurrency at 8192: 25,650 / 512                                 = 50.098
     * decode at context 1024: KV read a sequence 1024 x 131,072 = 134,217,728
     *   batch 1: 3.35e12 / (16,060,522,496 + 134,217,728 = 16,194,740,224)              = 206.857 tok/s
     *   batch 32: 32 x 3.35e12 / (16,060,522,496 + 4,294,967,296 = 20,355,489,792)     = 5,266.39 tok/s */
    assay_plan_request r = req("llama-3.1-8b", "bf16", "h100", 1, 1, ASSAY_KV_BF16);
    assay_plan p;
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK_NEAR(p.params, 8030261248.0, 0);
    CHECK_NEAR(p.weight_bytes, 16060522496.0, 0);
    CHECK_NEAR(p.weight_bytes_per_gpu, 16060522496.0, 0);
    CHECK_NEAR(p.bits_per_weight, 16.0, 1e-12);
    CHECK_NEAR(p.kv_bytes_per_token, 131072, 0);
    CHECK_NEAR(p.kv_pool_bytes_per_gpu, 53791993856.0, 1e-3);
    CHECK(p.kv_blocks == 25650 && p.kv_tokens == 410400);
    CHECK_NEAR(p.concurrency, 25650.0 / 512.0, 1e-12);
    CHECK(p.max_seqs == 50 && p.fits);
    CHECK_NEAR(p.decode[0].tokens_per_s, 3.35e12 / 16194740224.0, 1e-9);
    CHECK_NEAR(p.decode[1].tokens_per_s, 32 * 3.35e12 / 20355489792.0, 1e-9);
    CHECK_NEAR(p.decode[0].tokens_per_s, 206.857, 0.001);
    CHECK_NEAR(p.decode[1].tokens_per_s, 5266.39, 0.01);
    CHECK(p.decode[1].kv_fits);
}

static void test_llama_70b_fp8_tp4(void) {
    /* Llama 3.1 70B: 80 layers, hidden 8192, 64 heads, 8 KV heads x 128, FFN 28672, vocab 128256, untied; fp8 on 4 x H100.
     * A layer's linears: q, o 8192x8192 = 67,108,864 each; k, v 8192x1024 = 8,388,608 each; gate, up, down
     *   8192x28672 = 234,881,024 each; in all 855,638,016 weights, 1 byte each under fp8.
     * Per rank (TP 4): every linear is split 4 ways: 213,909,504 bytes. f32 scales, one per output row the rank holds:
     *   q 2048 + k 256 + v 256 (2 KV heads x 128) + o 8192 (row-parallel: all outputs) + gate 7168 + up 7168 + down
     *   8192 = 33,280 rows x 4 = 133,120; two bf16 norms of 8192, replicated: 32,768.
     *   a layer 214,075,392 x 80 = 17,126,031,360
     *   embedding and lm_head stay bf16, vocab-parallel: 128256 / 4 = 32,064 rows x 8192 x 2 bytes x 2 = 1,050,673,152
     *   final norm 16,384                                            -> 18,176,720,896 bytes per GPU
     * The whole model: 80 x 855,638,016 = 68,451,041,280 + scales 80 x 83,968 rows x 4 = 26,869,760 + norms
     *   80 x 32,768 = 2,621,440 + bf16 embedding and lm_head 4,202,692,608 + 16,384 = 72,683,241,472
     * KV bf16: 327,680 bytes a token (80 x 2 x 8 x 128 x 2), 81,920 per GPU (2 heads each).
     * Pool: 72e9 - 18,176,720,896 - 2,147,483,648 = 51,675,795,456; blocks of 1,310,720 bytes: 39,425
     *   (39,425 x 1,310,720 = 51,675,136,000) = 630,800 tokens; concurrency at 8192 39,425 / 512 = 77.002 */
    assay_plan_request r = req("llama-3.1-70b", "fp8", "h100", 4, 4, ASSAY_KV_BF16);
    assay_plan p;
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK_NEAR(p.params, 70553706496.0, 0);
    CHECK_NEAR(p.weight_bytes, 72683241472.0, 0);
    CHECK_NEAR(p.weight_bytes_per_gpu, 18176720896.0, 0);
    CHECK(p.kv_heads_per_gpu == 2 && p.kv_head_copies == 1 && p.vocab_per_gpu == 32064);
    CHECK_NEAR(p.kv_bytes_per_token, 327680, 0);
    CHECK_NEAR(p.kv_bytes_per_token_per_gpu, 81920, 0);
    CHECK(p.kv_blocks == 39425 && p.kv_tokens == 630800 && p.max_seqs == 77 && p.replicas == 1);
    CHECK_NEAR(p.concurrency, 39425.0 / 512.0, 1e-12);

    /* TP 16 > 8 KV heads: one head a rank, each head on 2 ranks; KV a token per GPU = 80 x 2 x 1 x 128 x 2 = 40,960 */
    r = req("llama-3.1-70b", "bf16", "h100", 16, 16, ASSAY_KV_BF16);
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK(p.kv_heads_per_gpu == 1 && p.kv_head_copies == 2);
    CHECK_NEAR(p.kv_bytes_per_token_per_gpu, 40960, 0);
    /* 8 GPUs at TP 4: two replicas, twice the tokens and sequences of one */
    assay_plan one;
    r = req("llama-3.1-70b", "fp8", "h100", 4, 4, ASSAY_KV_BF16);
    CHECK_OK(assay_plan_compute(&r, &one));
    r.num_gpus = 8;
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK(p.replicas == 2 && p.kv_tokens == one.kv_tokens && p.max_seqs == 2 * one.max_seqs);
}

static void test_qwen_14b_int4_tp2(void) {
    /* Qwen 2.5 14B: 48 layers, hidden 5120, 40 heads, 8 KV heads x 128, FFN 13824, vocab 152064, untied, q/k/v biases.
     * int4-g128 (AWQ layout: in x out / 2 bytes of nibbles, per group of 128 inputs an f16 scale per output and a 4-bit
     * zero per output, zeros packed 8 to an int32), TP 2 on 2 x L40S (48e9 bytes, 864 GB/s), fp8 KV (vLLM layout).
     * Per rank, a layer:
     *   q: 2560 out x 5120 in: 6,553,600 + 40 groups x 2560 x 2 = 204,800 + 40 x 320 int32 = 51,200 -> 6,809,600
     *   k, v: 4 KV heads = 512 out x 5120 in: 1,310,720 + 40,960 + 10,240                        -> 1,361,920 each
     *   o: row-parallel, 5120 out x 2560 in: 6,553,600 + 20 x 5120 x 2 + 20 x 640 x 4             -> 6,809,600
     *   gate, up: 6912 out x 5120 in: 17,694,720 + 40 x 6912 x 2 + 40 x 864 x 4                    -> 18,385,920 each
     *   down: row-parallel, 5120 out x 6912 in: 17,694,720 + 54 x 5120 x 2 + 54 x 640 x 4         -> 18,385,920
     *   linears 71,500,800 + bf16 biases (2560 + 512 + 512) x 2 = 7,168 + bf16 norms 2 x 5120 x 2 = 20,480
     *   = 71,528,448 x 48 layers = 3,433,365,504
     *   embedding and lm_head bf16: 152064 / 2 = 76,032 rows x 5120 x 2 x 2 = 1,557,135,360; final norm 10,240
     *   -> 4,990,511,104 bytes per GPU
     * KV fp8: 48 x 2 x 4 heads x 128 x 1 = 49,152 bytes a token per GPU (98,304 for the model).
     * Pool: 0.9 x 48e9 = 43.2e9 - 4,990,511,104 - 2,147,483,648 = 36,062,005,248; blocks of 786,432 bytes: 45,855
     *   (45,855 x 786,432 = 36,061,839,360) = 733,680 tokens
     * decode at context 1024 (50,331,648 bytes of KV a sequence):
     *   batch 1: 864e9 / 5,040,842,752 = 171.400 tok/s; batch 32: 32 x 864e9 / 6,601,123,840 = 4,188.38 tok/s */
    assay_plan_request r = req("Qwen/Qwen2.5-14B-Instruct", "awq", "L40S", 2, 2, ASSAY_KV_FP8_E4M3);
    assay_plan p;
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK(!strcmp(r.scheme.name, "int4-g128") && r.scheme.group == 128);
    CHECK_NEAR(p.weight_bytes_per_gpu, 4990511104.0, 0);
    CHECK_NEAR(p.kv_bytes_per_token_per_gpu, 49152, 0);
    CHECK_NEAR(p.kv_bytes_per_token, 98304, 0);
    CHECK(p.kv_blocks == 45855 && p.kv_tokens == 733680);
    CHECK_NEAR(p.decode[0].tokens_per_s, 864e9 / 5040842752.0, 1e-9);
    CHECK_NEAR(p.decode[1].tokens_per_s, 32 * 864e9 / 6601123840.0, 1e-9);
    CHECK_NEAR(p.decode[0].tokens_per_s, 171.400, 0.001);
    /* the engine's fp8 layout adds an f32 scale per token and KV head for K and V: 48 x 2 x 4 x (128 + 4) = 50,688 */
    r.kv_slot_scales = 1;
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK_NEAR(p.kv_bytes_per_token_per_gpu, 50688, 0);
}

static void test_parsing(void) {
    assay_plan_gpu g;
    CHECK_OK(assay_plan_gpu_find("H100 SXM 80 GB", &g));
    CHECK(g.memory_bytes == 80e9 && g.bandwidth == 3.35e12);
    CHECK_OK(assay_plan_gpu_find("rtx-4090", &g));
    CHECK(g.memory_bytes == 24e9 && g.bandwidth == 1008e9);
    CHECK_OK(assay_plan_gpu_find("B200", &g));
    CHECK(g.memory_bytes == 180e9 && g.bandwidth == 8e12);
    CHECK_OK(assay_plan_gpu_find("h200", &g));
    CHECK(g.memory_bytes == 141e9 && g.bandwidth == 4.8e12);
    CHECK(assay_plan_gpu_count() == 5);
    CHECK(assay_plan_gpu_find("a100", &g) == ASSAY_ERR_ARG && strstr(assay_last_error(), "unknown GPU 'a100'"));
    assay_plan_scheme s;
    CHECK_OK(assay_plan_scheme_parse("Q4_K_M", &s));
    CHECK(s.kind == ASSAY_PLAN_SCHEME_GGUF && !strcmp(s.name, "q4_k_m"));
    CHECK_OK(assay_plan_scheme_parse("w8a8-int8", &s));
    CHECK(s.kind == ASSAY_PLAN_SCHEME_W8 && !strcmp(s.name, "int8"));
    CHECK_OK(assay_plan_scheme_parse("int4-g64", &s));
    CHECK(s.kind == ASSAY_PLAN_SCHEME_INT4 && s.group == 64);
    CHECK(assay_plan_scheme_parse("int3", &s) == ASSAY_ERR_ARG && strstr(assay_last_error(), "unknown weight scheme 'int3'"));
    CHECK(assay_plan_parse_bytes("80GB") == 80e9);
    CHECK(assay_plan_parse_bytes("2GiB") == 2147483648.0);
    CHECK(assay_plan_parse_bytes("2G") == 2147483648.0);
    CHECK(assay_plan_parse_bytes("3.35TB/s") == 3.35e12);
    CHECK(assay_plan_parse_bytes("85520809984") == 85520809984.0);
    CHECK(assay_plan_parse_bytes("80 apples") < 0 && assay_plan_parse_bytes("") < 0 && assay_plan_parse_bytes("-1GB") < 0);
    assay_model_config c;
    const char *name;
    CHECK_OK(assay_plan_preset("meta-llama/Meta-Llama-3.1-405B-Instruct", &c, &name));
    CHECK(!strcmp(name, "Llama 3.1 405B") && c.n_layer == 126 && c.n_embd == 16384 && c.n_ff == 53248);
    CHECK_OK(assay_plan_preset("Qwen 2.5 72B", &c, &name));
    CHECK(c.n_layer == 80 && c.n_ff == 29568 && c.n_vocab == 152064 && c.has_qkv_bias && !c.tied_embeddings);
}

static void test_bad_input(void) {
    assay_model_config c;
    CHECK(assay_plan_preset("llama-3.1-7b", &c, NULL) == ASSAY_ERR_ARG && strstr(assay_last_error(), "known preset"));
    assay_plan p;
    assay_plan_request r = req("llama-3.1-70b", "bf16", "h100", 3, 3, ASSAY_KV_BF16);
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "does not divide the model's 64 attention heads"));
    r = req("qwen2.5-14b", "bf16", "h100", 20, 20, ASSAY_KV_BF16); /* 40 heads: 20 divides them, but not the 8 KV heads */
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "KV heads"));
    r = req("llama-3.1-8b", "bf16", "h100", 6, 4, ASSAY_KV_BF16);
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "not a multiple of --tensor-parallel-size"));
    r = req("qwen2.5-14b", "bf16", "h100", 1, 1, ASSAY_KV_BF16);
    r.max_model_len = 65536;
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "longer than the model's context of 32768"));
    /* Qwen 2.5 72B's FFN of 29568 over TP 8 is 3696 inputs of down_proj a rank: not a multiple of 128 */
    r = req("qwen2.5-72b", "int4", "h100", 8, 8, ASSAY_KV_BF16);
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "ffn_down.weight has 3696 inputs per GPU"));
    /* an FFN width the tensor-parallel size does not divide */
    r = req("llama-3.1-8b", "bf16", "h100", 2, 2, ASSAY_KV_BF16);
    r.model.n_ff = 14335;
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "FFN width 14335"));
    /* 405B fp8 over 4 H100s: 102.55 GB of weights a GPU against 72 GB usable. Short by the weights + reserve - usable
     * (+ one 8192-token sequence: 8192 x 129,024 bytes a token per GPU = 1,056,964,608) */
    r = req("llama-3.1-405b", "fp8", "h100", 4, 4, ASSAY_KV_BF16);
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK(!p.fits && p.kv_pool_bytes_per_gpu < 0 && p.kv_tokens == 0 && p.max_seqs == 0);
    CHECK_NEAR(p.weight_bytes_per_gpu / 1e9, 102.55, 0.01);
    CHECK_NEAR(p.short_bytes, p.weight_bytes_per_gpu + 2147483648.0 - 72e9 + 8192.0 * 129024.0, 1e-3);
    /* a pool smaller than one sequence: 8B bf16 on a 20 GB card at full context */
    r = req("llama-3.1-8b", "bf16", "rtx4090", 1, 1, ASSAY_KV_BF16);
    r.max_model_len = 131072; /* 131072 x 131,072 bytes = 17.2 GB of KV for one sequence */
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK(!p.fits && p.kv_pool_bytes_per_gpu > 0 && p.short_bytes > 0 && p.max_seqs == 0);
    r = req("llama-3.1-8b", "stored", "h100", 1, 1, ASSAY_KV_BF16);
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "needs a GGUF file"));
    r = req("llama-3.1-8b", "bf16", "h100", 1, 1, ASSAY_KV_BF16);
    r.gpu_memory_utilization = 1.5;
    CHECK(assay_plan_compute(&r, &p) == ASSAY_ERR_ARG && strstr(assay_last_error(), "--gpu-memory-utilization"));
}

/* The guide rows: the verdict each must get, and the computed value against hand arithmetic. */
static void test_guides(void) {
    const assay_plan_guide_row *rows;
    int n;
    CHECK_OK(assay_plan_guide_rows(&rows, &n));
    static const struct { const char *claim_start; assay_plan_guide_verdict v; double value, tol; } want[] = {
        /* 70B bf16 weights: 70,553,706,496 x 2 = 141.107 GB (the test above counts the parameters) */
        {"model weights VRAM, BF16", ASSAY_PLAN_GUIDE_AGREES, 141.107, 0.001},
        {"model weights VRAM, FP8", ASSAY_PLAN_GUIDE_AGREES, 72.683, 0.001},
        /* per GPU: the 141.107 GB split four ways, plus the norms every rank keeps (161 x 8192 x 2 = 2,637,824 bytes):
         * 35,278,831,616; 4 x (80e9 - 35,278,831,616) = 178.885 GB */
        {"KV cache VRAM available on 4xH100, BF16", ASSAY_PLAN_GUIDE_AGREES, 178.885, 0.001},
        {"KV cache VRAM available on 4xH100, FP8", ASSAY_PLAN_GUIDE_AGREES, 247.293, 0.001},
        {"KV cache VRAM available, FP8 vs BF16", ASSAY_PLAN_GUIDE_AGREES, 38.24, 0.01},
        /* 178.885e9 / 4 per GPU / 1,310,720 bytes a block = 34,119 blocks x 16 = 545,904 tokens */
        {"maximum concurrency at 8K context, BF16", ASSAY_PLAN_GUIDE_DISAGREES, 545904, 0},
        {"maximum concurrency at 8K context, FP8", ASSAY_PLAN_GUIDE_DISAGREES, 754672, 0},
        {"maximum concurrency at 8K, FP8 vs BF16", ASSAY_PLAN_GUIDE_AGREES, 38.24, 0.01},
        /* 32 x 3.35e12 / (35.279e9 + 32 x 1024 x 81,920) */
        {"decode throughput at batch 32, BF16", ASSAY_PLAN_GUIDE_BELOW_BOUND, 2823.8, 0.1},
        {"decode throughput at batch 32, FP8", ASSAY_PLAN_GUIDE_BELOW_BOUND, 5138.8, 0.1},
        /* Qwen 2.5 14B q4_k_m: 8.982 GB of weights; 24 - 8.982 = 15.018 GB; / 196,608 bytes a token (16-token blocks)
         * = 76,384 tokens = 9.32 sequences of 8192; fp8 twice that */
        {"KV cache VRAM: 15 GB", ASSAY_PLAN_GUIDE_AGREES, 15.018, 0.001},
        {"cache tokens at 8K context, f16", ASSAY_PLAN_GUIDE_DISAGREES, 76384, 0},
        {"cache tokens at 8K context, fp8", ASSAY_PLAN_GUIDE_DISAGREES, 152768, 0},
        {"concurrent users at 8K, f16", ASSAY_PLAN_GUIDE_DISAGREES, 76384.0 / 8192, 1e-9},
        {"concurrent users at 8K, fp8", ASSAY_PLAN_GUIDE_DISAGREES, 152768.0 / 8192, 1e-9},
        {"concurrent users, fp8 vs f16", ASSAY_PLAN_GUIDE_DISAGREES, 100, 1e-9},
        {"decode, f16 KV", ASSAY_PLAN_GUIDE_BELOW_BOUND, 109.76, 0.01},
        {"decode, fp8 KV", ASSAY_PLAN_GUIDE_BELOW_BOUND, 110.98, 0.01},
        {"Llama 3.1 8B AWQ-INT4", ASSAY_PLAN_GUIDE_DISAGREES, 5.728, 0.001},
        {"... on a 24 GB card", ASSAY_PLAN_GUIDE_AGREES, 18.272, 0.001},
        {"... for 4-8 sessions", ASSAY_PLAN_GUIDE_DISAGREES, 17.02, 0.01},
        {"Llama 3.1 70B Q4_K_M", ASSAY_PLAN_GUIDE_AGREES, 42.471, 0.001},
        {"70B AWQ, TP=2 on two 4090s", ASSAY_PLAN_GUIDE_DISAGREES, 19.885, 0.001},
        {"70B FP8, TP=2 on H100s", ASSAY_PLAN_GUIDE_AGREES, 36.346, 0.001},
        {"405B FP8, TP=4", ASSAY_PLAN_GUIDE_DISAGREES, 102.554, 0.001},
        {"405B AWQ, TP=2", ASSAY_PLAN_GUIDE_AGREES, 108.545, 0.001},
        {"INT8 SmoothQuant", ASSAY_PLAN_GUIDE_AGREES, 72.683, 0.001},
        {"INT4 AWQ / GPTQ", ASSAY_PLAN_GUIDE_DISAGREES, 39.768, 0.001},
        {"GGUF Q5_K_M", ASSAY_PLAN_GUIDE_AGREES, 49.942, 0.001},
        {"GGUF Q3_K_M", ASSAY_PLAN_GUIDE_AGREES, 34.178, 0.001},
        /* q8_0: 34 bytes a 32-weight block = 8.5 bits; the f32 norms are a rounding error */
        {"Q8_0", ASSAY_PLAN_GUIDE_AGREES, 8.5, 0.001},
        /* q6_K: 210 bytes a 256-weight block = 6.5625 bits */
        {"Q6_K", ASSAY_PLAN_GUIDE_AGREES, 6.5625, 0.001},
        {"Q5_K_M", ASSAY_PLAN_GUIDE_AGREES, 5.663, 0.001},
        {"Q4_K_M", ASSAY_PLAN_GUIDE_AGREES, 4.816, 0.001},
        {"Q4_K_S", ASSAY_PLAN_GUIDE_AGREES, 4.565, 0.001},
        {"Q3_K_M", ASSAY_PLAN_GUIDE_AGREES, 3.875, 0.001},
        {"Q2_K", ASSAY_PLAN_GUIDE_DISAGREES, 2.980, 0.001},
    };
    int nw = (int)(sizeof want / sizeof want[0]);
    CHECK(n == nw);
    for (int i = 0; i < n && i < nw; i++) {
        const assay_plan_guide_row *r = &rows[i];
        int ok = !strncmp(r->claim, want[i].claim_start, strlen(want[i].claim_start));
        if (!ok) fprintf(stderr, "row %d: '%s', want '%s'\n", i, r->claim, want[i].claim_start);
        CHECK(ok);
        if (r->verdict != want[i].v) fprintf(stderr, "row %d (%s): verdict %d, want %d\n", i, r->claim, r->verdict, want[i].v);
        CHECK(r->verdict == want[i].v);
        CHECK_NEAR(r->computed, want[i].value, want[i].tol);
        CHECK(r->verdict != ASSAY_PLAN_GUIDE_DISAGREES || r->why); /* every figure that does not add up says why */
    }
    /* Llama 3.1 70B under q4_k_m, by llama-quantize's rules: q4_K is 144 bytes a 256-weight block (0.5625 a weight),
     * q6_K 210 (0.8203125). use_more_bits at 80 layers: layers 0-9, 70-79 and 12, 15, ... 69: 40 layers, whose attn_v
     * and ffn_down get q6_K; the rest of the linears and the embedding q4_K, the output matrix q6_K, norms f32.
     *   token_embd 1,050,673,152 x 0.5625                                    =    591,003,648
     *   output     1,050,673,152 x 0.8203125                                 =    861,880,320
     *   q, k, o, gate, up: 612,368,384 a layer x 0.5625 x 80                 = 27,556,577,280
     *   attn_v 8,388,608: 40 x q6_K 6,881,280 + 40 x q4_K 4,718,592          =    463,994,880
     *   ffn_down 234,881,024: 40 x q6_K 192,675,840 + 40 x q4_K 132,120,576  = 12,991,856,640
     *   norms 161 x 8192 x 4                                                 =      5,275,648
     *                                                                          42,470,588,416 */
    assay_plan_request r = req("llama-3.1-70b", "q4_k_m", "h200", 1, 1, ASSAY_KV_BF16);
    assay_plan p;
    CHECK_OK(assay_plan_compute(&r, &p));
    CHECK_NEAR(p.weight_bytes, 42470588416.0, 0);
}

/* The house model through the planner and the engine: the same KV bytes a token and the same pool. */
static void test_engine_agrees(void) {
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s/config.json", check_shared_path("models/house"));
    static const assay_kv_dtype dtypes[2] = {ASSAY_KV_F16, ASSAY_KV_FP8_E4M3};
    for (int i = 0; i < 2; i++) {
        assay_plan_request r;
        assay_plan_request_default(&r);
        CHECK_OK(assay_model_config_from_hf_file(&r.model, cfg));
        r.kv_dtype = dtypes[i];
        r.kv_slot_scales = 1; /* the engine's layout */
        r.max_model_len = 1024;
        r.gpu_memory_utilization = 1.0;
        r.reserve_bytes = 0;
        assay_plan p;
        CHECK_OK(assay_plan_compute(&r, &p));
        /* 7 layers x K,V x 2 KV heads x 64: f16 7 x 2 x 2 x 64 x 2 = 3,584; fp8 7 x 2 x 2 x (64 + 4) = 1,904 */
        CHECK_NEAR(p.kv_bytes_per_token, i == 0 ? 3584 : 1904, 0);
        assay_kv_geom g = {dtypes[i], r.model.n_head_kv, r.model.head_dim};
        size_t block = assay_kv_cache_block_bytes(&g, r.model.n_layer);
        CHECK_NEAR(p.kv_bytes_per_token * ASSAY_KV_BLOCK, (double)block, 0);

        /* a KV budget of 700.5 blocks: the planner's pool (a GPU of weights + budget bytes) and the engine's */
        int64_t budget = (int64_t)(700.5 * (double)block);
        r.gpu.memory_bytes = p.weight_bytes_per_gpu + (double)budget;
        CHECK_OK(assay_plan_compute(&r, &p));
        assay_engine_args a;
        assay_engine_args_default(&a);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", check_shared_path("models/house"));
        a.model = dir;
        a.threads = 1;
        a.kv_cache_dtype = dtypes[i];
        a.max_model_len = 1024;
        a.kv_cache_memory = budget;
        assay_engine *e = NULL;
        CHECK_OK(assay_engine_open(&e, &a));
        if (!e) continue;
        long long blocks = -1;
        const char *d = assay_engine_describe(e);
        CHECK(sscanf(d, "KV pool %lld blocks", &blocks) == 1);
        printf("%s KV: planner %lld blocks (%lld tokens), engine: %s\n", assay_kv_dtype_name(dtypes[i]),
               (long long)p.kv_blocks, (long long)p.kv_tokens, d);
        CHECK(blocks == 700 && p.kv_blocks == 700);
        assay_engine_close(e);
    }
}

int main(void) {
    test_llama_8b_bf16();
    test_llama_70b_fp8_tp4();
    test_qwen_14b_int4_tp2();
    test_parsing();
    test_bad_input();
    test_guides();
    test_engine_agrees();
    return check_finish("plan");
}
