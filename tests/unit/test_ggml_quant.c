/* test_ggml_quant.c — GGUF block encoders (q8_0 ... q6_K) against references nobody here wrote.
 *
 * The C side quantizes synthetic rows (gaussian, heavy-tailed, an outlier, all zeros, exact .5 ties) and real
 * house-model weights (exported to f32 by the python helper), with and without an importance matrix, and writes
 * blocks plus their dequantization by dequant.h (the engine's reference decoder) to $ASSAY_BUILD_DIR/ggml_quant_fixture. tests/py/ggml_quant_oracle.py then
 * checks them with gguf-py: its dequantizer must give our values, its quantizer (legacy types) our exact bytes,
 * and — when ASSAY_LLAMACPP_LIB names a libggml-base.so — llama.cpp's ggml_quantize_chunk our exact bytes for
 * every type, imatrix included.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/dequant.h"
#include "assay/ggml_quant.h"
#include "check.h"

static const assay_type kTypes[] = {ASSAY_TYPE_Q8_0, ASSAY_TYPE_Q4_0, ASSAY_TYPE_Q4_1, ASSAY_TYPE_Q5_0,
                                    ASSAY_TYPE_Q5_1, ASSAY_TYPE_Q2_K, ASSAY_TYPE_Q3_K, ASSAY_TYPE_Q4_K,
                                    ASSAY_TYPE_Q5_K, ASSAY_TYPE_Q6_K};
static const char *kNames[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"};
#define NTYPES 10

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rng_uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static float rng_gauss(void) { return (float)(sqrt(-2 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform())); }

static int write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(data, 1, bytes, f);
    return fclose(f) == 0 && w == bytes;
}

static float *read_f32(const char *dir, const char *name, int64_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)bytes);
    *n = (int64_t)(fread(v, 1, (size_t)bytes, f) / 4);
    fclose(f);
    return v;
}

/* Quantizes one set (rows x cols) under every type, with and without imatrix; writes blocks + our dequant. */
static void quantize_set(const char *dir, const char *tag, const float *src, int64_t rows, int64_t cols,
                         const float *imatrix) {
    float *deq = malloc(sizeof(float) * rows * cols);
    for (int t = 0; t < NTYPES; t++) {
        if (cols % assay_ggml_quant_block_elems(kTypes[t])) continue;
        for (int im = 0; im < 2; im++) {
            size_t bytes = assay_ggml_quant_bytes(kTypes[t], rows, cols);
            void *blk = malloc(bytes);
            CHECK_OK(assay_ggml_quantize(kTypes[t], src, blk, rows, cols, im ? imatrix : NULL));
            CHECK_OK(assay_dequantize(kTypes[t], blk, deq, rows * cols));
            char name[256];
            snprintf(name, sizeof name, "%s.%s%s.bin", tag, kNames[t], im ? ".im" : "");
            CHECK(write_file(dir, name, blk, bytes));
            snprintf(name, sizeof name, "%s.%s%s.deq", tag, kNames[t], im ? ".im" : "");
            CHECK(write_file(dir, name, deq, sizeof(float) * rows * cols));
            free(blk);
        }
    }
    free(deq);
}

static void test_errors(void) {
    float x[48] = {0};
    uint8_t buf[512];
    CHECK(assay_ggml_quantize(ASSAY_TYPE_Q4_K, x, buf, 1, 48, NULL) == ASSAY_ERR_ARG);
    CHECK(assay_ggml_quantize(ASSAY_TYPE_F16, x, buf, 1, 32, NULL) == ASSAY_ERR_UNSUPPORTED);
    float im[32];
    for (int i = 0; i < 32; i++) im[i] = 1;
    im[5] = NAN;
    CHECK(assay_ggml_quantize(ASSAY_TYPE_Q4_0, x, buf, 1, 32, im) == ASSAY_ERR_ARG);
    /* all-zero input encodes to all-zero values */
    float z[256] = {0}, back[256];
    for (int t = 0; t < NTYPES; t++) {
        CHECK_OK(assay_ggml_quantize(kTypes[t], z, buf, 1, 256, NULL));
        CHECK_OK(assay_dequantize(kTypes[t], buf, back, 256));
        int ok = 1;
        for (int i = 0; i < 256; i++) ok &= back[i] == 0.0f;
        CHECK(ok);
    }
}

