/* cmd_quantize.c — `assay quantize MODEL -o OUT --scheme S`: post-training quantization through the scheme table
 * of quantize.h. The output is written under a temporary name and renamed only when complete. */
#include <stdio.h>
#include <string.h>

#include "assay/model_file.h"
#include "assay/progress.h"
#include "assay/quantize.h"
#include "cli.h"
#include "commands.h"

static void print_schemes(void) {
    fprintf(stdout, "\nschemes:\n");
    for (const assay_quantize_scheme *s = assay_quantize_schemes; s->name; s++)
        fprintf(stdout, "  %-18s %s%s\n", s->name, s->summary, s->needs_calibration ? " [calibrates]" : "");
}

int assay_cmd_quantize(int argc, char **argv) {
    const char *out = NULL, *scheme = NULL, *calib = NULL, *rotate = NULL, *ignore = NULL, *kv = NULL, *imatrix = NULL;
    const char *awq_route = NULL, *awq_grid = NULL, *awq_clip = NULL;
    int64_t samples = 128, seq_len = 512, group = 0, threads = 0, seed = 0, awq_seqs = -1, awq_tokens = -1;
    double alpha = 0.5;
    int force = 0, quant_lm_head = 0, allow_requantize = 0;
    const cli_option opts[] = {
        {"-o", "--output", CLI_STRING, &out, "OUT", "output directory (HF schemes) or NAME.gguf file (GGUF schemes)"},
        {"-s", "--scheme", CLI_STRING, &scheme, "S", "quantization scheme (listed below)"},
        {NULL, "--calib", CLI_STRING, &calib, "FILE", "calibration text: a file or a directory of .txt files"},
        {NULL, "--calib-samples", CLI_INT, &samples, "N", "calibration sequences (default 128)", CLI_AT_LEAST(1)},
        {NULL, "--calib-seq-len", CLI_INT, &seq_len, "N", "tokens per calibration sequence (default 512)", CLI_AT_LEAST(2)},
        {NULL, "--group-size", CLI_INT, &group, "G", "quantization group size (default 0: the scheme's)", CLI_AT_LEAST(0)},
        {NULL, "--rotate", CLI_STRING, &rotate, "KIND", "rotate weights first: hadamard"},
        {NULL, "--ignore", CLI_STRING, &ignore, "PATTERNS", "comma-separated tensor name patterns to leave unquantized"},
        {NULL, "--quantize-lm-head", CLI_FLAG, &quant_lm_head, NULL, "quantize the lm_head too (kept by default)"},
        {NULL, "--kv-cache-scheme", CLI_STRING, &kv, "S", "calibrate KV-cache scales: fp8"},
        {NULL, "--imatrix", CLI_STRING, &imatrix, "FILE", "importance matrix (GGUF and int4 schemes)"},
        {NULL, "--alpha", CLI_FLOAT, &alpha, "A", "SmoothQuant migration strength (default 0.5)", CLI_IN(0, 1)},
        {NULL, "--awq-route", CLI_STRING, &awq_route, "R",
         "int4-awq driver: hooks (default) or cached (layer by layer on every calibration token)"},
        {NULL, "--awq-seqs", CLI_INT, &awq_seqs, "N", "int4-awq: sequences the scales are scored on (0: all)", CLI_AT_LEAST(0)},
        {NULL, "--awq-grid", CLI_STRING, &awq_grid, "G", "int4-awq scale grid: autoawq (default) or llm-compressor"},
        {NULL, "--awq-clip", CLI_STRING, &awq_clip, "C",
         "int4-awq clipping: two-sided (default), all (AutoAWQ's ranges, q/k too) or autoawq (q/k not clipped)"},
        {NULL, "--awq-tokens", CLI_INT, &awq_tokens, "N",
         "int4-awq: rows per input for clipping and the MLP scale losses (default 4096)", CLI_AT_LEAST(1)},
        {"-t", "--threads", CLI_INT, &threads, "N", "threads (default 0: all cores)", CLI_THREADS},
        {NULL, "--seed", CLI_INT, &seed, "N", "seed for calibration sampling and rotations; -1: a random one, printed (default 0)",
         CLI_SEED},
        {NULL, "--force", CLI_FLAG, &force, NULL, "replace an existing output"},
        {NULL, "--allow-requantize", CLI_FLAG, &allow_requantize, NULL,
         "quantize a model whose weights are quantized already (more quality loss than from the original weights)"},
        {0}};
    const cli_spec spec = {"quantize", "MODEL -o OUT --scheme S [options]",
                           "post-training quantization of a GGUF file or HF safetensors directory", opts, 1, 1};
    cli_args args;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            cli_print_help(&spec);
            print_schemes();
            return CLI_EXIT_OK;
        }
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (!out || !scheme) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "both -o OUT and --scheme S are required");
    }
    if (!assay_quantize_scheme_find(scheme)) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "unknown scheme '%s' (see --help for the list)", scheme);
    }
    if (rotate && strcmp(rotate, "hadamard") != 0) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "unknown --rotate '%s' (known: hadamard)", rotate);
    }

    assay_quantize_options opt;
    assay_quantize_options_init(&opt);
    opt.calib_path = calib;
    opt.calib_samples = samples;
    opt.calib_seq_len = seq_len;
    opt.group_size = group;
    opt.rotate = rotate;
    opt.kv_cache_scheme = kv;
    opt.imatrix_path = imatrix;
    opt.smoothquant_alpha = alpha;
    opt.awq_route = awq_route;
    opt.awq_seqs = awq_seqs;
    opt.awq_grid = awq_grid;
    opt.awq_clip = awq_clip;
    opt.awq_tokens = awq_tokens;
    opt.keep_lm_head = !quant_lm_head;
    opt.force = force;
    opt.allow_requantize = allow_requantize;
    opt.threads = (int)threads;
    opt.seed = cli_seed("quantize", seed);
    char ignore_buf[4096];
    if (ignore) {
        if (strlen(ignore) >= sizeof ignore_buf) {
            cli_args_free(&args);
            return cli_usage_error(&spec, "--ignore list too long");
        }
        strcpy(ignore_buf, ignore);
        for (char *tok = strtok(ignore_buf, ","); tok; tok = strtok(NULL, ",")) {
            if (opt.n_ignore == ASSAY_QUANTIZE_MAX_IGNORE) {
                cli_args_free(&args);
                return cli_usage_error(&spec, "at most %d --ignore patterns", ASSAY_QUANTIZE_MAX_IGNORE);
            }
            if (*tok) opt.ignore[opt.n_ignore++] = tok;
        }
    }

    assay_model_file *mf = NULL;
    if (assay_model_file_open(&mf, args.positional[0]) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_report_error("quantize");
    }
    double t0 = assay_now_seconds();
    assay_status st = assay_quantize(mf, scheme, &opt, out);
    assay_model_file_close(mf);
    cli_args_free(&args);
    if (st != ASSAY_OK) return cli_report_error("quantize");
    fprintf(stderr, "assay quantize: %s written to %s in %.1f s\n", scheme, out, assay_now_seconds() - t0);
    return CLI_EXIT_OK;
}
