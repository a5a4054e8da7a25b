/* tok_internal.h — the tokenizer's private structure, shared by the core (tokenizer.c) and the two loaders
 * (tokenizer_json.c, tokenizer_gguf.c). A loader fills the vocabulary with tok_set_token, builds the lookup
 * with tok_index_vocab, adds merges and pre-tokenizer steps, then calls tok_finish. */
#ifndef ASSAY_TOK_INTERNAL_H
#define ASSAY_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>

#include "assay/tokenizer.h"

/* ---- string -> value hash map over keys living in an external arena (offsets, so the arena may grow) ---- */
typedef struct tok_map_entry {
    uint64_t hash;
    uint64_t value;
    uint32_t off, len;
} tok_map_entry;

typedef struct tok_map {
    int32_t *slots; /* index into entries, -1 empty */
    uint64_t mask;
    tok_map_entry *entries;
    int64_t n, cap;
} tok_map;

uint64_t tok_hash(const void *p, size_t n);
void tok_map_init(tok_map *m, int64_t expected);
void tok_map_free(tok_map *m);
void tok_map_clear(tok_map *m);
/* Returns a pointer to the value or NULL. `base` is the arena the stored offsets refer to. */
uint64_t *tok_map_find(const tok_map *m, const char *base, const void *key, size_t len, uint64_t hash);
/* Inserts (the key must already be in the arena at `off`); returns 0 if it was already present. */
int tok_map_insert(tok_map *m, const char *base, uint32_t off, uint32_t len, uint64_t hash, uint64_t value);

/* ---- pre-tokenizer steps ---------------------------------------------------------------------------- */
typedef enum tok_split_behavior { TOK_SPLIT_ISOLATED, TOK_SPLIT_REMOVED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT } tok_split_behavior;

#define TOK_MAX_REGEX 8

typedef struct tok_regex {
    pcre2_code *code;
    tok_split_behavior behavior;
    int invert;
} tok_regex;

typedef struct tok_token {
    uint32_t text_off, text_len;   /* as stored in the vocabulary */
    uint32_t bytes_off, bytes_len; /* what it decodes to */
    float score;
    uint8_t type;                  /* assay_token_type */
    uint8_t lstrip, rstrip;        /* added-token whitespace absorption (HF) */
    uint8_t special;               /* matched in the input only with ASSAY_TOK_PARSE_SPECIAL */
    uint8_t matchable;             /* matched in the input before pre-tokenization */
} tok_token;

struct assay_tokenizer {
    assay_tokenizer_kind kind;
    char describe[128];
    int64_t n_vocab;
    tok_token *tokens;
    char *arena; /* stored texts, then decoded bytes */
    size_t arena_len, arena_cap;
    tok_map vocab; /* stored text -> id */

    /* BPE merges: (left id, right id) -> (rank, result id), open addressing on a 64-bit key. */
    uint64_t *merge_keys; /* 0 = empty (left/right stored +1) */
    uint32_t *merge_rank;
    int32_t *merge_result;
    uint64_t merge_mask;
    int64_t n_merges;

    int32_t byte_to_id[256]; /* byte-level: the token of the byte's mapped char; SPM/chars: <0xXX> */

    /* pre-tokenizer */
    tok_regex regex[TOK_MAX_REGEX];
    int n_regex;
    int byte_level;          /* GPT-2 byte-to-unicode mapping */
    int bl_add_prefix_space; /* HF ByteLevel add_prefix_space */
    int ignore_merges;       /* a word that is itself a token is not merged (Llama-3) */
    /* SentencePiece / Metaspace */
    int add_space_prefix;    /* SPM: prepend ' ' to text after BOS/special (or first); HF: Prepend/Metaspace */
    int prefix_first_only;   /* HF Metaspace prepend_scheme "first": only the fragment at offset 0 */
    int prefix_unless_space; /* HF Metaspace: no prefix when the fragment already starts with a space */
    int escape_spaces;       /* ' ' -> U+2581 */
    int nfc;                 /* HF NFC normalizer: compose each text fragment (utf8proc) before pre-tokenizing */
    int metaspace_split;     /* HF Metaspace split: pieces start at each U+2581 */
    int byte_fallback;       /* chars not in the vocabulary become <0xXX> tokens */
    /* SPM: mergeable tokens with a U+2581 after another character ("X▁"), and the byte offset of that
     * U+2581 in them. Without such a token no merge crosses the start of a ▁ run, so a fragment can be cut
     * there into words that merge independently (and are cached); the list keeps those cuts exact. */
    int32_t *cross_id;
    uint32_t *cross_at;
    int64_t n_cross;

    int32_t bos, eos, eot, eom, unk, pad;
    int add_bos, add_eos;
    uint8_t *eog; /* per token: ends generation */

    /* special-token matcher: candidates by first byte, longest first */
    int32_t sp_start[257];
    int32_t *sp_ids;

    /* word cache for byte-level BPE (raw word bytes -> ids), guarded by `lock` */
    pthread_mutex_t lock;
    tok_map cache;
    char *cache_keys;
    size_t cache_keys_len, cache_keys_cap;
    int32_t *cache_ids;
    int64_t cache_ids_len, cache_ids_cap;
};

/* Loader helpers (tokenizer.c). */
assay_tokenizer *tok_new(assay_tokenizer_kind kind, int64_t n_vocab);
void tok_set_token(assay_tokenizer *t, int32_t id, const char *text, size_t len, float score, assay_token_type type);
/* Builds the text -> id map; fails on duplicate texts only where that would make ids ambiguous (first wins). */
void tok_index_vocab(assay_tokenizer *t);
/* Adds a merge of two stored texts with rank `rank`; returns 0 when a side or the result is not a token. */
int tok_add_merge(assay_tokenizer *t, const char *left, size_t llen, const char *right, size_t rlen, uint32_t rank);
void tok_reserve_merges(assay_tokenizer *t, int64_t n);
assay_status tok_add_regex(assay_tokenizer *t, const char *pattern, size_t len, int literal, tok_split_behavior b, int invert);
/* The GGUF pre-tokenizer names (tokenizer.ggml.pre) -> regex list; ASSAY_ERR_UNSUPPORTED names unknown ones. */
assay_status tok_set_pre_by_name(assay_tokenizer *t, const char *name, size_t len);
/* The pre-tokenizer table's i-th family: its space-separated tokenizer.ggml.pre names (" a b "), NULL past the end. */
const char *tok_pre_family_names(size_t i);
/* Computes decoded bytes, the byte table, the special matcher, EOG set; call last. */
assay_status tok_finish(assay_tokenizer *t);

extern const char TOK_GPT2_REGEX[];
/* Opens a GGUF file and loads its tokenizer (tokenizer_gguf.c). */
assay_status tok_load_gguf_path(assay_tokenizer **out, const char *path);

#endif
