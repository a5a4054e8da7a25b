/* test_shard.c — tensor parallelism's sharding rules (shard.h):
 *   - tiling: for the house model, Llama 3 8B and 70B (bench/configs) at TP 1, 2, 4, 8 and four weight storages
 *     (bf16, fp8 per channel, fp8 per tensor, int4 groups), the ranks' ranges of every weight cover its split
 *     dimension exactly once (KV heads exactly kv_head_copies times), the other dimension whole; every rank's query
 *     heads read only KV heads it holds; the ranks' bytes add up to the unsharded bytes plus exactly what the rules
 *     replicate (norms, row-parallel per-channel scales, per-tensor scales, KV heads kept on several ranks) and the
 *     vocabulary's padding rows;
 *   - hand numbers: Llama 3 8B bf16 over 2 ranks, KV replication (70B at TP 16, the house model's 2 KV heads at TP 4
 *     and 8, one KV head at TP 8, 12 heads over 3 KV heads at TP 6), scale ranges of fp8 and int4 weights;
 *   - errors, each naming the rule and both numbers: heads, KV heads, FFN, padded vocabulary, int4 groups cut by a
 *     row-parallel split, a rank outside the group;
 *   - numbers: a random f32 layer (embedding, q/k/v, causal GQA attention, o_proj, gate/up/down, lm_head) computed
 *     whole and as each rank computes its shard, the row-parallel partial outputs summed (the all-reduce), the
 *     vocab-parallel embedding summed and the lm_head's logits concatenated. The rank's attention outputs must equal
 *     the whole model's bit for bit (same heads, same operations); the all-reduced outputs may differ only by the
 *     reassociation of f32 sums, bounded by 2 gamma_K sum|a_i w_i| (Higham's dot-product bound, for each order). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/hf_config.h"
#include "assay/shard.h"
#include "check.h"

#define MAX_TP 16

static const assay_shard_dtype BF16 = {ASSAY_SHARD_QUANT_NONE, 0, 2};
static const assay_shard_dtype FP8_CHANNEL = {ASSAY_SHARD_QUANT_FP8_CHANNEL, 0, 2};
static const assay_shard_dtype FP8_TENSOR = {ASSAY_SHARD_QUANT_FP8_TENSOR, 0, 2};

static int load_model(assay_shard_model *m, const char *path, const assay_shard_dtype *d) {
    assay_model_config c;
    assay_status st = assay_model_config_from_hf_file(&c, path);
    if (st) {
        fprintf(stderr, "%s: %s\n", path, assay_last_error());
        CHECK(0);
        return 0;
    }
    assay_shard_model_from_config(&c, d, m);
    return 1;
}

static const char *bench_config(const char *name) {
    static char buf[4096];
    const char *src = getenv("ASSAY_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "ASSAY_SOURCE_DIR is not set (run the tests through ctest)\n");
        exit(1);
    }
    snprintf(buf, sizeof buf, "%s/bench/configs/%s/config.json", src, name);
    return buf;
}

/* Every index of [0, n) is covered `times` times by the ranges. */
static int covers(const assay_shard_range *r, int64_t n_ranges, int64_t n, int64_t times) {
    int64_t *count = calloc((size_t)(n > 0 ? n : 1), sizeof *count);
    int ok = 1;
    for (int64_t i = 0; i < n_ranges && ok; i++) {
        if (r[i].begin < 0 || r[i].end > n || r[i].begin > r[i].end) ok = 0;
        for (int64_t j = r[i].begin; ok && j < r[i].end; j++) count[j]++;
    }
    for (int64_t j = 0; ok && j < n; j++) ok = count[j] == times;
    free(count);
    return ok;
}

static int whole(assay_shard_range r, int64_t n) { return r.begin == 0 && r.end == n; }

