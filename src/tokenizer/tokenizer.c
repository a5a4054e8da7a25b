/* tokenizer.c — the tokenizer core: vocabulary and merge tables, special-token matching, regex
 * pre-tokenization (PCRE2 with Unicode properties), byte-level BPE by merge rank, SentencePiece BPE by
 * token score, and decoding. The loaders (tokenizer_json.c, tokenizer_gguf.c) only fill the tables. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "assay/file.h"
#include "assay/status.h"
#include "tokenizer/tok_internal.h"

/* The GPT-2 pre-tokenizer as written in HF tokenizers' ByteLevel (with the trailing \s+). */
const char TOK_GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- small helpers ------------------------------------------------------------------------------------ */

void assay_tokens_push(assay_tokens *v, int32_t id) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        v->ids = assay_xrealloc(v->ids, (size_t)v->cap * sizeof *v->ids);
    }
    v->ids[v->n++] = id;
}

void assay_tokens_free(assay_tokens *v) {
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

uint64_t tok_hash(const void *p, size_t n) {
    /* FNV-1a with a final avalanche: keys are short words, this is cheap and spreads well. */
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

void tok_map_init(tok_map *m, int64_t expected) {
    uint64_t cap = 16;
    while (cap < (uint64_t)expected * 2) cap <<= 1;
    m->slots = assay_xmalloc(cap * sizeof *m->slots);
    memset(m->slots, 0xff, cap * sizeof *m->slots);
    m->mask = cap - 1;
    m->cap = expected > 8 ? expected : 8;
    m->entries = assay_xmalloc((size_t)m->cap * sizeof *m->entries);
    m->n = 0;
}

void tok_map_free(tok_map *m) {
    free(m->slots);
    free(m->entries);
    memset(m, 0, sizeof *m);
}

void tok_map_clear(tok_map *m) {
    memset(m->slots, 0xff, (m->mask + 1) * sizeof *m->slots);
    m->n = 0;
}

uint64_t *tok_map_find(const tok_map *m, const char *base, const void *key, size_t len, uint64_t hash) {
    for (uint64_t i = hash & m->mask;; i = (i + 1) & m->mask) {
        int32_t e = m->slots[i];
        if (e < 0) return NULL;
        tok_map_entry *en = &m->entries[e];
        if (en->hash == hash && en->len == len && memcmp(base + en->off, key, len) == 0) return &en->value;
    }
}

static void tok_map_grow(tok_map *m) {
    uint64_t cap = (m->mask + 1) * 2;
    free(m->slots);
    m->slots = assay_xmalloc(cap * sizeof *m->slots);
    memset(m->slots, 0xff, cap * sizeof *m->slots);
    m->mask = cap - 1;
    for (int64_t e = 0; e < m->n; e++) {
        uint64_t i = m->entries[e].hash & m->mask;
        while (m->slots[i] >= 0) i = (i + 1) & m->mask;
        m->slots[i] = (int32_t)e;
    }
}

int tok_map_insert(tok_map *m, const char *base, uint32_t off, uint32_t len, uint64_t hash, uint64_t value) {
    if (tok_map_find(m, base, base + off, len, hash)) return 0;
    if ((uint64_t)(m->n + 1) * 2 > m->mask + 1) tok_map_grow(m);
    if (m->n == m->cap) {
        m->cap *= 2;
        m->entries = assay_xrealloc(m->entries, (size_t)m->cap * sizeof *m->entries);
    }
    tok_map_entry *en = &m->entries[m->n];
    en->hash = hash;
    en->value = value;
    en->off = off;
    en->len = len;
    uint64_t i = hash & m->mask;
    while (m->slots[i] >= 0) i = (i + 1) & m->mask;
    m->slots[i] = (int32_t)m->n++;
    return 1;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes there are not valid UTF-8
 * (overlong forms, surrogates and values above U+10FFFF are invalid, as for PCRE2 and Python). */
static int utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp_out) {
    uint8_t c = s[0];
    uint32_t cp;
    int len;
    if (c < 0x80) {
        if (cp_out) *cp_out = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < (size_t)len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    if (cp_out) *cp_out = cp;
    return len;
}

static int utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves, the rest to U+0100 upwards in
 * byte order, so every byte has a visible, non-space character. */
static uint32_t byte_to_cp(int b) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        int n = 0;
        for (int x = 0; x < 256; x++) {
            int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
            table[x] = printable ? (uint32_t)x : (uint32_t)(256 + n++);
        }
        ready = 1; /* idempotent: racing initialisers write identical values */
    }
    return table[b];
}

/* Inverse: a code point of the byte alphabet -> byte, or -1. */
static int cp_to_byte(uint32_t cp) {
    static int16_t inv[512];
    static int ready;
    if (!ready) {
        for (int i = 0; i < 512; i++) inv[i] = -1;
        for (int b = 0; b < 256; b++) inv[byte_to_cp(b)] = (int16_t)b;
        ready = 1;
    }
    return cp < 512 ? inv[cp] : -1;
}

static uint32_t arena_add(assay_tokenizer *t, const char *s, size_t n) {
    if (t->arena_len + n + 1 > t->arena_cap) {
        while (t->arena_len + n + 1 > t->arena_cap) t->arena_cap = t->arena_cap ? t->arena_cap * 2 : 1 << 16;
        t->arena = assay_xrealloc(t->arena, t->arena_cap);
    }
    ASSAY_ASSERT(t->arena_len + n < UINT32_MAX);
    uint32_t off = (uint32_t)t->arena_len;
    if (n) memcpy(t->arena + off, s, n);
    t->arena[off + n] = 0;
    t->arena_len += n + 1;
    return off;
}

/* ---- construction ------------------------------------------------------------------------------------- */

assay_tokenizer *tok_new(assay_tokenizer_kind kind, int64_t n_vocab) {
    assay_tokenizer *t = assay_xcalloc(1, sizeof *t);
    t->kind = kind;
    t->n_vocab = n_vocab;
    t->tokens = assay_xcalloc((size_t)(n_vocab ? n_vocab : 1), sizeof *t->tokens);
    t->eog = assay_xcalloc((size_t)(n_vocab ? n_vocab : 1), 1);
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    for (int i = 0; i < 256; i++) t->byte_to_id[i] = -1;
    pthread_mutex_init(&t->lock, NULL);
    tok_map_init(&t->cache, 1024);
    return t;
}

void tok_set_token(assay_tokenizer *t, int32_t id, const char *text, size_t len, float score, assay_token_type type) {
    ASSAY_ASSERT(id >= 0 && id < t->n_vocab);
    tok_token *k = &t->tokens[id];
    k->text_off = arena_add(t, text, len);
    k->text_len = (uint32_t)len;
    k->score = score;
    k->type = (uint8_t)type;
}

void tok_index_vocab(assay_tokenizer *t) {
    tok_map_init(&t->vocab, t->n_vocab);
    /* First occurrence wins, as in HF (the vocab is a map) and in practice in GGUF files. */
    for (int64_t i = 0; i < t->n_vocab; i++) {
        tok_token *k = &t->tokens[i];
        tok_map_insert(&t->vocab, t->arena, k->text_off, k->text_len, tok_hash(t->arena + k->text_off, k->text_len),
                       (uint64_t)i);
    }
}

int32_t assay_tokenizer_find(const assay_tokenizer *t, const char *piece, size_t len) {
    uint64_t *v = tok_map_find(&t->vocab, t->arena, piece, len, tok_hash(piece, len));
    return v ? (int32_t)*v : -1;
}

void tok_reserve_merges(assay_tokenizer *t, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    free(t->merge_keys);
    free(t->merge_rank);
    free(t->merge_result);
    t->merge_keys = assay_xcalloc(cap, sizeof *t->merge_keys);
    t->merge_rank = assay_xmalloc(cap * sizeof *t->merge_rank);
    t->merge_result = assay_xmalloc(cap * sizeof *t->merge_result);
    t->merge_mask = cap - 1;
    t->n_merges = 0;
}

static inline uint64_t merge_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)(l + 1) << 32) | (uint32_t)(r + 1); }

