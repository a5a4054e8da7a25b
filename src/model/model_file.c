/* model_file.c — a model on disk as one view: GGUF file or HF safetensors directory (see include/assay/model_file.h).
 *
 * HF directories: config.json gives the hyper-parameters; tensors keep their mmapped bytes and get llama.cpp's
 * GGUF names and ggml-order shapes (HF [out, in] becomes ne = {in, out}). For the llama architecture the
 * q_proj/k_proj rows are left as stored and flagged with permute_heads: assay_tensor_copy_rows reorders each
 * head's rows from HF's [first half, second half] layout to llama.cpp's interleaved pairs, the layout
 * convert_hf_to_gguf.py writes, so one forward pass with "normal" RoPE serves both sources.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/file.h"
#include "assay/hf_config.h"
#include "assay/json.h"
#include "model_file_internal.h"

const char *assay_model_file_own_(assay_model_file *mf, char *s) {
    mf->owned = assay_xrealloc(mf->owned, (size_t)(mf->n_owned + 1) * sizeof *mf->owned);
    mf->owned[mf->n_owned++] = s;
    return s;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const assay_tensor *const *)a)->name, (*(const assay_tensor *const *)b)->name);
}

/* Sorted index for find, and a duplicate check (two HF names must never map to one GGUF name). */
static assay_status build_index(assay_model_file *mf) {
    mf->by_name = assay_xmalloc(((size_t)mf->n_tensors + 1) * sizeof *mf->by_name);
    for (int64_t i = 0; i < mf->n_tensors; i++) mf->by_name[i] = &mf->tensors[i];
    qsort(mf->by_name, (size_t)mf->n_tensors, sizeof *mf->by_name, cmp_tensor_name);
    for (int64_t i = 1; i < mf->n_tensors; i++)
        if (strcmp(mf->by_name[i]->name, mf->by_name[i - 1]->name) == 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: two tensors named '%s' (%s and %s)", mf->path, mf->by_name[i]->name,
                              mf->by_name[i - 1]->source_name, mf->by_name[i]->source_name);
    return ASSAY_OK;
}


/* The tensors each architecture needs, with their ggml shapes: a file missing one, or holding one of another
 * shape, is rejected here with a message naming it, instead of failing later inside a matmul. */
typedef struct expected_tensor {
    const char *name; /* "%d" is the layer */
    int64_t ne0, ne1; /* ne1 == 0: a vector */
    int optional;
} expected_tensor;

static assay_status check_tensor(const assay_model_file *mf, const char *name, int64_t ne0, int64_t ne1, int optional) {
    const assay_tensor *t = assay_model_file_find(mf, name);
    if (!t) {
        if (optional) return ASSAY_OK;
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' is missing (a %lld-layer %s model needs it)", mf->path, name,
                          (long long)mf->config.n_layer, mf->config.arch);
    }
    int64_t want_dims = ne1 ? 2 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != (ne1 ? ne1 : 1) || t->ne[2] != 1 || t->ne[3] != 1 || t->n_dims > want_dims)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' (%s) has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                          mf->path, name, t->source_name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)ne0, (long long)(ne1 ? ne1 : 1));
    return ASSAY_OK;
}

