/* cmd_inspect.c — `assay inspect MODEL`: what a GGUF file or HF directory holds.
 *
 *   assay inspect ../shared/models/house            # human-readable summary and tensor table
 *   assay inspect model.gguf --json                 # the same as one JSON object, for scripts
 *
 * Shapes are printed in ggml order (innermost first), the same for both sources and the same as gguf-py's
 * tensor.shape; an HF weight of shape [out, in] shows as [in, out].
 */
#include <stdio.h>
#include <string.h>

#include "assay/ggml_quant.h"
#include "assay/hf_config.h"
#include "assay/json.h"
#include "assay/model_file.h"
#include "assay/strbuf.h"
#include "assay/weight_type.h"
#include "cli.h"
#include "commands.h"

typedef struct tokenizer_summary {
    char model[64]; /* "gpt2", "llama", "BPE", "Unigram", ... */
    char pre[64];
    int64_t vocab;
    int64_t bos, eos;
    int64_t merges;
    const char *source;
} tokenizer_summary;

static void summarize_tokenizer(const assay_model_file *mf, tokenizer_summary *ts) {
    memset(ts, 0, sizeof *ts);
    ts->vocab = ts->bos = ts->eos = ts->merges = -1;
    const assay_model_config *c = assay_model_file_config(mf);
    ts->bos = c->bos_id;
    ts->eos = c->eos_id;
    const assay_gguf *g = assay_model_file_gguf(mf);
    if (g) {
        assay_gguf_str s;
        ts->source = "gguf";
        if (assay_gguf_get_string(g, "tokenizer.ggml.model", &s))
            snprintf(ts->model, sizeof ts->model, "%.*s", (int)(s.len < 63 ? s.len : 63), s.ptr);
        if (assay_gguf_get_string(g, "tokenizer.ggml.pre", &s))
            snprintf(ts->pre, sizeof ts->pre, "%.*s", (int)(s.len < 63 ? s.len : 63), s.ptr);
        const assay_gguf_kv *kv = assay_gguf_find(g, "tokenizer.ggml.tokens");
        if (kv && kv->type == ASSAY_GGUF_ARRAY) ts->vocab = (int64_t)kv->array_len;
        kv = assay_gguf_find(g, "tokenizer.ggml.merges");
        if (kv && kv->type == ASSAY_GGUF_ARRAY) ts->merges = (int64_t)kv->array_len;
        ts->bos = assay_gguf_get_int(g, "tokenizer.ggml.bos_token_id", -1);
        ts->eos = assay_gguf_get_int(g, "tokenizer.ggml.eos_token_id", -1);
        return;
    }
    const char *tj = assay_model_file_tokenizer_json(mf);
    assay_json_doc *doc;
    if (!tj || assay_json_parse_file(tj, &doc) != ASSAY_OK) return;
    ts->source = "tokenizer.json";
    const assay_json *root = assay_json_root(doc);
    const assay_json *model = assay_json_get(root, "model");
    snprintf(ts->model, sizeof ts->model, "%s", assay_json_string(assay_json_get(model, "type"), "?"));
    const char *pre = assay_json_string(assay_json_get(assay_json_get(root, "pre_tokenizer"), "type"), "");
    snprintf(ts->pre, sizeof ts->pre, "%s", pre);
    const assay_json *vocab = assay_json_get(model, "vocab");
    int64_t n = vocab ? vocab->count : 0;
    /* Added tokens beyond the model's vocabulary extend it. */
    for (const assay_json *a = assay_json_get(root, "added_tokens") ? assay_json_get(root, "added_tokens")->first : NULL;
         a; a = a->next) {
        int64_t id = assay_json_int(assay_json_get(a, "id"), -1);
        if (id + 1 > n) n = id + 1;
    }
    ts->vocab = n;
    const assay_json *merges = assay_json_get(model, "merges");
    if (merges) ts->merges = merges->count;
    assay_json_doc_free(doc);
}

static const char *rope_scaling_name(assay_rope_scaling s) {
    switch (s) {
    case ASSAY_ROPE_SCALING_LINEAR: return "linear";
    case ASSAY_ROPE_SCALING_LLAMA3: return "llama3";
    case ASSAY_ROPE_SCALING_YARN: return "yarn";
    default: return "none";
    }
}

