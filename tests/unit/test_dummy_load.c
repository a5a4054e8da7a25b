/* test_dummy_load.c — `--load-format dummy` (model.h): a model from config.json alone, with seeded random weights.
 *   - a tiny llama config in a temporary folder (no weights, no tokenizer) opens an engine with no tokenizer; greedy
 *     generation from token ids gives finite logits and tokens in the vocabulary;
 *   - the same seed gives bit-identical logits and tokens, another seed other logits;
 *   - the weights are the documented values (dummy_weights.h: the hash of (tensor seed, index) rounded to the
 *     config's bf16), norms 1, in [-0.02, 0.02);
 *   - assay_model_weight_bytes is the size the checkpoint would have: the formula for the tiny configs (untied and
 *     tied), and the real house model's own figure for a dummy of the house folder (whose tokenizer is then loaded);
 *   - a qwen2 config (q/k/v biases, tied) and --quantization fp8 on dummy weights run;
 *   - a folder without config.json, a missing folder, a quantized config and an unknown load format are clear errors;
 *   - bench/configs' Llama 3 8B and 70B configs read as those models (shapes only: nothing that size is made here);
 *   - the engine flags print --load-format dummy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/dtype.h"
#include "assay/dummy_weights.h"
#include "assay/engine.h"
#include "assay/file.h"
#include "assay/model.h"
#include "assay/strbuf.h"
#include "check.h"

enum { N_PROMPT = 6, N_GEN = 5, V = 256 };

static char tmp[4096];

static void write_config(const char *dir, const char *json) {
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        exit(1);
    }
    fputs(json, f);
    fclose(f);
}

static const char *make_dir(const char *name, const char *config_json) {
    static char dirs[8][4200];
    static int n;
    char *d = dirs[n++ % 8];
    snprintf(d, 4200, "%s/%s", tmp, name);
    if (mkdir(d, 0700) != 0) {
        perror(d);
        exit(1);
    }
    if (config_json) write_config(d, config_json);
    return d;
}

static const char *LLAMA = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"num_key_value_heads\": 2, \"vocab_size\": 256, \"max_position_embeddings\": 128, "
                           "\"rms_norm_eps\": 1e-5, \"rope_theta\": 500000.0, \"torch_dtype\": \"bfloat16\", "
                           "\"tie_word_embeddings\": false, \"bos_token_id\": 1, \"eos_token_id\": 2}";

typedef struct run_out {
    float logits[(N_PROMPT - 1) * V]; /* the logits predicting prompt tokens 1.. */
    int32_t tok[N_GEN];
    int64_t n_tok;
} run_out;

static assay_engine *open_dummy(const char *dir, uint64_t seed, const char *quant) {
    assay_engine_args a;
    assay_engine_args_default(&a);
    a.model = dir;
    a.load_format = "dummy";
    a.seed = seed;
    a.threads = 2;
    a.quantization = quant;
    a.max_model_len = 64;
    a.max_num_seqs = 4;
    a.kv_cache_dtype = ASSAY_KV_F32;
    assay_engine *e = NULL;
    if (assay_engine_open(&e, &a) != ASSAY_OK) fprintf(stderr, "engine: %s\n", assay_last_error());
    return e;
}

/* One greedy request from a fixed token-id prompt: the prompt's logits and N_GEN tokens. */
static void run(assay_engine *e, run_out *r) {
    memset(r, 0, sizeof *r);
    const int32_t prompt[N_PROMPT] = {1, 17, 200, 3, 99, 42};
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.temperature = 0;
    sp.max_tokens = N_GEN;
    sp.ignore_eos = 1;
    sp.prompt_logprobs = 0;
    sp.prompt_logits = r->logits;
    int64_t id;
    CHECK_OK(assay_engine_add_request(e, prompt, N_PROMPT, &sp, &id));
    while (assay_engine_has_unfinished(e)) {
        const assay_request_output *o;
        int64_t n;
        if (assay_engine_step(e, &o, &n) != ASSAY_OK) {
            fprintf(stderr, "step: %s\n", assay_last_error());
            CHECK(0);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < o[i].n_new && r->n_tok < N_GEN; j++) r->tok[r->n_tok++] = o[i].new_tokens[j];
    }
}

/* the bytes one token reads, as model.h counts them: every linear once, the lm_head, one embedding row */
static size_t expect_bytes(int64_t E, int64_t F, int64_t L, int64_t qd, int64_t kvd, int64_t vocab, size_t el) {
    return ((size_t)L * (size_t)(2 * qd * E + 2 * kvd * E + 3 * E * F) + (size_t)(vocab * E) + (size_t)E) * el;
}