static assay_status validate_tensors(assay_model_file *mf, int strict_names) {
    const assay_model_config *c = &mf->config;
    /* a quantized checkpoint may store a linear as packed tensors with no ".weight" (GPTQ qweight, ...): the model
     * layer's checkpoint loader checks those; a ".weight" that is present must still have the right shape */
    int q = mf->quant_config != NULL;
    const char *a = c->arch;
    int llama = strcmp(a, "llama") == 0 || strcmp(a, "mistral") == 0, qwen2 = strcmp(a, "qwen2") == 0;
    int qwen3 = strcmp(a, "qwen3") == 0, gemma = strcmp(a, "gemma3") == 0;
    if (!llama && !qwen2 && !qwen3 && !gemma) return ASSAY_OK; /* an architecture we only inspect */
    if (mf->n_tensors == 0 && !strict_names) return ASSAY_OK;  /* a vocab-only GGUF (llama.cpp's tokenizer fixtures) */
    int64_t e = c->n_embd, qd = c->n_head * c->head_dim, kv = c->n_head_kv * c->head_dim, ff = c->n_ff;
    const expected_tensor global[] = {
        {"token_embd.weight", e, c->n_vocab, 0}, {"output_norm.weight", e, 0, 0}, {"output.weight", e, c->n_vocab, 1},
        {"rope_freqs.weight", c->head_dim / 2, 0, 1}};
    const expected_tensor block[] = {
        {"blk.%d.attn_norm.weight", e, 0, 0},        {"blk.%d.attn_q.weight", e, qd, q},
        {"blk.%d.attn_k.weight", e, kv, q},          {"blk.%d.attn_v.weight", e, kv, q},
        {"blk.%d.attn_output.weight", qd, e, q},     {"blk.%d.ffn_norm.weight", e, 0, 0},
        {"blk.%d.ffn_gate.weight", e, ff, q},        {"blk.%d.ffn_up.weight", e, ff, q},
        {"blk.%d.ffn_down.weight", ff, e, q},        {"blk.%d.attn_q.bias", qd, 0, !qwen2},
        {"blk.%d.attn_k.bias", kv, 0, !qwen2},       {"blk.%d.attn_v.bias", kv, 0, !qwen2},
        {"blk.%d.attn_output.bias", e, 0, 1},        {"blk.%d.attn_q_norm.weight", c->head_dim, 0, !(qwen3 || gemma)},
        {"blk.%d.attn_k_norm.weight", c->head_dim, 0, !(qwen3 || gemma)},
        {"blk.%d.post_attention_norm.weight", e, 0, !gemma}, {"blk.%d.post_ffw_norm.weight", e, 0, !gemma}};
    assay_status rc;
    int64_t matched = 0;
    for (size_t i = 0; i < sizeof global / sizeof global[0]; i++) {
        if ((rc = check_tensor(mf, global[i].name, global[i].ne0, global[i].ne1, global[i].optional))) return rc;
        matched += assay_model_file_find(mf, global[i].name) != NULL;
    }
    for (int64_t l = 0; l < c->n_layer; l++)
        for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) {
            char name[96];
            snprintf(name, sizeof name, block[i].name, (int)l);
            if ((rc = check_tensor(mf, name, block[i].ne0, block[i].ne1, block[i].optional))) return rc;
            matched += assay_model_file_find(mf, name) != NULL;
        }
    /* An HF directory with tensors we would silently ignore is not the model its config describes. */
    if (strict_names && matched != mf->n_tensors)
        for (int64_t i = 0; i < mf->n_tensors; i++) {
            const char *n = mf->tensors[i].name;
            int known = 0;
            for (size_t g = 0; g < sizeof global / sizeof global[0] && !known; g++) known = strcmp(n, global[g].name) == 0;
            long layer = -1;
            const char *dot = NULL;
            /* companions of a quantized lm_head / embedding ("output.weight_scale") */
            if (!known && q) known = strncmp(n, "output.", 7) == 0 || strncmp(n, "token_embd.", 11) == 0;
            if (!known && strncmp(n, "blk.", 4) == 0) {
                layer = strtol(n + 4, (char **)&dot, 10);
                known = dot && *dot == '.' && layer >= 0 && layer < c->n_layer;
            }
            if (!known)
                return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' does not belong to a %lld-layer %s model", mf->path,
                                  mf->tensors[i].source_name, (long long)c->n_layer, a);
        }
    return ASSAY_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The canonical name of a quantization companion ("<module>.qweight", "<module>.weight_scale", ...): the module's
 * weight name mapped as usual, with "weight" replaced by the companion's last component. 0 if the module is not
 * one we know. */
static int companion_name(const char *hf, const char *arch, char *out, size_t cap) {
    const char *dot = strrchr(hf, '.');
    if (!dot || strcmp(dot, ".weight") == 0 || strcmp(dot, ".bias") == 0) return 0;
    char w[256], g[256];
    int n = snprintf(w, sizeof w, "%.*s.weight", (int)(dot - hf), hf);
    if (n <= 0 || n >= (int)sizeof w || !assay_hf_to_gguf_name(w, arch, g, sizeof g)) return 0;
    size_t gl = strlen(g);
    if (gl < 7 || strcmp(g + gl - 7, ".weight") != 0) return 0;
    n = snprintf(out, cap, "%.*s%s", (int)(gl - 7), g, dot);
    return n > 0 && n < (int)cap;
}

