/* engine_cli.c — see engine_cli.h. */
#include "engine_cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "assay/backend.h"
#include "assay/model.h"

void engine_cli_init(engine_cli *ec) {
    memset(ec, 0, sizeof *ec);
    assay_engine_args d;
    assay_engine_args_default(&d);
    ec->max_num_seqs = d.max_num_seqs;
    ec->max_num_batched_tokens = d.max_num_batched_tokens;
    ec->gpu_memory_utilization = d.gpu_memory_utilization;
    ec->kv_scale_tokens = 1024;
    ec->seed_help = "engine: seed of requests that bring none (and of dummy weights): same seed, same text; -1: a random "
                    "one, printed (default 0)";
}

/* "2G", "512M", "65536", "1.5GiB" -> bytes; -1 when it is not a size */
static int64_t parse_bytes(const char *s) {
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0)) return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1048576.0; end++; break;
    case 'g': case 'G': mul = 1073741824.0; end++; break;
    case 't': case 'T': mul = 1099511627776.0; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I')) end++;
    if (mul > 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end) return -1;
    double b = v * mul;
    return b > 9.0e18 ? -1 : (int64_t)b;
}

int engine_cli_args(const engine_cli *ec, const cli_spec *spec, const char *model, assay_engine_args *a) {
    assay_engine_args_default(a);
    a->model = model;
    if (ec->device) {
        if (assay_backend_check(ec->device) != ASSAY_OK) return cli_usage_error(spec, "%s", assay_last_error());
        a->device = ec->device;
    }
    if (ec->quantization) {
        if (assay_model_quantization_check(ec->quantization) != ASSAY_OK)
            return cli_usage_error(spec, "--quantization: %s", assay_last_error());
        a->quantization = ec->quantization;
    }
    if (ec->load_format) {
        if (assay_model_load_format_check(ec->load_format) != ASSAY_OK)
            return cli_usage_error(spec, "--load-format: %s", assay_last_error());
        a->load_format = ec->load_format;
    }
    if (ec->kv_cache_dtype && strcmp(ec->kv_cache_dtype, "auto") != 0 &&
        assay_kv_dtype_from_name(ec->kv_cache_dtype, &a->kv_cache_dtype) != ASSAY_OK)
        return cli_usage_error(spec, "--kv-cache-dtype: %s", assay_last_error());
    if (ec->calculate_kv_scales && !assay_kv_dtype_scaled(a->kv_cache_dtype))
        return cli_usage_error(spec, "--calculate-kv-scales needs an 8-bit KV cache (--kv-cache-dtype fp8 or int8), not %s",
                               assay_kv_dtype_name(a->kv_cache_dtype));
    if (ec->kv_cache_memory) {
        a->kv_cache_memory = parse_bytes(ec->kv_cache_memory);
        if (a->kv_cache_memory <= 0)
            return cli_usage_error(spec, "--kv-cache-memory: '%s' is not a size in bytes (e.g. 4G, 512M, 1048576)",
                                   ec->kv_cache_memory);
    }
    a->threads = (int)ec->threads;
    a->max_model_len = ec->max_model_len;
    a->max_num_seqs = ec->max_num_seqs;
    a->max_num_batched_tokens = ec->max_num_batched_tokens;
    a->num_gpu_blocks_override = ec->num_gpu_blocks_override;
    a->enable_prefix_caching = !ec->no_prefix_caching;
    a->gpu_memory_utilization = ec->gpu_memory_utilization;
    a->calculate_kv_scales = ec->calculate_kv_scales ? ec->kv_scale_tokens : 0;
    a->seed = cli_seed(spec->command, ec->seed);
    return CLI_CONTINUE;
}

int engine_cli_parse_text(const char *text, const char *what, const char *model, assay_engine_args *a, char **storage) {
    engine_cli ec;
    engine_cli_init(&ec);
    const cli_option opts[] = {ENGINE_CLI_OPTIONS(ec), {0}};
    const cli_spec spec = {what, "'ENGINE FLAGS'", "engine flags", opts, 0, 0};
    char *s = assay_xstrdup(text ? text : "");
    *storage = s;
    int argc = 1;
    char *argv[128];
    argv[0] = (char *)what;
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        if (argc == 127) return cli_usage_error(&spec, "too many engine flags");
        argv[argc++] = tok;
    }
    argv[argc] = NULL;
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc == CLI_EXIT_OK ? CLI_EXIT_USAGE : rc; /* --help inside a flag string is no run */
    cli_args_free(&args);
    return engine_cli_args(&ec, &spec, model, a);
}
