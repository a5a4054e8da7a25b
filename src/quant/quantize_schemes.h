/* quantize_schemes.h — the functions behind the rows of assay_quantize_schemes[] (src/quant/quantize.c).
 * Each scheme family declares its entry points here; see quantize.h for the contract. Not a public header. */
#ifndef ASSAY_QUANTIZE_SCHEMES_H
#define ASSAY_QUANTIZE_SCHEMES_H

#include "assay/quantize.h"

/* FP8 to a compressed-tensors safetensors directory (quantize_fp8.c). `param` is an assay_fp8_scheme_param. */
enum assay_fp8_scheme_param {
    ASSAY_FP8_SCHEME_TENSOR = 0,  /* per-tensor weights, static per-tensor activations (calibrated) */
    ASSAY_FP8_SCHEME_CHANNEL = 1, /* per-channel weights, dynamic per-token activations */
    ASSAY_FP8_SCHEME_BLOCK = 2,   /* 128x128 weight blocks, dynamic 1x128 activation groups */
    ASSAY_FP8_SCHEME_E5M2 = 16,   /* flag: E5M2 instead of E4M3 */
};
assay_status assay_quantize_fp8(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                const assay_quantize_options *opt, const char *out_path);

/* GGUF under one of llama.cpp's mixes (quantize_kquant.c). `param` is an assay_ggml_ftype. */
assay_status assay_quantize_gguf(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                 const assay_quantize_options *opt, const char *out_path);
/* int4-rtn / int4-gptq / int4-awq / w8a8-int8 (quantize_kquant.c). `param` is an assay_intq_method. */
assay_status assay_quantize_int(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                const assay_quantize_options *opt, const char *out_path);

#endif
