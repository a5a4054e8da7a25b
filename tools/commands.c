/* commands.c — every subcommand in one table: adding a command is adding a row. */
#include <stddef.h>

#include "commands.h"

const assay_command assay_commands[] = {
    {"inspect", "architecture, parameters, tensor table, bytes by type, tokenizer, chat template", assay_cmd_inspect},
    {"convert", "HF safetensors directory <-> GGUF, dtype changes (f32/f16/bf16)", assay_cmd_convert},
    {"quantize", "post-training quantization: fp8, int8, int4 gptq/awq, GGUF k-quants, mxfp4/nvfp4", assay_cmd_quantize},
    {"tokenize", "text -> token ids or pieces with the model's tokenizer", assay_cmd_tokenize},
    {"detokenize", "token ids -> text", assay_cmd_detokenize},
    {"run", "generate text, streaming, with tok/s at the end", assay_cmd_run},
    {"perplexity", "perplexity with uncertainty, KL divergence against saved baseline logits", assay_cmd_perplexity},
    {"imatrix", "importance matrix from calibration text", assay_cmd_imatrix},
    {"serve", "OpenAI-compatible HTTP server with Prometheus metrics", assay_cmd_serve},
    {"eval", "evaluation tasks (wikitext, kld, hellaswag, arc, piqa, mmlu, gsm8k) -> lm-eval JSON", assay_cmd_eval},
    {"compare", "paired statistics between two result files and a ship/monitor/investigate verdict", assay_cmd_compare},
    {"decide", "baseline vs candidate: eval + throughput + compare -> report.md and report.html", assay_cmd_decide},
    {"judge", "LLM-as-judge domain eval of two endpoints: paired scores, Wilcoxon, bootstrap, verdict", assay_cmd_judge},
    {"bench", "offline throughput and memory: prefill/decode tok/s by batch and context", assay_cmd_bench},
    {"bench-serve", "load generator for any OpenAI-compatible server: TTFT, TPOT, ITL, E2E", assay_cmd_bench_serve},
    {"plan", "size a deployment: weights per GPU, KV cache, concurrency, a decode bound; the guides' figures checked", assay_cmd_plan},
    {"dashboard", "throughput and judged quality on one time axis, from Prometheus, as one HTML page", assay_cmd_dashboard},
    {NULL, NULL, NULL},
};
