/* model_file_gguf.c — the GGUF side of model_file (see model_file.c for the HF side). */
#include "model_file_internal.h"

assay_status assay_model_file_open_gguf_(assay_model_file *mf) {
    /* Replaced once the GGUF reader lands (src/io/gguf.c). */
    return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: GGUF models are not readable yet", mf->path);
}

void assay_model_file_close_gguf_(assay_model_file *mf) { mf->gguf = NULL; }
