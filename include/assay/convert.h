/* convert.h — HF safetensors directory <-> GGUF, with llama.cpp's names so each side's tools load the result.
 *
 *   assay_model_file *mf;  assay_model_file_open(&mf, "models/house");
 *   assay_convert_options o = {.dtype = ASSAY_TYPE_COUNT, .overwrite = 0};     // COUNT: keep each tensor's type
 *   assay_convert_hf_to_gguf(mf, "house.gguf", &o);
 *   ...
 *   assay_model_file_open(&g, "house.gguf");
 *   assay_convert_gguf_to_hf(g, "house-hf", &o);   // config.json, tokenizer.json, tokenizer_config.json, model.safetensors
 *
 * HF -> GGUF writes what convert_hf_to_gguf.py writes for the llama family: general.architecture, the
 * <arch>.* hyper-parameters, tokenizer.ggml.* (model "gpt2" for byte-level BPE tokenizer.json: tokens,
 * token_type, merges, bos/eos/pad ids, add_bos/add_eos, the pre-tokenizer name, the chat template), llama3
 * RoPE scaling as the rope_freqs.weight tensor, and the tensors under GGUF names with llama's Q/K rows
 * permuted. Matrix bytes are copied unchanged unless `dtype` asks for f32/f16/bf16; vectors (norms, biases)
 * are stored as f32 like convert_hf_to_gguf.py does (exact), unless keep_types.
 * GGUF -> HF undoes all of that: HF names, [out, in] shapes, un-permuted Q/K, f32 vectors back in the
 * matrices' type when every value converts exactly (so HF -> GGUF -> HF is bit-exact), config.json values formatted
 * so float32 metadata reads back as the decimal it came from (1e-05, not 9.99999974737875e-06), and a
 * tokenizer.json rebuilt from tokenizer.ggml.* for the gpt2 model with a known pre-tokenizer.
 * Outputs are written to temporary names and renamed into place.
 */
#ifndef ASSAY_CONVERT_H
#define ASSAY_CONVERT_H

#include "assay/gguf.h"
#include "assay/model_file.h"
#include "assay/status.h"
#include "assay/weight_type.h"

typedef struct assay_convert_options {
    assay_type dtype; /* ASSAY_TYPE_F32/F16/BF16 to convert float tensors; ASSAY_TYPE_COUNT keeps them */
    int overwrite;    /* replace existing outputs */
    int quiet;        /* no notes on stderr */
    int vocab_only;   /* GGUF -> HF: only tokenizer.json + tokenizer_config.json */
    int keep_types;   /* HF -> GGUF: keep vectors in their stored type (byte-identical, but llama.cpp's CPU
                         backend cannot run bf16 norms); default: vectors become f32, as llama.cpp writes */
} assay_convert_options;

assay_status assay_convert_hf_to_gguf(const assay_model_file *mf, const char *out_path, const assay_convert_options *o);
assay_status assay_convert_gguf_to_hf(const assay_model_file *mf, const char *out_dir, const assay_convert_options *o);

/* The hyper-parameter and tokenizer metadata of an HF model in llama.cpp's GGUF keys (no tensors): for any
 * tool that writes a GGUF from an HF directory (quantize too). `file_type` is general.file_type (llama_ftype). */
assay_status assay_convert_gguf_metadata(assay_gguf_writer *w, const assay_model_file *mf, int file_type);

#endif