/* "28,122,624" */
static const char *commas(int64_t v, char *buf) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)(v < 0 ? -v : v)), o = 0;
    if (v < 0) buf[o++] = '-';
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

typedef struct type_total {
    int64_t tensors, elements;
    size_t bytes;
} type_total;

int assay_cmd_inspect(int argc, char **argv) {
    int as_json = 0, no_tensors = 0;
    const cli_option opts[] = {
        {NULL, "--json", CLI_FLAG, &as_json, NULL, "print one JSON object instead of text"},
        {NULL, "--no-tensors", CLI_FLAG, &no_tensors, NULL, "leave out the per-tensor table"},
        {0}};
    const cli_spec spec = {"inspect", "MODEL [--json]",
                           "architecture, hyper-parameters, parameter count, tensor table, bytes by type, tokenizer and "
                           "chat template of a GGUF file or HF safetensors directory",
                           opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    assay_model_file *mf;
    if (assay_model_file_open(&mf, args.positional[0]) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_report_error("inspect");
    }
    const assay_model_config *c = assay_model_file_config(mf);
    int64_t nt = assay_model_file_tensor_count(mf), params = 0;
    static type_total totals[ASSAY_TYPE_COUNT];
    memset(totals, 0, sizeof totals);
    size_t total_bytes = 0;
    for (int64_t i = 0; i < nt; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        int64_t ne = assay_tensor_nelements(t);
        params += ne;
        total_bytes += t->bytes;
        if ((int)t->type >= 0 && t->type < ASSAY_TYPE_COUNT) {
            totals[t->type].tensors++;
            totals[t->type].elements += ne;
            totals[t->type].bytes += t->bytes;
        }
    }
    int main_type = -1; /* the type holding most bytes: "the model's dtype" */
    for (int ty = 0; ty < ASSAY_TYPE_COUNT; ty++)
        if (totals[ty].tensors && (main_type < 0 || totals[ty].bytes > totals[main_type].bytes)) main_type = ty;
    tokenizer_summary ts;
    summarize_tokenizer(mf, &ts);
    const char *tmpl = assay_model_file_chat_template(mf);
    const assay_gguf *g = assay_model_file_gguf(mf);
    int is_gguf = assay_model_file_format(mf) == ASSAY_MODEL_FORMAT_GGUF;

    assay_strbuf b = {0};
    if (as_json) {
        assay_strbuf_puts(&b, "{\"path\": ");
        assay_strbuf_json_string(&b, args.positional[0], strlen(args.positional[0]));
        assay_strbuf_printf(&b, ", \"format\": \"%s\"", is_gguf ? "gguf" : "hf");
        if (g) assay_strbuf_printf(&b, ", \"gguf_version\": %u, \"metadata_count\": %lld, \"file_type\": %lld",
                                   assay_gguf_version(g), (long long)assay_gguf_kv_count(g),
                                   (long long)assay_gguf_get_int(g, "general.file_type", -1));
        assay_strbuf_printf(&b, ", \"architecture\": \"%s\", \"config\": {", c->arch);
        assay_strbuf_printf(&b,
                            "\"n_layer\": %lld, \"n_embd\": %lld, \"n_head\": %lld, \"n_head_kv\": %lld, \"head_dim\": %lld, "
                            "\"n_ff\": %lld, \"n_vocab\": %lld, \"n_ctx_train\": %lld, \"norm_eps\": ",
                            (long long)c->n_layer, (long long)c->n_embd, (long long)c->n_head, (long long)c->n_head_kv,
                            (long long)c->head_dim, (long long)c->n_ff, (long long)c->n_vocab, (long long)c->n_ctx_train);
        assay_strbuf_json_number(&b, c->norm_eps);
        assay_strbuf_puts(&b, ", \"rope_theta\": ");
        assay_strbuf_json_number(&b, c->rope_theta);
        assay_strbuf_printf(&b, ", \"rope_style\": \"%s\", \"rope_scaling\": \"%s\", \"rope_factor\": ",
                            c->rope_style == ASSAY_ROPE_NEOX ? "neox" : "norm", rope_scaling_name(c->rope_scaling));
        assay_strbuf_json_number(&b, c->rope_factor);
        assay_strbuf_printf(&b, ", \"tied_embeddings\": %s, \"has_qkv_bias\": %s, \"has_qk_norm\": %s",
                            c->tied_embeddings ? "true" : "false", c->has_qkv_bias ? "true" : "false",
                            c->has_qk_norm ? "true" : "false");
        if (c->sliding_window) {
            assay_strbuf_printf(&b, ", \"sliding_window\": %lld, \"sliding_window_pattern\": %lld, \"rope_theta_local\": ",
                                (long long)c->sliding_window, (long long)c->sliding_window_pattern);
            assay_strbuf_json_number(&b, c->rope_theta_local);
        }
        assay_strbuf_printf(&b, ", \"bos_id\": %lld, \"eos_id\": %lld}", (long long)c->bos_id, (long long)c->eos_id);
        assay_strbuf_printf(&b, ", \"parameters\": %lld, \"bytes\": %zu, \"dtype\": \"%s\"", (long long)params, total_bytes,
                            main_type >= 0 ? assay_type_name((assay_type)main_type) : "none");
        assay_strbuf_puts(&b, ", \"bytes_by_type\": {");
        int first = 1;
        for (int ty = 0; ty < ASSAY_TYPE_COUNT; ty++)
            if (totals[ty].tensors) {
                assay_strbuf_printf(&b, "%s\"%s\": {\"tensors\": %lld, \"elements\": %lld, \"bytes\": %zu}", first ? "" : ", ",
                                    assay_type_name((assay_type)ty), (long long)totals[ty].tensors,
                                    (long long)totals[ty].elements, totals[ty].bytes);
                first = 0;
            }
        assay_strbuf_printf(&b, "}, \"tokenizer\": {\"model\": ");
        assay_strbuf_json_string(&b, ts.model, strlen(ts.model));
        assay_strbuf_puts(&b, ", \"pre\": ");
        assay_strbuf_json_string(&b, ts.pre, strlen(ts.pre));
        assay_strbuf_printf(&b, ", \"vocab_size\": %lld, \"merges\": %lld, \"bos_id\": %lld, \"eos_id\": %lld}",
                            (long long)ts.vocab, (long long)ts.merges, (long long)ts.bos, (long long)ts.eos);
        assay_strbuf_printf(&b, ", \"chat_template\": %s", tmpl ? "true" : "false");
        if (!no_tensors) {
            assay_strbuf_puts(&b, ", \"tensors\": [");
            for (int64_t i = 0; i < nt; i++) {
                const assay_tensor *t = assay_model_file_tensor(mf, i);
                assay_strbuf_puts(&b, i ? ",\n  {\"name\": " : "\n  {\"name\": ");
                assay_strbuf_json_string(&b, t->name, strlen(t->name));
                if (!is_gguf) {
                    assay_strbuf_puts(&b, ", \"source_name\": ");
                    assay_strbuf_json_string(&b, t->source_name, strlen(t->source_name));
                }
                assay_strbuf_puts(&b, ", \"shape\": [");
                for (int d = 0; d < t->n_dims; d++) assay_strbuf_printf(&b, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
                assay_strbuf_printf(&b, "], \"type\": \"%s\", \"bytes\": %zu}", assay_type_name(t->type), t->bytes);
            }
            assay_strbuf_puts(&b, "]");
        }
        assay_strbuf_puts(&b, "}\n");
    } else {
        char n1[32], n2[32];
        assay_strbuf_printf(&b, "model:        %s (%s)\n", args.positional[0],
                            is_gguf ? "GGUF" : "Hugging Face safetensors directory");
        if (g) {
            assay_strbuf_printf(&b, "gguf:         version %u, %lld metadata keys, alignment %llu", assay_gguf_version(g),
                                (long long)assay_gguf_kv_count(g), (unsigned long long)assay_gguf_alignment(g));
            int64_t ft = assay_gguf_get_int(g, "general.file_type", -1);
            /* The float file types are not quantization mixes, so ggml_quant's table leaves them out. */
            const char *ftn = ft == 0 ? "all f32" : ft == 1 ? "mostly f16" : ft == 32 ? "mostly bf16"
                                                                                     : assay_ggml_ftype_name((assay_ggml_ftype)ft);
            if (ft >= 0) assay_strbuf_printf(&b, ", file type %lld (%s)", (long long)ft, ftn);
            assay_strbuf_putc(&b, '\n');
        }
        assay_strbuf_printf(&b, "architecture: %s\n", c->arch);
        assay_strbuf_printf(&b, "  layers %lld, hidden %lld, heads %lld/%lld (q/kv), head_dim %lld, ffn %lld, vocab %lld, "
                                "context %lld\n",
                            (long long)c->n_layer, (long long)c->n_embd, (long long)c->n_head, (long long)c->n_head_kv,
                            (long long)c->head_dim, (long long)c->n_ff, (long long)c->n_vocab, (long long)c->n_ctx_train);
        assay_strbuf_printf(&b, "  rms_norm_eps %g, rope theta %g (%s), rope scaling %s", c->norm_eps, c->rope_theta,
                            c->rope_style == ASSAY_ROPE_NEOX ? "neox" : "normal", rope_scaling_name(c->rope_scaling));
        if (c->rope_scaling != ASSAY_ROPE_SCALING_NONE) assay_strbuf_printf(&b, " x%g", c->rope_factor);
        assay_strbuf_printf(&b, ", embeddings %s%s%s\n", c->tied_embeddings ? "tied" : "untied",
                            c->has_qkv_bias ? ", qkv bias" : "", c->has_qk_norm ? ", q/k norm" : "");
        if (c->sliding_window)
            assay_strbuf_printf(&b, "  sliding window %lld (every %lld-th layer global), local rope theta %g\n",
                                (long long)c->sliding_window, (long long)c->sliding_window_pattern, c->rope_theta_local);
        assay_strbuf_printf(&b, "parameters:   %s (%.1fM), %s bytes, dtype %s\n", commas(params, n1), params / 1e6,
                            commas((int64_t)total_bytes, n2), main_type >= 0 ? assay_type_name((assay_type)main_type) : "none");
        assay_strbuf_puts(&b, "bytes by type:\n");
        for (int ty = 0; ty < ASSAY_TYPE_COUNT; ty++)
            if (totals[ty].tensors)
                assay_strbuf_printf(&b, "  %-8s %4lld tensors %16s bytes %6.2f%%\n", assay_type_name((assay_type)ty),
                                    (long long)totals[ty].tensors, commas((int64_t)totals[ty].bytes, n1),
                                    total_bytes ? 100.0 * (double)totals[ty].bytes / (double)total_bytes : 0.0);
        if (ts.source) {
            assay_strbuf_printf(&b, "tokenizer:    %s (from %s), vocab %lld", ts.model, ts.source, (long long)ts.vocab);
            if (ts.pre[0]) assay_strbuf_printf(&b, ", pre-tokenizer %s", ts.pre);
            if (ts.merges >= 0) assay_strbuf_printf(&b, ", %lld merges", (long long)ts.merges);
            assay_strbuf_printf(&b, ", bos %lld, eos %lld\n", (long long)ts.bos, (long long)ts.eos);
        } else
            assay_strbuf_puts(&b, "tokenizer:    none found\n");
        assay_strbuf_printf(&b, "chat template: %s\n", tmpl ? "present" : "absent");
        if (!no_tensors) {
            assay_strbuf_printf(&b, "tensors:      %lld\n", (long long)nt);
            for (int64_t i = 0; i < nt; i++) {
                const assay_tensor *t = assay_model_file_tensor(mf, i);
                char shape[96];
                int o = snprintf(shape, sizeof shape, "[");
                for (int d = 0; d < t->n_dims; d++)
                    o += snprintf(shape + o, sizeof shape - o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
                snprintf(shape + o, sizeof shape - o, "]");
                assay_strbuf_printf(&b, "  %-40s %-22s %-8s %14s\n", t->name, shape, assay_type_name(t->type),
                                    commas((int64_t)t->bytes, n1));
            }
        }
    }
    fputs(b.data, stdout);
    assay_strbuf_free(&b);
    assay_model_file_close(mf);
    cli_args_free(&args);
    return CLI_EXIT_OK;
}