static inline uint64_t merge_slot(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return key ^ (key >> 29);
}

static int merge_lookup(const assay_tokenizer *t, int32_t l, int32_t r, uint32_t *rank, int32_t *result) {
    if (!t->merge_keys) return 0;
    uint64_t key = merge_key(l, r);
    for (uint64_t i = merge_slot(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        if (t->merge_keys[i] == 0) return 0;
        if (t->merge_keys[i] == key) {
            *rank = t->merge_rank[i];
            *result = t->merge_result[i];
            return 1;
        }
    }
}

int tok_add_merge(assay_tokenizer *t, const char *left, size_t llen, const char *right, size_t rlen, uint32_t rank) {
    int32_t l = assay_tokenizer_find(t, left, llen), r = assay_tokenizer_find(t, right, rlen);
    if (l < 0 || r < 0) return 0;
    char stack[256];
    char *joined = llen + rlen <= sizeof stack ? stack : assay_xmalloc(llen + rlen);
    memcpy(joined, left, llen);
    memcpy(joined + llen, right, rlen);
    int32_t res = assay_tokenizer_find(t, joined, llen + rlen);
    if (joined != stack) free(joined);
    if (res < 0) return 0;
    if ((uint64_t)(t->n_merges + 1) * 2 > t->merge_mask + 1) {
        /* grow: rehash into a table twice the size */
        uint64_t *ok = t->merge_keys;
        uint32_t *orank = t->merge_rank;
        int32_t *ores = t->merge_result;
        uint64_t ocap = t->merge_mask + 1;
        t->merge_keys = NULL;
        tok_reserve_merges(t, (int64_t)ocap);
        for (uint64_t i = 0; i < ocap; i++) {
            if (!ok[i]) continue;
            uint64_t j = merge_slot(ok[i]) & t->merge_mask;
            while (t->merge_keys[j]) j = (j + 1) & t->merge_mask;
            t->merge_keys[j] = ok[i];
            t->merge_rank[j] = orank[i];
            t->merge_result[j] = ores[i];
            t->n_merges++;
        }
        free(ok);
        free(orank);
        free(ores);
    }
    uint64_t key = merge_key(l, r);
    uint64_t i = merge_slot(key) & t->merge_mask;
    while (t->merge_keys[i] && t->merge_keys[i] != key) i = (i + 1) & t->merge_mask;
    if (t->merge_keys[i] == key) return 1; /* duplicate merge: the first (lowest rank) stays, as in HF */
    t->merge_keys[i] = key;
    t->merge_rank[i] = rank;
    t->merge_result[i] = res;
    t->n_merges++;
    return 1;
}

assay_status tok_add_regex(assay_tokenizer *t, const char *pattern, size_t len, int literal, tok_split_behavior b, int invert) {
    if (t->n_regex == TOK_MAX_REGEX) return assay_fail(ASSAY_ERR_UNSUPPORTED, "tokenizer: more than %d pre-tokenizer splits", TOK_MAX_REGEX);
    int err;
    PCRE2_SIZE erroff;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &err, &erroff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer regex /%.*s/ does not compile at offset %zu: %s",
                          (int)len, pattern, (size_t)erroff, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter when JIT is unavailable */
    t->regex[t->n_regex].code = re;
    t->regex[t->n_regex].behavior = b;
    t->regex[t->n_regex].invert = invert;
    t->n_regex++;
    return ASSAY_OK;
}

/* GGUF tokenizer.ggml.pre -> the family's split regexes, applied in order (each splits the pieces of the
 * previous one; matches and the text between them both become pieces). The patterns are the ones in the
 * families' tokenizer.json files (case-insensitive contractions included), which PCRE2 runs as written. */
typedef struct pre_family {
    const char *names; /* space-separated tokenizer.ggml.pre values */
    const char *regex[6];
    int ignore_merges;
} pre_family;

#define LLAMA3_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static const pre_family pre_families[] = {
    {" llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano ", {LLAMA3_RE}, 1},
    {" dbrx smaug-bpe chatglm-bpe glm4 ", {LLAMA3_RE}, 0},
    {" qwen2 deepseek-r1-qwen megrez stablelm2 hunyuan kormo f2llmv2 ", {QWEN2_RE}, 0},
    {" qwen35 ", {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, 0},
    {" gpt-2 phi-2 jina-es jina-de jina-v1-en jina-v2-es jina-v2-de jina-v2-code roberta-bpe mpt olmo jais exaone4 "
     "gigachat trillion granite-docling modern-bert mellum a.x-4.0 ", {GPT2_RE}, 0},
    {" starcoder refact command-r smollm codeshell exaone minerva-7b ", {"\\p{N}", GPT2_RE}, 0},
    {" falcon ", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}, 0},
    {" deepseek-coder ", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}, 0},
    /* the letters class written as code points: these ranges end in characters that Unicode normalization would
     * change (U+1FD3, U+2126, U+212A, ...), which would leave ranges out of order */
    {" deepseek-llm ",
     {"[\r\n]",
      "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      "\\s+$",
      "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
      "\\p{N}+"},
     0},
    {" deepseek-v3 ",
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0},
    {" gpt-4o llama4 kanana2 minimax-m2 talkie ",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0},
    {" tekken ",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     1},
    {" poro-chat bloom gpt3-finnish ", {" ?[^(\\s|.,!?…。，、।۔،)]+"}, 0},
    {" viking ", {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}, 0},
    {" default ", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}, 0},
};

