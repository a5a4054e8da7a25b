/* test_hf_config.c — config.json of each supported family (the fuzz seeds in fuzz/corpus/fuzz_config/, copies
 * of published configs) and GGUF metadata (stories260K.gguf) into assay_model_config. */
#include <stdlib.h>
#include <string.h>

#include "assay/hf_config.h"
#include "assay/model_file.h"
#include "check.h"

static int load(assay_model_config *c, const char *name) {
    char path[4096];
    const char *src = getenv("ASSAY_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/fuzz/corpus/fuzz_config/%s", src ? src : ".", name);
    assay_status st = assay_model_config_from_hf_file(c, path);
    if (st != ASSAY_OK) fprintf(stderr, "%s: %s\n", name, assay_last_error());
    return st == ASSAY_OK;
}

int main(void) {
    assay_model_config c;
    CHECK(load(&c, "llama3.json"));
    CHECK(strcmp(c.arch, "llama") == 0 && c.rope_scaling == ASSAY_ROPE_SCALING_LLAMA3 && c.rope_factor == 32.0);
    CHECK(c.rope_orig_ctx == 8192 && c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0);
    CHECK(c.head_dim == 64 && c.tied_embeddings && c.eos_id == 128001 && c.rope_style == ASSAY_ROPE_NORM);
    CHECK(strcmp(assay_model_config_gguf_arch(&c), "llama") == 0);

    CHECK(load(&c, "mistral.json"));
    CHECK(strcmp(c.arch, "mistral") == 0 && strcmp(assay_model_config_gguf_arch(&c), "llama") == 0);
    CHECK(c.head_dim == 128 && c.n_head_kv == 8 && c.rope_theta == 1e6 && !c.tied_embeddings); /* head_dim: null */

    CHECK(load(&c, "qwen2.json"));
    CHECK(c.has_qkv_bias && !c.has_qk_norm && c.rope_style == ASSAY_ROPE_NEOX && c.head_dim == 64 && c.norm_eps == 1e-6);

    CHECK(load(&c, "qwen3.json"));
    CHECK(c.has_qk_norm && !c.has_qkv_bias && c.head_dim == 128 && c.rope_theta == 1e6);
    CHECK(c.rope_scaling == ASSAY_ROPE_SCALING_YARN && c.rope_factor == 4.0 && c.rope_orig_ctx == 32768);

    CHECK(load(&c, "gemma3.json"));
    CHECK(strcmp(c.arch, "gemma3") == 0 && c.activation == ASSAY_ACT_GELU_TANH && c.head_dim == 256);
    CHECK(c.rope_theta == 1e6 && c.rope_theta_local == 10000.0 && c.sliding_window == 512 && c.sliding_window_pattern == 6);
    CHECK(c.scale_embeddings && c.has_post_norms && c.has_qk_norm && c.tied_embeddings && c.final_logit_softcap == 0);
    CHECK_NEAR(c.attn_scale, 1.0 / 16.0, 1e-15);

    CHECK(load(&c, "gemma3_mm.json")); /* multimodal: the text_config */
    CHECK(c.n_layer == 34 && c.n_embd == 2560 && c.rope_scaling == ASSAY_ROPE_SCALING_LINEAR && c.rope_factor == 8.0);
    CHECK(c.sliding_window == 1024 && c.eos_id == 1 && c.bos_id == 2);

    /* The GGUF path: stories260K's metadata as gguf-py lists it. */
    assay_model_file *mf = NULL;
    CHECK_OK(assay_model_file_open(&mf, check_shared_path("data/stories260K/stories260K.gguf")));
    if (mf) {
        const assay_model_config *g = assay_model_file_config(mf);
        CHECK(strcmp(g->arch, "llama") == 0 && g->n_layer == 5 && g->n_embd == 64 && g->n_head == 8 && g->n_head_kv == 4);
        CHECK(g->n_ff == 172 && g->n_vocab == 512 && g->head_dim == 8 && g->rope_style == ASSAY_ROPE_NORM);
        CHECK(assay_model_file_format(mf) == ASSAY_MODEL_FORMAT_GGUF && assay_model_file_tensor_count(mf) == 48);
        const assay_tensor *q = assay_model_file_find(mf, "blk.0.attn_q.weight");
        CHECK(q && q->permute_heads == 0 && q->ne[0] == 64 && q->ne[1] == 64 && q->type == ASSAY_TYPE_F32);
        CHECK(assay_model_file_gguf(mf) != NULL && assay_model_file_tokenizer_json(mf) == NULL);
        assay_model_file_close(mf);
    }
    return check_finish("hf_config");
}
