/* test_ggml_quantize_model.c — whole-model GGUF quantization of stories260K (all-f32 llama, rows of 64 and 172,
 * so every k-quant falls back and ffn_down even falls back to f16) under each llama.cpp mix, with and without an
 * importance matrix written by our imatrix writer.
 * tests/py/ggml_model_oracle.py then reads every output with gguf-py: the source's metadata is all there, types
 * follow the mix, values decode close to the source; and when ASSAY_LLAMACPP_BIN names a directory holding
 * llama-quantize, it quantizes the same file under the same mix and every tensor must match ours byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/ggml_quant.h"
#include "assay/imatrix.h"
#include "assay/model_file.h"
#include "check.h"

static const char *kMixes[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k"};

int main(void) {
    const char *build = getenv("ASSAY_BUILD_DIR"), *py = getenv("ASSAY_PYTHON"), *srcdir = getenv("ASSAY_SOURCE_DIR");
    if (!build || !py || !srcdir) {
        fprintf(stderr, "run through ctest\n");
        return 1;
    }
    const char *model = check_shared_path("data/stories260K/stories260K.gguf");
    assay_model_file *mf;
    CHECK_OK(assay_model_file_open(&mf, model));
    if (!mf) return check_finish("ggml_quantize_model");

    /* an importance matrix with a deterministic, uneven column profile for every blk.* weight */
    assay_imatrix *im = assay_imatrix_new();
    for (int64_t i = 0; i < assay_model_file_tensor_count(mf); i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        if (t->n_dims != 2 || strncmp(t->name, "blk.", 4)) continue;
        float x[4 * 172];
        for (int r = 0; r < 4; r++)
            for (int64_t c = 0; c < t->ne[0]; c++) x[r * t->ne[0] + c] = (float)(((c * 7 + r * 3) % 11) - 5) * 0.3f;
        assay_imatrix_hook(im, t->name, x, 4, t->ne[0]);
    }
    assay_imatrix_end_chunk(im);
    char path[4096], cmd[8192];
    snprintf(path, sizeof path, "%s/stories260K.imatrix.gguf", build);
    CHECK_OK(assay_imatrix_write(im, path, "synthetic", 4, 1));
    assay_imatrix_free(im);
    assay_imatrix *loaded = NULL;
    CHECK_OK(assay_imatrix_load(&loaded, path));
    CHECK(loaded && assay_imatrix_count(loaded) == 5 * 7);
    const float *v = loaded ? assay_imatrix_get(loaded, "blk.0.ffn_down.weight", 172) : NULL;
    CHECK(v && v[0] > 0);
    CHECK(!loaded || assay_imatrix_get(loaded, "blk.0.ffn_down.weight", 64) == NULL);

    for (size_t k = 0; k < sizeof kMixes / sizeof kMixes[0]; k++)
        for (int with_im = 0; with_im < 2; with_im++) {
            assay_ggml_model_options o = {.threads = 2, .overwrite = 1, .imatrix = with_im ? loaded : NULL,
                                          .imatrix_path = with_im ? path : NULL};
            CHECK(assay_ggml_ftype_from_name(kMixes[k], &o.ftype));
            char out[4096];
            snprintf(out, sizeof out, "%s/stories260K.%s%s.gguf", build, kMixes[k], with_im ? ".im" : "");
            assay_ggml_model_report rep;
            CHECK_OK(assay_ggml_quantize_model(mf, out, &o, &rep));
            CHECK(with_im ? rep.n_imatrix_used > 0 : rep.n_imatrix_used == 0);
        }
    /* refusing to overwrite */
    assay_ggml_model_options o = {.ftype = ASSAY_GGML_FTYPE_Q8_0, .threads = 1};
    snprintf(path, sizeof path, "%s/stories260K.q8_0.gguf", build);
    CHECK(assay_ggml_quantize_model(mf, path, &o, NULL) != ASSAY_OK);
    assay_imatrix_free(loaded);
    assay_model_file_close(mf);

    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/ggml_model_oracle.py' '%s' '%s'", py, srcdir, model, build);
    CHECK(system(cmd) == 0);
    return check_finish("ggml_quantize_model");
}
