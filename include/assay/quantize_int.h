/* quantize_int.h — a whole HF model to INT4 (RTN / GPTQ / AWQ) or W8A8 INT8 (SmoothQuant) checkpoints.
 *
 *   assay_intq_options o;
 *   assay_intq_options_default(&o, ASSAY_INTQ_GPTQ);     // g128, asymmetric, act-order, damp 0.01, mse group ranges, 32 x 512 tokens
 *   o.calib_path = "../shared/data/calibration";
 *   assay_intq_quantize_model("../shared/models/house", "out-dir", &o, NULL);   // out-dir must exist
 *
 * Writes into out_dir: model.safetensors, config.json with "quantization_config", quantize_config.json (GPTQ),
 * and the tokenizer files of the source. Layouts (int_quant.h has the bit-level description):
 *   GPTQ: <prefix>.qweight / .qzeros / .scales / .g_idx, quant_method "gptq", checkpoint_format "gptq";
 *   AWQ:  <prefix>.qweight / .qzeros / .scales, quant_method "awq", version "gemm";
 *   W8A8: <prefix>.weight (I8 [out, in]) and .weight_scale (F32 [out, 1]), compressed-tensors "int-quantized"
 *         with per-channel weights and per-token dynamic activations.
 * The int4-rtn scheme uses the GPTQ layout (desc_act false). lm_head, embeddings and norms stay in the source
 * dtype (norms carry the folded AWQ/SmoothQuant scales). With fake_quant the linears are instead written back
 * as f32 dequantized weights in an ordinary HF checkpoint (for measuring quality with any float engine).
 */
#ifndef ASSAY_QUANTIZE_INT_H
#define ASSAY_QUANTIZE_INT_H

#include <stdint.h>

#include "assay/status.h"

typedef enum assay_intq_method { ASSAY_INTQ_RTN, ASSAY_INTQ_GPTQ, ASSAY_INTQ_AWQ, ASSAY_INTQ_W8A8 } assay_intq_method;

/* AWQ's clipping search: which linears it clips and which clamp ranges it tries (assay_awq_clip) */
typedef enum assay_awq_clip_mode {
    ASSAY_AWQ_CLIP_AUTOAWQ,   /* AutoAWQ: [−m, m] shrunk from max |w|; q/k not clipped (their error shows through q·k) */
    ASSAY_AWQ_CLIP_ALL,       /* the same ranges, q/k clipped on their own output error too */
    ASSAY_AWQ_CLIP_TWO_SIDED, /* every linear; the group's low and high ends shrunk independently */
} assay_awq_clip_mode;

typedef struct assay_intq_options {
    assay_intq_method method;
    int64_t group_size;     /* int4 groups along the input (default 128) */
    int act_order;          /* GPTQ desc_act with g_idx (default on) */
    int sym;                /* GPTQ symmetric grid (default off) */
    double damp;            /* GPTQ dampening (0.01) */
    float alpha;            /* SmoothQuant migration strength (0.5) */
    const char *calib_path; /* text file or directory; NULL: $ASSAY_SHARED/data/calibration */
    int64_t calib_chunks;   /* calibration chunks (32) */
    int64_t calib_seq_len;  /* tokens per chunk (512) */
    int64_t awq_tokens;     /* rows AWQ keeps per input for the clipping search and the MLP / down_proj scale losses
                               (4096; AutoAWQ's clipping uses 512) */
    int awq_grid;           /* AWQ scale grid points in [0, 1) (20) */
    int sequential;         /* GPTQ calibration: 0 one pass over the FP model, 1 one pass per layer on the model with
                               the earlier layers quantized (gptq.py), 2 one pass per distinct input, q/k/v -> o ->
                               gate/up -> down (its --true-sequential; default) */
    int seq_engine;         /* GPTQ sequential passes as truncated engine forwards from the embeddings (the route for
                               models whose layers assay_model_layer_* do not implement yet; for checking the
                               cached-input route against it) */
    int64_t awq_seqs;       /* calibration sequences AWQ scores its scale candidates on (0: all of them; with
                               awq_cached off, the attention-block loss keeps this many, 0 meaning 8) */
    int awq_block_loss;     /* AWQ scores scales on the attention / MLP block output (AutoAWQ), not per linear (1) */
    int awq_duo;            /* AutoAWQ's duo scaling (weights' magnitude too) in the scale grid (1) */
    assay_awq_clip_mode awq_clip; /* (ASSAY_AWQ_CLIP_TWO_SIDED) */
    int awq_cached;         /* AWQ layer by layer on the cached residual stream of every calibration token through
                               the model's assay_model_layer_* (a model they do not implement yet is an error naming
                               the feature); otherwise one engine pass keeping awq_tokens rows per input (0) */
    int mse;                /* GPTQ group parameters from gptq's mse range search (quant.py Quantizer mse=True: ranges
                               shrunk by up to 20 %, least sum |err|^2.4) instead of min/max (default on: whole heldout
                               of the house model +0.920 % PPL vs +1.107 %, mean KLD 0.0148 vs 0.0173) */
    int keep_lm_head;       /* lm_head stays unquantized (always, for now) */
    int threads;            /* <= 0: every core */
    int fake_quant;         /* write dequantized f32 linears instead of packed ones */
    /* optional: linears for which this returns nonzero stay in the source dtype (--ignore) */
    int (*is_ignored)(void *ctx, const char *canonical_name, const char *source_name);
    void *ignore_ctx;
} assay_intq_options;

typedef struct assay_intq_report {
    double seconds, calib_seconds;
    float awq_alpha[64][3]; /* chosen alpha per layer for (qkv, gate/up, down) */
} assay_intq_report;

void assay_intq_options_default(assay_intq_options *o, assay_intq_method method);
assay_status assay_intq_quantize_model(const char *model_path, const char *out_dir, const assay_intq_options *o,
                                       assay_intq_report *rep);

#endif
