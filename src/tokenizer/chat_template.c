/* chat_template.c — chat templates recognised by signature and rendered in C (see chat_template.h). Each
 * renderer reproduces what its family's Jinja template outputs, including where it trims content (Jinja's
 * `trim` / Python's str.strip(): Unicode whitespace at both ends) and where it raises. */
#include <stdlib.h>
#include <string.h>

#include "assay/chat_template.h"
#include "assay/gguf.h"

typedef enum chat_family { CHAT_CHATML, CHAT_LLAMA3, CHAT_GEMMA, CHAT_LLAMA2, CHAT_MISTRAL } chat_family;

struct assay_chat_template {
    chat_family family;
    char *bos, *eos;
    int writes_bos;        /* the template starts with {{ bos_token }} (or writes it per turn) */
    char *default_system;  /* chatml: system prompt used when the conversation has none (NULL: none) */
    int trim;              /* chatml: content | trim */
    char *system_sep;      /* gemma: text after the folded system message; NULL: system role raises */
};

static const char *family_names[] = {"chatml", "llama3", "gemma", "llama2", "mistral"};

static int has(const char *text, const char *s) { return strstr(text, s) != NULL; }

/* Python str.isspace() for the code point at s (length in *len), for trim. */
static int space_at(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) {
        *len = 1;
        return (u[0] >= 0x09 && u[0] <= 0x0d) || (u[0] >= 0x1c && u[0] <= 0x20);
    }
    if (n >= 2 && u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0)) return *len = 2, 1;
    if (n >= 3 && u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80) return *len = 3, 1;                  /* U+1680 */
    if (n >= 3 && u[0] == 0xe2 && u[1] == 0x80 && (u[2] <= 0x8a || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf))
        return *len = 3, 1;                                                                          /* U+2000..200A, 2028, 2029, 202F */
    if (n >= 3 && u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) return *len = 3, 1;                  /* U+205F */
    if (n >= 3 && u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80) return *len = 3, 1;                  /* U+3000 */
    return 0;
}

static void append_trimmed(assay_strbuf *b, const char *s) {
    size_t n = strlen(s), a = 0, l;
    while (a < n && space_at(s + a, n - a, &l)) a += l;
    size_t e;
    /* scan from the front to find the last non-space end (code points have variable length) */
    size_t i = a, last = a;
    while (i < n) {
        if (space_at(s + i, n - i, &l)) {
            i += l;
        } else {
            size_t cl = 1;
            unsigned char c = (unsigned char)s[i];
            if (c >= 0xf0) cl = 4;
            else if (c >= 0xe0) cl = 3;
            else if (c >= 0xc0) cl = 2;
            i += cl;
            if (i > n) i = n;
            last = i;
        }
    }
    e = last;
    assay_strbuf_append(b, s + a, e - a);
}

static void append_content(assay_strbuf *b, const char *s, int trim) {
    if (trim) append_trimmed(b, s);
    else assay_strbuf_puts(b, s);
}

/* Reads the Jinja string literal body starting at s (after the opening quote `q`) up to `end_marker`,
 * unescaping \n \t \' \" \\; returns NULL if the literal closes or has an expression before the marker. */
static char *literal_until(const char *s, char q, const char *end_marker) {
    assay_strbuf b = {0};
    size_t ml = strlen(end_marker);
    for (const char *p = s; *p; p++) {
        if (strncmp(p, end_marker, ml) == 0) {
            char *r = assay_xstrdup(b.data ? b.data : "");
            assay_strbuf_free(&b);
            return r;
        }
        if (*p == q) break;
        if (*p == '\\' && p[1]) {
            p++;
            char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            assay_strbuf_putc(&b, c);
        } else {
            assay_strbuf_putc(&b, *p);
        }
    }
    assay_strbuf_free(&b);
    return NULL;
}

/* chatml: the default system prompt, from a literal '<|im_start|>system\n...<|im_end|>\n' in the template. */
static char *chatml_default_system(const char *text) {
    static const char tag[] = "<|im_start|>system";
    for (const char *p = strstr(text, tag); p; p = strstr(p + 1, tag)) {
        if (p == text || (p[-1] != '\'' && p[-1] != '"')) continue;
        char q = p[-1];
        const char *c = p + sizeof tag - 1;
        if (*c == '\n') c++;
        else if (c[0] == '\\' && c[1] == 'n') c += 2;
        else continue;
        char *body = literal_until(c, q, "<|im_end|>");
        if (body && body[0]) return body;
        free(body);
    }
    return NULL;
}

