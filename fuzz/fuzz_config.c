/* fuzz_config.c — libFuzzer harness for the config.json loader (JSON parse + hyper-parameter checks) and the
 * HF <-> GGUF tensor-name map.   bash scripts/fuzz.sh 300   (seeds: fuzz/seeds_fuzz_config.sh) */
#include <stdint.h>
#include <string.h>

#include "assay/hf_config.h"
#include "assay/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    assay_json_doc *doc;
    if (assay_json_parse((const char *)data, size, &doc) != ASSAY_OK) return 0;
    assay_model_config c;
    if (assay_model_config_from_hf_json(&c, assay_json_root(doc), "fuzz") == ASSAY_OK) {
        /* The loader promises these invariants to the engine. */
        if (c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.n_head % c.n_head_kv || c.head_dim <= 0 ||
            c.head_dim % 2 || !(c.rope_theta > 0) || c.arch[sizeof c.arch - 1] != 0)
            __builtin_trap();
    }
    /* Every string in the document doubles as a tensor name for the name map. */
    const assay_json *root = assay_json_root(doc);
    if (root && (root->type == ASSAY_JSON_OBJECT || root->type == ASSAY_JSON_ARRAY)) {
        char out[64], back[64];
        for (const assay_json *v = root->first; v; v = v->next) {
            const char *s = v->key ? v->key : assay_json_string(v, NULL);
            if (!s) continue;
            if (assay_hf_to_gguf_name(s, "llama", out, sizeof out)) {
                if (!assay_gguf_to_hf_name(out, "llama", back, sizeof back) || strcmp(back, s) != 0) __builtin_trap();
            }
            assay_gguf_to_hf_name(s, "gemma3", out, sizeof out);
        }
    }
    assay_json_doc_free(doc);
    return 0;
}