const char *tok_pre_family_names(size_t i) {
    return i < sizeof pre_families / sizeof *pre_families ? pre_families[i].names : NULL;
}

assay_status tok_set_pre_by_name(assay_tokenizer *t, const char *name, size_t len) {
    char key[80];
    if (len == 0) name = "default", len = 7;
    if (len + 3 > sizeof key) return assay_fail(ASSAY_ERR_UNSUPPORTED, "tokenizer: unknown pre-tokenizer '%.*s'", (int)len, name);
    key[0] = ' ';
    memcpy(key + 1, name, len);
    key[len + 1] = ' ';
    key[len + 2] = 0;
    for (size_t f = 0; f < sizeof pre_families / sizeof *pre_families; f++) {
        if (!strstr(pre_families[f].names, key)) continue;
        for (int i = 0; i < 6 && pre_families[f].regex[i]; i++) {
            assay_status st = tok_add_regex(t, pre_families[f].regex[i], strlen(pre_families[f].regex[i]), 0, TOK_SPLIT_ISOLATED, 0);
            if (st != ASSAY_OK) return st;
        }
        t->ignore_merges = pre_families[f].ignore_merges;
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported", (int)len, name);
}

static int is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int by_length_desc_ctx_cmp(const void *a, const void *b, void *ctx) {
    const assay_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->tokens[x].text_len, ly = t->tokens[y].text_len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

assay_status tok_finish(assay_tokenizer *t) {
    /* What each token decodes to. */
    char *buf = NULL;
    size_t cap = 0;
    for (int64_t id = 0; id < t->n_vocab; id++) {
        tok_token *k = &t->tokens[id];
        const char *s = t->arena + k->text_off;
        size_t n = k->text_len;
        if (cap < n * 2 + 8) {
            cap = n * 2 + 8;
            buf = assay_xrealloc(buf, cap);
        }
        size_t m = 0;
        int raw = k->type == ASSAY_TOKEN_CONTROL || k->type == ASSAY_TOKEN_USER_DEFINED || k->type == ASSAY_TOKEN_UNKNOWN;
        if (k->type == ASSAY_TOKEN_BYTE && n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
            buf[m++] = (char)strtol((char[]){s[3], s[4], 0}, NULL, 16);
        } else if (raw) {
            memcpy(buf, s, n), m = n;
        } else if (t->byte_level) {
            /* Map each character back to its byte; a token with a character outside the byte alphabet
             * decodes to its own text (as HF's ByteLevel decoder does). */
            size_t i = 0;
            while (i < n) {
                uint32_t cp;
                int l = utf8_valid_len((const uint8_t *)s + i, n - i, &cp);
                int b = l ? cp_to_byte(cp) : -1;
                if (b < 0) break;
                buf[m++] = (char)b;
                i += (size_t)l;
            }
            if (i < n) memcpy(buf, s, n), m = n;
        } else {
            /* SentencePiece: U+2581 is a space. */
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0 && t->escape_spaces) {
                    buf[m++] = ' ';
                    i += 3;
                } else {
                    buf[m++] = s[i++];
                }
            }
        }
        k->bytes_off = arena_add(t, buf, m);
        k->bytes_len = (uint32_t)m;
    }
    free(buf);

    /* byte -> token */
    for (int b = 0; b < 256; b++) {
        char tmp[8];
        int l;
        if (t->byte_level) {
            l = utf8_encode(byte_to_cp(b), tmp);
        } else {
            l = snprintf(tmp, sizeof tmp, "<0x%02X>", b);
        }
        t->byte_to_id[b] = assay_tokenizer_find(t, tmp, (size_t)l);
    }

    /* Special-token matcher: every control, user-defined and unknown token (GGUF), or every added token
     * (tokenizer.json), by first byte and longest first, so the leftmost-longest match wins. */
    int64_t count = 0;
    for (int64_t id = 0; id < t->n_vocab; id++) {
        tok_token *k = &t->tokens[id];
        if (!k->matchable) k->matchable = k->type == ASSAY_TOKEN_CONTROL || k->type == ASSAY_TOKEN_USER_DEFINED || k->type == ASSAY_TOKEN_UNKNOWN;
        if (k->matchable && k->text_len == 0) k->matchable = 0;
        if (k->matchable && k->type != ASSAY_TOKEN_USER_DEFINED && k->type != ASSAY_TOKEN_NORMAL) k->special = 1;
        count += k->matchable;
    }
    t->sp_ids = assay_xmalloc((size_t)(count ? count : 1) * sizeof *t->sp_ids);
    int32_t bucket[257] = {0};
    for (int64_t id = 0; id < t->n_vocab; id++)
        if (t->tokens[id].matchable) bucket[(uint8_t)t->arena[t->tokens[id].text_off] + 1]++;
    for (int b = 0; b < 256; b++) bucket[b + 1] += bucket[b];
    memcpy(t->sp_start, bucket, sizeof bucket);
    for (int64_t id = 0; id < t->n_vocab; id++)
        if (t->tokens[id].matchable) t->sp_ids[bucket[(uint8_t)t->arena[t->tokens[id].text_off]]++] = (int32_t)id;
    for (int b = 0; b < 256; b++)
        qsort_r(t->sp_ids + t->sp_start[b], (size_t)(t->sp_start[b + 1] - t->sp_start[b]), sizeof *t->sp_ids, by_length_desc_ctx_cmp, t);
    int64_t fill = count;
    t->sp_start[256] = (int32_t)fill;

    if (t->kind == ASSAY_TOKENIZER_SPM) {
        for (int64_t id = 0; id < t->n_vocab; id++) {
            const tok_token *k = &t->tokens[id];
            uint8_t ty = k->type;
            if (!(ty == ASSAY_TOKEN_NORMAL || ty == ASSAY_TOKEN_USER_DEFINED || ty == ASSAY_TOKEN_UNDEFINED)) continue;
            const char *s = t->arena + k->text_off;
            for (uint32_t j = 1; j + 3 <= k->text_len; j++) {
                if (memcmp(s + j, "\xe2\x96\x81", 3) != 0) continue;
                if (j >= 3 && memcmp(s + j - 3, "\xe2\x96\x81", 3) == 0) continue;
                t->cross_id = assay_xrealloc(t->cross_id, (size_t)(t->n_cross + 1) * sizeof *t->cross_id);
                t->cross_at = assay_xrealloc(t->cross_at, (size_t)(t->n_cross + 1) * sizeof *t->cross_at);
                t->cross_id[t->n_cross] = (int32_t)id;
                t->cross_at[t->n_cross++] = j;
            }
        }
    }

    /* End-of-generation tokens: eos, eot, eom, and the end-of-turn texts models use without declaring them. */
    static const char *eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                      "<|end_of_text|>", "<|eom_id|>", "<EOT>", "<|return|>", "<|call|>", NULL};
    for (int i = 0; eog_texts[i]; i++) {
        int32_t id = assay_tokenizer_find(t, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0 && t->tokens[id].type != ASSAY_TOKEN_NORMAL) {
            t->eog[id] = 1;
            if (t->eot < 0 && i < 7) t->eot = id;
        }
    }
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
    return ASSAY_OK;
}

