/* convert.c — HF directory <-> GGUF (see include/assay/convert.h).
 *
 * The GGUF side follows llama.cpp's convert_hf_to_gguf.py and gguf-py (key names, token types, the Q/K row
 * permutation for llama, rope_freqs for llama3 scaling) so llama.cpp loads what we write; the HF side writes
 * what transformers and the `safetensors`/`tokenizers` packages read.
 */
#include "assay/convert.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/cleanup.h"
#include "assay/dtype.h"
#include "assay/file.h"
#include "assay/ggml_quant.h"
#include "assay/hf_config.h"
#include "assay/json.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"

/* gguf-py's TokenType values. */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4, TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

static int is_float_type(assay_type t) { return t == ASSAY_TYPE_F32 || t == ASSAY_TYPE_F16 || t == ASSAY_TYPE_BF16; }

/* Converts n elements between f32/f16/bf16 (through f32, exact where the target can hold the value). */
static void convert_floats(const void *src, assay_type st, void *dst, assay_type dt, int64_t n) {
    if (st == dt) {
        memcpy(dst, src, (size_t)n * (st == ASSAY_TYPE_F32 ? 4 : 2));
        return;
    }
    float *tmp = dt == ASSAY_TYPE_F32 ? dst : assay_xmalloc((size_t)n * sizeof(float));
    if (st == ASSAY_TYPE_F32) memcpy(tmp, src, (size_t)n * 4);
    else if (st == ASSAY_TYPE_F16) assay_f16_to_f32_row(src, tmp, n);
    else assay_bf16_to_f32_row(src, tmp, n);
    if (dt == ASSAY_TYPE_F16) assay_f32_to_f16_row(tmp, dst, n);
    else if (dt == ASSAY_TYPE_BF16) assay_f32_to_bf16_row(tmp, dst, n);
    if (tmp != dst) free(tmp);
}

/* Whether n f32 values convert to `type` (f16/bf16) and back unchanged, bit for bit. */
static int f32_fits(const void *src, int64_t n, assay_type type) {
    const float *x = src;
    for (int64_t i = 0; i < n; i++) {
        float y = type == ASSAY_TYPE_BF16 ? assay_bf16_to_f32(assay_f32_to_bf16(x[i])) : assay_f16_to_f32(assay_f32_to_f16(x[i]));
        if (memcmp(&x[i], &y, 4) != 0) return 0;
    }
    return 1;
}

/* ---- HF tokenizer.json -> tokenizer.ggml.* ------------------------------------------------------------------- */

static int json_is_string_eq(const assay_json *v, const char *s) {
    return assay_json_is(v, ASSAY_JSON_STRING) && strcmp(v->str, s) == 0;
}

/* The Split regexes of Llama 3 ("llama-bpe") and Qwen2 ("qwen2") tokenizer.json files. */
static const char *const LLAMA3_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const QWEN2_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* llama.cpp identifies pre-tokenizers by hashing a tokenization; we recognise the structures instead. */
static const char *detect_pre(const assay_json *pre) {
    const char *type = assay_json_string(assay_json_get(pre, "type"), "");
    if (strcmp(type, "ByteLevel") == 0) return assay_json_bool(assay_json_get(pre, "use_regex"), 1) ? "gpt-2" : NULL;
    if (strcmp(type, "Sequence") != 0) return NULL;
    const assay_json *list = assay_json_get(pre, "pretokenizers");
    if (!list || list->count != 2) return NULL;
    const assay_json *a = list->first, *b = list->first->next;
    const char *ta = assay_json_string(assay_json_get(a, "type"), ""), *tb = assay_json_string(assay_json_get(b, "type"), "");
    if (strcmp(ta, "Digits") == 0 && assay_json_bool(assay_json_get(a, "individual_digits"), 0) &&
        strcmp(tb, "ByteLevel") == 0 && assay_json_bool(assay_json_get(b, "use_regex"), 1))
        return "smollm";
    if (strcmp(ta, "Split") == 0 && strcmp(tb, "ByteLevel") == 0) {
        const assay_json *re = assay_json_get(assay_json_get(a, "pattern"), "Regex");
        if (json_is_string_eq(re, LLAMA3_RE)) return "llama-bpe";
        if (json_is_string_eq(re, QWEN2_RE)) return "qwen2";
    }
    return NULL;
}

/* The id of an added token by content, or -1. */
static int64_t added_token_id(const assay_json *tok_root, const char *content) {
    const assay_json *added = assay_json_get(tok_root, "added_tokens");
    for (const assay_json *a = added ? added->first : NULL; a; a = a->next)
        if (strcmp(assay_json_string(assay_json_get(a, "content"), ""), content) == 0)
            return assay_json_int(assay_json_get(a, "id"), -1);
    const assay_json *id = assay_json_get(assay_json_get(assay_json_get(tok_root, "model"), "vocab"), content);
    return assay_json_int(id, -1);
}

/* tokenizer_config.json names special tokens as a string or as {"content": ...}. */
static const char *special_content(const assay_json *v) {
    if (assay_json_is(v, ASSAY_JSON_OBJECT)) return assay_json_string(assay_json_get(v, "content"), NULL);
    return assay_json_string(v, NULL);
}

