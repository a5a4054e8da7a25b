/* tokenizer_json.c — a Hugging Face tokenizer.json (model type BPE) into the tokenizer tables.
 *
 * Supported pieces of the HF pipeline: normalizer null / NFC / Prepend("▁") / Replace(" ", "▁")
 * (and Sequence of these); pre_tokenizer ByteLevel, Split (Regex or String pattern), Digits, Punctuation,
 * Metaspace (and Sequence of these); model BPE with merges (strings "a b" or pairs), byte_fallback,
 * ignore_merges, unk_token; added_tokens with special/lstrip/rstrip. Anything else is refused with a
 * message naming it, rather than tokenized differently.
 * BOS/EOS and add_bos/add_eos come from tokenizer_config.json beside the file when present, else from the
 * post_processor (TemplateProcessing: a special token before/after $A). */
#include <stdlib.h>
#include <string.h>

#include "assay/file.h"
#include "assay/json.h"
#include "tokenizer/tok_internal.h"

static int str_is(const assay_json *v, const char *s) {
    return v && v->type == ASSAY_JSON_STRING && strcmp(v->str, s) == 0;
}

static assay_status add_pre_tokenizer(assay_tokenizer *t, const assay_json *p, const char *path) {
    if (!p || p->type == ASSAY_JSON_NULL) return ASSAY_OK;
    const char *type = assay_json_string(assay_json_get(p, "type"), "");
    if (strcmp(type, "Sequence") == 0) {
        for (const assay_json *e = assay_json_get(p, "pretokenizers") ? assay_json_get(p, "pretokenizers")->first : NULL; e; e = e->next) {
            assay_status st = add_pre_tokenizer(t, e, path);
            if (st != ASSAY_OK) return st;
        }
        return ASSAY_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        t->byte_level = 1;
        t->bl_add_prefix_space = assay_json_bool(assay_json_get(p, "add_prefix_space"), 0);
        if (assay_json_bool(assay_json_get(p, "use_regex"), 1))
            return tok_add_regex(t, TOK_GPT2_REGEX, strlen(TOK_GPT2_REGEX), 0, TOK_SPLIT_ISOLATED, 0);
        return ASSAY_OK;
    }
    if (strcmp(type, "Split") == 0) {
        const assay_json *pat = assay_json_get(p, "pattern");
        const assay_json *rx = assay_json_get(pat, "Regex"), *lit = assay_json_get(pat, "String");
        const char *beh = assay_json_string(assay_json_get(p, "behavior"), "Isolated");
        tok_split_behavior b;
        if (strcmp(beh, "Isolated") == 0) b = TOK_SPLIT_ISOLATED;
        else if (strcmp(beh, "Removed") == 0) b = TOK_SPLIT_REMOVED;
        else if (strcmp(beh, "MergedWithPrevious") == 0) b = TOK_SPLIT_MERGED_PREV;
        else if (strcmp(beh, "MergedWithNext") == 0) b = TOK_SPLIT_MERGED_NEXT;
        else return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: Split behavior '%s' is not supported", path, beh);
        if (assay_json_bool(assay_json_get(p, "invert"), 0))
            return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: inverted Split pre-tokenizer is not supported", path);
        if (rx && rx->type == ASSAY_JSON_STRING) return tok_add_regex(t, rx->str, rx->str_len, 0, b, 0);
        if (lit && lit->type == ASSAY_JSON_STRING) return tok_add_regex(t, lit->str, lit->str_len, 1, b, 0);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: Split pre-tokenizer without a pattern", path);
    }
    if (strcmp(type, "Digits") == 0) {
        const char *re = assay_json_bool(assay_json_get(p, "individual_digits"), 0) ? "\\p{N}" : "\\p{N}+";
        return tok_add_regex(t, re, strlen(re), 0, TOK_SPLIT_ISOLATED, 0);
    }
    if (strcmp(type, "Punctuation") == 0) {
        /* HF: Unicode punctuation or ASCII punctuation (which includes the ASCII symbols $+<=>^`|~). */
        const char *beh = assay_json_string(assay_json_get(p, "behavior"), "Isolated");
        const char *re = strcmp(beh, "Contiguous") == 0 ? "[\\p{P}!-/:-@\\[-`{-~]+" : "[\\p{P}!-/:-@\\[-`{-~]";
        return tok_add_regex(t, re, strlen(re), 0, TOK_SPLIT_ISOLATED, 0);
    }
    if (strcmp(type, "Metaspace") == 0) {
        const char *rep = assay_json_string(assay_json_get(p, "replacement"), "\xe2\x96\x81");
        if (strcmp(rep, "\xe2\x96\x81") != 0) return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: Metaspace replacement other than U+2581", path);
        t->kind = ASSAY_TOKENIZER_BPE_CHARS;
        t->escape_spaces = 1;
        t->prefix_unless_space = 1;
        const char *scheme = assay_json_string(assay_json_get(p, "prepend_scheme"), NULL);
        if (scheme) {
            t->add_space_prefix = strcmp(scheme, "never") != 0;
            t->prefix_first_only = strcmp(scheme, "first") == 0;
        } else {
            t->add_space_prefix = assay_json_bool(assay_json_get(p, "add_prefix_space"), 1);
        }
        t->metaspace_split = assay_json_bool(assay_json_get(p, "split"), 1);
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: pre-tokenizer '%s' is not supported", path, type);
}

static assay_status add_normalizer(assay_tokenizer *t, const assay_json *p, const char *path) {
    if (!p || p->type == ASSAY_JSON_NULL) return ASSAY_OK;
    const char *type = assay_json_string(assay_json_get(p, "type"), "");
    if (strcmp(type, "Sequence") == 0) {
        for (const assay_json *e = assay_json_get(p, "normalizers") ? assay_json_get(p, "normalizers")->first : NULL; e; e = e->next) {
            assay_status st = add_normalizer(t, e, path);
            if (st != ASSAY_OK) return st;
        }
        return ASSAY_OK;
    }
    if (strcmp(type, "NFC") == 0) {
        t->nfc = 1;
        return ASSAY_OK;
    }
    if (strcmp(type, "Prepend") == 0 && str_is(assay_json_get(p, "prepend"), "\xe2\x96\x81")) {
        t->kind = ASSAY_TOKENIZER_BPE_CHARS;
        t->add_space_prefix = 1;
        t->escape_spaces = 1;
        return ASSAY_OK;
    }
    if (strcmp(type, "Replace") == 0 && str_is(assay_json_get(assay_json_get(p, "pattern"), "String"), " ") &&
        str_is(assay_json_get(p, "content"), "\xe2\x96\x81")) {
        t->kind = ASSAY_TOKENIZER_BPE_CHARS;
        t->escape_spaces = 1;
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported", path, type);
}

/* "bos_token": "<s>" or {"content": "<s>", ...} in tokenizer_config.json */
static int32_t config_token(const assay_tokenizer *t, const assay_json *cfg, const char *key) {
    const assay_json *v = assay_json_get(cfg, key);
    if (v && v->type == ASSAY_JSON_OBJECT) v = assay_json_get(v, "content");
    if (!v || v->type != ASSAY_JSON_STRING) return -1;
    return assay_tokenizer_find(t, v->str, v->str_len);
}

assay_status assay_tokenizer_from_json_file(assay_tokenizer **out, const char *path) {
    *out = NULL;
    assay_json_doc *doc;
    assay_status st = assay_json_parse_file(path, &doc);
    if (st != ASSAY_OK) return st;
    const assay_json *root = assay_json_root(doc);
    const assay_json *model = assay_json_get(root, "model");
    const char *mtype = assay_json_string(assay_json_get(model, "type"), "");
    const assay_json *vocab = assay_json_get(model, "vocab");
    const assay_json *added = assay_json_get(root, "added_tokens");
    assay_tokenizer *t = NULL;
    if (strcmp(mtype, "BPE") != 0) {
        st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tokenizer model '%s' is not supported (BPE only)", path, mtype);
        goto done;
    }
    if (!vocab || vocab->type != ASSAY_JSON_OBJECT) {
        st = assay_fail(ASSAY_ERR_FORMAT, "%s: model.vocab is missing", path);
        goto done;
    }
    if (assay_json_string(assay_json_get(model, "continuing_subword_prefix"), NULL) ||
        assay_json_string(assay_json_get(model, "end_of_word_suffix"), NULL)) {
        st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: BPE with subword prefix/suffix is not supported", path);
        goto done;
    }
    int64_t n_vocab = 0;
    for (const assay_json *e = vocab->first; e; e = e->next) {
        int64_t id = assay_json_int(e, -1);
        if (id < 0 || id > (1 << 24)) {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: vocab entry '%s' has a bad id", path, e->key);
            goto done;
        }
        if (id + 1 > n_vocab) n_vocab = id + 1;
    }
    for (const assay_json *e = added ? added->first : NULL; e; e = e->next) {
        int64_t id = assay_json_int(assay_json_get(e, "id"), -1);
        if (id < 0 || id > (1 << 24)) {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: added token with a bad id", path);
            goto done;
        }
        if (id + 1 > n_vocab) n_vocab = id + 1;
    }
    t = tok_new(ASSAY_TOKENIZER_BPE_BYTES, n_vocab);
    snprintf(t->describe, sizeof t->describe, "tokenizer.json BPE");
    uint8_t *seen = assay_xcalloc((size_t)n_vocab, 1);
    for (const assay_json *e = vocab->first; e; e = e->next) {
        int32_t id = (int32_t)assay_json_int(e, -1);
        tok_set_token(t, id, e->key, e->key_len, 0.0f, ASSAY_TOKEN_NORMAL);
        seen[id] = 1;
    }
    for (const assay_json *e = added ? added->first : NULL; e; e = e->next) {
        int32_t id = (int32_t)assay_json_int(assay_json_get(e, "id"), -1);
        const assay_json *content = assay_json_get(e, "content");
        if (!content || content->type != ASSAY_JSON_STRING) continue;
        int special = assay_json_bool(assay_json_get(e, "special"), 0);
        if (!seen[id]) tok_set_token(t, id, content->str, content->str_len, 0.0f, ASSAY_TOKEN_NORMAL);
        seen[id] = 1;
        t->tokens[id].type = special ? ASSAY_TOKEN_CONTROL : ASSAY_TOKEN_USER_DEFINED;
        t->tokens[id].matchable = 1;
        t->tokens[id].special = (uint8_t)special;
        t->tokens[id].lstrip = (uint8_t)assay_json_bool(assay_json_get(e, "lstrip"), 0);
        t->tokens[id].rstrip = (uint8_t)assay_json_bool(assay_json_get(e, "rstrip"), 0);
    }
    for (int64_t id = 0; id < n_vocab; id++)
        if (!seen[id]) tok_set_token(t, (int32_t)id, "", 0, 0.0f, ASSAY_TOKEN_UNUSED); /* a hole in the ids */
    free(seen);
    tok_index_vocab(t);

    st = add_normalizer(t, assay_json_get(root, "normalizer"), path);
    if (st == ASSAY_OK) st = add_pre_tokenizer(t, assay_json_get(root, "pre_tokenizer"), path);
    if (st != ASSAY_OK) goto done;
    if (t->kind == ASSAY_TOKENIZER_BPE_CHARS && t->byte_level) {
        st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: both ByteLevel and Metaspace in one pipeline", path);
        goto done;
    }
    if (t->kind == ASSAY_TOKENIZER_BPE_BYTES && !t->byte_level) {
        st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: BPE without ByteLevel or Metaspace/▁ normalisation is not supported", path);
        goto done;
    }
    t->byte_fallback = assay_json_bool(assay_json_get(model, "byte_fallback"), 0);
    t->ignore_merges = assay_json_bool(assay_json_get(model, "ignore_merges"), 0);
    if (t->byte_fallback) {
        /* <0xXX> pieces are the byte-fallback tokens: they decode to their byte (HF's ByteFallback decoder) */
        for (int64_t id = 0; id < n_vocab; id++) {
            tok_token *k = &t->tokens[id];
            const char *s = t->arena + k->text_off;
            if (k->type == ASSAY_TOKEN_NORMAL && k->text_len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' &&
                strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF", s[4]))
                k->type = ASSAY_TOKEN_BYTE;
        }
    }
    const assay_json *unk = assay_json_get(model, "unk_token");
    if (unk && unk->type == ASSAY_JSON_STRING) t->unk = assay_tokenizer_find(t, unk->str, unk->str_len);

    const assay_json *merges = assay_json_get(model, "merges");
    tok_reserve_merges(t, merges ? merges->count : 0);
    uint32_t rank = 0;
    for (const assay_json *m = merges ? merges->first : NULL; m; m = m->next, rank++) {
        if (m->type == ASSAY_JSON_STRING) {
            /* "left right": the separator is the first space after the first character */
            const char *sp = m->str_len > 1 ? memchr(m->str + 1, ' ', m->str_len - 1) : NULL;
            if (!sp) {
                st = assay_fail(ASSAY_ERR_FORMAT, "%s: merge %u '%s' has no space", path, rank, m->str);
                goto done;
            }
            size_t ll = (size_t)(sp - m->str);
            tok_add_merge(t, m->str, ll, sp + 1, m->str_len - ll - 1, rank);
        } else if (m->type == ASSAY_JSON_ARRAY && m->count == 2 && m->first->type == ASSAY_JSON_STRING &&
                   m->first->next->type == ASSAY_JSON_STRING) {
            tok_add_merge(t, m->first->str, m->first->str_len, m->first->next->str, m->first->next->str_len, rank);
        } else {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: merge %u is neither \"a b\" nor [a, b]", path, rank);
            goto done;
        }
    }

    /* Special ids and whether encode adds them. */
    {
        char *dir = assay_xstrdup(path);
        char *slash = strrchr(dir, '/');
        char *cfg_path = slash ? (*slash = 0, assay_path_join(dir, "tokenizer_config.json")) : assay_xstrdup("tokenizer_config.json");
        assay_json_doc *cdoc = NULL;
        const assay_json *cfg = NULL;
        if (assay_path_exists(cfg_path) && assay_json_parse_file(cfg_path, &cdoc) == ASSAY_OK) cfg = assay_json_root(cdoc);
        t->bos = config_token(t, cfg, "bos_token");
        t->eos = config_token(t, cfg, "eos_token");
        t->pad = config_token(t, cfg, "pad_token");
        if (t->unk < 0) t->unk = -1;
        /* post_processor TemplateProcessing: special tokens around $A are what add_special_tokens adds */
        const assay_json *pp = assay_json_get(root, "post_processor");
        if (pp && str_is(assay_json_get(pp, "type"), "Sequence")) {
            for (const assay_json *e = assay_json_get(pp, "processors") ? assay_json_get(pp, "processors")->first : NULL; e; e = e->next)
                if (str_is(assay_json_get(e, "type"), "TemplateProcessing")) pp = e;
        }
        if (pp && str_is(assay_json_get(pp, "type"), "TemplateProcessing")) {
            const assay_json *single = assay_json_get(pp, "single");
            int before = 1;
            for (const assay_json *e = single ? single->first : NULL; e; e = e->next) {
                const assay_json *sp = assay_json_get(e, "SpecialToken");
                if (assay_json_get(e, "Sequence")) {
                    before = 0;
                } else if (sp) {
                    const assay_json *idj = assay_json_get(sp, "id");
                    int32_t id = idj && idj->type == ASSAY_JSON_STRING ? assay_tokenizer_find(t, idj->str, idj->str_len) : -1;
                    if (before) {
                        t->add_bos = 1;
                        if (t->bos < 0) t->bos = id;
                    } else {
                        t->add_eos = 1;
                        if (t->eos < 0) t->eos = id;
                    }
                }
            }
        }
        if (cfg) {
            t->add_bos = assay_json_bool(assay_json_get(cfg, "add_bos_token"), t->add_bos);
            t->add_eos = assay_json_bool(assay_json_get(cfg, "add_eos_token"), t->add_eos);
        }
        assay_json_doc_free(cdoc);
        free(cfg_path);
        free(dir);
    }
    st = tok_finish(t);

done:
    assay_json_doc_free(doc);
    if (st != ASSAY_OK) {
        assay_tokenizer_free(t);
        return st;
    }
    snprintf(t->describe, sizeof t->describe, "tokenizer.json BPE (%s, %lld tokens, %lld merges)",
             t->kind == ASSAY_TOKENIZER_BPE_BYTES ? "byte-level" : "characters with byte fallback", (long long)t->n_vocab,
             (long long)t->n_merges);
    *out = t;
    return ASSAY_OK;
}
