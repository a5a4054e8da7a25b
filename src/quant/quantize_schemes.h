/* quantize_schemes.h — the functions behind the rows of assay_quantize_schemes[] (src/quant/quantize.c).
 * Each scheme family declares its entry points here; see quantize.h for the contract. Not a public header. */
#ifndef ASSAY_QUANTIZE_SCHEMES_H
#define ASSAY_QUANTIZE_SCHEMES_H

#include "assay/quantize.h"
#include "assay/model_file.h"
#include "assay/safetensors.h"

/* ---- helpers shared by the HF-directory writers (quantize.c) ---- */

/* 1 for the Linear weights of a decoder block (blk.N.attn_q/k/v/output, ffn_gate/up/down .weight). */
int assay_quantize_is_block_linear(const char *canonical_name);
/* N of "blk.N.*", -1 for tensors outside the blocks. */
int64_t assay_quantize_layer_of(const char *canonical_name);
/* The tensor's elements as f32 in file order (HF rows as stored, no Q/K permutation); f32/f16/bf16 only, else an
 * error naming `scheme`. */
assay_status assay_quantize_tensor_f32(const assay_tensor *t, float *dst, const char *scheme);
/* Buffers a safetensors writer references (it does not copy) until the file is written. */
typedef struct assay_quantize_keep {
    void **p;
    int n, cap;
} assay_quantize_keep;
void *assay_quantize_keep_add(assay_quantize_keep *k, void *p);
void assay_quantize_keep_free(assay_quantize_keep *k);
/* "model.layers.0.mlp.up_proj.weight" + ".weight_scale" -> "model.layers.0.mlp.up_proj.weight_scale", kept in k. */
char *assay_quantize_module_name(assay_quantize_keep *k, const char *weight_name, const char *suffix);
/* Adds the tensor to the writer as stored (its source name, dtype and bytes); an error naming the file and tensor
 * when its type has no safetensors dtype (a GGUF block type). */
assay_status assay_quantize_copy_tensor(assay_safetensors_writer *w, const assay_tensor *t);
/* Quantizes one block linear into the writer (its tensors kept alive in k). */
typedef assay_status (*assay_quantize_linear_fn)(void *ctx, assay_safetensors_writer *w, assay_quantize_keep *k,
                                                 const assay_tensor *t);
/* The per-layer loop every compressed-tensors writer shares: walks the tensors layer by layer (one progress step a
 * layer, then those outside the blocks), hands each block linear that is not --ignore'd to `quantize`, copies the
 * rest as stored, and writes <od>/model.safetensors. *ignored / *n_ignored get the module names of the Linears left
 * unquantized (for the config's ignore list; "lm_head" when the embeddings are tied); the caller frees the array. */
assay_status assay_quantize_write_weights(const assay_model_file *mf, const assay_quantize_options *opt,
                                          const assay_quantize_outdir *od, assay_quantize_keep *keep,
                                          assay_quantize_linear_fn quantize, void *ctx, char ***ignored,
                                          int *n_ignored);
/* Writes <src_dir>/config.json to dst_path with every key kept in order (numbers keep their spelling), keys[i]
 * set to the JSON text values[i] (replaced in place, or appended); n <= 16. Refuses a source that already has a
 * quantization_config when one of the keys is "quantization_config". */
assay_status assay_quantize_write_hf_config(const char *src_dir, const char *dst_path, const char *const *keys,
                                            const char *const *values, int n);

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

/* mxfp4 / nvfp4 weights to a compressed-tensors mxfp4-pack-quantized / nvfp4-pack-quantized directory
 * (quantize_fp4.c). `param` is an assay_fp4_scheme_param. */
enum assay_fp4_scheme_param { ASSAY_FP4_SCHEME_NVFP4 = 0, ASSAY_FP4_SCHEME_MXFP4 = 1 };
assay_status assay_quantize_fp4(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                const assay_quantize_options *opt, const char *out_path);

/* An unquantized HF directory (quantize_rotate.c): `param` is ASSAY_TYPE_F32 or ASSAY_TYPE_BF16. With --rotate
 * this writes the rotated model itself. */
/* Writes the model rotated as --rotate asks (opt->rotate, opt->seed) into the existing directory `dir`, as an
 * f32 HF checkpoint (with source_dtype_outside_linears: embeddings, lm_head and norms in a bf16 source's dtype);
 * assay_quantize then runs the scheme on that directory. */
assay_status assay_quantize_rotated_model(const assay_model_file *mf, const assay_quantize_options *opt,
                                          const char *dir, int source_dtype_outside_linears);
assay_status assay_quantize_plain(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                  const assay_quantize_options *opt, const char *out_path);

/* --kv-cache-scheme fp8 and the `none` scheme (quantize_kv.c). */
assay_status assay_quantize_none(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                 const assay_quantize_options *opt, const char *out_path);
/* Per-layer k_scale / v_scale (amax / 448 of post-RoPE K and of V over the calibration chunks), [n_layer] each. */
assay_status assay_quantize_kv_calibrate(const assay_model_file *mf, const assay_quantize_options *opt,
                                         float *k_scale, float *v_scale);
/* Adds model.layers.N.self_attn.k_scale / v_scale to dir/model.safetensors and kv_cache_scheme to config.json. */
assay_status assay_quantize_kv_write(const char *dir, int64_t n_layer, const float *k_scale, const float *v_scale);

#endif