/* Plans every rank at `tp` and checks the tiling, the GQA mapping and the bytes. */
static void check_tiling(const char *label, const assay_shard_model *m, int64_t tp) {
    static assay_shard s[MAX_TP];
    for (int64_t r = 0; r < tp; r++)
        if (assay_shard_plan(m, tp, r, &s[r]) != ASSAY_OK) {
            fprintf(stderr, "%s TP %lld rank %lld: %s\n", label, (long long)tp, (long long)r, assay_last_error());
            CHECK(0);
            return;
        }
    int64_t copies = m->n_head_kv >= tp ? 1 : tp / m->n_head_kv, group = m->n_head / m->n_head_kv;
    assay_shard_range part[MAX_TP], part2[MAX_TP];
    /* heads: query heads once each; KV heads `copies` times; each rank's query heads read its own KV heads */
    int gqa_ok = 1;
    for (int64_t r = 0; r < tp; r++) {
        part[r] = s[r].q_heads;
        part2[r] = s[r].kv_heads;
        for (int64_t h = s[r].q_heads.begin; h < s[r].q_heads.end; h++)
            gqa_ok &= h / group >= s[r].kv_heads.begin && h / group < s[r].kv_heads.end;
        int64_t nq = s[r].q_heads.end - s[r].q_heads.begin, nkv = s[r].kv_heads.end - s[r].kv_heads.begin;
        /* the rank's local GQA: local query head j reads local KV head j / (nq / nkv) */
        for (int64_t j = 0; j < nq; j++) gqa_ok &= (s[r].q_heads.begin + j) / group == s[r].kv_heads.begin + j / (nq / nkv);
        gqa_ok &= s[r].kv_head_copies == copies;
    }
    CHECK(covers(part, tp, m->n_head, 1));
    CHECK(covers(part2, tp, m->n_head_kv, copies));
    CHECK(gqa_ok);
    if (!gqa_ok) fprintf(stderr, "  %s TP %lld: a rank's query heads read a KV head it does not hold\n", label, (long long)tp);

    size_t elem = m->dtype.elem_bytes;
    int per_tensor = m->dtype.quant == ASSAY_SHARD_QUANT_FP8_TENSOR;
    int per_channel = m->dtype.quant == ASSAY_SHARD_QUANT_FP8_CHANNEL || m->dtype.quant == ASSAY_SHARD_QUANT_INT8_CHANNEL;
    for (int role = 0; role < ASSAY_SHARD_ROLE_COUNT; role++) {
        const assay_shard_weight *w0 = &s[0].w[role];
        for (int64_t r = 1; r < tp; r++) CHECK(s[r].w[role].present == w0->present);
        if (!w0->present) continue;
        int ok = 1;
        size_t sum = 0;
        for (int64_t r = 0; r < tp; r++) {
            const assay_shard_weight *w = &s[r].w[role];
            ok &= w->n_out == w0->n_out && w->n_in == w0->n_in && w->split == w0->split && w->full_bytes == w0->full_bytes;
            part[r] = w0->split == ASSAY_SHARD_ROW ? w->in : w->out;
            part2[r] = w0->split == ASSAY_SHARD_ROW ? w->out : w->in; /* the dimension that is not split */
            if (w0->split == ASSAY_SHARD_VOCAB) part2[r] = s[r].vocab;
            ok &= w0->split == ASSAY_SHARD_VOCAB ? w->rows == s[0].vocab_padded / tp : w->rows == w->out.end - w->out.begin;
            sum += w->bytes;
        }
        int64_t n_split = w0->split == ASSAY_SHARD_ROW ? w0->n_in : w0->n_out;
        int64_t n_other = w0->split == ASSAY_SHARD_ROW ? w0->n_out : w0->n_in;
        size_t extra = 0; /* what the ranks hold beyond one copy of the tensor */
        size_t scale1 = w0->linear && per_tensor ? 4 : 0;
        switch (w0->split) {
        case ASSAY_SHARD_REPLICATED:
            ok &= covers(part, tp, n_split, tp);
            extra = (size_t)(tp - 1) * w0->full_bytes;
            break;
        case ASSAY_SHARD_COLUMN:
            ok &= covers(part, tp, n_split, 1);
            for (int64_t r = 0; r < tp; r++) ok &= whole(part2[r], n_other);
            extra = (size_t)(tp - 1) * scale1; /* a per-tensor scale on every rank */
            break;
        case ASSAY_SHARD_COLUMN_KV:
            ok &= covers(part, tp, n_split, copies);
            for (int64_t r = 0; r < tp; r++) ok &= whole(part2[r], n_other);
            /* replicated KV heads: each held `copies` times */
            extra = (size_t)(copies - 1) * (w0->full_bytes - scale1) + (size_t)(tp - 1) * scale1;
            break;
        case ASSAY_SHARD_ROW:
            ok &= covers(part, tp, n_split, 1);
            for (int64_t r = 0; r < tp; r++) ok &= whole(part2[r], n_other);
            /* every rank keeps every output row, hence the whole per-channel scale vector */
            extra = (size_t)(tp - 1) * (per_channel ? (size_t)w0->n_out * 4 : scale1);
            break;
        case ASSAY_SHARD_VOCAB:
            ok &= covers(part, tp, n_split, 1);            /* the real tokens, once each */
            ok &= covers(part2, tp, s[0].vocab_padded, 1); /* the padded rows, once each */
            for (int64_t r = 0; r < tp; r++) ok &= whole(s[r].w[role].in, n_other);
            extra = (size_t)(s[0].vocab_padded - m->n_vocab) * (size_t)m->n_embd * elem;
            break;
        }
        if (!ok || sum != w0->full_bytes + extra)
            fprintf(stderr, "  %s TP %lld %s (%s): tiling %s, bytes %zu over the ranks, want %zu + %zu\n", label,
                    (long long)tp, assay_shard_role_name(role), assay_shard_split_name(w0->split), ok ? "ok" : "WRONG", sum,
                    w0->full_bytes, extra);
        CHECK(ok);
        CHECK(sum == w0->full_bytes + extra);
    }
}

