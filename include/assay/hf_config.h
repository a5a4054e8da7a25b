/* hf_config.h — model hyper-parameters from a Hugging Face config.json or from GGUF metadata, into one
 * assay_model_config (model_file.h), plus the tensor-name map between the two worlds.
 *
 *   assay_model_config c;
 *   if (assay_model_config_from_hf_file(&c, "models/house/config.json") != ASSAY_OK) ...
 *   if (assay_model_config_from_gguf(&c, gguf) != ASSAY_OK) ...      // <arch>.block_count, ...
 *   char gguf_name[96];
 *   assay_hf_to_gguf_name("model.layers.3.self_attn.q_proj.weight", "llama", gguf_name, sizeof gguf_name);
 *   // -> "blk.3.attn_q.weight"
 *
 * Supported families: llama, mistral (a llama in GGUF), qwen2, qwen3, and gemma3's text config. Both the
 * classic `rope_theta` + `rope_scaling` keys and the newer `rope_parameters` object are read; llama3 RoPE
 * scaling (factor, low/high_freq_factor, original_max_position_embeddings), linear and yarn are recognised.
 * Missing hyper-parameters that are required (layers, hidden size, heads) are a format error naming the key.
 */
#ifndef ASSAY_HF_CONFIG_H
#define ASSAY_HF_CONFIG_H

#include <stddef.h>

#include "assay/gguf.h"
#include "assay/json.h"
#include "assay/model_file.h"
#include "assay/status.h"

/* `label` names the source in error messages. */
assay_status assay_model_config_from_hf_json(assay_model_config *c, const assay_json *root, const char *label);
assay_status assay_model_config_from_hf_file(assay_model_config *c, const char *config_json_path);
assay_status assay_model_config_from_gguf(assay_model_config *c, const assay_gguf *g);

/* The GGUF architecture name llama.cpp uses for a config arch ("mistral" -> "llama"). */
const char *assay_model_config_gguf_arch(const assay_model_config *c);
/* The HF model_type / architectures class for writing config.json ("llama", "LlamaForCausalLM"). */
const char *assay_model_config_hf_class(const assay_model_config *c);

/* HF tensor name -> canonical GGUF name. Returns 1 and writes `out` when the name maps, 0 when it has no
 * GGUF counterpart (e.g. rotary_emb.inv_freq, which llama.cpp drops). `arch` is the config arch. */
int assay_hf_to_gguf_name(const char *hf_name, const char *arch, char *out, size_t out_size);
/* The inverse, for writing an HF directory from GGUF. */
int assay_gguf_to_hf_name(const char *gguf_name, const char *arch, char *out, size_t out_size);

#endif
