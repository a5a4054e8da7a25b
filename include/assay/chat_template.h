/* chat_template.h — render a conversation the way a model's own chat template (Jinja, in the GGUF key
 * tokenizer.chat_template or tokenizer_config.json) would, without a Jinja engine: the template text is
 * recognised by its signature and rendered by the matching C renderer, with the parts that vary between
 * models (default system prompt, BOS, the system-prefix separator) read out of the template itself.
 *
 *   assay_chat_template *ct;
 *   if (assay_chat_template_parse(&ct, template_text, "<bos>", "<eos>") != ASSAY_OK)
 *       fprintf(stderr, "%s\n", assay_last_error());   // "chat template not supported: Qwen3 (<think> ...)"
 *   const assay_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
 *   assay_strbuf prompt = {0};
 *   assay_chat_template_render(ct, msgs, 2, 1, &prompt);  // 1: add the generation prompt
 *   ... tokenize prompt.data with ASSAY_TOK_PARSE_SPECIAL (and without ASSAY_TOK_ADD_SPECIAL when the
 *       template writes BOS itself: assay_chat_template_writes_bos) ...
 *   assay_chat_template_free(ct);
 *
 * Supported families (the output equals the Jinja rendering of the model's template; tests/py/
 * test_chat_template.py checks it with jinja2 as transformers configures it):
 *   chatml   <|im_start|>role\ncontent<|im_end|>\n   (SmolLM2, Qwen2, Qwen2.5 without tools), with the
 *            template's default system prompt when the conversation has none
 *   llama3   <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>  (Llama 3 / 3-style, no date block)
 *   gemma    <start_of_turn>user|model\n...<end_of_turn>\n  (Gemma 1/2/3; Gemma 3 folds the system message
 *            into the first user turn)
 *   llama2   [INST] <<SYS>>...<</SYS>> ... [/INST]   and   mistral  [INST] ... [/INST] (Mistral v0.1 style)
 * Anything else fails with ASSAY_ERR_UNSUPPORTED naming what the template looks like.
 */
#ifndef ASSAY_CHAT_TEMPLATE_H
#define ASSAY_CHAT_TEMPLATE_H

#include <stdint.h>

#include "assay/status.h"
#include "assay/strbuf.h"

typedef struct assay_gguf assay_gguf;

typedef struct assay_chat_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} assay_chat_message;

typedef struct assay_chat_template assay_chat_template;

/* Recognises `text` (a model's Jinja chat template). bos/eos: the texts of the model's BOS/EOS tokens
 * (templates write them as {{ bos_token }} / eos_token); NULL for none. */
assay_status assay_chat_template_parse(assay_chat_template **out, const char *text, const char *bos, const char *eos);
/* A family by name ("chatml", "llama3", "gemma", "llama2", "mistral"), for models without a template. */
assay_status assay_chat_template_builtin(assay_chat_template **out, const char *name, const char *bos, const char *eos);
/* tokenizer.chat_template of a GGUF file, with BOS/EOS texts from its vocabulary. */
assay_status assay_chat_template_from_gguf(assay_chat_template **out, const assay_gguf *g);
void assay_chat_template_free(assay_chat_template *ct);

/* The family name ("chatml", ...). */
const char *assay_chat_template_name(const assay_chat_template *ct);
/* Whether the rendered text starts with the BOS token text (then do not add BOS again when tokenizing). */
int assay_chat_template_writes_bos(const assay_chat_template *ct);

/* Appends the rendered conversation. Fails with ASSAY_ERR_ARG where the template would raise an exception
 * (roles not alternating, a system message the template does not accept), with the template's message. */
assay_status assay_chat_template_render(const assay_chat_template *ct, const assay_chat_message *msgs, int64_t n,
                                        int add_generation_prompt, assay_strbuf *out);

#endif