/* The chat template from tokenizer_config.json ("chat_template": a string, or a list of {name, template}
 * where "default" wins) or from chat_template.jinja, which newer transformers write instead. */
static void load_hf_chat_template(assay_model_file *mf) {
    char *p = assay_path_join(mf->path, "tokenizer_config.json");
    assay_json_doc *doc = NULL;
    if (assay_path_exists(p) && assay_json_parse_file(p, &doc) == ASSAY_OK) {
        const assay_json *ct = assay_json_get(assay_json_root(doc), "chat_template");
        const char *text = assay_json_string(ct, NULL);
        if (!text && assay_json_is(ct, ASSAY_JSON_ARRAY)) {
            for (const assay_json *e = ct->first; e; e = e->next) {
                const char *t = assay_json_string(assay_json_get(e, "template"), NULL);
                if (t && (!text || strcmp(assay_json_string(assay_json_get(e, "name"), ""), "default") == 0)) text = t;
            }
        }
        if (text) mf->chat_template = assay_xstrdup(text);
        assay_json_doc_free(doc);
    }
    free(p);
    if (!mf->chat_template) {
        p = assay_path_join(mf->path, "chat_template.jinja");
        char *text;
        if (assay_path_exists(p) && assay_read_file(p, &text, NULL) == ASSAY_OK) mf->chat_template = text;
        free(p);
    }
}

/* The dtype config.json says the weights have: "torch_dtype", or "dtype" (newer transformers), at the top or in a
 * multimodal model's text_config. ASSAY_TYPE_COUNT when it names no float dtype. */
static void read_torch_dtype(assay_model_file *mf) {
    const assay_json *root = assay_json_root(mf->config_doc), *text = assay_json_get(root, "text_config");
    const assay_json *objs[] = {root, assay_json_is(text, ASSAY_JSON_OBJECT) ? text : NULL};
    const char *keys[] = {"torch_dtype", "dtype"};
    const char *name = NULL;
    for (int o = 0; o < 2 && !name; o++)
        for (int k = 0; k < 2 && !name && objs[o]; k++) name = assay_json_string(assay_json_get(objs[o], keys[k]), NULL);
    mf->torch_dtype = ASSAY_TYPE_COUNT;
    if (!name) return;
    if (strcmp(name, "bfloat16") == 0) mf->torch_dtype = ASSAY_TYPE_BF16;
    else if (strcmp(name, "float16") == 0 || strcmp(name, "half") == 0) mf->torch_dtype = ASSAY_TYPE_F16;
    else if (strcmp(name, "float32") == 0 || strcmp(name, "float") == 0) mf->torch_dtype = ASSAY_TYPE_F32;
}

/* config.json of an HF directory: the hyper-parameters, the document (quantization_config) and the dtype. */
static assay_status read_hf_config(assay_model_file *mf) {
    mf->format = ASSAY_MODEL_FORMAT_HF;
    char *cfg_path = assay_path_join(mf->path, "config.json");
    if (!assay_path_exists(cfg_path)) {
        assay_status rc = assay_fail(ASSAY_ERR_IO, "%s: no config.json (%s)", mf->path,
                                     mf->config_only ? "a model's shape alone comes from an HF config.json"
                                                     : "expected a GGUF file or an HF model directory");
        free(cfg_path);
        return rc;
    }
    assay_status rc = assay_model_config_from_hf_file(&mf->config, cfg_path);
    if (rc == ASSAY_OK) rc = assay_json_parse_file(cfg_path, &mf->config_doc);
    free(cfg_path);
    if (rc != ASSAY_OK) return rc;
    mf->quant_config = assay_json_get(assay_json_root(mf->config_doc), "quantization_config");
    if (mf->quant_config && !assay_json_is(mf->quant_config, ASSAY_JSON_OBJECT))
        return assay_fail(ASSAY_ERR_FORMAT, "%s/config.json: quantization_config is not an object", mf->path);
    read_torch_dtype(mf);
    return ASSAY_OK;
}

/* The tokenizer and chat template beside config.json, when present. */
static void find_hf_tokenizer(assay_model_file *mf) {
    char *tok = assay_path_join(mf->path, "tokenizer.json");
    if (assay_path_exists(tok)) mf->tokenizer_json = tok;
    else free(tok);
    load_hf_chat_template(mf);
}

