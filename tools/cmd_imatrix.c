/* cmd_imatrix.c — `assay imatrix MODEL -f FILE -o OUT`: llama-imatrix's job. Runs the calibration text through the
 * CPU engine in consecutive chunks of --ctx tokens and writes Σx² per input column and the token count of every
 * blk.* weight in llama.cpp's GGUF imatrix format (the format llama-quantize --imatrix and our GGUF schemes read;
 * the legacy .dat format is not written). */
#include <stdio.h>
#include <string.h>

#include "assay/calib.h"
#include "assay/imatrix.h"
#include "assay/model.h"
#include "assay/progress.h"
#include "assay/tokenizer.h"
#include "cli.h"
#include "commands.h"

static void imatrix_chunk_done(void *im, int64_t chunk) {
    (void)chunk;
    assay_imatrix_end_chunk(im);
}

int assay_cmd_imatrix(int argc, char **argv) {
    const char *file = NULL, *out = "imatrix.gguf";
    int64_t chunks = 0, ctx = 512, threads = 0;
    int force = 0;
    const cli_option opts[] = {
        {"-f", "--file", CLI_STRING, &file, "FILE", "calibration text: a file or a directory of .txt files"},
        {"-o", "--output", CLI_STRING, &out, "OUT", "output file (default imatrix.gguf)"},
        {NULL, "--chunks", CLI_INT, &chunks, "N", "process at most N chunks (default 0: all of the text)", CLI_AT_LEAST(0)},
        {"-c", "--ctx-size", CLI_INT, &ctx, "N", "tokens per chunk (default 512)", CLI_AT_LEAST(2), .alias = "--ctx"},
        {"-t", "--threads", CLI_INT, &threads, "N", "threads (default 0: all cores)", CLI_THREADS},
        {NULL, "--force", CLI_FLAG, &force, NULL, "replace an existing output"},
        {0}};
    const cli_spec spec = {"imatrix", "MODEL -f FILE [-o OUT] [options]",
                           "importance matrix (mean squared activation per input column) from calibration text",
                           opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (!file) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "-f FILE (the calibration text) is required");
    }
    double t0 = assay_now_seconds();
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = (int)threads;
    mo.f32_activations = 1; /* calibration sees f32 activations, whatever the CPU */
    assay_model *m = NULL;
    assay_tokenizer *tok = NULL;
    assay_imatrix *im = NULL;
    assay_calib_text text = {0};
    int64_t done = 0;
    assay_status st = assay_model_load(&m, args.positional[0], &mo);
    if (st == ASSAY_OK) st = assay_tokenizer_load(&tok, args.positional[0]);
    if (st == ASSAY_OK) st = assay_calib_text_load(&text, tok, file);
    if (st == ASSAY_OK) {
        im = assay_imatrix_new();
        st = assay_calib_run(m, &text, chunks, ctx, assay_imatrix_hook, im, imatrix_chunk_done,
                             &done);
    }
    if (st == ASSAY_OK) st = assay_imatrix_write(im, out, file, (int)ctx, force);
    if (st == ASSAY_OK)
        fprintf(stderr, "assay imatrix: %s of %lld tokens, %s -> %s (%.1f s)\n", cli_count(done, "chunk", "chunks").s,
                (long long)ctx, cli_count(assay_imatrix_count(im), "weight", "weights").s, out, assay_now_seconds() - t0);
    assay_imatrix_free(im);
    assay_calib_text_free(&text);
    assay_tokenizer_free(tok);
    assay_model_free(m);
    cli_args_free(&args);
    return st == ASSAY_OK ? CLI_EXIT_OK : cli_report_error("imatrix");
}
