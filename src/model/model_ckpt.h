/* model_ckpt.h — quantized HF checkpoints in the engine (model.h, "Quantized checkpoints"): the table that maps
 * config.json's quantization_config to a loader, and the activation fake-quantization a loader asks for.
 * Not a public header: model.c is its only user.
 *
 * Adding a format (e.g. compressed-tensors "nvfp4-pack-quantized") is one row in assay_ckpt_loaders[]
 * (model_ckpt.c) and one linear function:
 *   {"compressed-tensors", "nvfp4-pack-quantized", "compressed-tensors nvfp4", ct_parse, nvfp4_linear},
 * where nvfp4_linear reads "<module>.weight_packed" / ".weight_scale" / ... with assay_ckpt_tensor(), writes the
 * dequantized weight and names the activation treatment (a new assay_act_quant_kind + its case in
 * assay_act_quant_apply when the activations are quantized too).
 */
#ifndef ASSAY_MODEL_CKPT_H
#define ASSAY_MODEL_CKPT_H

#include <stdint.h>

#include "assay/json.h"
#include "assay/model_file.h"
#include "assay/status.h"
#include "assay/act_quant.h"
#include "assay/weight_type.h"



typedef struct assay_ckpt_loader assay_ckpt_loader;

/* A detected quantized checkpoint: its loader row and what the row's parse function read from the config. */
typedef struct assay_ckpt {
    const assay_ckpt_loader *loader;
    const assay_model_file *mf;
    /* filled by the row's parse function; each row uses the fields it needs */
    int64_t group_size;      /* GPTQ / AWQ groups along the input (-1: one per row) */
    int zero_offset;         /* GPTQ: 1 for the "gptq" (v1) checkpoint format, 0 for "gptq_v2" */
    int int4_asym;           /* compressed-tensors pack-quantized: weight_zero_point stored (symmetric: zero 0) */
    int weight_strategy;     /* compressed-tensors: 0 tensor, 1 channel, 2 block */
    int64_t block[2];        /* compressed-tensors block_structure (rows, cols) */
    assay_act_quant act;     /* compressed-tensors input_activations (static: the scale comes per layer) */
    int int4_f32;            /* GPTQ / AWQ: dequantize to f32 instead of packing (ASSAY_INT4_F32=1: comparisons) */
} assay_ckpt;

/* Where a loader puts one linear weight. The caller provides f32 (room for [n_out][n_in]); a loader whose format
 * the CPU kernels run packed (GPTQ / AWQ int4) sets type and data instead, and perm when it reordered the inputs. */
typedef struct assay_ckpt_weight {
    float *f32;       /* in: [n_out][n_in] for a dequantized weight (type ASSAY_TYPE_F32) */
    assay_type type;  /* out: ASSAY_TYPE_F32 (f32 written) or a packed type (data) */
    void *data;       /* out: n_out rows of `type`, malloc'ed, owned by the caller from then on */
    int32_t *perm;    /* out: NULL, or [n_in] (malloc'ed, caller-owned): packed input column c reads x[perm[c]] */
    char note[200];   /* out: why a weight of a packed format was dequantized to f32 instead ("" otherwise) */
} assay_ckpt_weight;

/* Reads the config into ck. */
typedef assay_status (*assay_ckpt_parse_fn)(assay_ckpt *ck, const assay_json *qc);
/* One linear layer, `module` canonical without ".weight" ("blk.0.attn_q", "output"). Sets *found = 0 when the
 * checkpoint stores this layer unquantized (an ordinary float ".weight"; the caller loads it as usual). Otherwise
 * fills *w (w->f32 [n_out][n_in], or packed rows; the file's row order: no llama Q/K permutation) and *act. */
typedef assay_status (*assay_ckpt_linear_fn)(const assay_ckpt *ck, const char *module, int64_t n_in, int64_t n_out,
                                             assay_ckpt_weight *w, assay_act_quant *act, int *found);

struct assay_ckpt_loader {
    const char *quant_method; /* quantization_config.quant_method */
    const char *format;       /* quantization_config.format (compressed-tensors); NULL: any */
    const char *label;        /* for messages and the load note */
    assay_ckpt_parse_fn parse;
    assay_ckpt_linear_fn linear;
};

/* Terminated by a row whose quant_method is NULL. */
extern const assay_ckpt_loader assay_ckpt_loaders[];

/* Detects the checkpoint's format. ck->loader = NULL for an unquantized model (or a GGUF file); an error names the
 * quantization_config this engine cannot run. */
assay_status assay_ckpt_open(assay_ckpt *ck, const assay_model_file *mf);

/* "<module>.<suffix>" of the checkpoint, or NULL. */
const assay_tensor *assay_ckpt_tensor(const assay_ckpt *ck, const char *module, const char *suffix);

#endif