static void test_tiny_llama(void) {
    const char *dir = make_dir("llama", LLAMA);
    run_out *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
    assay_engine *e = open_dummy(dir, 7, NULL);
    CHECK(e != NULL);
    if (!e) return;
    CHECK(assay_engine_tokenizer(e) == NULL); /* config.json alone: token ids only */
    assay_model *m = assay_engine_model(e);
    CHECK(assay_model_is_dummy(m));
    CHECK(assay_model_weight_bytes(m) == expect_bytes(64, 128, 2, 64, 32, V, 2));
    run(e, a);
    CHECK(a->n_tok == N_GEN);
    int finite = 1;
    double lo = 1e30, hi = -1e30;
    for (int64_t i = 0; i < (N_PROMPT - 1) * V; i++) {
        finite &= isfinite(a->logits[i]);
        lo = a->logits[i] < lo ? a->logits[i] : lo;
        hi = a->logits[i] > hi ? a->logits[i] : hi;
    }
    CHECK(finite);
    CHECK(hi > lo); /* the rows are not constant */
    for (int64_t i = 0; i < a->n_tok; i++) CHECK(a->tok[i] >= 0 && a->tok[i] < V);

    /* the weights are the documented values: bf16 of the hash of (tensor seed, index) */
    const char *name = "blk.1.ffn_down.weight";
    int64_t n_in, n_out;
    CHECK_OK(assay_model_weight_f32(m, name, &n_in, &n_out, NULL));
    CHECK(n_in == 128 && n_out == 64);
    float *w = malloc(sizeof(float) * (size_t)(n_in * n_out));
    CHECK_OK(assay_model_weight_f32(m, name, &n_in, &n_out, w));
    uint64_t ts = assay_dummy_tensor_seed(7, name);
    int same = 1, in_range = 1;
    double sum2 = 0;
    for (int64_t i = 0; i < n_in * n_out; i++) {
        same &= w[i] == assay_bf16_to_f32(assay_f32_to_bf16(assay_dummy_value(ts, (uint64_t)i, ASSAY_DUMMY_RANGE)));
        in_range &= fabsf(w[i]) <= 0.02005f; /* 0.02 and the bf16 it may round to */
        sum2 += (double)w[i] * w[i];
    }
    CHECK(same);
    CHECK(in_range);
    double rms = sqrt(sum2 / (double)(n_in * n_out));
    CHECK(rms > 0.0105 && rms < 0.0126); /* uniform on [-0.02, 0.02): 0.02 / sqrt(3) = 0.01155 */
    free(w);
    assay_engine_close(e);

    /* same seed: the same bits; another seed: other logits */
    e = open_dummy(dir, 7, NULL);
    CHECK(e != NULL);
    if (e) {
        run(e, b);
        CHECK(memcmp(a->logits, b->logits, sizeof a->logits) == 0);
        CHECK(b->n_tok == a->n_tok && memcmp(a->tok, b->tok, sizeof a->tok) == 0);
        assay_engine_close(e);
    }
    e = open_dummy(dir, 8, NULL);
    CHECK(e != NULL);
    if (e) {
        run(e, c);
        CHECK(memcmp(a->logits, c->logits, sizeof a->logits) != 0);
        assay_engine_close(e);
    }
    /* on-the-fly fp8 quantizes the dummy values like stored ones */
    e = open_dummy(dir, 7, "fp8");
    CHECK(e != NULL);
    if (e) {
        run(e, c);
        CHECK(c->n_tok == N_GEN);
        assay_engine_close(e);
    }
    free(a);
    free(b);
    free(c);
}

static void test_tied_qwen2(void) {
    const char *dir = make_dir("qwen2", "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", "
                                        "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 3, "
                                        "\"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"vocab_size\": 256, "
                                        "\"max_position_embeddings\": 256, \"tie_word_embeddings\": true, "
                                        "\"torch_dtype\": \"float32\"}");
    assay_engine *e = open_dummy(dir, 0, NULL);
    CHECK(e != NULL);
    if (!e) return;
    /* f32 as config.json says; tied: the lm_head is the embedding table, counted once as the lm_head */
    CHECK(assay_model_weight_bytes(assay_engine_model(e)) == expect_bytes(64, 96, 3, 64, 16, V, 4));
    run_out *r = calloc(1, sizeof *r);
    run(e, r);
    CHECK(r->n_tok == N_GEN);
    int finite = 1;
    for (int64_t i = 0; i < (N_PROMPT - 1) * V; i++) finite &= isfinite(r->logits[i]);
    CHECK(finite);
    free(r);
    assay_engine_close(e);
}

/* A dummy of the house folder: its safetensors are ignored, its tokenizer is loaded, and the weight bytes are the
 * real model's. */
static void test_house_shape(void) {
    static char house[4096];
    snprintf(house, sizeof house, "%s", check_shared_path("models/house"));
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = 2;
    assay_model *real = NULL, *dummy = NULL;
    CHECK_OK(assay_model_load(&real, house, &mo));
    mo.load_format = "dummy";
    CHECK_OK(assay_model_load(&dummy, house, &mo));
    if (real && dummy) {
        CHECK(!assay_model_is_dummy(real) && assay_model_is_dummy(dummy));
        CHECK(assay_model_weight_bytes(dummy) == assay_model_weight_bytes(real));
        CHECK(assay_model_file_config_only(assay_model_get_file(dummy)));
        CHECK(assay_model_file_tensor_count(assay_model_get_file(dummy)) == 0);
    }
    assay_model_free(real);
    assay_model_free(dummy);
    assay_engine *e = open_dummy(house, 3, NULL);
    CHECK(e != NULL && assay_engine_tokenizer(e) != NULL);
    assay_engine_close(e);
}

