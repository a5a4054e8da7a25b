/* quantize_gguf_internal.h — helpers shared by the quantization drivers in src/quant. */
#ifndef ASSAY_QUANTIZE_GGUF_INTERNAL_H
#define ASSAY_QUANTIZE_GGUF_INTERNAL_H

#include "assay/ggml_quant.h"
#include "assay/gguf.h"
#include "assay/model_file.h"

/* Tensor t as float32 (dequantized, HF Q/K rows permuted to GGUF order). dst holds nelements floats. */
assay_status assay_tensor_read_f32(const assay_tensor *t, float *dst);
/* assay_ggml_quantize with rows split over `threads` threads (<= 0: every core). */
assay_status assay_ggml_quantize_threaded(assay_type type, const float *src, void *dst, int64_t nrow,
                                          int64_t n_per_row, const float *imatrix, int threads);
/* GGUF metadata of an HF source model (convert's keys). */
assay_status assay_ggml_hf_metadata(assay_gguf_writer *w, const assay_model_file *mf, int file_type);

#endif