static assay_status write_tokenizer_metadata(assay_gguf_writer *w, const assay_model_file *mf) {
    const char *path = assay_model_file_tokenizer_json(mf);
    if (!path)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: no tokenizer.json (llama.cpp needs the vocabulary in the GGUF)",
                          assay_model_file_path(mf));
    assay_json_doc *doc, *tcdoc = NULL;
    assay_status rc = assay_json_parse_file(path, &doc);
    if (rc != ASSAY_OK) return rc;
    const assay_json *root = assay_json_root(doc), *model = assay_json_get(root, "model");
    const assay_model_config *c = assay_model_file_config(mf);
    const char *mtype = assay_json_string(assay_json_get(model, "type"), "");
    const char *pre = detect_pre(assay_json_get(root, "pre_tokenizer"));
    const assay_json *vocab = assay_json_get(model, "vocab");
    if (strcmp(mtype, "BPE") != 0 || !assay_json_is(vocab, ASSAY_JSON_OBJECT) ||
        assay_json_bool(assay_json_get(model, "byte_fallback"), 0) || !pre) {
        assay_json_doc_free(doc);
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: only byte-level BPE tokenizers (GPT-2, llama3, qwen2, smollm pre-tokenizers) convert to "
                          "GGUF so far",
                          path);
    }
    int64_t n = c->n_vocab;
    assay_gguf_str *tokens = assay_xcalloc((size_t)n + 1, sizeof *tokens);
    int32_t *types = assay_xcalloc((size_t)n + 1, sizeof *types);
    char **pads = assay_xcalloc((size_t)n + 1, sizeof *pads);
    for (const assay_json *v = vocab->first; v; v = v->next) {
        int64_t id = assay_json_int(v, -1);
        if (id < 0 || id >= n) {
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: token '%s' has id %lld outside vocab_size %lld", path, v->key,
                            (long long)id, (long long)n);
            goto done;
        }
        tokens[id] = (assay_gguf_str){v->key, v->key_len};
        types[id] = TOKEN_NORMAL;
    }
    const assay_json *added = assay_json_get(root, "added_tokens");
    for (const assay_json *a = added ? added->first : NULL; a; a = a->next) {
        int64_t id = assay_json_int(assay_json_get(a, "id"), -1);
        const assay_json *content = assay_json_get(a, "content");
        if (id < 0 || id >= n || !assay_json_is(content, ASSAY_JSON_STRING)) {
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: added token with id %lld outside vocab_size %lld", path, (long long)id,
                            (long long)n);
            goto done;
        }
        tokens[id] = (assay_gguf_str){content->str, content->str_len};
        types[id] = assay_json_bool(assay_json_get(a, "special"), 0) ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
    }
    for (int64_t i = 0; i < n; i++)
        if (!types[i]) { /* ids the tokenizer never produces: llama.cpp's "[PAD<id>]" placeholders */
            pads[i] = assay_xmalloc(32);
            snprintf(pads[i], 32, "[PAD%lld]", (long long)i);
            tokens[i] = (assay_gguf_str){pads[i], strlen(pads[i])};
            types[i] = TOKEN_UNUSED;
        }
    assay_gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2");
    assay_gguf_writer_set_string(w, "tokenizer.ggml.pre", pre);
    assay_gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    assay_gguf_writer_set_array(w, "tokenizer.ggml.token_type", ASSAY_GGUF_INT32, types, (uint64_t)n);

    /* Merges: "a b" strings (older tokenizer.json) or ["a", "b"] pairs (newer); GGUF stores "a b". */
    const assay_json *merges = assay_json_get(model, "merges");
    int64_t nm = merges ? merges->count : 0;
    assay_gguf_str *ms = assay_xcalloc((size_t)nm + 1, sizeof *ms);
    assay_strbuf mb = {0};
    size_t *offs = assay_xcalloc((size_t)nm + 1, sizeof *offs);
    int64_t i = 0;
    for (const assay_json *m = merges ? merges->first : NULL; m; m = m->next, i++) {
        offs[i] = mb.len;
        if (assay_json_is(m, ASSAY_JSON_STRING)) assay_strbuf_append(&mb, m->str, m->str_len);
        else if (assay_json_is(m, ASSAY_JSON_ARRAY) && m->count == 2 && assay_json_is(m->first, ASSAY_JSON_STRING) &&
                 assay_json_is(m->first->next, ASSAY_JSON_STRING)) {
            assay_strbuf_append(&mb, m->first->str, m->first->str_len);
            assay_strbuf_putc(&mb, ' ');
            assay_strbuf_append(&mb, m->first->next->str, m->first->next->str_len);
        } else {
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: merge %lld is neither \"a b\" nor [\"a\", \"b\"]", path, (long long)i);
            break;
        }
    }
    if (rc == ASSAY_OK && nm) {
        for (i = 0; i < nm; i++)
            ms[i] = (assay_gguf_str){mb.data + offs[i], (i + 1 < nm ? offs[i + 1] : mb.len) - offs[i]};
        assay_gguf_writer_set_string_array(w, "tokenizer.ggml.merges", ms, (uint64_t)nm);
    }
    free(ms);
    free(offs);
    assay_strbuf_free(&mb);
    if (rc != ASSAY_OK) goto done;

    /* Special ids, as gguf-py's SpecialVocab finds them: tokenizer_config.json's token strings first, then
     * config.json's *_token_id. add_bos/add_eos only when the tokenizer says (llama.cpp has per-pre defaults). */
    char *tc_path = assay_path_join(assay_model_file_path(mf), "tokenizer_config.json");
    if (assay_path_exists(tc_path)) assay_json_parse_file(tc_path, &tcdoc); /* optional; a broken one is ignored */
    free(tc_path);
    const assay_json *tc = tcdoc ? assay_json_root(tcdoc) : NULL;
    static const char *const kinds[][2] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                           {"eos_token", "tokenizer.ggml.eos_token_id"},
                                           {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                           {"pad_token", "tokenizer.ggml.padding_token_id"}};
    for (int k = 0; k < 4; k++) {
        int64_t id = -1;
        const char *s = special_content(assay_json_get(tc, kinds[k][0]));
        if (s) id = added_token_id(root, s);
        if (id < 0 && k == 0) id = c->bos_id;
        if (id < 0 && k == 1) id = c->eos_id;
        if (id >= 0 && id < n) assay_gguf_writer_set_u32(w, kinds[k][1], (uint32_t)id);
    }
    const assay_json *ab = assay_json_get(tc, "add_bos_token"), *ae = assay_json_get(tc, "add_eos_token");
    if (assay_json_is(ab, ASSAY_JSON_TRUE) || assay_json_is(ab, ASSAY_JSON_FALSE))
        assay_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", assay_json_bool(ab, 0));
    if (assay_json_is(ae, ASSAY_JSON_TRUE) || assay_json_is(ae, ASSAY_JSON_FALSE))
        assay_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", assay_json_bool(ae, 0));
    if (!ab) {
        /* A TemplateProcessing post-processor that puts a special token first adds BOS. */
        const assay_json *pp = assay_json_get(root, "post_processor");
        const assay_json *procs = assay_json_get(pp, "processors");
        for (const assay_json *p = procs ? procs->first : pp; p; p = procs ? p->next : NULL) {
            if (strcmp(assay_json_string(assay_json_get(p, "type"), ""), "TemplateProcessing") == 0) {
                const assay_json *first = assay_json_at(assay_json_get(p, "single"), 0);
                assay_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token",
                                           assay_json_get(first, "SpecialToken") != NULL);
            }
            if (!procs) break;
        }
    }
    const char *tmpl = assay_model_file_chat_template(mf);
    if (tmpl) assay_gguf_writer_set_string(w, "tokenizer.chat_template", tmpl);