void assay_tokenizer_free(assay_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_regex; i++) pcre2_code_free(t->regex[i].code);
    tok_map_free(&t->vocab);
    tok_map_free(&t->cache);
    free(t->cache_keys);
    free(t->cache_ids);
    free(t->merge_keys);
    free(t->merge_rank);
    free(t->merge_result);
    free(t->tokens);
    free(t->arena);
    free(t->eog);
    free(t->sp_ids);
    free(t->cross_id);
    free(t->cross_at);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* ---- encoding -------------------------------------------------------------------------------------------- */

/* Scratch state of one encode call: reused buffers, so there is no allocation per word. */
typedef struct enc_ctx {
    assay_tokenizer *t;
    assay_tokens *out;
    pcre2_match_data *md;
    /* pieces as (offset, length) pairs into the sanitized text */
    uint32_t *ra, *rb;
    int64_t na, nb, cap_a, cap_b;
    /* BPE symbols and heap */
    int32_t *sym_id, *sym_prev, *sym_next;
    uint32_t *sym_off, *sym_len;
    int64_t sym_cap;
    struct heap_item { float score; uint32_t rank; int32_t pos, left, right, res; uint32_t size; } *heap;
    int64_t heap_n, heap_cap;
    char *buf;
    size_t buf_cap;
} enc_ctx;

static void ranges_push(uint32_t **r, int64_t *n, int64_t *cap, uint32_t off, uint32_t len) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *r = assay_xrealloc(*r, (size_t)*cap * 2 * sizeof **r);
    }
    (*r)[2 * *n] = off;
    (*r)[2 * *n + 1] = len;
    (*n)++;
}

static void sym_reserve(enc_ctx *c, int64_t n) {
    if (n <= c->sym_cap) return;
    c->sym_cap = n * 2;
    c->sym_id = assay_xrealloc(c->sym_id, (size_t)c->sym_cap * sizeof *c->sym_id);
    c->sym_prev = assay_xrealloc(c->sym_prev, (size_t)c->sym_cap * sizeof *c->sym_prev);
    c->sym_next = assay_xrealloc(c->sym_next, (size_t)c->sym_cap * sizeof *c->sym_next);
    c->sym_off = assay_xrealloc(c->sym_off, (size_t)c->sym_cap * sizeof *c->sym_off);
    c->sym_len = assay_xrealloc(c->sym_len, (size_t)c->sym_cap * sizeof *c->sym_len);
}

/* Min-heap order for BPE: lowest rank first, then leftmost. For SPM: highest score first, then leftmost. */
static int heap_before(const struct heap_item *a, const struct heap_item *b, int by_score) {
    if (by_score) {
        if (a->score != b->score) return a->score > b->score;
    } else if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->pos < b->pos;
}

static void heap_push(enc_ctx *c, struct heap_item it, int by_score) {
    if (c->heap_n == c->heap_cap) {
        c->heap_cap = c->heap_cap ? c->heap_cap * 2 : 256;
        c->heap = assay_xrealloc(c->heap, (size_t)c->heap_cap * sizeof *c->heap);
    }
    int64_t i = c->heap_n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!heap_before(&it, &c->heap[p], by_score)) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = it;
}

