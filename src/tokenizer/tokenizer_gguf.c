/* tokenizer_gguf.c — placeholder until the GGUF reader (src/format/gguf.c) is on main. */
#include "tokenizer/tok_internal.h"

assay_status assay_tokenizer_from_gguf(assay_tokenizer **out, const assay_gguf *g) {
    (void)g;
    *out = NULL;
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "tokenizer: GGUF loading is not built yet");
}

assay_status tok_load_gguf_path(assay_tokenizer **out, const char *path) {
    *out = NULL;
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: GGUF tokenizers are not built yet", path);
}
