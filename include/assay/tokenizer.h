/* tokenizer.h — the tokenizers real models use: byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM, StarCoder,
 * Falcon, DeepSeek) and SentencePiece-style BPE (Llama-1/2, Phi-3, Gemma), loaded from GGUF metadata
 * (tokenizer.ggml.*) or from a Hugging Face tokenizer.json.
 *
 *   assay_tokenizer *tok;
 *   if (assay_tokenizer_load(&tok, "model.gguf") != ASSAY_OK)      // or an HF directory, or a tokenizer.json
 *       fprintf(stderr, "%s\n", assay_last_error());
 *   assay_tokens ids = {0};
 *   assay_tokenizer_encode(tok, text, strlen(text), ASSAY_TOK_ADD_SPECIAL | ASSAY_TOK_PARSE_SPECIAL, &ids);
 *   for (int64_t i = 0; i < ids.n; i++) printf("%d ", ids.ids[i]);
 *   assay_strbuf out = {0};
 *   assay_tokenizer_decode(tok, ids.ids, ids.n, 0, &out);       // out.data, out.len: the exact bytes
 *   assay_tokens_free(&ids); assay_strbuf_free(&out);
 *   assay_tokenizer_free(tok);
 *
 * Semantics (what the tests hold us to):
 *   - Encoding gives the ids of the Hugging Face `tokenizers` implementation of the same vocabulary
 *     (llama.cpp's vocab fixtures, the house model's tokenizer.json, transformers on GGUF files).
 *   - Special-token text in the input ("<|im_start|>", "<|endoftext|>") becomes that token when
 *     ASSAY_TOK_PARSE_SPECIAL is given; user-defined (non-special added) tokens are always matched,
 *     as in llama.cpp and HF.
 *   - BOS/EOS are added only with ASSAY_TOK_ADD_SPECIAL, and then only as the model's add_bos/add_eos say.
 *   - Decoding is the byte-exact concatenation of the tokens' bytes: a character split across tokens is
 *     rejoined, and bytes that were not valid UTF-8 in the input come back unchanged, so
 *     decode(encode(x)) == x for byte-level BPE where the vocabulary has a token for each byte of x
 *     (deepseek-coder has none for C0 C1 F5-FF, bytes never seen in UTF-8: its added tokens spelled like
 *     those bytes, "Á" ..., stand in and decode as their text, as in llama.cpp), and for SentencePiece with
 *     the dummy prefix stripped where x has no U+2581 and no added token (fuzz/fuzz_tokenizer.c checks these).
 *   - Bytes that are not valid UTF-8 are, for pre-tokenization, classified like U+FFFD (one per byte) and
 *     then encoded as their own byte tokens.
 *   - A tokenizer is safe to share between threads: encode locks a mutex around its word cache.
 */
#ifndef ASSAY_TOKENIZER_H
#define ASSAY_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/strbuf.h"

typedef struct assay_gguf assay_gguf;
typedef struct assay_tokenizer assay_tokenizer;

typedef enum assay_tokenizer_kind {
    ASSAY_TOKENIZER_BPE_BYTES, /* byte-level BPE: merges by rank over GPT-2 byte-to-unicode characters */
    ASSAY_TOKENIZER_BPE_CHARS, /* BPE by rank over UTF-8 characters with byte fallback (HF Metaspace style) */
    ASSAY_TOKENIZER_SPM,       /* SentencePiece BPE: merges by token score, <0xXX> byte fallback, ▁ spaces */
} assay_tokenizer_kind;

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
typedef enum assay_token_type {
    ASSAY_TOKEN_UNDEFINED = 0,
    ASSAY_TOKEN_NORMAL = 1,
    ASSAY_TOKEN_UNKNOWN = 2,
    ASSAY_TOKEN_CONTROL = 3,
    ASSAY_TOKEN_USER_DEFINED = 4,
    ASSAY_TOKEN_UNUSED = 5,
    ASSAY_TOKEN_BYTE = 6,
} assay_token_type;

