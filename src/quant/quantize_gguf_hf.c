/* quantize_gguf_hf.c — GGUF metadata for HF sources. Stub until convert's metadata writer is available. */
#include "quantize_gguf_internal.h"

assay_status assay_ggml_hf_metadata(assay_gguf_writer *w, const assay_model_file *mf, int file_type) {
    (void)w;
    (void)file_type;
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: GGUF output from an HF directory needs the HF->GGUF metadata "
                      "converter; convert the model to GGUF first (assay convert)", assay_model_file_path(mf));
}
