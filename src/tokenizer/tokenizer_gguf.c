/* tokenizer_gguf.c — the tokenizer.ggml.* keys of a GGUF file into the tokenizer tables.
 *
 *   tokenizer.ggml.model  "gpt2" -> byte-level BPE (merges by rank, pre-tokenizer from tokenizer.ggml.pre)
 *                         "llama" -> SentencePiece BPE (merges by score, <0xXX> byte fallback, ▁ for spaces)
 *   tokens / scores / token_type / merges, the special ids, add_bos_token / add_eos_token / add_space_prefix.
 * Defaults follow llama.cpp where the file is silent (SPM: bos 1, eos 2, unk 0, add_bos, dummy prefix). */
#include <stdlib.h>
#include <string.h>

#include "assay/gguf.h"
#include "tokenizer/tok_internal.h"

static int32_t get_id(const assay_gguf *g, const char *key, int32_t fallback, int64_t n_vocab) {
    int64_t v = assay_gguf_get_int(g, key, -1);
    return v >= 0 && v < n_vocab ? (int32_t)v : fallback;
}

assay_status assay_tokenizer_from_gguf(assay_tokenizer **out, const assay_gguf *g) {
    *out = NULL;
    const char *path = assay_gguf_path(g);
    assay_gguf_str model = {0}, pre = {0};
    if (!assay_gguf_get_string(g, "tokenizer.ggml.model", &model))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: no tokenizer (tokenizer.ggml.model is missing)", path);
    assay_gguf_get_string(g, "tokenizer.ggml.pre", &pre);
    assay_tokenizer_kind kind;
    if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0) kind = ASSAY_TOKENIZER_BPE_BYTES;
    else if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0) kind = ASSAY_TOKENIZER_SPM;
    else
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tokenizer model '%.*s' is not supported (gpt2 and llama are)", path,
                          (int)model.len, model.ptr);

    const assay_gguf_kv *toks = assay_gguf_find(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != ASSAY_GGUF_ARRAY || toks->array_type != ASSAY_GGUF_STRING || toks->array_len == 0 ||
        toks->array_len > (1u << 24))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tokenizer.ggml.tokens is missing or not an array of strings", path);
    int64_t n = (int64_t)toks->array_len;
    const assay_gguf_kv *scores = assay_gguf_find(g, "tokenizer.ggml.scores");
    const assay_gguf_kv *types = assay_gguf_find(g, "tokenizer.ggml.token_type");
    if (scores && (scores->type != ASSAY_GGUF_ARRAY || scores->array_len < (uint64_t)n ||
                   (scores->array_type != ASSAY_GGUF_FLOAT32 && scores->array_type != ASSAY_GGUF_FLOAT64)))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tokenizer.ggml.scores is not a float array of %lld entries", path, (long long)n);
    if (types && (types->type != ASSAY_GGUF_ARRAY || types->array_len < (uint64_t)n ||
                  types->array_type == ASSAY_GGUF_STRING || types->array_type == ASSAY_GGUF_FLOAT32 ||
                  types->array_type == ASSAY_GGUF_FLOAT64 || types->array_type == ASSAY_GGUF_ARRAY))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tokenizer.ggml.token_type is not an integer array of %lld entries", path, (long long)n);

    assay_tokenizer *t = tok_new(kind, n);
    for (int64_t i = 0; i < n; i++) {
        assay_gguf_str s = assay_gguf_array_str(toks, (uint64_t)i);
        float score = scores ? (float)assay_gguf_array_float(scores, (uint64_t)i) : 0.0f;
        int64_t ty = types ? assay_gguf_array_int(types, (uint64_t)i) : ASSAY_TOKEN_NORMAL;
        if (ty < 0 || ty > ASSAY_TOKEN_BYTE) ty = ASSAY_TOKEN_UNDEFINED;
        tok_set_token(t, (int32_t)i, s.ptr, (size_t)s.len, score, (assay_token_type)ty);
    }
    tok_index_vocab(t);

    assay_status st = ASSAY_OK;
    if (kind == ASSAY_TOKENIZER_BPE_BYTES) {
        t->byte_level = 1;
        const assay_gguf_kv *merges = assay_gguf_find(g, "tokenizer.ggml.merges");
        if (!merges || merges->type != ASSAY_GGUF_ARRAY || merges->array_type != ASSAY_GGUF_STRING) {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: tokenizer.ggml.merges is missing (needed by a gpt2 tokenizer)", path);
            goto done;
        }
        tok_reserve_merges(t, (int64_t)merges->array_len);
        for (uint64_t i = 0; i < merges->array_len; i++) {
            assay_gguf_str m = assay_gguf_array_str(merges, i);
            /* "left right": the separator is the first space after the first byte */
            const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', (size_t)m.len - 1) : NULL;
            if (!sp) continue;
            size_t ll = (size_t)(sp - m.ptr);
            tok_add_merge(t, m.ptr, ll, sp + 1, (size_t)m.len - ll - 1, (uint32_t)i);
        }
        st = tok_set_pre_by_name(t, pre.ptr, (size_t)pre.len);
        if (st != ASSAY_OK) {
            assay_fail_context(st, "%s", path);
            goto done;
        }
        /* llama.cpp's defaults for BPE families that add BOS without saying so */
        t->add_bos = t->ignore_merges; /* llama3 and tekken */
    } else {
        t->escape_spaces = 1;
        t->add_space_prefix = 1;
        t->add_bos = 1;
        t->bos = 1, t->eos = 2, t->unk = 0;
    }
    t->add_space_prefix = assay_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", t->add_space_prefix);
    if (kind == ASSAY_TOKENIZER_BPE_BYTES) t->add_space_prefix = 0; /* byte-level has no dummy prefix */
    t->bos = get_id(g, "tokenizer.ggml.bos_token_id", t->bos, n);
    t->eos = get_id(g, "tokenizer.ggml.eos_token_id", t->eos, n);
    t->eot = get_id(g, "tokenizer.ggml.eot_token_id", t->eot, n);
    t->eom = get_id(g, "tokenizer.ggml.eom_token_id", t->eom, n);
    t->unk = get_id(g, "tokenizer.ggml.unknown_token_id", t->unk, n);
    t->pad = get_id(g, "tokenizer.ggml.padding_token_id", t->pad, n);
    t->add_bos = assay_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", t->add_bos);
    t->add_eos = assay_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", t->add_eos);
    if (kind == ASSAY_TOKENIZER_BPE_BYTES && t->unk >= 0 && t->tokens[t->unk].type != ASSAY_TOKEN_UNKNOWN)
        t->unk = -1; /* byte-level vocabularies cover every byte; an "unknown" id there is only a label */
    st = tok_finish(t);
    snprintf(t->describe, sizeof t->describe, "%.*s/%.*s (%lld tokens, %lld merges)", (int)model.len, model.ptr,
             pre.len ? (int)pre.len : 7, pre.len ? pre.ptr : "default", (long long)n, (long long)t->n_merges);

done:
    if (st != ASSAY_OK) {
        assay_tokenizer_free(t);
        return st;
    }
    *out = t;
    return ASSAY_OK;
}

assay_status tok_load_gguf_path(assay_tokenizer **out, const char *path) {
    assay_gguf *g;
    assay_status st = assay_gguf_open(&g, path);
    if (st != ASSAY_OK) return st;
    st = assay_tokenizer_from_gguf(out, g);
    assay_gguf_close(g);
    return st;
}
