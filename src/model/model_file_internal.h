/* model_file_internal.h — the model_file struct, shared by the HF loader (model_file.c) and the GGUF loader
 * (model_file_gguf.c). Not a public header. */
#ifndef ASSAY_MODEL_FILE_INTERNAL_H
#define ASSAY_MODEL_FILE_INTERNAL_H

#include "assay/json.h"
#include "assay/model_file.h"
#include "assay/safetensors.h"

struct assay_model_file {
    assay_model_format format;
    char *path;
    assay_model_config config;
    int64_t n_tensors;
    assay_tensor *tensors;          /* in source order */
    const assay_tensor **by_name;   /* sorted by canonical name */
    char **owned;                   /* strings the tensors point at */
    int64_t n_owned;
    assay_safetensors_set *st;      /* HF */
    assay_gguf *gguf;               /* GGUF */
    char *tokenizer_json;
    char *chat_template;
    assay_json_doc *config_doc;     /* HF: config.json, kept for quantization_config */
    const assay_json *quant_config; /* HF: its "quantization_config" object, or NULL */
    assay_type torch_dtype;         /* HF: config.json's torch_dtype / dtype; ASSAY_TYPE_COUNT: not given */
    int config_only;                /* assay_model_file_open_config: no tensors were read */
};

/* Keeps `s` until close and returns it. */
const char *assay_model_file_own_(assay_model_file *mf, char *s);
/* Fills mf from the GGUF file at mf->path (format, config, tensors, chat template). */
assay_status assay_model_file_open_gguf_(assay_model_file *mf);
void assay_model_file_close_gguf_(assay_model_file *mf);

#endif