/* gemma 3: `set first_user_prefix = messages[0]['content'] + '<sep>'` */
static char *gemma_system_sep(const char *text) {
    const char *p = strstr(text, "first_user_prefix = messages[0]['content'] + ");
    if (!p) p = strstr(text, "first_user_prefix = messages[0].content + ");
    if (!p) return NULL;
    p = strchr(p, '+') + 1;
    while (*p == ' ') p++;
    if (*p != '\'' && *p != '"') return NULL;
    char q = *p;
    /* the literal ends at the matching quote */
    assay_strbuf b = {0};
    for (p++; *p && *p != q; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            assay_strbuf_putc(&b, *p == 'n' ? '\n' : *p == 't' ? '\t' : *p);
        } else {
            assay_strbuf_putc(&b, *p);
        }
    }
    char *r = assay_xstrdup(b.data ? b.data : "");
    assay_strbuf_free(&b);
    return r;
}

static int starts_with_bos(const char *text) {
    while (*text == ' ' || *text == '\n') text++;
    return strncmp(text, "{{ bos_token }}", 15) == 0 || strncmp(text, "{{bos_token}}", 13) == 0 ||
           strncmp(text, "{{- bos_token }}", 16) == 0 || strncmp(text, "{{- bos_token -}}", 17) == 0;
}

static assay_chat_template *new_template(chat_family f, const char *bos, const char *eos) {
    assay_chat_template *ct = assay_xcalloc(1, sizeof *ct);
    ct->family = f;
    ct->bos = assay_xstrdup(bos ? bos : "");
    ct->eos = assay_xstrdup(eos ? eos : "");
    return ct;
}

assay_status assay_chat_template_parse(assay_chat_template **out, const char *text, const char *bos, const char *eos) {
    *out = NULL;
    if (!text || !*text) return assay_fail(ASSAY_ERR_UNSUPPORTED, "the model has no chat template; name one of chatml, llama3, gemma, llama2, mistral");
    assay_chat_template *ct = NULL;
    if (has(text, "<|im_start|>")) {
        if (has(text, "<think>")) return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: Qwen3-style ChatML with <think> reasoning blocks");
        if (has(text, "<|im_sep|>")) return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: Phi-4 (<|im_sep|>)");
        if (has(text, "<end_of_utterance>")) return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: SmolVLM (<end_of_utterance>)");
        ct = new_template(CHAT_CHATML, bos, eos);
        ct->default_system = chatml_default_system(text);
        ct->trim = has(text, "content'] | trim") || has(text, "content']|trim") || has(text, "content | trim") || has(text, ".strip()");
        ct->writes_bos = starts_with_bos(text);
    } else if (has(text, "<|start_header_id|>") && has(text, "<|end_header_id|>")) {
        if (has(text, "Cutting Knowledge Date") || has(text, "ipython"))
            return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: Llama 3.1+ (date and tools system block)");
        ct = new_template(CHAT_LLAMA3, bos, eos);
        ct->writes_bos = has(text, "bos_token");
    } else if (has(text, "<start_of_turn>")) {
        ct = new_template(CHAT_GEMMA, bos, eos);
        ct->system_sep = gemma_system_sep(text);
        ct->writes_bos = starts_with_bos(text);
    } else if (has(text, "[INST]")) {
        if (has(text, "<<SYS>>") && has(text, "' [/INST]'")) {
            ct = new_template(CHAT_LLAMA2, bos, eos);
            ct->writes_bos = 1;
        } else if (has(text, "'[INST] ' + message['content'] + ' [/INST]'") && !has(text, "[AVAILABLE_TOOLS]") && !has(text, "system_message")) {
            ct = new_template(CHAT_MISTRAL, bos, eos);
            ct->writes_bos = starts_with_bos(text);
        } else {
            return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: a Mistral [INST] variant (v0.3/v7/tekken/tools)");
        }
    } else if (has(text, "<|user|>") && has(text, "<|end|>")) {
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: Phi-3 (<|user|> ... <|end|>)");
    } else {
        char head[64];
        size_t n = strcspn(text, "\n");
        snprintf(head, sizeof head, "%.*s", (int)(n < 48 ? n : 48), text);
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "chat template not supported: unrecognised template beginning '%s'", head);
    }
    *out = ct;
    return ASSAY_OK;
}

