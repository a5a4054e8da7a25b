/* fuzz_chat_template.c — libFuzzer harness for the chat templates (src/tokenizer/chat_template.c): the template
 * text a model file carries (recognised by signature, with its default system prompt, trim and separator read
 * out of it) and the conversation rendered with it.
 *   bash scripts/fuzz.sh 300      (seeds: fuzz/corpus/fuzz_chat_template; dictionary: fuzz/fuzz_chat_template.dict)
 * Input: byte 0 is the mode (bit 0: add the generation prompt; bits 1-3: 0-4 a built-in family by name, 5-7 parse
 * the template text), then NUL-separated fields: template, BOS text, EOS text, then role and content of each
 * message (at most 32; a missing BOS/EOS field is NULL, a role without content is a message without content).
 * Checks: recognition succeeds with a family name or fails with a message; rendering appends to what the buffer
 * held, NUL-terminated, and on failure (ASSAY_ERR_ARG, with a message) leaves the buffer as it was; rendering twice
 * gives the same text; the generation prompt ends the text where the family has one; an untrimmed ChatML
 * conversation carries every role and content as given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assay/chat_template.h"
#include "assay/strbuf.h"

#define FAIL() __builtin_trap()
#define MAX_MSGS 32

static const char *families[] = {"chatml", "llama3", "gemma", "llama2", "mistral"};

/* The next NUL-terminated field of [*p, end), or NULL when the input is used up. */
static const char *field(const char **p, const char *end) {
    if (*p >= end) return NULL;
    const char *s = *p;
    const char *z = memchr(s, 0, (size_t)(end - s));
    *p = z ? z + 1 : end;
    return s;
}

static int ends_with(const assay_strbuf *b, const char *s) {
    size_t n = strlen(s);
    return b->len >= n && memcmp(b->data + b->len - n, s, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* a NUL-terminated copy, so every field is a C string */
    char *buf = malloc(size + 1);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    const char *p = buf, *end = buf + size - 1;
    int gen = data[0] & 1, mode = (data[0] >> 1) & 7;
    const char *text = field(&p, end);
    const char *bos = field(&p, end), *eos = field(&p, end);
    assay_chat_message m[MAX_MSGS];
    int64_t n = 0;
    while (n < MAX_MSGS && p < end) {
        m[n].role = field(&p, end);
        m[n].content = field(&p, end);
        n++;
    }

    assay_chat_template *ct = NULL;
    assay_status st = mode < 5 ? assay_chat_template_builtin(&ct, families[mode], bos, eos)
                               : assay_chat_template_parse(&ct, text ? text : "", bos, eos);
    if (st != ASSAY_OK) {
        if (ct || !assay_last_error()[0]) FAIL();
        free(buf);
        return 0;
    }
    const char *name = assay_chat_template_name(ct);
    int family = -1;
    for (int f = 0; f < 5; f++)
        if (strcmp(name, families[f]) == 0) family = f;
    if (family < 0 || (mode < 5 && family != mode)) FAIL();

    static const char prefix[] = "earlier text|";
    assay_strbuf out = {0}, again = {0};
    assay_strbuf_puts(&out, prefix);
    st = assay_chat_template_render(ct, m, n, gen, &out);
    if (out.len < sizeof prefix - 1 || memcmp(out.data, prefix, sizeof prefix - 1) != 0 || strlen(out.data) != out.len) FAIL();
    if (st != ASSAY_OK) {
        if (st != ASSAY_ERR_ARG || !assay_last_error()[0] || out.len != sizeof prefix - 1) FAIL();
    } else {
        if (assay_chat_template_render(ct, m, n, gen, &again) != ASSAY_OK || !again.data ||
            again.len != out.len - (sizeof prefix - 1) || memcmp(again.data, out.data + sizeof prefix - 1, again.len) != 0)
            FAIL();
        if (gen && family == 0 && !ends_with(&out, "<|im_start|>assistant\n")) FAIL();
        if (gen && family == 1 && !ends_with(&out, "<|start_header_id|>assistant<|end_header_id|>\n\n")) FAIL();
        if (gen && family == 2 && !ends_with(&out, "<start_of_turn>model\n")) FAIL();
        if (family == 0 && mode < 5) /* the built-in ChatML: no trim, no default system prompt */
            for (int64_t i = 0; i < n; i++)
                if (!strstr(out.data, m[i].role) || !strstr(out.data, m[i].content)) FAIL();
        if (assay_chat_template_writes_bos(ct) && family != 3 && !(family == 1 && n == 0) &&
            strncmp(out.data + sizeof prefix - 1, bos, strlen(bos)) != 0)
            FAIL();
    }
    assay_strbuf_free(&out);
    assay_strbuf_free(&again);
    assay_chat_template_free(ct);
    free(buf);
    return 0;
}
