/* cmd_plan.c — `assay plan MODEL --gpu G [--num-gpus N] [--tensor-parallel-size N] [-q SCHEME] [--kv-cache-dtype D] ...`:
 * sizes a deployment without loading anything (include/assay/plan.h does the arithmetic).
 *
 *   assay plan llama-3.1-70b --gpu h100 --num-gpus 4 -q fp8 --kv-cache-dtype fp8
 *   assay plan ../shared/models/house --gpu rtx4090 --json
 *   assay plan model.gguf --gpu-memory 24GB --gpu-bandwidth 1008GB/s
 *   assay plan --guides                       # the deployment guides' figures, recomputed and judged
 *
 * MODEL is a Hugging Face directory (its config.json; the weight scheme from its quantization_config or dtype), a
 * config.json, a GGUF file (its metadata, and its own tensor bytes unless -q says otherwise) or a preset name.
 * Exit code: 0 when the plan fits, 1 when it does not (or on an error), 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/gguf.h"
#include "assay/hf_config.h"
#include "assay/json.h"
#include "assay/plan.h"
#include "assay/strbuf.h"
#include "cli.h"
#include "commands.h"

#define GB 1e9

/* 1234567 -> "1,234,567" */
static const char *grouped(double v, char *buf, size_t cap) {
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v < 0 ? -v : v);
    size_t n = strlen(digits), o = 0;
    if (v < 0 && o + 1 < cap) buf[o++] = '-';
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
    return buf;
}

/* bytes as GB (10^9), or MB below 1 GB so a small model's numbers still say something */
static const char *size_str(double bytes, char *buf, size_t cap) {
    double a = bytes < 0 ? -bytes : bytes;
    if (a >= 1e9 || a == 0) snprintf(buf, cap, "%.2f GB", bytes / 1e9);
    else snprintf(buf, cap, "%.1f MB", bytes / 1e6);
    return buf;
}