assay_status assay_chat_template_builtin(assay_chat_template **out, const char *name, const char *bos, const char *eos) {
    *out = NULL;
    for (int f = 0; f < 5; f++) {
        if (strcmp(name, family_names[f]) != 0) continue;
        assay_chat_template *ct = new_template((chat_family)f, bos, eos);
        ct->writes_bos = f != CHAT_CHATML;
        if (f == CHAT_GEMMA) ct->system_sep = assay_xstrdup("\n\n");
        *out = ct;
        return ASSAY_OK;
    }
    return assay_fail(ASSAY_ERR_ARG, "unknown chat template '%s' (chatml, llama3, gemma, llama2, mistral)", name);
}

assay_status assay_chat_template_from_gguf(assay_chat_template **out, const assay_gguf *g) {
    *out = NULL;
    assay_gguf_str s;
    if (!assay_gguf_get_string(g, "tokenizer.chat_template", &s))
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the model has no chat template (tokenizer.chat_template)", assay_gguf_path(g));
    const assay_gguf_kv *toks = assay_gguf_find(g, "tokenizer.ggml.tokens");
    char *names[2] = {NULL, NULL};
    const char *keys[2] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
    for (int i = 0; i < 2; i++) {
        int64_t id = assay_gguf_get_int(g, keys[i], -1);
        if (toks && toks->type == ASSAY_GGUF_ARRAY && toks->array_type == ASSAY_GGUF_STRING && id >= 0 && (uint64_t)id < toks->array_len) {
            assay_gguf_str t = assay_gguf_array_str(toks, (uint64_t)id);
            names[i] = assay_xmalloc((size_t)t.len + 1);
            memcpy(names[i], t.ptr, (size_t)t.len);
            names[i][t.len] = 0;
        }
    }
    char *text = assay_xmalloc((size_t)s.len + 1);
    memcpy(text, s.ptr, (size_t)s.len);
    text[s.len] = 0;
    assay_status st = assay_chat_template_parse(out, text, names[0], names[1]);
    free(text);
    free(names[0]);
    free(names[1]);
    return st;
}

void assay_chat_template_free(assay_chat_template *ct) {
    if (!ct) return;
    free(ct->bos);
    free(ct->eos);
    free(ct->default_system);
    free(ct->system_sep);
    free(ct);
}

const char *assay_chat_template_name(const assay_chat_template *ct) { return family_names[ct->family]; }
int assay_chat_template_writes_bos(const assay_chat_template *ct) { return ct->writes_bos && ct->bos[0]; }

static int is_role(const assay_chat_message *m, const char *r) { return m->role && strcmp(m->role, r) == 0; }

static assay_status alternation_error(void) {
    return assay_fail(ASSAY_ERR_ARG, "Conversation roles must alternate user/assistant/user/assistant/...");
}