static void test_tiling(void) {
    static const int64_t tps[] = {1, 2, 4, 8};
    const struct {
        const char *label, *path;
        int64_t group, int4_max_tp; /* the int4 group that splits it, and up to which TP (see test_errors) */
    } models[] = {
        {"house", check_shared_path("models/house/config.json"), 32, 4},
        {"llama3-8b", NULL, 128, 8},
        {"llama3-70b", NULL, 128, 8},
    };
    char paths[3][4096];
    for (int i = 0; i < 3; i++) snprintf(paths[i], sizeof paths[i], "%s", models[i].path ? models[i].path : bench_config(models[i].label));
    for (int i = 0; i < 3; i++) {
        const assay_shard_dtype int4 = {ASSAY_SHARD_QUANT_INT4_GROUP, models[i].group, 2};
        const assay_shard_dtype *dtypes[] = {&BF16, &FP8_CHANNEL, &FP8_TENSOR, &int4};
        for (int d = 0; d < 4; d++) {
            assay_shard_model m;
            if (!load_model(&m, paths[i], dtypes[d])) return;
            for (size_t t = 0; t < sizeof tps / sizeof tps[0]; t++) {
                if (d == 3 && tps[t] > models[i].int4_max_tp) {
                    CHECK(assay_shard_check(&m, tps[t]) == ASSAY_ERR_ARG);
                    continue;
                }
                check_tiling(models[i].label, &m, tps[t]);
            }
        }
    }
}

