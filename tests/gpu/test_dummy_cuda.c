/* test_dummy_cuda.c — dummy weights (--load-format dummy) made on the GPU (run on a GPU machine; CI builds it but has
 * no GPU to run it on):
 *   - the CUDA backend's fill kernel gives, for bf16, f16 and f32 dummy weights, exactly the bf16 matrix the upload of
 *     the host's fill (assay_weight_dummy_fill) would give: every element of small matrices, read back through
 *     get_rows, and a strided sample of one matrix larger than a single pass of the kernel's grid;
 *   - a tiny dummy model through the engine on --device cuda and on the CPU, same seed: the same weights, so the
 *     logits agree up to bf16 activations;
 *   - argv[1], when given: an HF config folder (bench/configs/llama3-8b) opened as a dummy model on the GPU, whose
 *     weight bytes are the checkpoint's.
 * Exits 1 when a check fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assay/backend.h"
#include "assay/dequant.h"
#include "assay/dtype.h"
#include "assay/dummy_weights.h"
#include "assay/engine.h"
#include "assay/model.h"

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* what the GPU must hold for element i: the host's stored value, widened, rounded to bf16 as the upload does */
static uint16_t expect_bf16(const assay_weight *w, int64_t i) {
    float v = assay_dummy_value(w->dummy_seed, (uint64_t)i, w->dummy_range);
    if (w->type == ASSAY_TYPE_F16) v = assay_f16_to_f32(assay_f32_to_f16(v));
    if (w->type == ASSAY_TYPE_BF16) v = assay_bf16_to_f32(assay_f32_to_bf16(v));
    return assay_f32_to_bf16(v);
}

/* rows ids[0..n) of the prepared weight, back on the host as f32 */
static float *read_rows(assay_backend *be, const assay_weight *w, const int32_t *ids, int64_t n) {
    void *y = be->ops->alloc(be, (size_t)(n * w->n_in) * assay_backend_act_size(be));
    float *h = malloc(sizeof(float) * (size_t)(n * w->n_in));
    if (!y || !h) {
        fprintf(stderr, "out of memory reading %lld rows\n", (long long)n);
        exit(1);
    }
    be->ops->get_rows(be, y, w, ids, n);
    be->ops->download_f32(be, h, y, n * w->n_in);
    be->ops->free(be, y);
    return h;
}

static void check_fill(assay_backend *be, assay_type type, int64_t n_in, int64_t n_out, int64_t row_step) {
    assay_weight w = {.type = type, .n_in = n_in, .n_out = n_out, .row_bytes = assay_type_row_bytes(type, n_in),
                      .name = "check", .dummy_seed = assay_dummy_tensor_seed(11, assay_type_name(type)),
                      .dummy_range = ASSAY_DUMMY_RANGE};
    assay_status st = be->ops->prepare_weight(be, &w);
    EXPECT(st == ASSAY_OK, "prepare %s: %s", assay_type_name(type), assay_last_error());
    if (st) return;
    int64_t n = (n_out + row_step - 1) / row_step;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t r = 0; r < n; r++) ids[r] = (int32_t)(r * row_step);
    float *got = read_rows(be, &w, ids, n);
    /* the host's own fill of the same rows, as bytes of the type (the CPU backend's values) */
    uint8_t *row = malloc(w.row_bytes);
    float *f = malloc(sizeof(float) * (size_t)n_in);
    int64_t bad = 0, bad_host = 0;
    for (int64_t r = 0; r < n; r++) {
        assay_weight_dummy_fill(&w, row, ids[r], 1);
        assay_dequantize(type, row, f, n_in);
        for (int64_t c = 0; c < n_in; c++) {
            int64_t i = (int64_t)ids[r] * n_in + c;
            uint16_t want = expect_bf16(&w, i);
            bad += assay_f32_to_bf16(got[r * n_in + c]) != want;
            bad_host += assay_f32_to_bf16(f[c]) != want;
        }
    }
    EXPECT(bad == 0, "%s %lldx%lld: %lld of %lld elements differ from the host's values", assay_type_name(type),
           (long long)n_out, (long long)n_in, (long long)bad, (long long)(n * n_in));
    EXPECT(bad_host == 0, "%s: the host fill disagrees with dummy_weights.h (%lld)", assay_type_name(type), (long long)bad_host);
    fprintf(stderr, "fill %s %lld x %lld (%lld rows read): %lld differ\n", assay_type_name(type), (long long)n_out,
            (long long)n_in, (long long)n, (long long)bad);
    free(ids);
    free(got);
    free(row);
    free(f);
}

static const char *TINY = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 256, "
                          "\"intermediate_size\": 512, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
                          "\"num_key_value_heads\": 2, \"vocab_size\": 1000, \"max_position_embeddings\": 512, "
                          "\"rms_norm_eps\": 1e-5, \"rope_theta\": 500000.0, \"torch_dtype\": \"bfloat16\"}";

enum { NP = 12 };