/* The mix rules on the house model's shapes (7 layers, 8 heads / 2 kv heads, ffn 1408), written out by hand
 * from llama.cpp's llama_tensor_get_type: use_more_bits(i, 7) selects layers 2, 5, 6. */
static void test_mix(void) {
    const char *names[] = {"token_embd.weight", "blk.%d.attn_q.weight", "blk.%d.attn_k.weight",
                           "blk.%d.attn_v.weight", "blk.%d.attn_output.weight", "blk.%d.ffn_gate.weight",
                           "blk.%d.ffn_up.weight", "blk.%d.ffn_down.weight", "blk.%d.attn_norm.weight",
                           "output_norm.weight", "output.weight"};
    int64_t ne_embd[2] = {512, 8192}, ne_sq[2] = {512, 512}, ne_kv[2] = {512, 128}, ne_up[2] = {512, 1408},
            ne_down[2] = {1408, 512}, ne_norm[2] = {512, 1};
    assay_ggml_mix m;
    assay_ggml_ftype f;
    CHECK(assay_ggml_ftype_from_name("Q4_K_M", &f) && f == ASSAY_GGML_FTYPE_Q4_K_M);
    CHECK(!assay_ggml_ftype_from_name("int4-gptq", &f));
    assay_ggml_mix_init(&m, ASSAY_GGML_FTYPE_Q4_K_M, 7, 8, 2);
    char nm[64];
    for (int pass = 0; pass < 2; pass++) {
        int got_v[7] = {0}, got_down[7] = {0};
        for (int l = 0; l < 7; l++) {
            for (int k = 1; k <= 8; k++) {
                snprintf(nm, sizeof nm, names[k], l);
                if (pass == 0) { assay_ggml_mix_count(&m, nm); continue; }
                const int64_t *ne = k == 1 || k == 4 ? ne_sq : k == 2 || k == 3 ? ne_kv : k == 5 || k == 6 ? ne_up
                                  : k == 7 ? ne_down : ne_norm;
                int nd = k == 8 ? 1 : 2;
                assay_type t = assay_ggml_mix_tensor_type(&m, nm, nd, ne);
                if (k == 3) got_v[l] = t;
                else if (k == 7) got_down[l] = t;
                else if (k == 8) CHECK(t == ASSAY_TYPE_F32);
                else CHECK(t == ASSAY_TYPE_Q4_K);
            }
        }
        if (pass == 0) {
            assay_ggml_mix_count(&m, "output.weight");
            CHECK(m.n_attention_wv == 7 && !m.has_tied_embeddings);
            continue;
        }
        for (int l = 0; l < 7; l++) {
            int more = l == 2 || l == 5 || l == 6;
            CHECK(got_v[l] == (more ? ASSAY_TYPE_Q6_K : ASSAY_TYPE_Q4_K));
            /* 1408 % 256 != 0: q6_K falls back to q8_0, q4_K to q5_0 */
            CHECK(got_down[l] == (more ? ASSAY_TYPE_Q8_0 : ASSAY_TYPE_Q5_0));
        }
        CHECK(assay_ggml_mix_tensor_type(&m, "token_embd.weight", 2, ne_embd) == ASSAY_TYPE_Q4_K);
        CHECK(assay_ggml_mix_tensor_type(&m, "output.weight", 2, ne_embd) == ASSAY_TYPE_Q6_K);
        CHECK(assay_ggml_mix_tensor_type(&m, "output_norm.weight", 1, ne_norm) == ASSAY_TYPE_F32);
        CHECK(m.n_fallback == 7);
    }
    /* q2_K: attn_v -> q4_K under GQA >= 4, ffn_down -> q3_K -> (1408) q4_0, attn_output -> q3_K */
    assay_ggml_mix_init(&m, ASSAY_GGML_FTYPE_Q2_K, 7, 8, 2);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.attn_v.weight", 2, ne_kv) == ASSAY_TYPE_Q4_K);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.ffn_down.weight", 2, ne_down) == ASSAY_TYPE_Q4_0);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.attn_output.weight", 2, ne_sq) == ASSAY_TYPE_Q3_K);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.ffn_up.weight", 2, ne_up) == ASSAY_TYPE_Q2_K);
    /* q3_k_m: attn_v q5_K for the first 2, then q4_K; ffn_down q4_K (n/16 = 0) -> q5_0 */
    assay_ggml_mix_init(&m, ASSAY_GGML_FTYPE_Q3_K_M, 7, 8, 2);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.attn_v.weight", 2, ne_kv) == ASSAY_TYPE_Q5_K);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.1.attn_v.weight", 2, ne_kv) == ASSAY_TYPE_Q5_K);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.2.attn_v.weight", 2, ne_kv) == ASSAY_TYPE_Q4_K);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.ffn_down.weight", 2, ne_down) == ASSAY_TYPE_Q5_0);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.attn_output.weight", 2, ne_sq) == ASSAY_TYPE_Q4_K);
    /* q4_k_s: attn_v q5_K on layers < 4; q5_k_m ffn_down: q6_K -> q8_0 / q5_K -> q5_1 */
    assay_ggml_mix_init(&m, ASSAY_GGML_FTYPE_Q4_K_S, 7, 8, 2);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.attn_v.weight", 2, ne_kv) == ASSAY_TYPE_Q5_K);
    assay_ggml_mix_init(&m, ASSAY_GGML_FTYPE_Q5_K_M, 7, 8, 2);
    CHECK(assay_ggml_mix_tensor_type(&m, "blk.0.ffn_down.weight", 2, ne_down) == ASSAY_TYPE_Q5_1);
    /* a tied model (no output.weight): token_embd follows the output rule */
    assay_ggml_mix_init(&m, ASSAY_GGML_FTYPE_Q4_K_M, 7, 8, 2);
    assay_ggml_mix_count(&m, "token_embd.weight");
    CHECK(assay_ggml_mix_tensor_type(&m, "token_embd.weight", 2, ne_embd) == ASSAY_TYPE_Q6_K);
    int64_t ne_576[2] = {576, 49152};
    CHECK(assay_ggml_mix_tensor_type(&m, "token_embd.weight", 2, ne_576) == ASSAY_TYPE_Q8_0);
}