static void test_hand_numbers(void) {
    assay_shard_model m;
    assay_shard s;
    if (!load_model(&m, bench_config("llama3-8b"), &BF16)) return;
    /* Llama 3 8B bf16: 32 layers, hidden 4096, 32 heads, 8 KV heads x 128, FFN 14336, vocab 128256, untied.
     * Whole: embedding + lm_head 2 x 128256 x 4096 = 1,050,673,152; a layer 218,112,000 (q 16,777,216, k and v
     * 4,194,304 each, o 16,777,216, gate/up/down 58,720,256 each, 2 norms of 4096) x 32 + final norm 4096
     * = 8,030,261,248 parameters x 2 = 16,060,522,496 bytes.
     * TP 2, a rank: a layer q 2048 x 4096 = 8,388,608 + k, v 512 x 4096 = 2,097,152 each + o 4096 x 2048 = 8,388,608
     *   + gate, up 7168 x 4096 and down 4096 x 7168 = 29,360,128 each + norms 8192 = 109,060,096 elements = 218,120,192
     *   bytes x 32 = 6,979,846,144; embedding + lm_head 64,128 rows x 4096 x 2 x 2 = 1,050,673,152; final norm 8192
     *   -> 8,030,527,488 bytes: half the model + the norms every rank keeps ((32 x 2 + 1) x 4096 x 2 = 532,480 / 2) */
    CHECK_OK(assay_shard_plan(&m, 2, 1, &s));
    CHECK(s.full_weight_bytes == 16060522496u);
    CHECK(s.weight_bytes == 8030527488u);
    CHECK(s.q_heads.begin == 16 && s.q_heads.end == 32 && s.kv_heads.begin == 4 && s.kv_heads.end == 8);
    CHECK(s.vocab.begin == 64128 && s.vocab.end == 128256 && s.vocab_padded == 128256);
    const assay_shard_weight *q = &s.w[ASSAY_SHARD_ROLE_ATTN_Q], *o = &s.w[ASSAY_SHARD_ROLE_ATTN_OUTPUT];
    const assay_shard_weight *k = &s.w[ASSAY_SHARD_ROLE_ATTN_K], *down = &s.w[ASSAY_SHARD_ROLE_FFN_DOWN];
    const assay_shard_weight *up = &s.w[ASSAY_SHARD_ROLE_FFN_UP];
    CHECK(q->out.begin == 2048 && q->out.end == 4096 && whole(q->in, 4096));
    CHECK(k->out.begin == 512 && k->out.end == 1024 && whole(k->in, 4096));
    CHECK(o->in.begin == 2048 && o->in.end == 4096 && whole(o->out, 4096)); /* o_proj reads the rank's heads */
    CHECK(up->out.begin == 7168 && up->out.end == 14336 && down->in.begin == 7168 && down->in.end == 14336);
    CHECK(!s.w[ASSAY_SHARD_ROLE_ATTN_Q_BIAS].present && s.w[ASSAY_SHARD_ROLE_OUTPUT].present);
    assay_shard_bytes b;
    CHECK_OK(assay_shard_rank_bytes(&m, 2, ASSAY_KV_BF16, 0, &b));
    CHECK(b.weights == 8030527488u);
    CHECK(b.kv_per_token == 32u * 2 * 4 * 128 * 2); /* 32 layers x K,V x 4 KV heads x 128 x 2 bytes = 65,536 */

    /* fp8 per channel, TP 2: q's scales follow its rows, o_proj keeps all 4096 scales on each rank;
     * a rank's q = 2048 x 4096 bytes + 2048 x 4; o = 4096 x 2048 + 4096 x 4 */
    m.dtype = FP8_CHANNEL;
    CHECK_OK(assay_shard_plan(&m, 2, 1, &s));
    CHECK(q->scale_out.begin == 2048 && q->scale_out.end == 4096 && q->scale_in.end == 1);
    CHECK(whole(o->scale_out, 4096) && o->scale_in.end == 1);
    CHECK(q->bytes == 2048u * 4096 + 2048 * 4 && o->bytes == 4096u * 2048 + 4096 * 4);
    m.dtype = FP8_TENSOR; /* one scale a tensor, on every rank */
    CHECK_OK(assay_shard_plan(&m, 2, 1, &s));
    CHECK(whole(q->scale_out, 1) && whole(o->scale_out, 1) && q->bytes == 2048u * 4096 + 4);
    /* int4 groups of 128, TP 2: down_proj's 7168 inputs a rank are groups 56..111 of 112;
     * bytes: 4096 x 7168 / 2 + 56 groups x 4096 x 2 (f16 scales) + 56 x 4096/8 x 4 (zeros) = 14,680,064 + 458,752
     * + 114,688 = 15,253,504 */
    m.dtype = (assay_shard_dtype){ASSAY_SHARD_QUANT_INT4_GROUP, 128, 2};
    CHECK_OK(assay_shard_plan(&m, 2, 1, &s));
    CHECK(down->scale_in.begin == 56 && down->scale_in.end == 112 && whole(down->scale_out, 4096));
    CHECK(down->bytes == 15253504u);
    CHECK(up->scale_out.begin == 7168 && up->scale_out.end == 14336 && whole(up->scale_in, 4096 / 128));

    /* Llama 3 70B at TP 16: 8 KV heads, so each is kept on 2 ranks; rank r holds KV head r / 2 and query heads
     * 4r .. 4r+3 (64 / 16), which are that head's (64 / 8 = 8 query heads a KV head). k_proj: a rank's 128 x 8192 x 2
     * = 2,097,152 bytes, 16 ranks 33,554,432 = twice the whole 1024 x 8192 x 2 = 16,777,216 */
    if (!load_model(&m, bench_config("llama3-70b"), &BF16)) return;
    size_t k_sum = 0;
    for (int64_t r = 0; r < 16; r++) {
        CHECK_OK(assay_shard_plan(&m, 16, r, &s));
        CHECK(s.kv_head_copies == 2 && s.kv_heads.begin == r / 2 && s.kv_heads.end == r / 2 + 1);
        CHECK(s.q_heads.begin == 4 * r && s.q_heads.end == 4 * r + 4);
        CHECK(k->out.begin == (r / 2) * 128 && k->out.end == (r / 2 + 1) * 128);
        k_sum += k->bytes;
    }
    CHECK(k->full_bytes == 16777216u && k_sum == 33554432u);
    CHECK(assay_shard_kv_heads_per_rank(8, 16) == 1 && assay_shard_kv_heads_per_rank(8, 4) == 2);
    check_tiling("llama3-70b", &m, 16);
    /* KV per token at TP 16: 80 layers x K,V x 1 head x 128 x 2 bytes = 40,960 (bf16), fp8 + assay's slot scales
     * 80 x 2 x (128 + 4) = 21,120 */
    assay_shard_bytes kb;
    CHECK_OK(assay_shard_rank_bytes(&m, 16, ASSAY_KV_BF16, 0, &kb));
    CHECK(kb.kv_per_token == 40960u);
    CHECK_OK(assay_shard_rank_bytes(&m, 16, ASSAY_KV_FP8_E4M3, 1, &kb));
    CHECK(kb.kv_per_token == 21120u);

    /* the house model: 8 heads, 2 KV heads. TP 4: each KV head on 2 ranks (k_proj 64 x 512 x 2 = 65,536 bytes a rank,
     * 4 ranks = 262,144 = twice the whole 131,072); TP 8: on 4 ranks */
    if (!load_model(&m, check_shared_path("models/house/config.json"), &BF16)) return;
    k_sum = 0;
    for (int64_t r = 0; r < 4; r++) {
        CHECK_OK(assay_shard_plan(&m, 4, r, &s));
        CHECK(s.kv_head_copies == 2 && s.kv_heads.begin == r / 2 && s.q_heads.begin == 2 * r);
        k_sum += k->bytes;
    }
    CHECK(k->full_bytes == 131072u && k_sum == 262144u);
    CHECK_OK(assay_shard_plan(&m, 8, 5, &s));
    CHECK(s.kv_head_copies == 4 && s.kv_heads.begin == 1 && s.q_heads.begin == 5 && s.q_heads.end == 6);
    /* house KV a token: 7 layers x 2 x 2 heads x 64 x 2 = 3,584 whole; at TP 4 one head a rank: 1,792 */
    CHECK_OK(assay_shard_rank_bytes(&m, 1, ASSAY_KV_F16, 0, &kb));
    CHECK(kb.kv_per_token == 3584u);
    CHECK_OK(assay_shard_rank_bytes(&m, 4, ASSAY_KV_F16, 0, &kb));
    CHECK(kb.kv_per_token == 1792u);

    /* one KV head (multi-query) over 8 ranks, and 12 heads / 3 KV heads over 6 ranks (a size that is no power of
     * two; vocabulary 1152 = 18 x 64, 192 a rank) */
    assay_shard_model mq = {.n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 8, .n_head_kv = 1, .head_dim = 32,
                            .n_vocab = 1000, .dtype = {ASSAY_SHARD_QUANT_NONE, 0, 2}};
    check_tiling("multi-query", &mq, 8);
    CHECK_OK(assay_shard_plan(&mq, 8, 7, &s));
    CHECK(s.kv_head_copies == 8 && s.kv_heads.begin == 0 && s.kv_heads.end == 1);
    /* vocabulary 1000, padded to 1024: rank 7 of 8 holds padded rows 896..1023, real tokens 896..999 */
    CHECK(s.vocab_padded == 1024 && s.vocab.begin == 896 && s.vocab.end == 1024);
    CHECK(s.w[ASSAY_SHARD_ROLE_TOKEN_EMBD].out.begin == 896 && s.w[ASSAY_SHARD_ROLE_TOKEN_EMBD].out.end == 1000);
    CHECK(s.w[ASSAY_SHARD_ROLE_TOKEN_EMBD].rows == 128 && s.w[ASSAY_SHARD_ROLE_TOKEN_EMBD].bytes == 128u * 256 * 2);
    assay_shard_model six = {.n_layer = 2, .n_embd = 384, .n_ff = 768, .n_head = 12, .n_head_kv = 3, .head_dim = 32,
                             .n_vocab = 1152, .qkv_bias = 1, .qk_norm = 1, .tied_embeddings = 1,
                             .dtype = {ASSAY_SHARD_QUANT_NONE, 0, 2}};
    check_tiling("12 heads / 3 KV", &six, 6);
    check_tiling("12 heads / 3 KV", &six, 3);
    CHECK_OK(assay_shard_plan(&six, 6, 3, &s));
    CHECK(s.kv_head_copies == 2 && s.kv_heads.begin == 1 && s.q_heads.begin == 6 && s.q_heads.end == 8);
    CHECK(!s.w[ASSAY_SHARD_ROLE_OUTPUT].present && s.w[ASSAY_SHARD_ROLE_ATTN_K_BIAS].present);
    CHECK(s.w[ASSAY_SHARD_ROLE_ATTN_K_BIAS].out.begin == 32 && s.w[ASSAY_SHARD_ROLE_ATTN_K_BIAS].out.end == 64);

    /* names */
    CHECK(assay_shard_role_from_name("blk.12.ffn_down.weight") == ASSAY_SHARD_ROLE_FFN_DOWN);
    CHECK(assay_shard_role_from_name("output.weight") == ASSAY_SHARD_ROLE_OUTPUT);
    CHECK(assay_shard_role_from_name("blk.0.attn_k.bias") == ASSAY_SHARD_ROLE_ATTN_K_BIAS);
    CHECK(assay_shard_role_from_name("blk.x.attn_q.weight") == -1 && assay_shard_role_from_name("rope_freqs.weight") == -1);
    CHECK(assay_shard_role_from_name("blk.3.output.weight") == -1 && assay_shard_role_from_name("attn_q.weight") == -1);
}