done:
    for (int64_t j = 0; j < n; j++) free(pads[j]);
    free(pads);
    free(tokens);
    free(types);
    assay_json_doc_free(tcdoc);
    assay_json_doc_free(doc);
    return rc;
}

assay_status assay_convert_gguf_metadata(assay_gguf_writer *w, const assay_model_file *mf, int file_type) {
    const assay_model_config *c = assay_model_file_config(mf);
    const char *arch = assay_model_config_gguf_arch(c);
    if (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3"))
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: converting architecture '%s' to GGUF is not supported",
                          assay_model_file_path(mf), c->arch);
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    assay_gguf_writer_set_string(w, "general.architecture", arch);
    assay_gguf_writer_set_string(w, "general.type", "model");
    const char *base = strrchr(assay_model_file_path(mf), '/');
    base = base && base[1] ? base + 1 : assay_model_file_path(mf);
    assay_gguf_writer_set_string(w, "general.name", base);
    assay_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)c->n_layer);
    if (c->n_ctx_train > 0) assay_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)c->n_ctx_train);
    assay_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)c->n_embd);
    assay_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)c->n_ff);
    assay_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head);
    assay_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_head_kv);
    assay_gguf_writer_set_f32(w, KEY("rope.freq_base"), (float)c->rope_theta);
    assay_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    /* convert_hf_to_gguf.py writes these when config.json has head_dim; always writing them is harmless. */
    assay_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
    assay_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
    if (c->rope_scaling == ASSAY_ROPE_SCALING_LINEAR || c->rope_scaling == ASSAY_ROPE_SCALING_YARN) {
        assay_gguf_writer_set_string(w, KEY("rope.scaling.type"),
                                     c->rope_scaling == ASSAY_ROPE_SCALING_LINEAR ? "linear" : "yarn");
        assay_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), (float)c->rope_factor);
        if (c->rope_scaling == ASSAY_ROPE_SCALING_YARN && c->rope_orig_ctx > 0)
            assay_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope_orig_ctx);
    }
    assay_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type);
    if (strcmp(arch, "llama") == 0) {
        assay_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)c->n_vocab);
        assay_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
    }
#undef KEY
    assay_gguf_writer_set_u32(w, "general.quantization_version", 2);
    return write_tokenizer_metadata(w, mf);
}