static assay_status open_hf(assay_model_file *mf) {
    assay_status rc = read_hf_config(mf);
    if (rc != ASSAY_OK) return rc;
    assay_model_config *c = &mf->config;
    if (strcmp(c->arch, "gemma3") == 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: gemma3 safetensors directories are not supported yet (their RMSNorm weights need "
                          "llama.cpp's +1 shift); use a gemma3 GGUF",
                          mf->path);
    if ((rc = assay_safetensors_set_open(&mf->st, mf->path)) != ASSAY_OK) return rc;

    int permute = strcmp(c->arch, "llama") == 0 || strcmp(c->arch, "mistral") == 0;
    int64_t total = 0;
    for (int64_t f = 0; f < assay_safetensors_set_file_count(mf->st); f++)
        total += assay_safetensors_tensor_count(assay_safetensors_set_file(mf->st, f));
    mf->tensors = assay_xcalloc((size_t)total + 1, sizeof *mf->tensors);
    for (int64_t f = 0; f < assay_safetensors_set_file_count(mf->st); f++) {
        const assay_safetensors *sf = assay_safetensors_set_file(mf->st, f);
        for (int64_t i = 0; i < assay_safetensors_tensor_count(sf); i++) {
            const assay_safetensors_tensor *s = assay_safetensors_tensor_at(sf, i);
            char name[128];
            if (!assay_hf_to_gguf_name(s->name, c->arch, name, sizeof name) &&
                !(mf->quant_config && companion_name(s->name, c->arch, name, sizeof name))) {
                /* llama.cpp drops the precomputed RoPE table; anything else keeps its HF name. */
                if (ends_with(s->name, "rotary_emb.inv_freq")) continue;
                snprintf(name, sizeof name, "%s", s->name);
            }
            if (s->n_dims > 4)
                return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions (at most 4)",
                                  assay_safetensors_path(sf), s->name, s->n_dims);
            assay_tensor *t = &mf->tensors[mf->n_tensors++];
            t->name = assay_model_file_own_(mf, assay_xstrdup(name));
            t->source_name = s->name;
            t->source_file = assay_safetensors_path(sf);
            t->type = s->type;
            t->n_dims = s->n_dims ? s->n_dims : 1;
            for (int d = 0; d < 4; d++) t->ne[d] = 1;
            for (int d = 0; d < s->n_dims; d++) t->ne[d] = s->shape[s->n_dims - 1 - d];
            t->data = s->data;
            t->bytes = s->bytes;
            if (permute) {
                int is_q = strncmp(name, "blk.", 4) == 0 && (ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_q.bias"));
                int is_k = strncmp(name, "blk.", 4) == 0 && (ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_k.bias"));
                if (is_q || is_k) {
                    int64_t heads = is_q ? c->n_head : c->n_head_kv;
                    int64_t rows = t->ne[t->n_dims - 1];
                    if (rows % (2 * heads) != 0)
                        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' has %lld rows, not a multiple of 2 x %lld heads",
                                          t->source_file, s->name, (long long)rows, (long long)heads);
                    t->permute_heads = heads;
                }
            }
        }
    }
    if ((rc = build_index(mf)) != ASSAY_OK) return rc;
    if ((rc = validate_tensors(mf, 1)) != ASSAY_OK) return rc;
    c->tied_embeddings = 1; /* no lm_head tensor at all, packed or not */
    for (int64_t i = 0; i < mf->n_tensors; i++)
        if (strncmp(mf->tensors[i].name, "output.", 7) == 0) c->tied_embeddings = 0;
    find_hf_tokenizer(mf);
    return ASSAY_OK;
}

assay_status assay_model_file_open(assay_model_file **out, const char *path) {
    *out = NULL;
    assay_model_file *mf = assay_xcalloc(1, sizeof *mf);
    mf->path = assay_xstrdup(path);
    assay_status rc;
    if (assay_path_is_dir(path)) {
        rc = open_hf(mf);
    } else if (!assay_path_exists(path)) {
        rc = assay_fail(ASSAY_ERR_IO, "%s: no such file or directory", path);
    } else {
        mf->format = ASSAY_MODEL_FORMAT_GGUF;
        rc = assay_model_file_open_gguf_(mf);
        if (rc == ASSAY_OK) rc = build_index(mf);
        if (rc == ASSAY_OK) rc = validate_tensors(mf, 0);
    }
    if (rc != ASSAY_OK) {
        assay_model_file_close(mf);
        return rc;
    }
    *out = mf;
    return ASSAY_OK;
}

assay_status assay_model_file_open_config(assay_model_file **out, const char *path) {
    *out = NULL;
    if (!assay_path_is_dir(path))
        return assay_fail(ASSAY_ERR_IO, "%s: %s (a model's shape alone comes from an HF directory with a config.json)",
                          path, assay_path_exists(path) ? "not a directory" : "no such directory");
    assay_model_file *mf = assay_xcalloc(1, sizeof *mf);
    mf->path = assay_xstrdup(path);
    mf->config_only = 1;
    assay_status rc = read_hf_config(mf);
    if (rc == ASSAY_OK) rc = build_index(mf); /* no tensors: every find answers NULL */
    if (rc != ASSAY_OK) {
        assay_model_file_close(mf);
        return rc;
    }
    find_hf_tokenizer(mf); /* tied_embeddings stays as config.json says (tie_word_embeddings) */
    *out = mf;
    return ASSAY_OK;
}

void assay_model_file_close(assay_model_file *mf) {
    if (!mf) return;
    free(mf->tensors);
    free((void *)mf->by_name);
    for (int64_t i = 0; i < mf->n_owned; i++) free(mf->owned[i]);
    free(mf->owned);
    assay_safetensors_set_close(mf->st);
    if (mf->gguf) assay_model_file_close_gguf_(mf);
    free(mf->tokenizer_json);
    free(mf->chat_template);
    assay_json_doc_free(mf->config_doc);
    free(mf->path);
    free(mf);
}

assay_model_format assay_model_file_format(const assay_model_file *mf) { return mf->format; }
const char *assay_model_file_path(const assay_model_file *mf) { return mf->path; }
const assay_model_config *assay_model_file_config(const assay_model_file *mf) { return &mf->config; }
int64_t assay_model_file_tensor_count(const assay_model_file *mf) { return mf->n_tensors; }
const assay_gguf *assay_model_file_gguf(const assay_model_file *mf) { return mf->gguf; }
const char *assay_model_file_tokenizer_json(const assay_model_file *mf) { return mf->tokenizer_json; }
const char *assay_model_file_chat_template(const assay_model_file *mf) { return mf->chat_template; }
const assay_json *assay_model_file_quantization_config(const assay_model_file *mf) { return mf->quant_config; }
assay_type assay_model_file_torch_dtype(const assay_model_file *mf) {
    return mf->format == ASSAY_MODEL_FORMAT_HF ? mf->torch_dtype : ASSAY_TYPE_COUNT;
}
int assay_model_file_config_only(const assay_model_file *mf) { return mf->config_only; }

const assay_tensor *assay_model_file_tensor(const assay_model_file *mf, int64_t i) {
    ASSAY_ASSERT(i >= 0 && i < mf->n_tensors);
    return &mf->tensors[i];
}

const assay_tensor *assay_model_file_find(const assay_model_file *mf, const char *name) {
    int64_t lo = 0, hi = mf->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, mf->by_name[mid]->name);
        if (c == 0) return mf->by_name[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int64_t assay_tensor_nelements(const assay_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

void assay_tensor_copy_rows(const assay_tensor *t, void *dst) {
    if (t->permute_heads <= 0) {
        memcpy(dst, t->data, t->bytes);
        return;
    }
    /* Rows are the outermost dimension. Within head h (hd rows), destination row 2i+j takes source row
     * j*hd/2+i: llama.cpp's reshape(n_head, 2, hd/2, ...).swapaxes(1, 2). */
    int64_t rows = t->ne[t->n_dims - 1];
    int64_t hd = rows / t->permute_heads;
    ASSAY_ASSERT(hd % 2 == 0 && hd * t->permute_heads == rows);
    size_t row_bytes = t->bytes / (size_t)rows;
    const uint8_t *src = t->data;
    uint8_t *out = dst;
    for (int64_t h = 0; h < t->permute_heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(out + (size_t)(h * hd + 2 * i + j) * row_bytes, src + (size_t)(h * hd + j * (hd / 2) + i) * row_bytes,
                       row_bytes);
}