static struct heap_item heap_pop(enc_ctx *c, int by_score) {
    struct heap_item top = c->heap[0], last = c->heap[--c->heap_n];
    int64_t i = 0, n = c->heap_n;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        const struct heap_item *best = &last;
        if (l < n && heap_before(&c->heap[l], best, by_score)) m = l, best = &c->heap[l];
        if (r < n && heap_before(&c->heap[r], best, by_score)) m = r;
        if (m == i) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

static void bpe_try_pair(enc_ctx *c, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t rank;
    int32_t res;
    if (!merge_lookup(c->t, c->sym_id[l], c->sym_id[r], &rank, &res)) return;
    struct heap_item it = {0, rank, l, c->sym_id[l], c->sym_id[r], res, 0};
    heap_push(c, it, 0);
}

/* Merge the symbols sym_id[0..n) by rank (HF BPE semantics: lowest rank, then leftmost; O(n log n)). */
static void bpe_merge_symbols(enc_ctx *c, int64_t n) {
    c->heap_n = 0;
    for (int64_t i = 0; i < n; i++) {
        c->sym_prev[i] = (int32_t)i - 1;
        c->sym_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (int64_t i = 0; i + 1 < n; i++) bpe_try_pair(c, (int32_t)i, (int32_t)i + 1);
    while (c->heap_n) {
        struct heap_item it = heap_pop(c, 0);
        int32_t l = it.pos, r = c->sym_next[l];
        /* stale: the left symbol was absorbed or grew, or its right neighbour changed */
        if (c->sym_id[l] != it.left || r < 0 || c->sym_id[r] != it.right) continue;
        c->sym_id[l] = it.res;
        c->sym_id[r] = -1;
        c->sym_next[l] = c->sym_next[r];
        if (c->sym_next[r] >= 0) c->sym_prev[c->sym_next[r]] = l;
        bpe_try_pair(c, c->sym_prev[l], l);
        bpe_try_pair(c, l, c->sym_next[l]);
    }
}

/* Word cache: raw word bytes -> ids. Bounded: cleared when it grows past the limit. */
#define TOK_CACHE_MAX_KEYS (64u << 20)

static int cache_get(assay_tokenizer *t, const char *w, size_t n, uint64_t h, assay_tokens *out) {
    uint64_t *v = tok_map_find(&t->cache, t->cache_keys, w, n, h);
    if (!v) return 0;
    int64_t off = (int64_t)(*v >> 16), cnt = (int64_t)(*v & 0xffff);
    for (int64_t i = 0; i < cnt; i++) assay_tokens_push(out, t->cache_ids[off + i]);
    return 1;
}

/* Caches the ids the word added to `out` from index `start` on (none: a word of bytes the vocabulary lacks). */
static void cache_put(assay_tokenizer *t, const char *w, size_t n, uint64_t h, const assay_tokens *out, int64_t start) {
    int64_t cnt = out->n - start;
    if (cnt >= 0xffff || n > 4096) return;
    if (t->cache_keys_len + n > TOK_CACHE_MAX_KEYS) {
        tok_map_clear(&t->cache);
        t->cache_keys_len = 0;
        t->cache_ids_len = 0;
    }
    if (t->cache_keys_len + n > t->cache_keys_cap) {
        while (t->cache_keys_len + n > t->cache_keys_cap) t->cache_keys_cap = t->cache_keys_cap ? t->cache_keys_cap * 2 : 1 << 16;
        t->cache_keys = assay_xrealloc(t->cache_keys, t->cache_keys_cap);
    }
    if (t->cache_ids_len + cnt > t->cache_ids_cap) {
        while (t->cache_ids_len + cnt > t->cache_ids_cap) t->cache_ids_cap = t->cache_ids_cap ? t->cache_ids_cap * 2 : 1 << 14;
        t->cache_ids = assay_xrealloc(t->cache_ids, (size_t)t->cache_ids_cap * sizeof *t->cache_ids);
    }
    uint32_t off = (uint32_t)t->cache_keys_len;
    memcpy(t->cache_keys + off, w, n);
    t->cache_keys_len += n;
    if (cnt) memcpy(t->cache_ids + t->cache_ids_len, out->ids + start, (size_t)cnt * sizeof *out->ids);
    tok_map_insert(&t->cache, t->cache_keys, off, (uint32_t)n, h, ((uint64_t)t->cache_ids_len << 16) | (uint64_t)cnt);
    t->cache_ids_len += cnt;
}

/* One pre-tokenized word of byte-level BPE: raw bytes -> ids. */
static void bpe_bytes_word(enc_ctx *c, const char *w, size_t n) {
    assay_tokenizer *t = c->t;
    if (n == 0) return;
    uint64_t h = tok_hash(w, n);
    if (cache_get(t, w, n, h, c->out)) return;
    int64_t start = c->out->n;
    if (t->ignore_merges) {
        /* the word in the byte alphabet, looked up whole */
        if (c->buf_cap < n * 2 + 4) {
            c->buf_cap = n * 2 + 4;
            c->buf = assay_xrealloc(c->buf, c->buf_cap);
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)utf8_encode(byte_to_cp((uint8_t)w[i]), c->buf + m);
        int32_t id = assay_tokenizer_find(t, c->buf, m);
        if (id >= 0) {
            assay_tokens_push(c->out, id);
            cache_put(t, w, n, h, c->out, start);
            return;
        }
    }
    sym_reserve(c, (int64_t)n);
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_to_id[(uint8_t)w[i]];
        if (id >= 0) c->sym_id[k++] = id;
        else if (t->unk >= 0) c->sym_id[k++] = t->unk;
        /* else: a byte missing from the vocabulary is dropped, as HF's BPE does without unk */
    }
    if (k > 1) bpe_merge_symbols(c, k);
    for (int64_t i = 0; i < k; i++)
        if (c->sym_id[i] >= 0) assay_tokens_push(c->out, c->sym_id[i]);
    cache_put(t, w, n, h, c->out, start);
}

/* Split the text into pieces with the regex steps; returns them in c->ra (count c->na). */
static assay_status pretokenize(enc_ctx *c, const char *s, size_t n) {
    assay_tokenizer *t = c->t;
    c->na = 0;
    ranges_push(&c->ra, &c->na, &c->cap_a, 0, (uint32_t)n);
    for (int k = 0; k < t->n_regex; k++) {
        tok_regex *rx = &t->regex[k];
        c->nb = 0;
        for (int64_t p = 0; p < c->na; p++) {
            uint32_t off = c->ra[2 * p], len = c->ra[2 * p + 1];
            const char *subj = s + off;
            size_t pos = 0, prev_end = 0;
            while (pos <= len) {
                int rc = pcre2_match(rx->code, (PCRE2_SPTR)subj, len, pos, PCRE2_NO_UTF_CHECK, c->md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    return assay_fail(ASSAY_ERR_UNSUPPORTED, "tokenizer: regex match failed: %s", (const char *)msg);
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
                size_t ms = ov[0], me = ov[1];
                if (me == ms) { /* empty match: no piece; step one character */
                    if (ms >= len) break;
                    int l = utf8_valid_len((const uint8_t *)subj + ms, len - ms, NULL);
                    pos = ms + (l ? (size_t)l : 1);
                    continue;
                }
                if (rx->invert) {
                    /* the match is kept as "between" text, the gap as the match */
                }
                switch (rx->behavior) {
                case TOK_SPLIT_ISOLATED:
                    if (ms > prev_end) ranges_push(&c->rb, &c->nb, &c->cap_b, off + (uint32_t)prev_end, (uint32_t)(ms - prev_end));
                    ranges_push(&c->rb, &c->nb, &c->cap_b, off + (uint32_t)ms, (uint32_t)(me - ms));
                    break;
                case TOK_SPLIT_REMOVED:
                    if (ms > prev_end) ranges_push(&c->rb, &c->nb, &c->cap_b, off + (uint32_t)prev_end, (uint32_t)(ms - prev_end));
                    break;
                case TOK_SPLIT_MERGED_PREV: /* the match ends the previous piece */
                    ranges_push(&c->rb, &c->nb, &c->cap_b, off + (uint32_t)prev_end, (uint32_t)(me - prev_end));
                    break;
                case TOK_SPLIT_MERGED_NEXT: /* the match starts the next piece */
                    if (ms > prev_end) ranges_push(&c->rb, &c->nb, &c->cap_b, off + (uint32_t)prev_end, (uint32_t)(ms - prev_end));
                    prev_end = ms;
                    pos = me;
                    continue;
                }
                prev_end = me;
                pos = me;
            }
            if (prev_end < len) ranges_push(&c->rb, &c->nb, &c->cap_b, off + (uint32_t)prev_end, (uint32_t)(len - prev_end));
        }
        uint32_t *tmp = c->ra;
        c->ra = c->rb, c->rb = tmp;
        int64_t tc = c->cap_a;
        c->cap_a = c->cap_b, c->cap_b = tc;
        c->na = c->nb;
    }
    return ASSAY_OK;
}

/* Pre-tokenizes s[0..n) and hands each piece, as the original bytes, to `word`. The regexes run on valid UTF-8
 * only (PCRE2 is called without its UTF check, and on invalid UTF-8 it reads out of bounds), so text that is not
 * valid UTF-8 is matched as a copy in which each bad byte is U+FFFD, and the pieces are mapped back to the
 * original bytes, which the word encoders then turn into byte tokens. `prefix`: a space goes in front (byte-level
 * add_prefix_space), as a piece's leading space of its own. */
static assay_status encode_pieces(enc_ctx *c, const char *s, size_t n, int prefix, void (*word)(enc_ctx *, const char *, size_t)) {
    char *clean = NULL;
    uint32_t *orig = NULL; /* clean offset -> original offset */
    size_t cn = 0;
    const char *subj = s;
    size_t sn = n;
    int valid = 1;
    for (size_t i = 0; i < n;) {
        if ((uint8_t)s[i] < 0x80) {
            i++;
            continue;
        }
        int l = utf8_valid_len((const uint8_t *)s + i, n - i, NULL);
        if (!l) {
            valid = 0;
            break;
        }
        i += (size_t)l;
    }
    if (!valid || prefix) {
        clean = assay_xmalloc(n * 3 + 2);
        orig = assay_xmalloc((n * 3 + 2) * sizeof *orig);
        if (prefix) clean[cn] = ' ', orig[cn++] = UINT32_MAX; /* the added space has no original byte */
        for (size_t i = 0; i < n;) {
            int l = utf8_valid_len((const uint8_t *)s + i, n - i, NULL);
            if (l) {
                for (int j = 0; j < l; j++) clean[cn] = s[i + j], orig[cn++] = (uint32_t)(i + j);
                i += (size_t)l;
            } else {
                memcpy(clean + cn, "\xef\xbf\xbd", 3);
                orig[cn++] = (uint32_t)i; /* the U+FFFD stands for this one byte */
                orig[cn++] = UINT32_MAX - 1;
                orig[cn++] = UINT32_MAX - 1;
                i++;
            }
        }
        orig[cn] = (uint32_t)n;
        subj = clean, sn = cn;
    }
    assay_status st = pretokenize(c, subj, sn);
    if (st == ASSAY_OK) {
        char *piece = NULL;
        size_t piece_cap = 0;
        for (int64_t p = 0; p < c->na; p++) {
            uint32_t off = c->ra[2 * p], len = c->ra[2 * p + 1];
            if (!clean) {
                word(c, s + off, len);
                continue;
            }
            /* rebuild the piece's original bytes */
            if (piece_cap < (size_t)len + 1) {
                piece_cap = (size_t)len + 16;
                piece = assay_xrealloc(piece, piece_cap);
            }
            size_t m = 0;
            for (uint32_t i = off; i < off + len; i++) {
                if (orig[i] == UINT32_MAX) piece[m++] = ' ';
                else if (orig[i] != UINT32_MAX - 1) piece[m++] = s[orig[i]];
            }
            word(c, piece, m);
        }
        free(piece);
    }
    free(clean);
    free(orig);
    return st;
}

/* A fragment of byte-level BPE text (no special tokens inside). */
static assay_status encode_bpe_bytes(enc_ctx *c, const char *s, size_t n) {
    int prefix = c->t->bl_add_prefix_space && (n == 0 || s[0] != ' ');
    return encode_pieces(c, s, n, prefix, bpe_bytes_word);
}

/* SentencePiece BPE over one fragment (llama.cpp's and sentencepiece's algorithm): start from UTF-8
 * characters, repeatedly merge the adjacent pair whose concatenation is the best-scoring token (ties:
 * leftmost), then emit; characters that are not tokens become <0xXX> byte tokens. */
static int spm_mergeable(const assay_tokenizer *t, int32_t id) {
    uint8_t ty = t->tokens[id].type;
    return ty == ASSAY_TOKEN_NORMAL || ty == ASSAY_TOKEN_USER_DEFINED || ty == ASSAY_TOKEN_UNDEFINED;
}

static void spm_try_pair(enc_ctx *c, const char *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = c->sym_len[l] + c->sym_len[r];
    int32_t id = assay_tokenizer_find(c->t, s + c->sym_off[l], size); /* adjacent symbols are contiguous */
    if (id < 0 || !spm_mergeable(c->t, id)) return;
    struct heap_item it = {c->t->tokens[id].score, 0, l, 0, r, id, size};
    heap_push(c, it, 1);
}

static void emit_bytes(enc_ctx *c, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = c->t->byte_to_id[(uint8_t)s[i]];
        if (id >= 0) assay_tokens_push(c->out, id);
        else if (c->t->unk >= 0) assay_tokens_push(c->out, c->t->unk);
    }
}

static void encode_spm(enc_ctx *c, const char *s, size_t n) {
    int64_t k = 0;
    sym_reserve(c, (int64_t)n + 1);
    for (size_t i = 0; i < n;) {
        int l = utf8_valid_len((const uint8_t *)s + i, n - i, NULL);
        if (!l) l = 1;
        c->sym_off[k] = (uint32_t)i;
        c->sym_len[k] = (uint32_t)l;
        c->sym_prev[k] = (int32_t)k - 1;
        c->sym_next[k] = i + (size_t)l < n ? (int32_t)k + 1 : -1;
        k++;
        i += (size_t)l;
    }
    c->heap_n = 0;
    for (int64_t i = 0; i + 1 < k; i++) spm_try_pair(c, s, (int32_t)i, (int32_t)i + 1);
    while (c->heap_n) {
        struct heap_item it = heap_pop(c, 1);
        int32_t l = it.pos, r = it.right;
        if (c->sym_len[l] == 0 || c->sym_len[r] == 0 || c->sym_len[l] + c->sym_len[r] != it.size) continue;
        c->sym_len[l] += c->sym_len[r];
        c->sym_len[r] = 0;
        c->sym_next[l] = c->sym_next[r];
        if (c->sym_next[r] >= 0) c->sym_prev[c->sym_next[r]] = l;
        spm_try_pair(c, s, c->sym_prev[l], l);
        spm_try_pair(c, s, l, c->sym_next[l]);
    }
    for (int32_t i = k ? 0 : -1; i >= 0; i = c->sym_next[i]) {
        int32_t id = assay_tokenizer_find(c->t, s + c->sym_off[i], c->sym_len[i]);
        if (id >= 0 && spm_mergeable(c->t, id)) assay_tokens_push(c->out, id);
        else emit_bytes(c, s + c->sym_off[i], c->sym_len[i]);
    }
}

static void spm_word(enc_ctx *c, const char *w, size_t n) {
    if (n == 0) return;
    uint64_t h = tok_hash(w, n);
    if (cache_get(c->t, w, n, h, c->out)) return;
    int64_t start = c->out->n;
    encode_spm(c, w, n);
    cache_put(c->t, w, n, h, c->out, start);
}

/* Cuts the normalised fragment before each run of U+2581 unless a cross token occurs there (see
 * tok_internal.h), and merges the words independently: the same result as merging the whole fragment. */
static void encode_spm_fragment(enc_ctx *c, const char *s, size_t n) {
    const assay_tokenizer *t = c->t;
    size_t a = 0;
    for (size_t i = 1; i + 3 <= n; i++) {
        if (memcmp(s + i, "\xe2\x96\x81", 3) != 0 || (i >= 3 && memcmp(s + i - 3, "\xe2\x96\x81", 3) == 0)) continue;
        int safe = 1;
        for (int64_t k = 0; k < t->n_cross && safe; k++) {
            const tok_token *tk = &t->tokens[t->cross_id[k]];
            size_t j = t->cross_at[k];
            if (j <= i && i - j + tk->text_len <= n && memcmp(s + i - j, t->arena + tk->text_off, tk->text_len) == 0) safe = 0;
        }
        if (!safe) continue;
        spm_word(c, s + a, i - a);
        a = i;
    }
    spm_word(c, s + a, n - a);
}

/* HF BPE over characters (Metaspace-style tokenizer.json): like byte-level BPE, but the initial symbols
 * are UTF-8 characters, and a character missing from the vocabulary falls back to <0xXX> tokens. */
static void encode_bpe_chars_word(enc_ctx *c, const char *w, size_t n) {
    assay_tokenizer *t = c->t;
    if (n == 0) return;
    uint64_t h = tok_hash(w, n);
    if (cache_get(t, w, n, h, c->out)) return;
    int64_t start = c->out->n;
    int32_t whole = t->ignore_merges ? assay_tokenizer_find(t, w, n) : -1;
    if (whole >= 0) {
        assay_tokens_push(c->out, whole);
    } else {
        sym_reserve(c, (int64_t)n * 4);
        int64_t k = 0;
        for (size_t i = 0; i < n;) {
            int l = utf8_valid_len((const uint8_t *)w + i, n - i, NULL);
            if (!l) l = 1;
            int32_t id = assay_tokenizer_find(t, w + i, (size_t)l);
            if (id >= 0) {
                c->sym_id[k++] = id;
            } else if (t->byte_fallback) {
                for (int j = 0; j < l; j++) {
                    int32_t b = t->byte_to_id[(uint8_t)w[i + j]];
                    c->sym_id[k++] = b >= 0 ? b : t->unk;
                }
                if (k && c->sym_id[k - 1] < 0) k--;
            } else if (t->unk >= 0) {
                c->sym_id[k++] = t->unk;
            }
            i += (size_t)l;
        }
        if (k > 1) bpe_merge_symbols(c, k);
        for (int64_t i = 0; i < k; i++)
            if (c->sym_id[i] >= 0) assay_tokens_push(c->out, c->sym_id[i]);
    }
    cache_put(t, w, n, h, c->out, start);
}

/* Normalise one fragment for SentencePiece/Metaspace: optional leading space, spaces -> U+2581. */
static size_t spm_normalize(enc_ctx *c, const char *s, size_t n, int prefix) {
    size_t need = n * 3 + 4;
    if (c->buf_cap < need) {
        c->buf_cap = need;
        c->buf = assay_xrealloc(c->buf, c->buf_cap);
    }
    size_t m = 0;
    if (prefix) {
        if (c->t->escape_spaces) memcpy(c->buf, "\xe2\x96\x81", 3), m = 3;
        else c->buf[m++] = ' ';
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' && c->t->escape_spaces) {
            memcpy(c->buf + m, "\xe2\x96\x81", 3);
            m += 3;
        } else {
            c->buf[m++] = s[i];
        }
    }
    return m;
}

