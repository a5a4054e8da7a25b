/* quantize.h — `assay quantize`: the table of quantization schemes and the helpers every scheme shares.
 *
 *   assay_model_file *mf;
 *   assay_model_file_open(&mf, "../shared/models/house");
 *   assay_quantize_options opt;
 *   assay_quantize_options_init(&opt);                   // defaults: 128 calibration samples of 512 tokens, ...
 *   opt.force = 1;
 *   if (assay_quantize(mf, "fp8-dynamic", &opt, "house-fp8-dynamic") != ASSAY_OK)
 *       fprintf(stderr, "%s\n", assay_last_error());
 *   assay_model_file_close(mf);
 *
 * One row per scheme in assay_quantize_schemes[] (src/quant/quantize.c): its name (the --scheme value), what it
 * writes, whether it needs calibration text, the function that does the work and one integer parameter the
 * function interprets (an FP8 variant, a ggml type id, a bit width...). Adding a scheme is adding a row.
 *
 * Contract of a row's function (assay_quantize_fn):
 *   - `mf` is the opened source model (a GGUF file or an HF safetensors directory); tensors are read from it,
 *     never modified. Tensor names in `mf` are canonical (llama.cpp) names; `source_name` is the file's own.
 *   - `out_path` does not exist, or `opt->force` is set (assay_quantize checked that). Write everything under a
 *     temporary name and rename into place only when complete: assay_quantize_outdir_* for directories,
 *     assay_output_file (file.h) for single files, so a failure never leaves a half-written output behind.
 *   - Skip tensors for which assay_quantize_is_ignored() is true (--ignore patterns; output.weight/lm_head
 *     stays unquantized by default for the HF schemes).
 *   - Draw one progress bar step per layer (assay_progress, unit "layer").
 *   - User- and file-caused problems return a status with a message; never exit.
 */
#ifndef ASSAY_QUANTIZE_H
#define ASSAY_QUANTIZE_H

#include <stdint.h>

#include "assay/model_file.h"
#include "assay/status.h"

#define ASSAY_QUANTIZE_MAX_IGNORE 64

typedef struct assay_quantize_options {
    const char *calib_path;      /* --calib: a text file or a directory of .txt files; NULL: the scheme's default
                                  * ($ASSAY_SHARED/data/calibration when the scheme needs calibration) */
    int64_t calib_samples;       /* --calib-samples: calibration sequences (default 128) */
    int64_t calib_seq_len;       /* --calib-seq-len: tokens per calibration sequence (default 512) */
    int64_t group_size;          /* --group-size: 0 means the scheme's default (128 for int4) */
    const char *rotate;          /* --rotate: NULL or "hadamard" */
    const char *ignore[ASSAY_QUANTIZE_MAX_IGNORE]; /* --ignore: fnmatch patterns, matched against the canonical and
                                  * the source tensor name (with or without the ".weight" suffix) */
    int n_ignore;
    const char *kv_cache_scheme; /* --kv-cache-scheme: NULL or "fp8" */
    const char *imatrix_path;    /* --imatrix: importance matrix for the GGUF / int4 schemes, or NULL */
    double smoothquant_alpha;    /* --alpha: SmoothQuant migration strength (default 0.5) */
    const char *awq_route;       /* --awq-route (int4-awq): NULL or "hooks" (one engine pass keeping 512 rows per
                                  * input: the default) or "cached" (layer by layer on every calibration token) */
    int64_t awq_seqs;            /* --awq-seqs (int4-awq): calibration sequences the scales are scored on; -1 means
                                  * the default (cached route: all; hooks route: 8 for the attention block) */
    const char *awq_grid;        /* --awq-grid (int4-awq): NULL or "autoawq" (duo scaling at i/20: the default) or
                                  * "llm-compressor" (identity, then duo scaling at i/18 up to 1.0) */
    const char *awq_clip;        /* --awq-clip (int4-awq): NULL or "two-sided" (the default: every linear, the low and
                                  * high ends of a group searched independently), "all" (AutoAWQ's ranges, q/k too) or
                                  * "autoawq" (AutoAWQ's ranges, q/k not clipped) */
    int64_t awq_tokens;          /* --awq-tokens (int4-awq): rows per input for the clipping search and the MLP scale
                                  * losses; -1 means the default (4096) */
    int keep_lm_head;            /* 1 (default): output.weight / lm_head stays in its source dtype */
    int force;                   /* --force: replace an existing output */
    int allow_requantize;        /* --allow-requantize: quantize weights that are quantized already */
    int threads;                 /* --threads: 0 = all cores */
    uint64_t seed;               /* --seed: calibration sampling and random rotations (default 0) */
} assay_quantize_options;

void assay_quantize_options_init(assay_quantize_options *opt);

typedef enum assay_quantize_output {
    ASSAY_QUANTIZE_OUT_HF_DIR, /* a safetensors directory (compressed-tensors, GPTQ, AWQ layouts) */
    ASSAY_QUANTIZE_OUT_GGUF,   /* one .gguf file */
} assay_quantize_output;

typedef struct assay_quantize_scheme assay_quantize_scheme;

typedef assay_status (*assay_quantize_fn)(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                          const assay_quantize_options *opt, const char *out_path);

struct assay_quantize_scheme {
    const char *name;           /* the --scheme value: "fp8-dynamic", "int4-gptq", "q4_k_m", ... */
    const char *summary;        /* one line for `assay quantize --help` */
    assay_quantize_output output;
    int needs_calibration;      /* 1: runs the CPU engine over --calib text */
    assay_quantize_fn run;
    int64_t param;              /* the row's own parameter, interpreted by `run` */
};

/* Terminated by a row whose name is NULL. */
extern const assay_quantize_scheme assay_quantize_schemes[];
const assay_quantize_scheme *assay_quantize_scheme_find(const char *name);

/* Looks the scheme up, checks the output path (exists and !force -> ASSAY_ERR_ARG; a GGUF scheme needs a NAME.gguf
 * file name, an HF scheme a directory name without .gguf: nothing is added to a name), refuses a source whose
 * weights are quantized already unless opt->allow_requantize, and runs the row. */
assay_status assay_quantize(const assay_model_file *mf, const char *scheme, const assay_quantize_options *opt,
                            const char *out_path);

/* ---- helpers for the rows --------------------------------------------------------------------------------- */

/* 1 when tensor `t` must be left unquantized: it matches an --ignore pattern, or it is the lm_head
 * (output.weight) and opt->keep_lm_head is set. Norms, biases and embeddings are the scheme's own decision. */
int assay_quantize_is_ignored(const assay_quantize_options *opt, const assay_tensor *t);

/* An output directory built under "<path>.tmp-<pid>" and renamed to <path> on commit. With `force`, an existing
 * <path> is moved aside and removed only after the new directory is in place. */
typedef struct assay_quantize_outdir {
    char *final_path;
    char *temp_path;
    int force;
} assay_quantize_outdir;

assay_status assay_quantize_outdir_begin(assay_quantize_outdir *d, const char *path, int force);
/* A new heap string "<temp dir>/<name>" to write a file into. */
char *assay_quantize_outdir_file(const assay_quantize_outdir *d, const char *name);
assay_status assay_quantize_outdir_commit(assay_quantize_outdir *d);
/* Removes the temporary directory and everything in it. Safe after a commit or a failed begin. */
void assay_quantize_outdir_abort(assay_quantize_outdir *d);

/* Copies the files an HF directory needs besides weights and config.json (tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, generation_config.json, chat_template.jinja, ...) from `src_dir` when present. */
assay_status assay_quantize_copy_hf_extras(const char *src_dir, const char *dst_dir);

#endif
