/* quantize_gguf_hf.c — GGUF metadata for HF sources: the same keys `assay convert` writes. */
#include "assay/convert.h"
#include "quantize_gguf_internal.h"

assay_status assay_ggml_hf_metadata(assay_gguf_writer *w, const assay_model_file *mf, int file_type) {
    return assay_convert_gguf_metadata(w, mf, file_type);
}
