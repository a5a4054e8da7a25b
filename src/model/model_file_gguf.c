/* model_file_gguf.c — the GGUF side of model_file (model_file.c has the HF side): tensors come straight from
 * the GGUF reader, already under canonical names and in ggml order; the hyper-parameters from its metadata. */
#include <string.h>

#include "assay/hf_config.h"
#include "model_file_internal.h"

static char *str_dup(assay_gguf_str s) {
    char *p = assay_xmalloc(s.len + 1);
    memcpy(p, s.ptr, s.len);
    p[s.len] = 0;
    return p;
}

assay_status assay_model_file_open_gguf_(assay_model_file *mf) {
    assay_status rc = assay_gguf_open(&mf->gguf, mf->path);
    if (rc != ASSAY_OK) return rc;
    if ((rc = assay_model_config_from_gguf(&mf->config, mf->gguf)) != ASSAY_OK) return rc;
    int64_t n = assay_gguf_tensor_count(mf->gguf);
    mf->tensors = assay_xcalloc((size_t)n + 1, sizeof *mf->tensors);
    for (int64_t i = 0; i < n; i++) {
        const assay_gguf_tensor *g = assay_gguf_tensor_at(mf->gguf, i);
        assay_tensor *t = &mf->tensors[mf->n_tensors++];
        char *name = str_dup(g->name);
        if (strlen(name) != g->name.len) {
            free(name);
            return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor %lld has a NUL byte in its name", mf->path, (long long)i);
        }
        t->name = t->source_name = assay_model_file_own_(mf, name);
        t->source_file = mf->path;
        t->type = g->type;
        t->n_dims = (int)g->n_dims;
        for (int d = 0; d < 4; d++) t->ne[d] = d < (int)g->n_dims ? g->ne[d] : 1;
        t->data = g->data;
        t->bytes = g->bytes;
    }
    assay_model_config *c = &mf->config;
    /* Facts the metadata leaves to the tensors. */
    int has_output = 0, has_bias = 0;
    for (int64_t i = 0; i < mf->n_tensors; i++) {
        if (strcmp(mf->tensors[i].name, "output.weight") == 0) has_output = 1;
        if (strcmp(mf->tensors[i].name, "blk.0.attn_q.bias") == 0) has_bias = 1;
        if (c->n_vocab <= 0 && strcmp(mf->tensors[i].name, "token_embd.weight") == 0) c->n_vocab = mf->tensors[i].ne[1];
    }
    c->tied_embeddings = !has_output;
    c->has_qkv_bias = c->has_qkv_bias || has_bias;
    assay_gguf_str s;
    if (assay_gguf_get_string(mf->gguf, "tokenizer.chat_template", &s)) mf->chat_template = str_dup(s);
    return ASSAY_OK;
}

void assay_model_file_close_gguf_(assay_model_file *mf) {
    assay_gguf_close(mf->gguf);
    mf->gguf = NULL;
}