static int prompt_logits(const char *dir, const char *device, float *logits) {
    assay_engine_args a;
    assay_engine_args_default(&a);
    a.model = dir;
    a.device = device;
    a.load_format = "dummy";
    a.seed = 42;
    a.max_model_len = 128;
    a.max_num_seqs = 4;
    a.max_num_batched_tokens = 128;
    a.kv_cache_memory = 16 << 20;
    if (strcmp(device, "cpu") == 0) a.kv_cache_dtype = ASSAY_KV_F32;
    else a.kv_cache_dtype = ASSAY_KV_BF16;
    assay_engine *e = NULL;
    if (assay_engine_open(&e, &a) != ASSAY_OK) {
        fprintf(stderr, "engine on %s: %s\n", device, assay_last_error());
        return -1;
    }
    int32_t p[NP];
    for (int i = 0; i < NP; i++) p[i] = (int32_t)((i * 389 + 7) % 1000);
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.prompt_only = 1;
    sp.prompt_logprobs = 0;
    sp.prompt_logits = logits;
    int64_t id;
    int rc = assay_engine_add_request(e, p, NP, &sp, &id) == ASSAY_OK ? 0 : -1;
    while (rc == 0 && assay_engine_has_unfinished(e)) {
        const assay_request_output *o;
        int64_t n;
        if (assay_engine_step(e, &o, &n) != ASSAY_OK) rc = -1;
    }
    if (rc) fprintf(stderr, "run on %s: %s\n", device, assay_last_error());
    assay_engine_close(e);
    return rc;
}

static void check_engine(void) {
    char dir[] = "/tmp/assay-dummy-gpu-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    char p[256];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    fputs(TINY, f);
    fclose(f);
    size_t n = (size_t)(NP - 1) * 1000;
    float *cpu = calloc(n, sizeof(float)), *gpu = calloc(n, sizeof(float));
    if (prompt_logits(dir, "cpu", cpu) == 0 && prompt_logits(dir, "cuda", gpu) == 0) {
        double mx = 0, md = 0;
        int top_same = 0, finite = 1;
        for (int r = 0; r < NP - 1; r++) {
            int a = 0, b = 0;
            for (int v = 0; v < 1000; v++) {
                float x = cpu[r * 1000 + v], y = gpu[r * 1000 + v];
                finite &= isfinite(x) && isfinite(y);
                mx = fabs(x) > mx ? fabs(x) : mx;
                md = fabs(x - y) > md ? fabs(x - y) : md;
                if (x > cpu[r * 1000 + a]) a = v;
                if (y > gpu[r * 1000 + b]) b = v;
            }
            top_same += a == b;
        }
        fprintf(stderr, "tiny dummy model, cpu vs cuda: max |logit| %.4g, max |diff| %.4g, top-1 same %d/%d\n", mx, md,
                top_same, NP - 1);
        EXPECT(finite, "non-finite logits");
        EXPECT(mx > 0 && md <= 0.05 * mx, "cpu and cuda logits differ by %g (max |logit| %g)", md, mx);
        EXPECT(top_same >= NP - 3, "top-1 agrees on %d of %d positions", top_same, NP - 1);
    } else
        EXPECT(0, "the tiny dummy model did not run");
    free(cpu);
    free(gpu);
    unlink(p);
    rmdir(dir);
}

static void check_big(const char *dir) {
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.device = "cuda";
    mo.load_format = "dummy";
    assay_model *m = NULL;
    assay_status st = assay_model_load(&m, dir, &mo);
    EXPECT(st == ASSAY_OK, "%s on cuda: %s", dir, assay_last_error());
    if (st) return;
    const assay_model_config *c = assay_model_get_config(m);
    int64_t E = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    size_t want = ((size_t)c->n_layer * (size_t)(2 * qd * E + 2 * kvd * E + 3 * E * c->n_ff) + (size_t)(c->n_vocab * E) +
                   (size_t)E) * 2;
    assay_backend *be = assay_model_backend(m);
    fprintf(stderr, "%s: weight bytes %.3f GiB (device: %.3f GiB)\n", dir, (double)assay_model_weight_bytes(m) / (1 << 30),
            (double)be->weight_bytes / (1 << 30));
    EXPECT(assay_model_weight_bytes(m) == want, "weight bytes %zu, want %zu", assay_model_weight_bytes(m), want);
    /* on the device: every matrix once, the embedding table and the lm_head each whole */
    EXPECT(be->weight_bytes == want - (size_t)E * 2 + (size_t)(c->n_vocab * E) * 2, "device weight bytes %zu", be->weight_bytes);
    assay_model_free(m);
}

int main(int argc, char **argv) {
    assay_backend *be = NULL;
    if (assay_backend_cuda_open(&be, 0) != ASSAY_OK) {
        fprintf(stderr, "no CUDA device: %s\n", assay_last_error());
        return 1;
    }
    check_fill(be, ASSAY_TYPE_BF16, 96, 80, 1);
    check_fill(be, ASSAY_TYPE_F16, 128, 333, 1);
    check_fill(be, ASSAY_TYPE_F32, 64, 1000, 1);
    /* 600M elements: more than one pass of the kernel's grid (65535 x 32 blocks of 256); every 9973rd row */
    check_fill(be, ASSAY_TYPE_BF16, 128, 4800000, 9973);
    assay_backend_close(be);
    check_engine();
    if (argc > 1) check_big(argv[1]);
    printf("{\"dummy_cuda_failures\": %d}\n", failures);
    return failures ? 1 : 0;
}