/* NFC of s[0..n) into a new buffer (HF's NFC normalizer). Runs of valid UTF-8 are composed with utf8proc;
 * bytes that are not valid UTF-8 are kept as they are. Returns NULL when the text is ASCII (unchanged). */
static char *nfc_copy(const char *s, size_t n, size_t *out_n) {
    size_t i = 0;
    while (i < n && (uint8_t)s[i] < 0x80) i++;
    if (i == n) return NULL;
    assay_strbuf b = {0};
    size_t run = 0;
    i = 0;
    while (i <= n) {
        int l = i < n ? utf8_valid_len((const uint8_t *)s + i, n - i, NULL) : 0;
        if (l) {
            i += (size_t)l;
            continue;
        }
        if (i > run) { /* compose the valid run [run, i) */
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s + run, (utf8proc_ssize_t)(i - run), &dst,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (m >= 0) assay_strbuf_append(&b, (const char *)dst, (size_t)m);
            else assay_strbuf_append(&b, s + run, i - run);
            free(dst);
        }
        if (i < n) assay_strbuf_putc(&b, s[i]); /* an invalid byte, kept */
        i++;
        run = i;
    }
    *out_n = b.len;
    if (!b.data) assay_strbuf_append(&b, "", 0);
    return b.data;
}

static assay_status encode_fragment_raw(enc_ctx *c, const char *s, size_t n, int prev_special, int first);