assay_status assay_chat_template_render(const assay_chat_template *ct, const assay_chat_message *m, int64_t n,
                                        int add_generation_prompt, assay_strbuf *b) {
    for (int64_t i = 0; i < n; i++)
        if (!m[i].role || !m[i].content) return assay_fail(ASSAY_ERR_ARG, "chat message %lld has no role or content", (long long)i);
    size_t start = b->len;
    switch (ct->family) {
    case CHAT_CHATML:
        if (ct->writes_bos) assay_strbuf_puts(b, ct->bos);
        for (int64_t i = 0; i < n; i++) {
            if (i == 0 && !is_role(&m[0], "system") && ct->default_system) {
                assay_strbuf_puts(b, "<|im_start|>system\n");
                assay_strbuf_puts(b, ct->default_system);
                assay_strbuf_puts(b, "<|im_end|>\n");
            }
            assay_strbuf_printf(b, "<|im_start|>%s\n", m[i].role);
            append_content(b, m[i].content, ct->trim);
            assay_strbuf_puts(b, "<|im_end|>\n");
        }
        if (add_generation_prompt) assay_strbuf_puts(b, "<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA3:
        for (int64_t i = 0; i < n; i++) {
            if (i == 0 && ct->writes_bos) assay_strbuf_puts(b, ct->bos);
            assay_strbuf_printf(b, "<|start_header_id|>%s<|end_header_id|>\n\n", m[i].role);
            append_trimmed(b, m[i].content);
            assay_strbuf_puts(b, "<|eot_id|>");
        }
        if (add_generation_prompt) assay_strbuf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_GEMMA: {
        int64_t first = 0;
        if (n > 0 && is_role(&m[0], "system")) {
            if (!ct->system_sep) {
                b->len = start;
                if (b->data) b->data[start] = 0;
                return assay_fail(ASSAY_ERR_ARG, "System role not supported");
            }
            first = 1;
        }
        if (ct->writes_bos) assay_strbuf_puts(b, ct->bos);
        for (int64_t i = first; i < n; i++) {
            int64_t k = i - first;
            if (is_role(&m[i], "user") != (k % 2 == 0)) {
                b->len = start;
                if (b->data) b->data[start] = 0;
                return alternation_error();
            }
            const char *role = is_role(&m[i], "assistant") ? "model" : m[i].role;
            assay_strbuf_puts(b, "<start_of_turn>");
            assay_strbuf_puts(b, role);
            assay_strbuf_putc(b, '\n');
            if (k == 0 && first) {
                assay_strbuf_puts(b, m[0].content);
                assay_strbuf_puts(b, ct->system_sep);
            }
            append_trimmed(b, m[i].content);
            assay_strbuf_puts(b, "<end_of_turn>\n");
        }
        if (add_generation_prompt) assay_strbuf_puts(b, "<start_of_turn>model\n");
        break;
    }
    case CHAT_LLAMA2: {
        int64_t first = n > 0 && is_role(&m[0], "system") ? 1 : 0;
        for (int64_t i = first; i < n; i++) {
            int64_t k = i - first;
            if (is_role(&m[i], "user") != (k % 2 == 0)) {
                b->len = start;
                if (b->data) b->data[start] = 0;
                return alternation_error();
            }
            assay_strbuf c = {0};
            if (k == 0 && first) {
                assay_strbuf_puts(&c, "<<SYS>>\n");
                assay_strbuf_puts(&c, m[0].content);
                assay_strbuf_puts(&c, "\n<</SYS>>\n\n");
            }
            assay_strbuf_puts(&c, m[i].content);
            if (is_role(&m[i], "user")) {
                assay_strbuf_puts(b, ct->bos);
                assay_strbuf_puts(b, "[INST] ");
                append_trimmed(b, c.data);
                assay_strbuf_puts(b, " [/INST]");
            } else if (is_role(&m[i], "assistant")) {
                assay_strbuf_puts(b, " ");
                append_trimmed(b, c.data);
                assay_strbuf_puts(b, " ");
                assay_strbuf_puts(b, ct->eos);
            }
            assay_strbuf_free(&c);
        }
        break;
    }
    case CHAT_MISTRAL:
        if (ct->writes_bos) assay_strbuf_puts(b, ct->bos);
        for (int64_t i = 0; i < n; i++) {
            if (is_role(&m[i], "user") != (i % 2 == 0)) {
                b->len = start;
                if (b->data) b->data[start] = 0;
                return alternation_error();
            }
            if (is_role(&m[i], "user")) {
                assay_strbuf_printf(b, "[INST] %s [/INST]", m[i].content);
            } else if (is_role(&m[i], "assistant")) {
                assay_strbuf_puts(b, m[i].content);
                assay_strbuf_puts(b, ct->eos);
            } else {
                b->len = start;
                if (b->data) b->data[start] = 0;
                return assay_fail(ASSAY_ERR_ARG, "Only user and assistant roles are supported!");
            }
        }
        break;
    }
    if (!b->data) assay_strbuf_append(b, "", 0);
    return ASSAY_OK;
}