static void test_errors(void) {
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.load_format = "dummy";
    assay_model *m = NULL;
    const char *empty = make_dir("empty", NULL);
    CHECK(assay_model_load(&m, empty, &mo) == ASSAY_ERR_IO && m == NULL);
    CHECK(strstr(assay_last_error(), "config.json") != NULL);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no-such-folder", tmp);
    CHECK(assay_model_load(&m, missing, &mo) != ASSAY_OK && m == NULL);
    CHECK(strstr(assay_last_error(), "no-such-folder") != NULL);
    /* the engine says the same */
    CHECK(open_dummy(empty, 0, NULL) == NULL);
    CHECK(strstr(assay_last_error(), "config.json") != NULL);
    const char *q = make_dir("quantized", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                                          "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 256, "
                                          "\"quantization_config\": {\"quant_method\": \"fp8\"}}");
    CHECK(assay_model_load(&m, q, &mo) == ASSAY_ERR_UNSUPPORTED && m == NULL);
    CHECK(strstr(assay_last_error(), "quantization_config") != NULL);
    mo.load_format = "pt";
    CHECK(assay_model_load(&m, q, &mo) == ASSAY_ERR_ARG && m == NULL);
    CHECK(assay_model_load_format_check("dummy") == ASSAY_OK && assay_model_load_format_check("auto") == ASSAY_OK);
    CHECK(assay_model_load_format_check("safetensors") == ASSAY_ERR_ARG);
    /* without --load-format dummy, config.json alone is not a model */
    mo.load_format = "auto";
    CHECK(assay_model_load(&m, make_dir("llama-auto", LLAMA), &mo) != ASSAY_OK && m == NULL);
}

static void test_bench_configs(void) {
    const char *src = getenv("ASSAY_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "ASSAY_SOURCE_DIR is not set (run the tests through ctest)\n");
        CHECK(0);
        return;
    }
    struct {
        const char *name;
        int64_t E, L, H, KV, F;
        size_t bytes; /* the bf16 weights one token reads */
    } want[] = {{"llama3-8b", 4096, 32, 32, 8, 14336, 0}, {"llama3-70b", 8192, 80, 64, 8, 28672, 0}};
    for (int i = 0; i < 2; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/bench/configs/%s", src, want[i].name);
        assay_model_file *mf = NULL;
        CHECK_OK(assay_model_file_open_config(&mf, dir));
        if (!mf) continue;
        const assay_model_config *c = assay_model_file_config(mf);
        CHECK(strcmp(c->arch, "llama") == 0);
        CHECK(c->n_embd == want[i].E && c->n_layer == want[i].L && c->n_head == want[i].H);
        CHECK(c->n_head_kv == want[i].KV && c->n_ff == want[i].F && c->head_dim == 128);
        CHECK(c->n_vocab == 128256 && c->n_ctx_train == 8192 && !c->tied_embeddings);
        CHECK(c->rope_theta == 500000.0 && c->norm_eps == 1e-5 && c->rope_scaling == ASSAY_ROPE_SCALING_NONE);
        CHECK(c->bos_id == 128000 && c->eos_id == 128001);
        CHECK(assay_model_file_torch_dtype(mf) == ASSAY_TYPE_BF16);
        CHECK(assay_model_file_tensor_count(mf) == 0 && assay_model_file_tokenizer_json(mf) == NULL);
        /* the published parameter counts: 8.03e9 and 70.6e9 */
        int64_t E = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
        double params = (double)c->n_layer * (double)(2 * qd * E + 2 * kvd * E + 3 * E * c->n_ff + 2 * E) +
                        2.0 * (double)(c->n_vocab * E) + (double)E;
        CHECK(i == 0 ? params > 8.02e9 && params < 8.04e9 : params > 70.5e9 && params < 70.6e9);
        assay_model_file_close(mf);
    }
}

static void test_flags(void) {
    assay_engine_args a;
    assay_engine_args_default(&a);
    CHECK(strcmp(a.load_format, "auto") == 0);
    assay_strbuf b = {0};
    assay_engine_args_format(&a, &b);
    CHECK(strstr(b.data, "load-format") == NULL);
    assay_strbuf_free(&b);
    a.load_format = "dummy";
    a.seed = 5;
    assay_engine_args_format(&a, &b);
    CHECK(strcmp(b.data, "--seed 5 --load-format dummy") == 0 || strcmp(b.data, "--load-format dummy --seed 5") == 0);
    assay_strbuf_free(&b);
    assay_model_options mo;
    assay_engine_args_model_options(&a, &mo);
    CHECK(strcmp(mo.load_format, "dummy") == 0 && mo.seed == 5 && strcmp(mo.device, "cpu") == 0);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/assay-dummy-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_tiny_llama();
    test_tied_qwen2();
    test_house_shape();
    test_errors();
    test_bench_configs();
    test_flags();
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_finish("dummy_load");
}