static assay_status encode_fragment(enc_ctx *c, const char *s, size_t n, int prev_special, int first) {
    if (!c->t->nfc) return encode_fragment_raw(c, s, n, prev_special, first);
    size_t m;
    char *norm = nfc_copy(s, n, &m);
    if (!norm) return encode_fragment_raw(c, s, n, prev_special, first);
    assay_status st = encode_fragment_raw(c, norm, m, prev_special, first);
    free(norm);
    return st;
}

static assay_status encode_fragment_raw(enc_ctx *c, const char *s, size_t n, int prev_special, int first) {
    assay_tokenizer *t = c->t;
    switch (t->kind) {
    case ASSAY_TOKENIZER_BPE_BYTES:
        return encode_bpe_bytes(c, s, n);
    case ASSAY_TOKENIZER_SPM: {
        int prefix = t->add_space_prefix && prev_special;
        size_t m = spm_normalize(c, s, n, prefix);
        /* the normalised copy lives in c->buf; the SPM path does not touch it */
        encode_spm_fragment(c, c->buf, m);
        return ASSAY_OK;
    }
    case ASSAY_TOKENIZER_BPE_CHARS: {
        int prefix = t->add_space_prefix && (!t->prefix_first_only || first);
        if (prefix && t->prefix_unless_space && ((n >= 1 && s[0] == ' ') || (n >= 3 && memcmp(s, "\xe2\x96\x81", 3) == 0)))
            prefix = 0; /* Metaspace: not when the text already starts with the marker */
        size_t m = spm_normalize(c, s, n, prefix);
        char *norm = assay_xmalloc(m + 1);
        memcpy(norm, c->buf, m);
        if (t->metaspace_split) {
            size_t a = 0;
            for (size_t i = 3; i + 3 <= m; i++) {
                if (memcmp(norm + i, "\xe2\x96\x81", 3) == 0) {
                    encode_bpe_chars_word(c, norm + a, i - a);
                    a = i;
                    i += 2;
                }
            }
            encode_bpe_chars_word(c, norm + a, m - a);
        } else {
            assay_status st = encode_pieces(c, norm, m, 0, encode_bpe_chars_word);
            if (st != ASSAY_OK) {
                free(norm);
                return st;
            }
        }
        free(norm);
        return ASSAY_OK;
    }
    }
    return ASSAY_OK;
}