/* A growable list of token ids. Zero-initialise; encode appends. */
typedef struct assay_tokens {
    int32_t *ids;
    int64_t n;
    int64_t cap;
} assay_tokens;

void assay_tokens_push(assay_tokens *v, int32_t id);
void assay_tokens_free(assay_tokens *v);

/* Encode flags. */
enum {
    ASSAY_TOK_ADD_SPECIAL = 1,   /* add BOS/EOS where the model's add_bos/add_eos say so */
    ASSAY_TOK_PARSE_SPECIAL = 2, /* control/special token text in the input becomes that token */
};
/* Decode flags. */
enum {
    ASSAY_DETOK_SKIP_SPECIAL = 1,  /* drop control tokens (BOS, EOS, <|im_end|>, ...) */
    ASSAY_DETOK_STRIP_PREFIX = 2,  /* SentencePiece: remove the dummy-prefix space of the first token */
};

/* `path`: a .gguf file, a directory holding tokenizer.json, or a tokenizer.json file. */
assay_status assay_tokenizer_load(assay_tokenizer **out, const char *path);
/* From the tokenizer.ggml.* keys of an open GGUF file (the GGUF may be closed afterwards). */
assay_status assay_tokenizer_from_gguf(assay_tokenizer **out, const assay_gguf *g);
/* From a Hugging Face tokenizer.json. */
assay_status assay_tokenizer_from_json_file(assay_tokenizer **out, const char *path);
void assay_tokenizer_free(assay_tokenizer *tok);

/* Appends the ids of text[0..len) to `out`. Fails only on internal limits (regex engine errors). */
assay_status assay_tokenizer_encode(assay_tokenizer *tok, const char *text, size_t len, int flags,
                                    assay_tokens *out);
/* Appends the bytes of the tokens to `out`. Fails with ASSAY_ERR_RANGE on an id outside the vocabulary. */
assay_status assay_tokenizer_decode(const assay_tokenizer *tok, const int32_t *ids, int64_t n, int flags,
                                    assay_strbuf *out);

assay_tokenizer_kind assay_tokenizer_get_kind(const assay_tokenizer *tok);
int64_t assay_tokenizer_n_vocab(const assay_tokenizer *tok);
/* The token as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>", "<|im_end|>"); not NUL-terminated. */
const char *assay_tokenizer_piece(const assay_tokenizer *tok, int32_t id, size_t *len);
/* The bytes the token decodes to (" the", "\n"); not NUL-terminated. */
const char *assay_tokenizer_token_bytes(const assay_tokenizer *tok, int32_t id, size_t *len);
assay_token_type assay_tokenizer_token_type(const assay_tokenizer *tok, int32_t id);
/* Exact lookup of a stored piece; -1 when absent. */
int32_t assay_tokenizer_find(const assay_tokenizer *tok, const char *piece, size_t len);

/* Special ids, -1 when the model has none. eot: end of turn (<|im_end|>, <|eot_id|>, <end_of_turn>). */
int32_t assay_tokenizer_bos(const assay_tokenizer *tok);
int32_t assay_tokenizer_eos(const assay_tokenizer *tok);
int32_t assay_tokenizer_eot(const assay_tokenizer *tok);
int32_t assay_tokenizer_unk(const assay_tokenizer *tok);
int32_t assay_tokenizer_pad(const assay_tokenizer *tok);
/* Whether generation should stop at this token (eos, eot, and the other end-of-generation tokens). */
int assay_tokenizer_is_eog(const assay_tokenizer *tok, int32_t id);
int assay_tokenizer_add_bos(const assay_tokenizer *tok);
int assay_tokenizer_add_eos(const assay_tokenizer *tok);
/* "gpt2/smollm", "llama/default", "tokenizer.json/ByteLevel": a short description for `inspect`. */
const char *assay_tokenizer_describe(const assay_tokenizer *tok);

#endif