/* llama.cpp's rope_freqs for llama3 scaling: per rotary frequency, the divisor applied to it. */
static float *llama3_rope_freqs(const assay_model_config *c) {
    int64_t n = c->head_dim / 2;
    float *f = assay_xmalloc((size_t)n * sizeof *f);
    double lo_wl = (double)c->rope_orig_ctx / c->rope_low_freq_factor;
    double hi_wl = (double)c->rope_orig_ctx / c->rope_high_freq_factor;
    for (int64_t i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)c->rope_theta, (float)(2 * i) / (float)c->head_dim);
        double wl = 2 * M_PI / freq;
        if (wl < hi_wl) f[i] = 1.0f;
        else if (wl > lo_wl) f[i] = (float)c->rope_factor;
        else {
            double smooth = ((double)c->rope_orig_ctx / wl - c->rope_low_freq_factor) /
                            (c->rope_high_freq_factor - c->rope_low_freq_factor);
            f[i] = (float)(1.0 / ((1 - smooth) / c->rope_factor + smooth));
        }
    }
    return f;
}

assay_status assay_convert_hf_to_gguf(const assay_model_file *mf, const char *out_path, const assay_convert_options *o) {
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF)
        return assay_fail(ASSAY_ERR_ARG, "%s is already a GGUF file (convert it to an HF directory instead)",
                          assay_model_file_path(mf));
    const assay_model_config *c = assay_model_file_config(mf);
    int64_t nt = assay_model_file_tensor_count(mf);
    void **bufs = assay_xcalloc((size_t)nt + 2, sizeof *bufs);
    assay_gguf_writer *w = assay_gguf_writer_new();
    assay_status rc = ASSAY_OK;
    size_t bytes_by[3] = {0};
    for (int64_t i = 0; i < nt && rc == ASSAY_OK; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        if (strcmp(t->name, t->source_name) == 0) {
            rc = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor '%s' has no GGUF name in llama.cpp's scheme", t->source_file,
                            t->source_name);
            break;
        }
        if (!is_float_type(t->type)) {
            rc = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor '%s' is %s; only f32/f16/bf16 tensors convert to GGUF",
                            t->source_file, t->source_name, assay_type_name(t->type));
            break;
        }
        assay_type out_type = o->dtype == ASSAY_TYPE_COUNT ? t->type : o->dtype;
        /* llama.cpp stores vectors (norms, biases) as f32 whatever the weights' type: its CPU backend cannot
         * multiply f32 activations by a bf16 vector. Exact, since f16/bf16 embed in f32. */
        if (t->n_dims == 1 && !o->keep_types) out_type = ASSAY_TYPE_F32;
        const void *data = t->data;
        if (t->permute_heads > 0) {
            bufs[i] = assay_xmalloc(t->bytes ? t->bytes : 1);
            assay_tensor_copy_rows(t, bufs[i]);
            data = bufs[i];
        }
        size_t out_bytes = t->bytes;
        if (out_type != t->type) {
            int64_t n = assay_tensor_nelements(t);
            out_bytes = (size_t)n * (out_type == ASSAY_TYPE_F32 ? 4 : 2);
            void *conv = malloc(out_bytes ? out_bytes : 1);
            if (!conv) {
                rc = assay_fail(ASSAY_ERR_NOMEM, "out of memory converting '%s'", t->name);
                break;
            }
            convert_floats(data, t->type, conv, out_type, n);
            free(bufs[i]);
            bufs[i] = conv;
            data = conv;
        }
        bytes_by[out_type == ASSAY_TYPE_F32 ? 0 : out_type == ASSAY_TYPE_F16 ? 1 : 2] += out_bytes;
        rc = assay_gguf_writer_add_tensor(w, t->name, out_type, t->n_dims, t->ne, data, out_bytes);
    }
    if (rc == ASSAY_OK && c->rope_scaling == ASSAY_ROPE_SCALING_LLAMA3) {
        float *f = llama3_rope_freqs(c);
        bufs[nt] = f;
        int64_t ne[1] = {c->head_dim / 2};
        rc = assay_gguf_writer_add_tensor(w, "rope_freqs.weight", ASSAY_TYPE_F32, 1, ne, f, (size_t)ne[0] * sizeof(float));
    }
    if (rc == ASSAY_OK) {
        /* general.file_type names the type holding most bytes, as llama.cpp's --outtype does. */
        int ft = ASSAY_GGML_FTYPE_ALL_F32;
        if (bytes_by[1] > bytes_by[0] && bytes_by[1] >= bytes_by[2]) ft = ASSAY_GGML_FTYPE_F16;
        if (bytes_by[2] > bytes_by[0] && bytes_by[2] > bytes_by[1]) ft = ASSAY_GGML_FTYPE_BF16;
        rc = assay_convert_gguf_metadata(w, mf, ft);
    }
    if (rc == ASSAY_OK) rc = assay_gguf_writer_write(w, out_path, o->overwrite);
    assay_gguf_writer_free(w);
    for (int64_t i = 0; i <= nt; i++) free(bufs[i]);
    free(bufs);
    return rc;
}

/* ---- GGUF -> HF ------------------------------------------------------------------------------------------------ */

/* A float32 metadata value as the shortest decimal that reads back as the same float32, so 1e-5 written as
 * f32 returns as 1e-05 rather than 9.99999974737875e-06. */
