/* model_probe.c — test support: loads a model with a given on-the-fly quantization and writes what the engine
 * holds and computes, so Python tests can check them against independent numpy code.
 *
 *   model_probe MODEL QUANT OUTDIR IDS NAME...
 *     QUANT  "none" or a model.h quantization name ("fp8")
 *     IDS    comma-separated token ids, run as one sequence from position 0
 *   writes OUTDIR/logits.f32 ([n_ids][n_vocab], every position) and OUTDIR/NAME.f32 for each linear weight NAME
 *   ([n_out][n_in] f32, as assay_model_weight_f32 returns it).
 *
 * Environment: ASSAY_PROBE_KV_F32=1 keeps the KV cache in f32 (default: the engine's f16), for oracles that compare
 * logits more tightly than f16 keys/values allow; ASSAY_PROBE_INPUTS=1 also writes OUTDIR/in.NAME.f32, the input
 * of every linear layer NAME as the engine hands it to the matmul's quantizer ([n_ids][n_in], from the calibration
 * hook), so an oracle can recompute each layer from the engine's own inputs (quantized activations make an
 * end-to-end comparison chaotic: one rounding-boundary flip changes every later code).
 *
 * Exit code 0 on success, 2 on usage errors, 1 on engine or I/O errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/model.h"

static int write_f32(const char *dir, const char *name, const float *x, int64_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    int bad = fwrite(x, sizeof(float), (size_t)n, f) != (size_t)n;
    return fclose(f) != 0 || bad;
}

static const char *g_dir;
static void dump_input(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    char nm[300];
    (void)user;
    snprintf(nm, sizeof nm, "in.%s", name);
    if (write_f32(g_dir, nm, x, n_tok * n_in)) fprintf(stderr, "cannot write %s/%s.f32\n", g_dir, nm);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: model_probe MODEL none|fp8 OUTDIR ID,ID,... [WEIGHT_NAME...]\n");
        return 2;
    }
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = 1;
    if (strcmp(argv[2], "none") != 0) mo.quantization = argv[2];
    int32_t ids[256], pos[256];
    int8_t want[256];
    int64_t n = 0;
    for (char *p = argv[4]; *p && n < 256; n++) {
        ids[n] = (int32_t)strtol(p, &p, 10);
        pos[n] = (int32_t)n;
        want[n] = 1;
        if (*p == ',') p++;
    }
    assay_model *m;
    if (assay_model_load(&m, argv[1], &mo) != ASSAY_OK) {
        fprintf(stderr, "%s\n", assay_last_error());
        return 1;
    }
    int rc = 0;
    const assay_model_config *c = assay_model_get_config(m);
    assay_session *s;
    assay_session_options so;
    assay_session_options_default(&so);
    if (getenv("ASSAY_PROBE_KV_F32")) so.kv_dtype = ASSAY_KV_F32;
    if (assay_session_open(&s, m, &so) != ASSAY_OK) {
        fprintf(stderr, "%s\n", assay_last_error());
        assay_model_free(m);
        return 1;
    }
    g_dir = argv[3];
    if (getenv("ASSAY_PROBE_INPUTS")) assay_session_set_calib_hook(s, dump_input, NULL);
    float *logits = malloc(sizeof(float) * (size_t)(n * c->n_vocab));
    assay_batch b = {.n_tokens = n, .token = ids, .pos = pos, .logits = want};
    if (assay_session_forward(s, &b, logits) != ASSAY_OK) {
        fprintf(stderr, "%s\n", assay_last_error());
        rc = 1;
    } else rc = write_f32(argv[3], "logits", logits, n * c->n_vocab);
    for (int i = 5; i < argc && rc == 0; i++) {
        int64_t n_in, n_out;
        if (assay_model_weight_f32(m, argv[i], &n_in, &n_out, NULL) != ASSAY_OK) {
            fprintf(stderr, "%s\n", assay_last_error());
            rc = 1;
            break;
        }
        float *w = malloc(sizeof(float) * (size_t)(n_in * n_out));
        if (assay_model_weight_f32(m, argv[i], &n_in, &n_out, w) != ASSAY_OK) {
            fprintf(stderr, "%s\n", assay_last_error());
            rc = 1;
        } else rc = write_f32(argv[3], argv[i], w, n_in * n_out);
        free(w);
    }
    free(logits);
    assay_session_close(s);
    assay_model_free(m);
    return rc;
}