/* The scheme a Hugging Face config declares: quantization_config (fp8, awq, gptq, compressed-tensors) or dtype. */
static assay_status hf_scheme(const char *config_path, assay_plan_scheme *out, char *note, size_t cap) {
    assay_json_doc *doc;
    assay_status st = assay_json_parse_file(config_path, &doc);
    if (st) return st;
    const assay_json *root = assay_json_root(doc), *qc = assay_json_get(root, "quantization_config");
    char name[32] = "bf16";
    note[0] = 0;
    if (qc) {
        const char *method = assay_json_string(assay_json_get(qc, "quant_method"), "");
        int64_t bits = assay_json_int(assay_json_get(qc, "bits"), 0), group = assay_json_int(assay_json_get(qc, "group_size"), 128);
        const char *type = "int";
        if (!strcmp(method, "compressed-tensors")) {
            const assay_json *groups = assay_json_get(qc, "config_groups");
            const assay_json *w = groups && groups->first ? assay_json_get(groups->first, "weights") : NULL;
            bits = assay_json_int(assay_json_get(w, "num_bits"), 0);
            type = assay_json_string(assay_json_get(w, "type"), "int");
            group = assay_json_int(assay_json_get(w, "group_size"), 128);
        } else if (!strcmp(method, "fp8")) {
            bits = 8;
            type = "float";
        }
        if (bits == 8) snprintf(name, sizeof name, "%s", !strcmp(type, "float") ? "fp8" : "int8");
        else if (bits == 4 && (group == 32 || group == 64 || group == 128)) snprintf(name, sizeof name, "int4-g%lld", (long long)group);
        else if (bits == 4) snprintf(name, sizeof name, "int4-g128");
        else snprintf(note, cap, "quantization_config (%s, %lld bits) is not one the planner knows; planned as bf16 (-q to "
                      "choose)", method[0] ? method : "?", (long long)bits);
        if (bits == 4 && group != 32 && group != 64 && group != 128)
            snprintf(note, cap, "int4 with group size %lld planned as groups of 128", (long long)group);
    } else {
        const char *dt = assay_json_string(assay_json_get(root, "torch_dtype"), assay_json_string(assay_json_get(root, "dtype"), "bfloat16"));
        snprintf(name, sizeof name, "%s", !strcmp(dt, "float32") ? "f32" : !strcmp(dt, "float16") ? "f16" : "bf16");
    }
    assay_json_doc_free(doc);
    return assay_plan_scheme_parse(name, out);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* MODEL -> architecture (+ the GGUF handle, kept open for scheme "stored", and the scheme the source declares) */
static assay_status resolve_model(const char *model, assay_plan_request *r, assay_gguf **gguf, char *label, size_t cap,
                                  assay_plan_scheme *declared, char *note, size_t note_cap) {
    struct stat sb;
    *gguf = NULL;
    assay_plan_scheme_parse("bf16", declared);
    note[0] = 0;
    snprintf(label, cap, "%s", model);
    if (stat(model, &sb) == 0) {
        char path[4096];
        if (S_ISDIR(sb.st_mode)) {
            snprintf(path, sizeof path, "%s/config.json", model);
            if (stat(path, &sb) != 0)
                return assay_fail(ASSAY_ERR_IO, "%s: no config.json in this directory (a Hugging Face model directory is "
                                                "needed, or a GGUF file, or a preset name)", model);
        } else if (ends_with(model, ".json")) {
            snprintf(path, sizeof path, "%s", model);
        } else {
            assay_status st = assay_gguf_open(gguf, model);
            if (st) return assay_fail_context(st, "%s (neither a GGUF file nor a config.json)", model);
            if ((st = assay_model_config_from_gguf(&r->model, *gguf))) return st;
            r->model.tied_embeddings = assay_gguf_find_tensor(*gguf, "output.weight") == NULL;
            assay_plan_scheme_parse("stored", declared);
            return ASSAY_OK;
        }
        assay_status st = assay_model_config_from_hf_file(&r->model, path);
        if (st) return st;
        return hf_scheme(path, declared, note, note_cap);
    }
    if (ends_with(model, ".gguf") || ends_with(model, ".json") || model[0] == '.' || model[0] == '/')
        return assay_fail(ASSAY_ERR_IO, "%s: no such file or directory", model);
    const char *display;
    assay_status st = assay_plan_preset(model, &r->model, &display);
    if (st) return st;
    snprintf(label, cap, "%s", display);
    return ASSAY_OK;
}

/* ---- the deployment guides' figures ------------------------------------------------------------------------ */
static const char *fmt_value(double v, const char *unit, char *buf, size_t cap) {
    char g[48];
    if (!strcmp(unit, "tokens") || !strcmp(unit, "tok/s")) snprintf(buf, cap, "%s %s", grouped(v, g, sizeof g), unit);
    else if (!strcmp(unit, "%")) snprintf(buf, cap, "%+.1f%%", v);
    else if (!strcmp(unit, "bits")) snprintf(buf, cap, "%.2f bits", v);
    else snprintf(buf, cap, "%.1f %s", v, unit);
    return buf;
}

static const char *verdict_word(const assay_plan_guide_row *r) {
    switch (r->verdict) {
    case ASSAY_PLAN_GUIDE_AGREES: return "agrees";
    case ASSAY_PLAN_GUIDE_BELOW_BOUND: return "consistent: under the bandwidth bound";
    case ASSAY_PLAN_GUIDE_DISAGREES: return "does not add up";
    }
    return "";
}

static int print_guides(int json) {
    const assay_plan_guide_row *rows;
    int n;
    if (assay_plan_guide_rows(&rows, &n)) return cli_report_error("plan");
    assay_strbuf b = {0};
    if (json) {
        assay_strbuf_puts(&b, "[");
        for (int i = 0; i < n; i++) {
            const assay_plan_guide_row *r = &rows[i];
            assay_strbuf_puts(&b, i ? ",\n {\"table\": " : "\n {\"table\": ");
            assay_strbuf_json_string(&b, r->table, strlen(r->table));
            assay_strbuf_puts(&b, ", \"claim\": ");
            assay_strbuf_json_string(&b, r->claim, strlen(r->claim));
            assay_strbuf_puts(&b, ", \"setup\": ");
            assay_strbuf_json_string(&b, r->setup, strlen(r->setup));
            assay_strbuf_puts(&b, ", \"unit\": ");
            assay_strbuf_json_string(&b, r->unit, strlen(r->unit));
            assay_strbuf_puts(&b, ", \"quoted\": ");
            assay_strbuf_json_number(&b, r->quoted);
            if (r->quoted_hi > 0) {
                assay_strbuf_puts(&b, ", \"quoted_hi\": ");
                assay_strbuf_json_number(&b, r->quoted_hi);
            }
            assay_strbuf_puts(&b, ", \"computed\": ");
            assay_strbuf_json_number(&b, r->computed);
            assay_strbuf_puts(&b, ", \"verdict\": ");
            const char *v = r->verdict == ASSAY_PLAN_GUIDE_AGREES ? "agrees" : r->verdict == ASSAY_PLAN_GUIDE_BELOW_BOUND ? "below_bound" : "disagrees";
            assay_strbuf_json_string(&b, v, strlen(v));
            if (r->why) {
                assay_strbuf_puts(&b, ", \"why\": ");
                assay_strbuf_json_string(&b, r->why, strlen(r->why));
            }
            assay_strbuf_puts(&b, "}");
        }
        assay_strbuf_puts(&b, "\n]\n");
    } else {
        assay_strbuf_puts(&b, "The deployment guides' figures, recomputed. Memory figures are checked as the guides count them "
                              "(the whole card, no reserve);\nthroughputs against the bandwidth bound at batch 32 (H100) "
                              "or 1 (RTX 4090), context 1,024. GB = 10^9 bytes.\n\n");
        assay_strbuf_puts(&b, "| guide | figure | setup checked | computed | verdict |\n|---|---|---|---|---|\n");
        int notes = 0;
        for (int i = 0; i < n; i++) {
            const assay_plan_guide_row *r = &rows[i];
            char v[64], tol[32] = "";
            if (r->verdict == ASSAY_PLAN_GUIDE_AGREES && r->quoted_hi <= 0) snprintf(tol, sizeof tol, " (within %.0f%%)", r->tolerance * 100);
            assay_strbuf_printf(&b, "| %s | %s | %s | %s | %s%s", r->table, r->claim, r->setup,
                                fmt_value(r->computed, r->unit, v, sizeof v), verdict_word(r), tol);
            if (r->why) assay_strbuf_printf(&b, " [%d]", ++notes);
            assay_strbuf_puts(&b, " |\n");
        }
        assay_strbuf_puts(&b, "\n");
        notes = 0;
        for (int i = 0; i < n; i++)
            if (rows[i].why) assay_strbuf_printf(&b, "[%d] %s.\n", ++notes, rows[i].why);
    }
    fputs(b.data, stdout);
    assay_strbuf_free(&b);
    return CLI_EXIT_OK;
}

/* ---- one plan ---------------------------------------------------------------------------------------------- */
static void json_str_field(assay_strbuf *b, const char *key, const char *v) {
    assay_strbuf_printf(b, ", \"%s\": ", key);
    assay_strbuf_json_string(b, v, strlen(v));
}

static void json_num_field(assay_strbuf *b, const char *key, double v) {
    assay_strbuf_printf(b, ", \"%s\": ", key);
    assay_strbuf_json_number(b, v);
}

static void plan_json(const assay_plan_request *r, const assay_plan *p, const char *label, int has_bw, const char *error,
                      assay_strbuf *b) {
    const assay_model_config *c = &r->model;
    assay_strbuf_puts(b, "{\"model\": ");
    assay_strbuf_json_string(b, label, strlen(label));
    assay_strbuf_printf(b, ", \"architecture\": {\"arch\": \"%s\", \"layers\": %lld, \"hidden\": %lld, \"heads\": %lld, "
                        "\"kv_heads\": %lld, \"head_dim\": %lld, \"intermediate\": %lld, \"vocab\": %lld, \"tied_embeddings\": %s}",
                        c->arch, (long long)c->n_layer, (long long)c->n_embd, (long long)c->n_head, (long long)c->n_head_kv,
                        (long long)c->head_dim, (long long)c->n_ff, (long long)c->n_vocab, c->tied_embeddings ? "true" : "false");
    json_str_field(b, "gpu", r->gpu.name);
    json_num_field(b, "gpu_memory_bytes", r->gpu.memory_bytes);
    if (has_bw) json_num_field(b, "gpu_bandwidth_bytes_per_s", r->gpu.bandwidth);
    else assay_strbuf_puts(b, ", \"gpu_bandwidth_bytes_per_s\": null");
    assay_strbuf_printf(b, ", \"num_gpus\": %lld, \"tensor_parallel_size\": %lld, \"data_parallel_replicas\": %lld",
                        (long long)r->num_gpus, (long long)r->tensor_parallel, (long long)p->replicas);
    json_str_field(b, "quantization", r->scheme.name);
    json_str_field(b, "kv_cache_dtype", assay_kv_dtype_name(r->kv_dtype));
    json_str_field(b, "kv_layout", r->kv_slot_scales ? "assay" : "vllm");
    assay_strbuf_printf(b, ", \"max_model_len\": %lld", (long long)r->max_model_len);
    json_num_field(b, "gpu_memory_utilization", r->gpu_memory_utilization);
    json_num_field(b, "reserve_bytes_per_gpu", r->reserve_bytes);
    json_num_field(b, "parameters", p->params);
    json_num_field(b, "weight_bytes", p->weight_bytes);
    json_num_field(b, "weight_bytes_per_gpu", p->weight_bytes_per_gpu);
    json_num_field(b, "bits_per_weight", p->bits_per_weight);
    assay_strbuf_printf(b, ", \"kv_heads_per_gpu\": %lld, \"kv_head_copies\": %lld", (long long)p->kv_heads_per_gpu,
                        (long long)p->kv_head_copies);
    json_num_field(b, "kv_bytes_per_token", p->kv_bytes_per_token);
    json_num_field(b, "kv_bytes_per_token_per_gpu", p->kv_bytes_per_token_per_gpu);
    json_num_field(b, "usable_bytes_per_gpu", p->usable_bytes_per_gpu);
    json_num_field(b, "kv_cache_bytes_per_gpu", p->kv_pool_bytes_per_gpu);
    assay_strbuf_printf(b, ", \"kv_blocks_per_gpu\": %lld, \"block_size\": %d, \"kv_tokens_per_replica\": %lld, "
                        "\"kv_tokens\": %lld", (long long)p->kv_blocks, ASSAY_PLAN_BLOCK, (long long)p->kv_tokens,
                        (long long)(p->kv_tokens * p->replicas));
    json_num_field(b, "max_concurrency_per_replica", p->concurrency);
    assay_strbuf_printf(b, ", \"max_concurrent_sequences\": %lld, \"fits\": %s", (long long)p->max_seqs, p->fits ? "true" : "false");
    if (!p->fits) json_num_field(b, "short_bytes_per_gpu", p->short_bytes);
    if (has_bw) {
        assay_strbuf_printf(b, ", \"decode_context\": %lld, \"decode_bound\": [", (long long)r->decode_context);
        for (int i = 0; i < 2; i++) {
            const assay_plan_decode *d = &p->decode[i];
            assay_strbuf_printf(b, "%s{\"batch\": %lld", i ? ", " : "", (long long)d->batch);
            json_num_field(b, "bytes_per_step_per_gpu", d->bytes_per_step);
            json_num_field(b, "tokens_per_s_per_replica", d->tokens_per_s);
            json_num_field(b, "tokens_per_s", d->tokens_per_s * (double)p->replicas);
            assay_strbuf_printf(b, ", \"kv_fits\": %s}", d->kv_fits ? "true" : "false");
        }
        assay_strbuf_puts(b, "]");
    }
    if (error) json_str_field(b, "error", error);
    assay_strbuf_puts(b, "}\n");
}

static void plan_text(const assay_plan_request *r, const assay_plan *p, const char *label, int has_bw, const char *note,
                      assay_strbuf *b) {
    const assay_model_config *c = &r->model;
    char g1[48], g2[48];
    assay_strbuf_printf(b, "%s on %lld x %s", label, (long long)r->num_gpus, r->gpu.name);
    if (r->tensor_parallel > 1 || p->replicas > 1) {
        assay_strbuf_printf(b, " (tensor parallel %lld", (long long)r->tensor_parallel);
        if (p->replicas > 1) assay_strbuf_printf(b, ", %lld data-parallel replicas", (long long)p->replicas);
        assay_strbuf_puts(b, ")");
    }
    char s1[32], s2[32], s3[32], s4[32], s5[32];
    char params[32];
    if (p->params >= 1e9) snprintf(params, sizeof params, "%.2fB", p->params / 1e9);
    else grouped(p->params, params, sizeof params);
    assay_strbuf_printf(b, "\n  model        %lld layers, hidden %lld, %lld heads, %lld KV heads x %lld, FFN %lld, vocab %lld, "
                        "%s; %s parameters\n", (long long)c->n_layer, (long long)c->n_embd, (long long)c->n_head,
                        (long long)c->n_head_kv, (long long)c->head_dim, (long long)c->n_ff, (long long)c->n_vocab,
                        c->tied_embeddings ? "lm_head tied" : "lm_head untied", params);
    assay_strbuf_printf(b, "  weights      %s: %s in all (%.2f bits a weight), %s per GPU\n", r->scheme.name,
                        size_str(p->weight_bytes, s1, sizeof s1), p->bits_per_weight,
                        size_str(p->weight_bytes_per_gpu, s2, sizeof s2));
    assay_strbuf_printf(b, "               (%s)\n", assay_plan_scheme_describe(&r->scheme));
    if (note && note[0]) assay_strbuf_printf(b, "               note: %s\n", note);
    assay_strbuf_printf(b, "  KV cache     %s (%s layout): %s bytes a token", assay_kv_dtype_name(r->kv_dtype),
                        r->kv_slot_scales ? "assay" : "vLLM", grouped(p->kv_bytes_per_token, g1, sizeof g1));
    if (r->tensor_parallel > 1) {
        assay_strbuf_printf(b, ", %s per GPU (%lld of %lld KV heads on each", grouped(p->kv_bytes_per_token_per_gpu, g2, sizeof g2),
                            (long long)p->kv_heads_per_gpu, (long long)c->n_head_kv);
        if (p->kv_head_copies > 1) assay_strbuf_printf(b, "; each head kept on %lld GPUs", (long long)p->kv_head_copies);
        assay_strbuf_puts(b, ")");
    }
    assay_strbuf_printf(b, "\n  memory/GPU   %.2f x %s = %s - weights %s - reserve %s = %s for the KV cache\n",
                        r->gpu_memory_utilization, size_str(r->gpu.memory_bytes, s1, sizeof s1),
                        size_str(p->usable_bytes_per_gpu, s2, sizeof s2), size_str(p->weight_bytes_per_gpu, s3, sizeof s3),
                        size_str(r->reserve_bytes, s4, sizeof s4), size_str(p->kv_pool_bytes_per_gpu, s5, sizeof s5));
    if (p->kv_pool_bytes_per_gpu > 0) {
        assay_strbuf_printf(b, "  KV capacity  %s tokens (%s blocks of %d)", grouped((double)p->kv_tokens, g1, sizeof g1),
                            grouped((double)p->kv_blocks, g2, sizeof g2), ASSAY_PLAN_BLOCK);
        if (p->replicas > 1)
            assay_strbuf_printf(b, " per replica, %s in all", grouped((double)(p->kv_tokens * p->replicas), g1, sizeof g1));
        assay_strbuf_printf(b, "\n  concurrency  %.2fx at %s tokens a sequence (vLLM's maximum concurrency)", p->concurrency,
                            grouped((double)r->max_model_len, g1, sizeof g1));
        if (p->replicas > 1) assay_strbuf_printf(b, " per replica");
        assay_strbuf_printf(b, ": %lld whole sequence%s at once\n", (long long)p->max_seqs, p->max_seqs == 1 ? "" : "s");
    }
    if (has_bw && p->kv_pool_bytes_per_gpu > 0) {
        assay_strbuf_printf(b, "  decode bound %s GB/s of memory bandwidth, each sequence holding %s tokens of context:\n",
                            grouped(r->gpu.bandwidth / 1e9, g2, sizeof g2), grouped((double)r->decode_context, g1, sizeof g1));
        for (int i = 0; i < 2; i++) {
            const assay_plan_decode *d = &p->decode[i];
            assay_strbuf_printf(b, "               batch %2lld: %9s tok/s", (long long)d->batch,
                                grouped(d->tokens_per_s, g1, sizeof g1));
            if (p->replicas > 1)
                assay_strbuf_printf(b, " a replica, %s with %lld replicas", grouped(d->tokens_per_s * (double)p->replicas, g2, sizeof g2),
                                    (long long)p->replicas);
            assay_strbuf_printf(b, " (%s read a step per GPU)", size_str(d->bytes_per_step, s1, sizeof s1));
            if (!d->kv_fits) assay_strbuf_puts(b, " - more KV than the cache holds");
            assay_strbuf_puts(b, "\n");
        }
    }
    assay_strbuf_printf(b, "  notes        GB = 10^9 bytes. The reserve (--reserve-memory) stands for what vLLM's profiling "
                           "finds besides the weights:\n               activation peak, CUDA context, NCCL buffers, CUDA "
                           "graphs (1-3 GB is typical). The decode bound reads every\n               weight and the "
                           "batch's KV once a step and ignores compute, inter-GPU traffic and kernel efficiency;\n"
                           "               real decode reaches perhaps 50-80%% of it.\n");
}

int assay_cmd_plan(int argc, char **argv) {
    const char *gpu = NULL, *gpu_mem = NULL, *gpu_bw = NULL, *scheme = NULL, *kv = NULL, *layout = "vllm", *reserve = "2GiB";
    int64_t num_gpus = 0, tp = 0, max_len = 0, ctx = 1024;
    double util = 0.9;
    int json = 0, guides = 0;
    const cli_option opts[] = {
        {NULL, "--gpu", CLI_STRING, &gpu, "NAME", "h100 (H100 SXM 80 GB), h200 (141 GB), b200 (180 GB), l40s (48 GB), rtx4090 (24 GB)"},
        {NULL, "--gpu-memory", CLI_STRING, &gpu_mem, "BYTES", "memory per GPU instead of (or overriding) --gpu's: 85520809984, 80GB, 79.6GiB"},
        {NULL, "--gpu-bandwidth", CLI_STRING, &gpu_bw, "BYTES/S", "memory bandwidth for the decode bound, e.g. 3.35TB/s (default: --gpu's)"},
        {NULL, "--num-gpus", CLI_INT, &num_gpus, "N", "GPUs in all (default: the tensor-parallel size)", CLI_AT_LEAST(0)},
        {"-tp", "--tensor-parallel-size", CLI_INT, &tp, "N", "GPUs one copy of the model is split over (default: --num-gpus)", CLI_AT_LEAST(0)},
        {"-q", "--quantization", CLI_STRING, &scheme, "SCHEME", "weights: bf16 f16 fp8 int8 int4 (AWQ/GPTQ g128) int4-g64 q8_0 q6_k q5_k_m q4_k_m q3_k_m q2_k ... (default: as the model declares; bf16 for presets)"},
        {NULL, "--kv-cache-dtype", CLI_STRING, &kv, "DTYPE", "auto (= bf16), bf16, f16, fp8 (= fp8_e4m3), fp8_e5m2, int8, f32"},
        {NULL, "--kv-layout", CLI_STRING, &layout, "vllm|assay", "vllm: fp8 scales per layer (default); assay: the engine's per-token scales"},
        {NULL, "--max-model-len", CLI_INT, &max_len, "N", "tokens a sequence may reach, for the concurrency (default 8192, or the model's context if shorter)", CLI_AT_LEAST(0)},
        {NULL, "--gpu-memory-utilization", CLI_FLOAT, &util, "F", "fraction of each GPU's memory to use (default 0.9, as vLLM)", CLI_IN_OPEN_CLOSED(0, 1)},
        {NULL, "--reserve-memory", CLI_STRING, &reserve, "BYTES", "per GPU, for activations and the runtime (default 2GiB)"},
        {NULL, "--decode-context", CLI_INT, &ctx, "N", "tokens of context per sequence in the decode bound (default 1024)", CLI_AT_LEAST(1)},
        {NULL, "--json", CLI_FLAG, &json, NULL, "print one JSON object"},
        {NULL, "--guides", CLI_FLAG, &guides, NULL, "recompute the deployment guides' figures and say which add up"},
        {0}};
    const cli_spec spec = {"plan", "MODEL --gpu NAME [--num-gpus N] [--tensor-parallel-size N] [-q SCHEME] [--kv-cache-dtype D] "
                                   "[--max-model-len N] [options]  |  --guides",
                           "size a deployment: weights per GPU, KV bytes a token, KV capacity, concurrency, a decode bound; "
                           "MODEL is an HF directory, a config.json, a GGUF file or a preset (llama-3.1-8b, llama-3.1-70b, "
                           "llama-3.1-405b, qwen2.5-14b, qwen2.5-72b); exit code 1 when it does not fit",
                           opts, 0, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (guides) {
        int n = args.count;
        cli_args_free(&args);
        if (n) return cli_usage_error(&spec, "--guides takes no MODEL");
        return print_guides(json);
    }
    if (args.count != 1) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "a MODEL is needed (an HF directory, a config.json, a GGUF file or a preset name)");
    }
    assay_plan_request r;
    assay_plan_request_default(&r);
    /* sizes and counts */
    if (!gpu && !gpu_mem) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--gpu NAME or --gpu-memory BYTES is needed");
    }
    int has_bw = 1;
    if (gpu) {
        if (assay_plan_gpu_find(gpu, &r.gpu)) {
            cli_args_free(&args);
            return cli_usage_error(&spec, "--gpu: %s", assay_last_error());
        }
    } else {
        snprintf(r.gpu.name, sizeof r.gpu.name, "GPU");
        r.gpu.bandwidth = 1; /* placeholder: no bound is printed without a bandwidth */
        has_bw = 0;
    }
    if (gpu_mem) {
        double v = assay_plan_parse_bytes(gpu_mem);
        if (!(v > 0)) {
            cli_args_free(&args);
            return cli_usage_error(&spec, "--gpu-memory: '%s' is not a size (85520809984, 80GB, 79.6GiB)", gpu_mem);
        }
        r.gpu.memory_bytes = v;
        if (!gpu) snprintf(r.gpu.name, sizeof r.gpu.name, "%.1f GB GPU", v / GB);
        else {
            char base[sizeof r.gpu.name];
            snprintf(base, sizeof base, "%s", r.gpu.name);
            snprintf(r.gpu.name, sizeof r.gpu.name, "%.24s with %.1f GB", base, v / GB);
        }
    }
    if (gpu_bw) {
        double v = assay_plan_parse_bytes(gpu_bw);
        if (!(v > 0)) {
            cli_args_free(&args);
            return cli_usage_error(&spec, "--gpu-bandwidth: '%s' is not a rate (3.35TB/s, 1008GB/s)", gpu_bw);
        }
        r.gpu.bandwidth = v;
        has_bw = 1;
    }
    double res = assay_plan_parse_bytes(reserve);
    if (res < 0) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--reserve-memory: '%s' is not a size (2GiB, 1.5GB, 0)", reserve);
    }
    r.reserve_bytes = res;
    if (num_gpus < 0 || tp < 0) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--num-gpus and --tensor-parallel-size must be at least 1");
    }
    r.tensor_parallel = tp ? tp : (num_gpus ? num_gpus : 1);
    r.num_gpus = num_gpus ? num_gpus : r.tensor_parallel;
    r.gpu_memory_utilization = util;
    r.decode_context = ctx;
    if (!strcmp(layout, "assay")) r.kv_slot_scales = 1;
    else if (strcmp(layout, "vllm")) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--kv-layout is vllm or assay, not '%s'", layout);
    }
    if (kv && strcmp(kv, "auto") && assay_kv_dtype_from_name(kv, &r.kv_dtype)) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--kv-cache-dtype: %s", assay_last_error());
    }
    if (scheme && assay_plan_scheme_parse(scheme, &r.scheme)) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--quantization: %s", assay_last_error());
    }

    /* the model */
    char label[256], note[256];
    assay_gguf *gguf = NULL;
    assay_plan_scheme declared;
    assay_status st = resolve_model(args.positional[0], &r, &gguf, label, sizeof label, &declared, note, sizeof note);
    cli_args_free(&args);
    if (st) return cli_report_error("plan");
    if (!scheme) r.scheme = declared;
    else if (scheme && gguf && r.scheme.kind != ASSAY_PLAN_SCHEME_STORED)
        snprintf(note, sizeof note, "the file's own tensor types are ignored: its shapes are priced as %s", r.scheme.name);
    r.gguf = gguf;
    r.model_name = label;
    /* vLLM's default is the model's whole context; the guides size at 8K, which is the default here */
    r.max_model_len = max_len ? max_len : (r.model.n_ctx_train > 0 && r.model.n_ctx_train < 8192 ? r.model.n_ctx_train : 8192);

    assay_plan p;
    st = assay_plan_compute(&r, &p);
    if (st) {
        if (gguf) assay_gguf_close(gguf);
        return cli_report_error("plan");
    }
    /* what does not fit, in words */
    char error[512] = "";
    char g1[48];
    if (!p.fits && p.kv_pool_bytes_per_gpu < 0)
        snprintf(error, sizeof error, "the weights do not fit: %.2f GB per GPU + a %.2f GB reserve exceed the %.2f GB usable "
                 "(%.2f x %.2f GB) by %.2f GB per GPU, before any KV cache (one sequence of %s tokens needs %.2f GB more); "
                 "try a larger --tensor-parallel-size, a smaller --quantization or a larger GPU", p.weight_bytes_per_gpu / GB,
                 r.reserve_bytes / GB, p.usable_bytes_per_gpu / GB, r.gpu_memory_utilization, r.gpu.memory_bytes / GB,
                 -p.kv_pool_bytes_per_gpu / GB, grouped((double)r.max_model_len, g1, sizeof g1),
                 (p.short_bytes + p.kv_pool_bytes_per_gpu) / GB);
    else if (!p.fits)
        snprintf(error, sizeof error, "the KV cache holds %lld tokens, less than one sequence of --max-model-len %s: %.2f GB "
                 "short per GPU; lower --max-model-len, use a smaller --kv-cache-dtype or --quantization, or more GPUs",
                 (long long)p.kv_tokens, grouped((double)r.max_model_len, g1, sizeof g1), p.short_bytes / GB);
    assay_strbuf b = {0};
    if (json) plan_json(&r, &p, label, has_bw, p.fits ? NULL : error, &b);
    else plan_text(&r, &p, label, has_bw, note, &b);
    fputs(b.data, stdout);
    fflush(stdout);
    assay_strbuf_free(&b);
    if (gguf) assay_gguf_close(gguf);
    if (!p.fits) {
        fprintf(stderr, "assay plan: %s\n", error);
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_OK;
}