int main(void) {
    test_errors();
    test_mix();

    const char *build = getenv("ASSAY_BUILD_DIR"), *py = getenv("ASSAY_PYTHON"), *srcdir = getenv("ASSAY_SOURCE_DIR");
    if (!build || !py || !srcdir) {
        fprintf(stderr, "ASSAY_BUILD_DIR / ASSAY_PYTHON / ASSAY_SOURCE_DIR not set (run through ctest)\n");
        return 1;
    }
    char dir[4096], cmd[16384];
    snprintf(dir, sizeof dir, "%s/ggml_quant_fixture", build);
    mkdir(dir, 0755);

    /* synthetic set: 48 rows x 512 */
    enum { ROWS = 48, COLS = 512 };
    float *x = malloc(sizeof(float) * ROWS * COLS), im[COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            float g = rng_gauss();
            float v = r % 4 == 0 ? g * 0.02f : r % 4 == 1 ? g * g * g * 0.01f : r % 4 == 2 ? (float)(rng_uniform() - 0.3) : g;
            x[r * COLS + c] = v;
        }
    for (int c = 0; c < COLS; c++) x[5 * COLS + c] = 0;                  /* an all-zero row */
    x[6 * COLS + 77] = 40.0f;                                            /* an outlier */
    for (int c = 0; c < COLS; c++) x[7 * COLS + c] = (float)((c % 17) - 8) * 0.125f; /* exact grid points, ties */
    for (int c = 0; c < 64; c++) x[8 * COLS + c] = 1e-20f * (c - 32);   /* a near-zero group */
    for (int c = 0; c < COLS; c++) im[c] = (float)(0.01 + rng_uniform() * rng_uniform() * 5);
    CHECK(write_file(dir, "syn.src", x, sizeof(float) * ROWS * COLS));
    CHECK(write_file(dir, "syn.imatrix", im, sizeof im));
    quantize_set(dir, "syn", x, ROWS, COLS, im);
    free(x);

    /* real weights: the python helper exports house blk.0 ffn_gate (1408 x 512) and a synthetic imatrix */
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/ggml_quant_oracle.py' export '%s'", py, srcdir, dir);
    CHECK(system(cmd) == 0);
    int64_t n = 0, ni = 0;
    float *w = read_f32(dir, "real.src", &n), *wim = read_f32(dir, "real.imatrix", &ni);
    CHECK(w && wim && ni == 512 && n == 1408 * 512);
    if (w && wim && ni == 512 && n == 1408 * 512) quantize_set(dir, "real", w, 1408, 512, wim);
    free(w);
    free(wim);

    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/ggml_quant_oracle.py' check '%s'", py, srcdir, dir);
    CHECK(system(cmd) == 0);
    return check_finish("ggml_quant");
}
