/* test_model_set_weight.c — assay_model_set_weight_f32 and assay_session_set_layer_limit (the two engine hooks
 * GPTQ's layer-by-layer calibration uses), on the house model:
 * - every linear replaced by its own values read straight from the safetensors file (HF row order, q/k rows not
 *   permuted) still gives transformers' logits for the reference prompt (ref_logits.f32, 1e-3): the setter applies
 *   the llama row permutation exactly as loading does;
 * - zeroing blk.0.attn_q changes the logits (the new weights are used);
 * - with a layer limit of 2 the calibration hook sees only blk.0 and blk.1 inputs and the logits buffer is left
 *   untouched. */
#include <stdlib.h>
#include <string.h>

#include "assay/dequant.h"
#include "assay/model.h"
#include "assay/model_file.h"
#include "check.h"

static const int32_t prompt[9] = {501, 672, 440, 776, 357, 263, 1519, 281, 399};

static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static int max_layer_seen;
static void hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    (void)user, (void)x, (void)n_tok, (void)n_in;
    int l;
    if (sscanf(name, "blk.%d.", &l) == 1 && l > max_layer_seen) max_layer_seen = l;
}

int main(void) {
    const int64_t V = 8192, P = 9;
    float *ref = malloc(P * V * 4), *lg = malloc(P * V * 4);
    FILE *f = fopen(check_shared_path("models/house/ref_logits.f32"), "rb");
    CHECK(f && fread(ref, 4, P * V, f) == (size_t)(P * V));
    if (f) fclose(f);
    assay_model *m;
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = 2;
    mo.f32_activations = 1; /* as calibration loads it (the bf16 lm_head meets f32 activations) */
    CHECK_OK(assay_model_load(&m, check_shared_path("models/house"), &mo));
    if (!m) return check_finish("model_set_weight");
    const assay_model_file *mf = assay_model_get_file(m);
    int64_t L = assay_model_get_config(m)->n_layer;
    const char *kinds[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (int64_t l = 0; l < L; l++)
        for (int k = 0; k < 7; k++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, kinds[k]);
            const assay_tensor *t = assay_model_file_find(mf, name);
            CHECK(t != NULL);
            if (!t) continue;
            int64_t n = assay_tensor_nelements(t);
            float *w = malloc(sizeof(float) * (size_t)n);
            CHECK_OK(assay_dequantize(t->type, t->data, w, n)); /* file row order */
            CHECK_OK(assay_model_set_weight_f32(m, name, w));
            free(w);
        }
    CHECK(assay_model_set_weight_f32(m, "blk.0.no_such.weight", ref) != ASSAY_OK);

    assay_session_options so;
    assay_session_options_default(&so);
    so.kv_dtype = ASSAY_KV_F32;
    so.n_ctx = 64;
    assay_session *s;
    CHECK_OK(assay_session_open(&s, m, &so));
    int32_t pos[9];
    int8_t all[9];
    for (int i = 0; i < 9; i++) pos[i] = i, all[i] = 1;
    assay_batch b = {P, prompt, pos, NULL, all};
    CHECK_OK(assay_session_forward(s, &b, lg));
    double d = max_diff(lg, ref, P * V);
    printf("every linear set from the file's values: max |logit diff| vs transformers %.3g (tolerance 1e-3)\n", d);
    CHECK(d <= 1e-3);

    /* the layer limit: hook sees layers 0..1 only, logits untouched */
    assay_session_seq_clear(s, 0);
    assay_session_set_calib_hook(s, hook, NULL);
    assay_session_set_layer_limit(s, 2);
    for (int64_t i = 0; i < P * V; i++) lg[i] = 12345.0f;
    max_layer_seen = -1;
    CHECK_OK(assay_session_forward(s, &b, lg));
    CHECK(max_layer_seen == 1);
    CHECK(lg[0] == 12345.0f && lg[P * V - 1] == 12345.0f);
    assay_session_set_layer_limit(s, 0);
    assay_session_set_calib_hook(s, NULL, NULL);
    assay_session_seq_clear(s, 0);

    /* new weights are used: zero q of layer 0 */
    const assay_tensor *tq = assay_model_file_find(mf, "blk.0.attn_q.weight");
    float *z = calloc((size_t)assay_tensor_nelements(tq), sizeof(float));
    CHECK_OK(assay_model_set_weight_f32(m, "blk.0.attn_q.weight", z));
    CHECK_OK(assay_session_forward(s, &b, lg));
    d = max_diff(lg, ref, P * V);
    printf("blk.0.attn_q zeroed: max |logit diff| %.3g (must exceed 1e-2)\n", d);
    CHECK(d > 1e-2);
    free(z);
    assay_session_close(s);
    assay_model_free(m);
    free(ref);
    free(lg);
    return check_finish("model_set_weight");
}
