/* cmd_convert.c — `assay convert MODEL -o OUT`: HF safetensors directory <-> GGUF.
 *
 *   assay convert ../shared/models/house -o house.gguf            # HF -> GGUF (llama.cpp names, tokenizer)
 *   assay convert house.gguf -o house-hf                          # GGUF -> HF directory
 *   assay convert ../shared/models/house -o house-f16.gguf --dtype f16
 *
 * The direction follows the input: a directory becomes a GGUF file, a GGUF file becomes a directory.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "assay/convert.h"
#include "assay/file.h"
#include "assay/model_file.h"
#include "cli.h"
#include "commands.h"

int assay_cmd_convert(int argc, char **argv) {
    const char *out = NULL, *dtype = NULL;
    int force = 0, quiet = 0, keep = 0, vocab_only = 0;
    const cli_option opts[] = {
        {"-o", "--output", CLI_STRING, &out, "OUT", "output: a .gguf file (from an HF directory) or a directory (from GGUF)"},
        {NULL, "--dtype", CLI_STRING, &dtype, "f32|f16|bf16", "convert float matrices to this type (default: keep; HF -> GGUF vectors are f32)"},
        {NULL, "--force", CLI_FLAG, &force, NULL, "overwrite existing outputs"},
        {NULL, "--quiet", CLI_FLAG, &quiet, NULL, "no notes on stderr (no short form: -q is --quantization, as in vLLM)"},
        {NULL, "--vocab-only", CLI_FLAG, &vocab_only, NULL, "GGUF -> HF: write only tokenizer.json and tokenizer_config.json"},
        {NULL, "--keep-types", CLI_FLAG, &keep, NULL,
         "HF -> GGUF: keep norms/biases in their stored type, byte for byte (default: f32 like llama.cpp; its CPU "
         "backend cannot run bf16 norms)"},
        {0}};
    const cli_spec spec = {"convert", "MODEL -o OUT [--dtype f32|f16|bf16] [--force]",
                           "HF safetensors directory -> GGUF (llama.cpp naming), or GGUF -> HF directory", opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    assay_convert_options o = {.dtype = ASSAY_TYPE_COUNT, .overwrite = force, .quiet = quiet, .keep_types = keep, .vocab_only = vocab_only};
    if (!out) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "missing -o OUT");
    }
    if (dtype) {
        if (strcmp(dtype, "f32") == 0) o.dtype = ASSAY_TYPE_F32;
        else if (strcmp(dtype, "f16") == 0) o.dtype = ASSAY_TYPE_F16;
        else if (strcmp(dtype, "bf16") == 0) o.dtype = ASSAY_TYPE_BF16;
        else {
            cli_args_free(&args);
            return cli_usage_error(&spec, "--dtype must be f32, f16 or bf16, not '%s'", dtype);
        }
    }
    assay_model_file *mf;
    if (assay_model_file_open(&mf, args.positional[0]) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_report_error("convert");
    }
    size_t ol = strlen(out);
    int gguf_name = ol > 5 && strcasecmp(out + ol - 5, ".gguf") == 0;
    if (assay_model_file_format(mf) == ASSAY_MODEL_FORMAT_GGUF && gguf_name) {
        assay_model_file_close(mf);
        cli_args_free(&args);
        return cli_usage_error(&spec, "the input is GGUF, so OUT is an HF directory; GGUF -> GGUF is `assay quantize`'s job");
    }
    if (assay_model_file_format(mf) == ASSAY_MODEL_FORMAT_HF && (!gguf_name || assay_path_is_dir(out))) {
        assay_model_file_close(mf);
        cli_args_free(&args);
        if (ol && out[ol - 1] == '/') return cli_usage_error(&spec, "the input is an HF directory, so OUT is one GGUF file, "
                                                                    "and '%s' names a directory: give NAME.gguf", out);
        return cli_usage_error(&spec, "the input is an HF directory, so OUT is a GGUF file: name it %s.gguf (the name is "
                               "used as given, nothing is added to it)", out);
    }
    assay_status st = assay_model_file_format(mf) == ASSAY_MODEL_FORMAT_HF ? assay_convert_hf_to_gguf(mf, out, &o)
                                                                           : assay_convert_gguf_to_hf(mf, out, &o);
    if (st == ASSAY_OK && !quiet)
        fprintf(stderr, "assay convert: wrote %s (%lld tensors)\n", out, (long long)assay_model_file_tensor_count(mf));
    assay_model_file_close(mf);
    cli_args_free(&args);
    return st == ASSAY_OK ? CLI_EXIT_OK : cli_report_error("convert");
}