static void put_f32_decimal(assay_strbuf *b, double v) {
    char s[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(s, sizeof s, "%.*g", p, v);
        if ((float)strtod(s, NULL) == (float)v) break;
    }
    /* Whole numbers as "10000.0" (a float in Python, like transformers writes), not "1e+04". */
    if (v == floor(v) && fabs(v) < 1e15) snprintf(s, sizeof s, "%.1f", v);
    assay_strbuf_puts(b, s);
}

static assay_status write_text_file(const char *path, const char *text, size_t n, int overwrite) {
    assay_output_file out;
    assay_status rc = assay_output_file_open(&out, path, overwrite);
    if (rc != ASSAY_OK) return rc;
    if (fwrite(text, 1, n, out.fp) != n) {
        assay_output_file_abort(&out);
        return assay_fail(ASSAY_ERR_IO, "%s: write failed", path);
    }
    return assay_output_file_commit(&out);
}

static assay_status write_config_json(const assay_model_file *mf, const char *dir, assay_type dtype, int overwrite) {
    const assay_model_config *c = assay_model_file_config(mf);
    const assay_gguf *g = assay_model_file_gguf(mf);
    const char *cls = assay_model_config_hf_class(c);
    assay_strbuf b = {0};
    assay_strbuf_printf(&b, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", cls, c->arch);
    assay_strbuf_printf(&b, "  \"attention_bias\": %s,\n", c->has_qkv_bias ? "true" : "false");
    if (c->bos_id >= 0) assay_strbuf_printf(&b, "  \"bos_token_id\": %lld,\n", (long long)c->bos_id);
    if (c->eos_id >= 0) assay_strbuf_printf(&b, "  \"eos_token_id\": %lld,\n", (long long)c->eos_id);
    const char *dt = dtype == ASSAY_TYPE_F32 ? "float32" : dtype == ASSAY_TYPE_F16 ? "float16" : "bfloat16";
    assay_strbuf_printf(&b, "  \"dtype\": \"%s\",\n  \"torch_dtype\": \"%s\",\n", dt, dt);
    assay_strbuf_printf(&b, "  \"head_dim\": %lld,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %lld,\n",
                        (long long)c->head_dim, (long long)c->n_embd);
    assay_strbuf_printf(&b, "  \"intermediate_size\": %lld,\n", (long long)c->n_ff);
    if (c->n_ctx_train > 0) assay_strbuf_printf(&b, "  \"max_position_embeddings\": %lld,\n", (long long)c->n_ctx_train);
    assay_strbuf_printf(&b, "  \"num_attention_heads\": %lld,\n  \"num_hidden_layers\": %lld,\n  \"num_key_value_heads\": %lld,\n",
                        (long long)c->n_head, (long long)c->n_layer, (long long)c->n_head_kv);
    assay_strbuf_puts(&b, "  \"rms_norm_eps\": ");
    put_f32_decimal(&b, c->norm_eps);
    /* Both spellings: transformers 5 reads rope_parameters, older versions rope_theta + rope_scaling. */
    assay_strbuf_puts(&b, ",\n  \"rope_theta\": ");
    put_f32_decimal(&b, c->rope_theta);
    const char *rtype = c->rope_scaling == ASSAY_ROPE_SCALING_LINEAR ? "linear"
                        : c->rope_scaling == ASSAY_ROPE_SCALING_YARN ? "yarn"
                                                                    : "default";
    assay_strbuf_puts(&b, ",\n  \"rope_parameters\": {\"rope_theta\": ");
    put_f32_decimal(&b, c->rope_theta);
    assay_strbuf_printf(&b, ", \"rope_type\": \"%s\"", rtype);
    if (c->rope_scaling != ASSAY_ROPE_SCALING_NONE) {
        assay_strbuf_puts(&b, ", \"factor\": ");
        put_f32_decimal(&b, c->rope_factor);
        if (c->rope_orig_ctx > 0)
            assay_strbuf_printf(&b, ", \"original_max_position_embeddings\": %lld", (long long)c->rope_orig_ctx);
    }
    assay_strbuf_puts(&b, "}");
    if (c->rope_scaling != ASSAY_ROPE_SCALING_NONE) {
        assay_strbuf_printf(&b, ",\n  \"rope_scaling\": {\"rope_type\": \"%s\", \"factor\": ", rtype);
        put_f32_decimal(&b, c->rope_factor);
        if (c->rope_orig_ctx > 0)
            assay_strbuf_printf(&b, ", \"original_max_position_embeddings\": %lld", (long long)c->rope_orig_ctx);
        assay_strbuf_puts(&b, "}");
    }
    assay_strbuf_printf(&b, ",\n  \"tie_word_embeddings\": %s,\n  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n",
                        c->tied_embeddings ? "true" : "false", (long long)c->n_vocab);
    (void)g;
    char *path = assay_path_join(dir, "config.json");
    assay_status rc = write_text_file(path, b.data, b.len, overwrite);
    free(path);
    assay_strbuf_free(&b);
    return rc;
}

static assay_gguf_str token_at(const assay_gguf_kv *kv, uint64_t i) { return assay_gguf_array_str(kv, i); }

/* tokenizer.json (+ tokenizer_config.json) from tokenizer.ggml.*: byte-level BPE with a pre-tokenizer we know. */
static assay_status write_tokenizer_files(const assay_model_file *mf, const char *dir, int overwrite, int quiet,
                                          int required) {
    const assay_gguf *g = assay_model_file_gguf(mf);
    assay_gguf_str model = {0}, pre = {0};
    assay_gguf_get_string(g, "tokenizer.ggml.model", &model);
    assay_gguf_get_string(g, "tokenizer.ggml.pre", &pre);
    const assay_gguf_kv *toks = assay_gguf_find(g, "tokenizer.ggml.tokens");
    const assay_gguf_kv *types = assay_gguf_find(g, "tokenizer.ggml.token_type");
    const assay_gguf_kv *merges = assay_gguf_find(g, "tokenizer.ggml.merges");
    int gpt2 = model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0;
    const char *pre_json = NULL;
    if (pre.len == 5 && memcmp(pre.ptr, "gpt-2", 5) == 0)
        pre_json = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}";
    else if (pre.len == 6 && memcmp(pre.ptr, "smollm", 6) == 0)
        pre_json = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, "
                   "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}]}";
    /* llama.cpp's "llama-bpe" and "qwen2" are the Split regexes of Llama 3 and Qwen2 (see detect_pre). */
    static char split_json[1024];
    const char *re = NULL;
    if ((pre.len == 9 && memcmp(pre.ptr, "llama-bpe", 9) == 0) || (pre.len == 6 && memcmp(pre.ptr, "llama3", 6) == 0))
        re = LLAMA3_RE;
    else if (pre.len == 5 && memcmp(pre.ptr, "qwen2", 5) == 0)
        re = QWEN2_RE;
    if (re) {
        assay_strbuf sb = {0};
        assay_strbuf_puts(&sb, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": ");
        assay_strbuf_json_string(&sb, re, strlen(re));
        assay_strbuf_puts(&sb, "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                               "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]}");
        snprintf(split_json, sizeof split_json, "%s", sb.data);
        assay_strbuf_free(&sb);
        pre_json = split_json;
    }
    if (!gpt2 || !pre_json || !toks || toks->type != ASSAY_GGUF_ARRAY || toks->array_type != ASSAY_GGUF_STRING ||
        !merges || merges->type != ASSAY_GGUF_ARRAY || merges->array_type != ASSAY_GGUF_STRING) {
        if (required)
            return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tokenizer '%.*s' with pre-tokenizer '%.*s' cannot be rebuilt as "
                              "tokenizer.json yet (gpt2 with gpt-2, llama-bpe, qwen2 or smollm can)",
                              assay_model_file_path(mf), (int)model.len, model.ptr ? model.ptr : "", (int)pre.len,
                              pre.ptr ? pre.ptr : "");
        if (!quiet)
            assay_note("note: tokenizer.json not written (tokenizer '%.*s', pre-tokenizer '%.*s' cannot be "
                       "rebuilt yet)",
                    (int)model.len, model.ptr ? model.ptr : "", (int)pre.len, pre.ptr ? pre.ptr : "");
        return ASSAY_OK;
    }
    int typed = types && types->type == ASSAY_GGUF_ARRAY && types->array_len == toks->array_len &&
                types->array_type != ASSAY_GGUF_STRING && types->array_type != ASSAY_GGUF_ARRAY;
    assay_strbuf b = {0};
    assay_strbuf_puts(&b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
    int first = 1;
    for (uint64_t i = 0; i < toks->array_len; i++) {
        int64_t ty = typed ? assay_gguf_array_int(types, i) : TOKEN_NORMAL;
        if (ty != TOKEN_CONTROL && ty != TOKEN_USER_DEFINED) continue;
        assay_gguf_str s = token_at(toks, i);
        assay_strbuf_printf(&b, "%s\n    {\"id\": %llu, \"content\": ", first ? "" : ",", (unsigned long long)i);
        assay_strbuf_json_string(&b, s.ptr, s.len);
        assay_strbuf_printf(&b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": %s, "
                                "\"special\": %s}",
                            ty == TOKEN_CONTROL ? "false" : "true", ty == TOKEN_CONTROL ? "true" : "false");
        first = 0;
    }
    assay_strbuf_printf(&b, "\n  ],\n  \"normalizer\": null,\n  \"pre_tokenizer\": %s,\n", pre_json);
    assay_strbuf_puts(&b, "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": false, "
                          "\"use_regex\": true},\n");
    assay_strbuf_puts(&b, "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "
                          "\"use_regex\": true},\n");
    assay_strbuf_puts(&b, "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": "
                          "null, \"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, "
                          "\"ignore_merges\": false,\n    \"vocab\": {");
    first = 1;
    for (uint64_t i = 0; i < toks->array_len; i++) {
        int64_t ty = typed ? assay_gguf_array_int(types, i) : TOKEN_NORMAL;
        if (ty == TOKEN_UNUSED) continue;
        assay_gguf_str s = token_at(toks, i);
        assay_strbuf_puts(&b, first ? "\n      " : ",\n      ");
        assay_strbuf_json_string(&b, s.ptr, s.len);
        assay_strbuf_printf(&b, ": %llu", (unsigned long long)i);
        first = 0;
    }
    assay_strbuf_puts(&b, "\n    },\n    \"merges\": [");
    for (uint64_t i = 0; i < merges->array_len; i++) {
        assay_gguf_str s = token_at(merges, i);
        assay_strbuf_puts(&b, i ? ",\n      " : "\n      ");
        assay_strbuf_json_string(&b, s.ptr, s.len);
    }
    assay_strbuf_puts(&b, "\n    ]\n  }\n}\n");
    char *path = assay_path_join(dir, "tokenizer.json");
    assay_status rc = write_text_file(path, b.data, b.len, overwrite);
    free(path);
    assay_strbuf_free(&b);
    if (rc != ASSAY_OK) return rc;

    /* tokenizer_config.json: the special tokens by content, add_bos/add_eos, the chat template. */
    assay_strbuf_puts(&b, "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"");
    static const char *const kinds[][2] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
                                           {"tokenizer.ggml.eos_token_id", "eos_token"},
                                           {"tokenizer.ggml.unknown_token_id", "unk_token"},
                                           {"tokenizer.ggml.padding_token_id", "pad_token"}};
    for (int k = 0; k < 4; k++) {
        int64_t id = assay_gguf_get_int(g, kinds[k][0], -1);
        if (id < 0 || (uint64_t)id >= toks->array_len) continue;
        assay_gguf_str s = token_at(toks, (uint64_t)id);
        assay_strbuf_printf(&b, ",\n  \"%s\": ", kinds[k][1]);
        assay_strbuf_json_string(&b, s.ptr, s.len);
    }
    if (assay_gguf_find(g, "tokenizer.ggml.add_bos_token"))
        assay_strbuf_printf(&b, ",\n  \"add_bos_token\": %s",
                            assay_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", 0) ? "true" : "false");
    if (assay_gguf_find(g, "tokenizer.ggml.add_eos_token"))
        assay_strbuf_printf(&b, ",\n  \"add_eos_token\": %s",
                            assay_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", 0) ? "true" : "false");
    const char *tmpl = assay_model_file_chat_template(mf);
    if (tmpl) {
        assay_strbuf_puts(&b, ",\n  \"chat_template\": ");
        assay_strbuf_json_string(&b, tmpl, strlen(tmpl));
    }
    assay_strbuf_puts(&b, "\n}\n");
    path = assay_path_join(dir, "tokenizer_config.json");
    rc = write_text_file(path, b.data, b.len, overwrite);
    free(path);
    assay_strbuf_free(&b);
    return rc;
}

/* The inverse of assay_tensor_copy_rows' permutation: source row 2i+j of head h goes back to row j*hd/2+i. */
static void unpermute_rows(const void *src, void *dst, int64_t rows, int64_t heads, size_t row_bytes) {
    int64_t hd = rows / heads;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy((uint8_t *)dst + (size_t)(h * hd + j * (hd / 2) + i) * row_bytes,
                       (const uint8_t *)src + (size_t)(h * hd + 2 * i + j) * row_bytes, row_bytes);
}

/* Creates out_dir when it does not exist; *created tells the caller to remove it again if the conversion fails. */
static assay_status make_out_dir(const char *out_dir, int *created) {
    if (assay_path_exists(out_dir) && !assay_path_is_dir(out_dir))
        return assay_fail(ASSAY_ERR_IO, "%s exists and is not a directory", out_dir);
    if (assay_path_exists(out_dir)) return ASSAY_OK;
    if (mkdir(out_dir, 0777) != 0) return assay_fail(ASSAY_ERR_IO, "cannot create directory %s: %s", out_dir, strerror(errno));
    *created = 1;
    assay_cleanup_add(out_dir, out_dir); /* an interrupted conversion leaves no half-filled directory */
    return ASSAY_OK;
}

static assay_status gguf_to_hf(const assay_model_file *mf, const char *out_dir, const assay_convert_options *o, int *created);

assay_status assay_convert_gguf_to_hf(const assay_model_file *mf, const char *out_dir, const assay_convert_options *o) {
    int created = 0;
    assay_status rc = gguf_to_hf(mf, out_dir, o, &created);
    if (created) {
        assay_cleanup_forget(out_dir);
        if (rc != ASSAY_OK) assay_remove_tree(out_dir);
    }
    return rc;
}

static assay_status gguf_to_hf(const assay_model_file *mf, const char *out_dir, const assay_convert_options *o, int *created) {
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_GGUF)
        return assay_fail(ASSAY_ERR_ARG, "%s is an HF directory already (convert it to GGUF with -o FILE.gguf)",
                          assay_model_file_path(mf));
    const assay_model_config *c = assay_model_file_config(mf);
    if (o->vocab_only) {
        assay_status rc = make_out_dir(out_dir, created);
        if (rc != ASSAY_OK) return rc;
        return write_tokenizer_files(mf, out_dir, o->overwrite, o->quiet, 1);
    }
    if (strcmp(c->arch, "llama") && strcmp(c->arch, "qwen2") && strcmp(c->arch, "qwen3"))
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: converting architecture '%s' to an HF directory is not supported",
                          assay_model_file_path(mf), c->arch);
    int permute = strcmp(c->arch, "llama") == 0;
    int64_t nt = assay_model_file_tensor_count(mf);
    /* Check everything before creating anything. */
    assay_type main_type = ASSAY_TYPE_COUNT;
    size_t main_bytes = 0, by[3] = {0};
    for (int64_t i = 0; i < nt; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue;
        char hf[128];
        if (!assay_gguf_to_hf_name(t->name, c->arch, hf, sizeof hf))
            return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor '%s' has no Hugging Face name", assay_model_file_path(mf),
                              t->name);
        if (!is_float_type(t->type))
            return assay_fail(ASSAY_ERR_UNSUPPORTED,
                              "%s: tensor '%s' is %s; only f32/f16/bf16 GGUFs convert to HF (dequantization is not "
                              "supported)",
                              assay_model_file_path(mf), t->name, assay_type_name(t->type));
        if (t->n_dims >= 2) by[t->type == ASSAY_TYPE_F32 ? 0 : t->type == ASSAY_TYPE_F16 ? 1 : 2] += t->bytes;
    }
    for (int k = 0; k < 3; k++)
        if (by[k] > main_bytes) main_bytes = by[k], main_type = k == 0 ? ASSAY_TYPE_F32 : k == 1 ? ASSAY_TYPE_F16 : ASSAY_TYPE_BF16;
    if (o->dtype != ASSAY_TYPE_COUNT) main_type = o->dtype;
    if (main_type == ASSAY_TYPE_COUNT) main_type = ASSAY_TYPE_F32;
    assay_status mk = make_out_dir(out_dir, created);
    if (mk != ASSAY_OK) return mk;
    char *st_path = assay_path_join(out_dir, "model.safetensors");
    if (!o->overwrite && assay_path_exists(st_path)) {
        free(st_path);
        return assay_fail(ASSAY_ERR_IO, "%s/model.safetensors already exists (pass --force to overwrite)", out_dir);
    }
    if (assay_model_file_find(mf, "rope_freqs.weight") && !o->quiet)
        assay_note("note: rope_freqs.weight (llama3 RoPE scaling) is dropped; its rope_scaling parameters are not "
                   "stored in the GGUF, add them to config.json by hand");

    assay_safetensors_writer *w = assay_safetensors_writer_new();
    assay_safetensors_writer_set_metadata(w, "format", "pt");
    void **bufs = assay_xcalloc((size_t)nt + 1, sizeof *bufs);
    assay_status rc = ASSAY_OK;
    for (int64_t i = 0; i < nt && rc == ASSAY_OK; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue;
        char hf[128];
        assay_gguf_to_hf_name(t->name, c->arch, hf, sizeof hf);
        const void *data = t->data;
        int is_q = strstr(t->name, ".attn_q.") != NULL, is_k = strstr(t->name, ".attn_k.") != NULL;
        if (permute && (is_q || is_k)) {
            int64_t heads = is_q ? c->n_head : c->n_head_kv, rows = t->ne[t->n_dims - 1];
            if (rows % (2 * heads)) {
                rc = assay_fail(ASSAY_ERR_FORMAT, "%s: %s has %lld rows, not a multiple of 2 x %lld heads",
                                assay_model_file_path(mf), t->name, (long long)rows, (long long)heads);
                break;
            }
            bufs[i] = assay_xmalloc(t->bytes ? t->bytes : 1);
            unpermute_rows(t->data, bufs[i], rows, heads, t->bytes / (size_t)rows);
            data = bufs[i];
        }
        assay_type out_type = o->dtype == ASSAY_TYPE_COUNT ? t->type : o->dtype;
        /* Undo llama.cpp's f32 vectors: back to the weights' type when every value survives the trip. */
        if (o->dtype == ASSAY_TYPE_COUNT && t->n_dims == 1 && t->type == ASSAY_TYPE_F32 && main_type != ASSAY_TYPE_F32 &&
            f32_fits(data, assay_tensor_nelements(t), main_type))
            out_type = main_type;
        size_t out_bytes = t->bytes;
        if (out_type != t->type) {
            int64_t n = assay_tensor_nelements(t);
            out_bytes = (size_t)n * (out_type == ASSAY_TYPE_F32 ? 4 : 2);
            void *conv = assay_xmalloc(out_bytes ? out_bytes : 1);
            convert_floats(data, t->type, conv, out_type, n);
            free(bufs[i]);
            bufs[i] = conv;
            data = conv;
        }
        int64_t shape[4];
        for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
        rc = assay_safetensors_writer_add(w, hf, assay_safetensors_dtype_name(out_type), t->n_dims, shape, data, out_bytes);
    }
    if (rc == ASSAY_OK) rc = assay_safetensors_writer_write(w, st_path, o->overwrite);
    assay_safetensors_writer_free(w);
    for (int64_t i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    free(st_path);
    if (rc == ASSAY_OK) rc = write_config_json(mf, out_dir, main_type, o->overwrite);
    if (rc == ASSAY_OK) rc = write_tokenizer_files(mf, out_dir, o->overwrite, o->quiet, 0);
    return rc;
}