static int fails_with(const assay_shard_model *m, int64_t tp, const char *a, const char *b) {
    assay_shard s;
    assay_status st = assay_shard_plan(m, tp, 0, &s);
    const char *e = assay_last_error();
    int ok = st == ASSAY_ERR_ARG && strstr(e, a) && (!b || strstr(e, b));
    if (!ok) fprintf(stderr, "  TP %lld: want an error with '%s'%s%s, got %d: %s\n", (long long)tp, a, b ? " and '" : "",
                     b ? b : "", (int)st, st ? e : "(none)");
    return ok;
}

static void test_errors(void) {
    assay_shard_model m;
    if (!load_model(&m, bench_config("llama3-70b"), &BF16)) return;
    /* heads: both numbers, and the sizes that work */
    CHECK(fails_with(&m, 3, "tensor-parallel size 3 does not divide the model's 64 attention heads",
                     "sizes that split this model: 1, 2, 4, 8, 16, 32, 64"));
    CHECK(fails_with(&m, 0, "at least 1", NULL));
    assay_shard s;
    CHECK(assay_shard_plan(&m, 4, 4, &s) == ASSAY_ERR_ARG && strstr(assay_last_error(), "rank 4 is outside a tensor-parallel group of 4"));
    m.n_ff = 28670; /* an FFN 4 does not divide */
    CHECK(fails_with(&m, 4, "tensor-parallel size 4 does not divide the FFN width 28670", NULL));
    /* 12 heads, 3 KV heads: 2 divides the heads but neither divides the other with 3 */
    assay_shard_model six = {.n_layer = 1, .n_embd = 384, .n_ff = 768, .n_head = 12, .n_head_kv = 3, .head_dim = 32,
                             .n_vocab = 1152, .dtype = {ASSAY_SHARD_QUANT_NONE, 0, 2}};
    CHECK(fails_with(&six, 2, "tensor-parallel size 2 and the model's 3 KV heads: one must divide the other",
                     "sizes that split this model: 1, 3, 6, 12"));
    six.n_vocab = 1000; /* padded to 1024, which 6 does not divide */
    CHECK(fails_with(&six, 6, "the vocabulary of 1000 tokens, padded to 1024", "tensor-parallel size 6"));
    six.n_head_kv = 5;
    CHECK(fails_with(&six, 1, "12 attention heads are not a multiple of its 5 KV heads", NULL));

    /* int4 groups that a row-parallel split would cut. House: o_proj has 512 inputs, down_proj 1408 (= 11 x 128).
     * g128 at TP 2: o_proj's 256 a rank are 2 groups, down_proj's 704 are 5.5; at TP 8 o_proj's 64 are half a group.
     * g32 at TP 8: down_proj's 176 are 5.5 groups. */
    assay_shard_dtype g128 = {ASSAY_SHARD_QUANT_INT4_GROUP, 128, 2}, g32 = {ASSAY_SHARD_QUANT_INT4_GROUP, 32, 2};
    if (!load_model(&m, check_shared_path("models/house/config.json"), &g128)) return;
    CHECK_OK(assay_shard_check(&m, 1));
    CHECK(fails_with(&m, 2, "int4-g128: ffn_down.weight has 704 inputs per GPU at tensor-parallel size 2, not a multiple "
                            "of the group size 128", "sizes that split this model: 1"));
    CHECK(fails_with(&m, 8, "int4-g128: attn_output.weight has 64 inputs per GPU at tensor-parallel size 8", NULL));
    m.dtype = g32;
    CHECK_OK(assay_shard_check(&m, 4));
    CHECK(fails_with(&m, 8, "int4-g32: ffn_down.weight has 176 inputs per GPU", "sizes that split this model: 1, 2, 4"));
    /* fp8 has no groups: the same split is fine */
    m.dtype = FP8_CHANNEL;
    CHECK_OK(assay_shard_check(&m, 8));
    /* packed outputs: a KV projection of 4 outputs a rank cannot hold whole int32s of 8 nibbles */
    assay_shard_model tiny = {.n_layer = 1, .n_embd = 128, .n_ff = 256, .n_head = 4, .n_head_kv = 4, .head_dim = 4,
                              .n_vocab = 64, .dtype = {ASSAY_SHARD_QUANT_INT4_GROUP, 32, 2}};
    CHECK(fails_with(&tiny, 4, "attn_q.weight has 4 outputs per GPU", "the 8 packed into an int32"));
}