assay_status assay_tokenizer_encode(assay_tokenizer *t, const char *text, size_t len, int flags, assay_tokens *out) {
    enc_ctx c = {0};
    c.t = t;
    c.out = out;
    if (t->n_regex) {
        c.md = pcre2_match_data_create(8, NULL);
        if (!c.md) return assay_fail(ASSAY_ERR_NOMEM, "tokenizer: out of memory");
    }
    int parse_special = (flags & ASSAY_TOK_PARSE_SPECIAL) != 0;
    assay_status st = ASSAY_OK;
    pthread_mutex_lock(&t->lock);
    if ((flags & ASSAY_TOK_ADD_SPECIAL) && t->add_bos && t->bos >= 0) assay_tokens_push(out, t->bos);

    /* Split out special/added tokens first (leftmost, longest), then encode the text between them. */
    size_t frag = 0, i = 0;
    int prev_special = 1;
    while (i < len && st == ASSAY_OK) {
        uint8_t b = (uint8_t)text[i];
        int32_t matched = -1;
        for (int32_t j = t->sp_start[b]; j < t->sp_start[b + 1]; j++) {
            const tok_token *k = &t->tokens[t->sp_ids[j]];
            if (k->special && !parse_special) continue;
            if (k->text_len <= len - i && memcmp(text + i, t->arena + k->text_off, k->text_len) == 0) {
                matched = t->sp_ids[j];
                break;
            }
        }
        if (matched < 0) {
            i++;
            continue;
        }
        const tok_token *k = &t->tokens[matched];
        size_t end = i;
        if (k->lstrip)
            while (end > frag && is_space_byte(text[end - 1])) end--;
        if (end > frag) st = encode_fragment(&c, text + frag, end - frag, prev_special, frag == 0);
        assay_tokens_push(out, matched);
        prev_special = 1;
        i += k->text_len;
        if (k->rstrip)
            while (i < len && is_space_byte(text[i])) i++;
        frag = i;
    }
    if (st == ASSAY_OK && len > frag) st = encode_fragment(&c, text + frag, len - frag, prev_special, frag == 0);
    if (st == ASSAY_OK && (flags & ASSAY_TOK_ADD_SPECIAL) && t->add_eos && t->eos >= 0) assay_tokens_push(out, t->eos);
    pthread_mutex_unlock(&t->lock);

    pcre2_match_data_free(c.md);
    free(c.ra);
    free(c.rb);
    free(c.sym_id);
    free(c.sym_prev);
    free(c.sym_next);
    free(c.sym_off);
    free(c.sym_len);
    free(c.heap);
    free(c.buf);
    return st;
}

/* ---- decoding and accessors ------------------------------------------------------------------------------ */

assay_status assay_tokenizer_decode(const assay_tokenizer *t, const int32_t *ids, int64_t n, int flags, assay_strbuf *out) {
    int strip = (flags & ASSAY_DETOK_STRIP_PREFIX) && t->add_space_prefix;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab)
            return assay_fail(ASSAY_ERR_RANGE, "token id %d is outside the vocabulary (0..%lld)", id, (long long)t->n_vocab - 1);
        const tok_token *k = &t->tokens[id];
        if ((flags & ASSAY_DETOK_SKIP_SPECIAL) && (k->type == ASSAY_TOKEN_CONTROL || k->type == ASSAY_TOKEN_UNKNOWN)) continue;
        const char *b = t->arena + k->bytes_off;
        size_t m = k->bytes_len;
        if (strip) { /* one space, from the start of the text as a whole (HF fuses the pieces, then strips) */
            if (m && b[0] == ' ') b++, m--;
            strip = 0;
        }
        assay_strbuf_append(out, b, m);
    }
    if (!out->data) assay_strbuf_append(out, "", 0);
    return ASSAY_OK;
}

assay_tokenizer_kind assay_tokenizer_get_kind(const assay_tokenizer *t) { return t->kind; }
int64_t assay_tokenizer_n_vocab(const assay_tokenizer *t) { return t->n_vocab; }

const char *assay_tokenizer_piece(const assay_tokenizer *t, int32_t id, size_t *len) {
    ASSAY_ASSERT(id >= 0 && id < t->n_vocab);
    *len = t->tokens[id].text_len;
    return t->arena + t->tokens[id].text_off;
}

const char *assay_tokenizer_token_bytes(const assay_tokenizer *t, int32_t id, size_t *len) {
    ASSAY_ASSERT(id >= 0 && id < t->n_vocab);
    *len = t->tokens[id].bytes_len;
    return t->arena + t->tokens[id].bytes_off;
}

assay_token_type assay_tokenizer_token_type(const assay_tokenizer *t, int32_t id) {
    ASSAY_ASSERT(id >= 0 && id < t->n_vocab);
    return (assay_token_type)t->tokens[id].type;
}

int32_t assay_tokenizer_bos(const assay_tokenizer *t) { return t->bos; }
int32_t assay_tokenizer_eos(const assay_tokenizer *t) { return t->eos; }
int32_t assay_tokenizer_eot(const assay_tokenizer *t) { return t->eot; }
int32_t assay_tokenizer_unk(const assay_tokenizer *t) { return t->unk; }
int32_t assay_tokenizer_pad(const assay_tokenizer *t) { return t->pad; }
int assay_tokenizer_is_eog(const assay_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->eog[id]; }
int assay_tokenizer_add_bos(const assay_tokenizer *t) { return t->add_bos; }
int assay_tokenizer_add_eos(const assay_tokenizer *t) { return t->add_eos; }
const char *assay_tokenizer_describe(const assay_tokenizer *t) { return t->describe; }

assay_status assay_tokenizer_load(assay_tokenizer **out, const char *path) {
    *out = NULL;
    if (assay_path_is_dir(path)) {
        char *p = assay_path_join(path, "tokenizer.json");
        assay_status st = assay_path_exists(p) ? assay_tokenizer_from_json_file(out, p)
                                               : assay_fail(ASSAY_ERR_IO, "%s: no tokenizer.json in this directory", path);
        free(p);
        return st;
    }
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".json") == 0) return assay_tokenizer_from_json_file(out, path);
    return tok_load_gguf_path(out, path);
}
