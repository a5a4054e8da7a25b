/* engine_cli.h — the engine flags of the commands that run a model, declared once with vLLM's names and turned into
 * one assay_engine_args (engine.h) in one place.
 *
 *   engine_cli ec; engine_cli_init(&ec);
 *   const cli_option opts[] = {{"-n", "--n-predict", ...}, ENGINE_CLI_OPTIONS(ec), {0}};
 *   ... cli_parse(&spec, ...) ...
 *   assay_engine_args a;
 *   if (engine_cli_args(&ec, &spec, model, &a) != CLI_CONTINUE) return CLI_EXIT_USAGE;  // the usage error is printed
 */
#ifndef ASSAY_TOOLS_ENGINE_CLI_H
#define ASSAY_TOOLS_ENGINE_CLI_H

#include <stdint.h>

#include "assay/engine.h"
#include "cli.h"

typedef struct engine_cli {
    const char *device, *quantization, *kv_cache_dtype, *kv_cache_memory, *load_format;
    int64_t threads, max_model_len, max_num_seqs, max_num_batched_tokens, kv_scale_tokens, seed, num_gpu_blocks_override;
    int calculate_kv_scales, no_prefix_caching, verbose;
    const char *seed_help; /* --seed's help: the default differs between commands */
    double gpu_memory_utilization;
} engine_cli;

void engine_cli_init(engine_cli *ec);

#define ENGINE_CLI_OPTIONS(ec)                                                                                         \
    {NULL, "--device", CLI_STRING, &(ec).device, "DEV", "engine: cpu (default) or cuda"},                              \
    {"-q", "--quantization", CLI_STRING, &(ec).quantization, "SCHEME",                                                 \
     "engine: quantize the weights at load: fp8 (E4M3, vLLM's online fp8)"},                                           \
    {NULL, "--kv-cache-dtype", CLI_STRING, &(ec).kv_cache_dtype, "T",                                                  \
     "engine: auto (= f16, default), f16, bf16, f32, fp8 (= fp8_e4m3), fp8_e5m2, int8"},                               \
    {NULL, "--calculate-kv-scales", CLI_FLAG, &(ec).calculate_kv_scales, NULL,                                         \
     "engine: 8-bit KV: per-layer k/v scales from the running max of the first --kv-scale-tokens tokens"},             \
    {NULL, "--kv-scale-tokens", CLI_INT, &(ec).kv_scale_tokens, "N",                                                   \
     "engine: tokens --calculate-kv-scales observes (default 1024)", CLI_AT_LEAST(1)},                                 \
    {"-t", "--threads", CLI_INT, &(ec).threads, "N", "engine: CPU threads (default 0: all cores)", CLI_THREADS},       \
    {NULL, "--max-model-len", CLI_INT, &(ec).max_model_len, "N",                                                       \
     "engine: positions per request (default 0: the model's context, at most 4096)", CLI_AT_LEAST(0)},                 \
    {NULL, "--max-num-seqs", CLI_INT, &(ec).max_num_seqs, "N", "engine: requests running at once (default 256)",       \
     CLI_AT_LEAST(1)},                                                                                                 \
    {NULL, "--max-num-batched-tokens", CLI_INT, &(ec).max_num_batched_tokens, "N",                                     \
     "engine: tokens per step, prefill chunks and decodes together (default 2048)", CLI_AT_LEAST(1)},                  \
    {NULL, "--kv-cache-memory", CLI_STRING, &(ec).kv_cache_memory, "BYTES",                                            \
     "engine: KV pool size, e.g. 2G or 512M (default: max-num-seqs x max-model-len tokens, at most 4 GiB)"},           \
    {NULL, "--num-gpu-blocks-override", CLI_INT, &(ec).num_gpu_blocks_override, "N",                                  \
     "engine: KV pool of N blocks of 16 tokens, no memory planning (default 0: off)", CLI_AT_LEAST(0)},                \
    {NULL, "--no-enable-prefix-caching", CLI_FLAG, &(ec).no_prefix_caching, NULL,                                      \
     "engine: no automatic prefix caching (on by default)"},                                                           \
    {NULL, "--gpu-memory-utilization", CLI_FLOAT, &(ec).gpu_memory_utilization, "F",                                   \
     "engine: fraction of the GPU's memory assay may use (--device cuda; default 0.9)", CLI_IN_OPEN_CLOSED(0, 1)},     \
    {NULL, "--seed", CLI_INT, &(ec).seed, "S", (ec).seed_help, CLI_SEED},                                              \
    {NULL, "--load-format", CLI_STRING, &(ec).load_format, "FMT",                                                      \
     "engine: auto (default: MODEL's weights) or dummy (seeded random weights shaped by MODEL/config.json, for speed)"}, \
    {"-v", "--verbose", CLI_FLAG, &(ec).verbose, NULL, "engine: describe the engine and its KV cache on stderr"}

/* Checks the flags and fills *a (model = `model`); prints a usage error and returns CLI_EXIT_USAGE on a bad value,
 * else CLI_CONTINUE. A --seed of -1 becomes a random seed, printed. */
int engine_cli_args(const engine_cli *ec, const cli_spec *spec, const char *model, assay_engine_args *a);
/* The same flags given as one string ("--quantization fp8 --kv-cache-dtype fp8": decide's --candidate), parsed with
 * the same table; usage errors name `what`. *storage holds the strings *a points to: free it after. */
int engine_cli_parse_text(const char *text, const char *what, const char *model, assay_engine_args *a, char **storage);

#endif