/* ---- the numbers: a random layer, whole and sharded ---------------------------------------------------------- */
enum { T = 5, D = 64, NH = 8, NKV = 2, HD = 16, FF = 96, NV = 200 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* xorshift64*, uniform in [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_matrix(int64_t n, float scale) {
    float *m = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) m[i] = frand() * scale;
    return m;
}

/* y[t][o] = sum_i x[t][x_col0 + i] w[o][w_col0 + i] for i < n, o in [o0, o1): output column o - o0. The full and the
 * sharded computations both use this one loop, so what differs between them is only which terms a sum holds. */
static void matmul(const float *x, int64_t x_stride, int64_t x_col0, const float *w, int64_t w_stride, int64_t w_col0,
                   int64_t n, int64_t o0, int64_t o1, float *y) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = o0; o < o1; o++) {
            float acc = 0;
            for (int64_t i = 0; i < n; i++) acc += x[t * x_stride + x_col0 + i] * w[o * w_stride + w_col0 + i];
            y[t * (o1 - o0) + (o - o0)] = acc;
        }
}

/* causal GQA attention: q [T][nq x HD], k and v [T][nkv x HD] -> out [T][nq x HD]; query head j reads KV head
 * j / (nq / nkv) */
static void attention(const float *q, const float *k, const float *v, int64_t nq, int64_t nkv, float *out) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < nq; j++) {
            int64_t kh = j / (nq / nkv);
            float score[T], mx = -INFINITY, sum = 0;
            for (int64_t s = 0; s <= t; s++) {
                float dot = 0;
                for (int64_t i = 0; i < HD; i++) dot += q[(t * nq + j) * HD + i] * k[(s * nkv + kh) * HD + i];
                score[s] = dot / sqrtf((float)HD);
                if (score[s] > mx) mx = score[s];
            }
            for (int64_t s = 0; s <= t; s++) sum += score[s] = expf(score[s] - mx);
            for (int64_t i = 0; i < HD; i++) {
                float acc = 0;
                for (int64_t s = 0; s <= t; s++) acc += score[s] / sum * v[(s * nkv + kh) * HD + i];
                out[(t * nq + j) * HD + i] = acc;
            }
        }
}

