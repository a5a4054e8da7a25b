/* engine_lm.c — the bridge from the inference engine to assay_lm, and the engine-flag text used by decide.
 * The engine (model forward pass + tokenizer) is built in src/model and src/tokenizer; until it is part of the
 * build, opening a model says so instead of producing numbers. */
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"

assay_status assay_eval_lm_open(const char *model, const assay_engine_flags *flags, assay_lm **out) {
    (void)flags;
    *out = NULL;
    return assay_fail(ASSAY_ERR_UNSUPPORTED,
                      "%s: the inference engine (tokenizer + forward pass) is not part of this build yet, so no "
                      "model can be scored; nothing was measured (--dump-requests works without a model)",
                      model);
}

void assay_eval_lm_close(assay_lm *lm) { (void)lm; }

assay_status assay_engine_flags_parse(const char *text, assay_engine_flags *f, char **storage) {
    memset(f, 0, sizeof *f);
    char *s = assay_xstrdup(text ? text : "");
    *storage = s;
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *val = strchr(tok, '=');
        if (val) *val++ = 0;
        else val = strtok_r(NULL, " \t", &save);
        if (!val) return assay_fail(ASSAY_ERR_ARG, "engine flag %s needs a value", tok);
        char *end = NULL;
        if (strcmp(tok, "--device") == 0) f->device = val;
        else if (strcmp(tok, "--quantization") == 0 || strcmp(tok, "-q") == 0) f->quantization = val;
        else if (strcmp(tok, "--kv-cache-dtype") == 0) f->kv_cache_dtype = val;
        else if (strcmp(tok, "--threads") == 0 || strcmp(tok, "-t") == 0) {
            f->threads = strtoll(val, &end, 10);
            if (!*val || *end || f->threads < 1) return assay_fail(ASSAY_ERR_ARG, "--threads wants a positive integer, got '%s'", val);
        } else if (strcmp(tok, "--max-model-len") == 0) {
            f->max_model_len = strtoll(val, &end, 10);
            if (!*val || *end || f->max_model_len < 2) return assay_fail(ASSAY_ERR_ARG, "--max-model-len wants an integer >= 2, got '%s'", val);
        } else
            return assay_fail(ASSAY_ERR_ARG,
                              "unknown engine flag '%s' (known: --device, --quantization, --kv-cache-dtype, --threads, "
                              "--max-model-len)",
                              tok);
    }
    return ASSAY_OK;
}

void assay_engine_flags_format(const assay_engine_flags *f, assay_strbuf *out) {
    const char *sep = "";
    if (f->device) assay_strbuf_printf(out, "%s--device %s", sep, f->device), sep = " ";
    if (f->quantization) assay_strbuf_printf(out, "%s--quantization %s", sep, f->quantization), sep = " ";
    if (f->kv_cache_dtype) assay_strbuf_printf(out, "%s--kv-cache-dtype %s", sep, f->kv_cache_dtype), sep = " ";
    if (f->threads) assay_strbuf_printf(out, "%s--threads %lld", sep, (long long)f->threads), sep = " ";
    if (f->max_model_len) assay_strbuf_printf(out, "%s--max-model-len %lld", sep, (long long)f->max_model_len), sep = " ";
    if (!out->data) assay_strbuf_puts(out, "");
}