/* |got - want| <= 2 gamma_K sum_i |x_i w_i| for every output: both are K-term f32 dot products in some order, each
 * within gamma_K = K u / (1 - K u) (u = 2^-24) of the exact value times sum |x_i w_i| (Higham, Accuracy and Stability
 * of Numerical Algorithms, 3.1). Returns the worst |got - want| / bound. */
static double reassociation_ratio(const float *got, const float *want, const float *x, const float *w, int64_t K,
                                  int64_t n_out) {
    double u = ldexp(1.0, -24), gamma = K * u / (1 - K * u), worst = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < n_out; o++) {
            double mag = 0;
            for (int64_t i = 0; i < K; i++) mag += fabs((double)x[t * K + i] * (double)w[o * K + i]);
            double diff = fabs((double)got[t * n_out + o] - (double)want[t * n_out + o]), bound = 2 * gamma * mag;
            double r = bound > 0 ? diff / bound : (diff > 0 ? INFINITY : 0);
            if (r > worst) worst = r;
        }
    return worst;
}

static void test_numbers(void) {
    const assay_shard_model m = {.n_layer = 1, .n_embd = D, .n_ff = FF, .n_head = NH, .n_head_kv = NKV, .head_dim = HD,
                                 .n_vocab = NV, .dtype = {ASSAY_SHARD_QUANT_NONE, 0, 4}};
    float *emb = rand_matrix(NV * D, 1), *wq = rand_matrix(NH * HD * D, 0.2f), *wk = rand_matrix(NKV * HD * D, 0.2f);
    float *wv = rand_matrix(NKV * HD * D, 0.2f), *wo = rand_matrix(D * NH * HD, 0.2f), *wg = rand_matrix(FF * D, 0.2f);
    float *wu = rand_matrix(FF * D, 0.2f), *wd = rand_matrix(D * FF, 0.2f), *wout = rand_matrix(NV * D, 0.2f);
    int32_t tok[T] = {3, 199, 64, 128, 77};

    /* the whole model */
    static float x[T * D], q[T * NH * HD], k[T * NKV * HD], v[T * NKV * HD], att[T * NH * HD], o[T * D];
    static float g[T * FF], up[T * FF], h[T * FF], y[T * D], logits[T * NV];
    for (int t = 0; t < T; t++) memcpy(&x[t * D], &emb[tok[t] * D], sizeof(float) * D);
    matmul(x, D, 0, wq, D, 0, D, 0, NH * HD, q);
    matmul(x, D, 0, wk, D, 0, D, 0, NKV * HD, k);
    matmul(x, D, 0, wv, D, 0, D, 0, NKV * HD, v);
    attention(q, k, v, NH, NKV, att);
    matmul(att, NH * HD, 0, wo, NH * HD, 0, NH * HD, 0, D, o);
    matmul(x, D, 0, wg, D, 0, D, 0, FF, g);
    matmul(x, D, 0, wu, D, 0, D, 0, FF, up);
    for (int i = 0; i < T * FF; i++) h[i] = g[i] / (1 + expf(-g[i])) * up[i];
    matmul(h, FF, 0, wd, FF, 0, FF, 0, D, y);
    matmul(x, D, 0, wout, D, 0, D, 0, NV, logits);

    static const int64_t tps[] = {1, 2, 4, 8};
    for (size_t ti = 0; ti < sizeof tps / sizeof tps[0]; ti++) {
        int64_t tp = tps[ti];
        static float x_sum[T * D], o_sum[T * D], y_sum[T * D], logits_cat[T * NV];
        memset(x_sum, 0, sizeof x_sum), memset(o_sum, 0, sizeof o_sum), memset(y_sum, 0, sizeof y_sum);
        for (int i = 0; i < T * NV; i++) logits_cat[i] = NAN;
        int att_same = 1;
        for (int64_t r = 0; r < tp; r++) {
            assay_shard s;
            CHECK_OK(assay_shard_plan(&m, tp, r, &s));
            const assay_shard_weight *E = &s.w[ASSAY_SHARD_ROLE_TOKEN_EMBD], *Q = &s.w[ASSAY_SHARD_ROLE_ATTN_Q];
            const assay_shard_weight *K = &s.w[ASSAY_SHARD_ROLE_ATTN_K], *V = &s.w[ASSAY_SHARD_ROLE_ATTN_V];
            const assay_shard_weight *O = &s.w[ASSAY_SHARD_ROLE_ATTN_OUTPUT], *G = &s.w[ASSAY_SHARD_ROLE_FFN_GATE];
            const assay_shard_weight *U = &s.w[ASSAY_SHARD_ROLE_FFN_UP], *Dn = &s.w[ASSAY_SHARD_ROLE_FFN_DOWN];
            const assay_shard_weight *L = &s.w[ASSAY_SHARD_ROLE_OUTPUT];
            /* vocab-parallel embedding: the rank's rows for the tokens it owns, zeros for the rest; all-reduce */
            for (int t = 0; t < T; t++)
                if (tok[t] >= E->out.begin && tok[t] < E->out.end)
                    for (int i = 0; i < D; i++) x_sum[t * D + i] += emb[tok[t] * D + i];
            /* column-parallel q/k/v, the rank's heads' attention, row-parallel o_proj: a partial sum */
            int64_t nq = s.q_heads.end - s.q_heads.begin, nkv = s.kv_heads.end - s.kv_heads.begin;
            int64_t qn = Q->out.end - Q->out.begin, kn = K->out.end - K->out.begin, on = O->in.end - O->in.begin;
            float *qr = malloc(sizeof(float) * T * qn), *kr = malloc(sizeof(float) * T * kn);
            float *vr = malloc(sizeof(float) * T * kn), *ar = malloc(sizeof(float) * T * qn), *part = malloc(sizeof(float) * T * D);
            matmul(x, D, 0, wq, D, 0, D, Q->out.begin, Q->out.end, qr);
            matmul(x, D, 0, wk, D, 0, D, K->out.begin, K->out.end, kr);
            matmul(x, D, 0, wv, D, 0, D, V->out.begin, V->out.end, vr);
            CHECK(qn == nq * HD && kn == nkv * HD && on == qn);
            attention(qr, kr, vr, nq, nkv, ar);
            for (int t = 0; t < T; t++) /* the same heads' outputs, bit for bit */
                att_same &= !memcmp(&ar[t * qn], &att[t * NH * HD + s.q_heads.begin * HD], sizeof(float) * (size_t)qn);
            /* o_proj reads the rank's attention output as its input columns O->in of the whole */
            matmul(ar, qn, 0, wo, NH * HD, O->in.begin, on, 0, D, part);
            for (int i = 0; i < T * D; i++) o_sum[i] += part[i];
            /* column-parallel gate/up, row-parallel down */
            int64_t fn = G->out.end - G->out.begin;
            CHECK(U->out.begin == G->out.begin && Dn->in.begin == G->out.begin && Dn->in.end == G->out.end);
            float *gr = malloc(sizeof(float) * T * fn), *ur = malloc(sizeof(float) * T * fn);
            matmul(x, D, 0, wg, D, 0, D, G->out.begin, G->out.end, gr);
            matmul(x, D, 0, wu, D, 0, D, U->out.begin, U->out.end, ur);
            for (int64_t i = 0; i < T * fn; i++) gr[i] = gr[i] / (1 + expf(-gr[i])) * ur[i];
            matmul(gr, fn, 0, wd, FF, Dn->in.begin, Dn->in.end - Dn->in.begin, 0, D, part);
            for (int i = 0; i < T * D; i++) y_sum[i] += part[i];
            /* vocab-parallel lm_head: the rank's logits, gathered into place (its padded rows are dropped) */
            int64_t ln = L->out.end - L->out.begin;
            float *lr = malloc(sizeof(float) * T * (ln ? ln : 1));
            matmul(x, D, 0, wout, D, 0, D, L->out.begin, L->out.end, lr);
            for (int t = 0; t < T; t++) memcpy(&logits_cat[t * NV + L->out.begin], &lr[t * ln], sizeof(float) * (size_t)ln);
            free(qr), free(kr), free(vr), free(ar), free(part), free(gr), free(ur), free(lr);
        }
        CHECK(!memcmp(x_sum, x, sizeof x));           /* one rank owns each token; the others add zeros */
        CHECK(!memcmp(logits_cat, logits, sizeof logits)); /* every logit from exactly one rank, as computed whole */
        CHECK(att_same);
        double ro = reassociation_ratio(o_sum, o, att, wo, NH * HD, D), ry = reassociation_ratio(y_sum, y, h, wd, FF, D);
        double rel = 0, mag = 0;
        for (int i = 0; i < T * D; i++) {
            rel = fmax(rel, fmax(fabs(o_sum[i] - o[i]), fabs(y_sum[i] - y[i])));
            mag = fmax(mag, fmax(fabs(o[i]), fabs(y[i])));
        }
        printf("TP %lld: o_proj and down_proj all-reduced vs whole: worst %.3g of the reassociation bound, %.3g "
               "relative to the largest output\n", (long long)tp, fmax(ro, ry), rel / mag);
        CHECK(ro <= 1 && ry <= 1);
        CHECK(rel / mag <= 1e-5);
        if (tp == 1) CHECK(!memcmp(o_sum, o, sizeof o) && !memcmp(y_sum, y, sizeof y)); /* one rank: the same sums */
    }
    free(emb), free(wq), free(wk), free(wv), free(wo), free(wg), free(wu), free(wd), free(wout);
}

int main(void) {
    test_tiling();
    test_hand_numbers();
    test_errors();
    test_numbers();
    return check_finish("shard");
}
