/* cmd_eval.c — `assay eval MODEL --tasks LIST`: lm-evaluation-harness tasks -> results JSON (lm-eval's shape).
 * `assay eval --base-url URL --tasks LIST` runs the same tasks through an OpenAI-compatible completions server
 * (eval.h: assay_eval_endpoint_open); documents whose requests fail after the retries are counted and left out, and
 * the results so far are written even when the run stops. `--dump-requests FILE` writes the prompts of every task as
 * JSON lines without needing a model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/engine.h"
#include "assay/eval.h"
#include "assay/file.h"
#include "assay/logits_file.h"
#include "assay/model.h"
#include "assay/sha256.h"
#include "assay/strbuf.h"
#include "cli.h"
#include "engine_cli.h"
#include "commands.h"

static void dump_doc(assay_strbuf *b, const assay_task_docs *t, const assay_eval_doc *d) {
    assay_strbuf_puts(b, "{\"task\": ");
    assay_strbuf_json_string(b, t->name, strlen(t->name));
    assay_strbuf_printf(b, ", \"doc_id\": %lld, ", (long long)d->doc_id);
    if (t->kind == ASSAY_TASK_MULTIPLE_CHOICE) {
        assay_strbuf_puts(b, "\"context\": ");
        assay_strbuf_json_string(b, d->context, strlen(d->context));
        assay_strbuf_puts(b, ", \"continuations\": [");
        for (int c = 0; c < d->n_choices; c++) {
            assay_strbuf s = {0};
            assay_strbuf_printf(&s, "%s%s", t->target_delimiter, d->choices[c]);
            assay_strbuf_puts(b, c ? ", " : "");
            assay_strbuf_json_string(b, s.data, s.len);
            assay_strbuf_free(&s);
        }
        assay_strbuf_printf(b, "], \"gold\": %d", d->gold);
    } else if (t->kind == ASSAY_TASK_GENERATE) {
        assay_strbuf_puts(b, "\"context\": ");
        assay_strbuf_json_string(b, d->context, strlen(d->context));
        assay_strbuf_puts(b, ", \"until\": [\"Question:\", \"</s>\", \"<|im_end|>\"], \"target\": ");
        assay_strbuf_json_string(b, d->target, strlen(d->target));
    } else if (t->kind == ASSAY_TASK_ROLLING) {
        assay_strbuf_puts(b, "\"target\": ");
        assay_strbuf_json_string(b, d->context, strlen(d->context));
        assay_strbuf_printf(b, ", \"words\": %lld, \"bytes\": %zu", (long long)assay_count_words_python(d->target),
                            strlen(d->target));
    } else {
        assay_strbuf_puts(b, "\"file\": ");
        assay_strbuf_json_string(b, d->target, strlen(d->target));
        assay_strbuf_printf(b, ", \"bytes\": %zu", strlen(d->context));
    }
    assay_strbuf_puts(b, "}\n");
}

static int dump_requests(const char *tasks_arg, const assay_eval_options *o, const char *path, int force) {
    assay_task_docs *tasks = NULL;
    int n = 0;
    assay_status st = ASSAY_OK;
    char *list = assay_xstrdup(tasks_arg);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && st == ASSAY_OK; name = strtok_r(NULL, ",", &save))
        if (*name) st = assay_task_load(name, o, &tasks, &n);
    free(list);
    assay_output_file out = {0};
    if (st == ASSAY_OK) st = assay_output_file_open(&out, path, force);
    for (int i = 0; i < n && st == ASSAY_OK; i++) {
        for (int64_t j = 0; j < tasks[i].n_docs; j++) {
            assay_strbuf b = {0};
            dump_doc(&b, &tasks[i], &tasks[i].docs[j]);
            fwrite(b.data, 1, b.len, out.fp);
            assay_strbuf_free(&b);
        }
    }
    if (st == ASSAY_OK) st = assay_output_file_commit(&out);
    else assay_output_file_abort(&out);
    for (int i = 0; i < n; i++) assay_task_docs_free(&tasks[i]);
    free(tasks);
    if (st != ASSAY_OK) return cli_report_error("eval");
    fprintf(stderr, "assay eval: wrote the requests of %d task(s) to %s\n", n, path);
    return CLI_EXIT_OK;
}

/* A regular file starting with the logits-file magic (a model is a directory or a GGUF file, "GGUF"). */
static int is_logits_file(const char *path) {
    if (assay_path_is_dir(path)) return 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, fp);
    fclose(fp);
    return got == 4 && memcmp(magic, ASSAY_LOGITS_MAGIC, 4) == 0;
}

/* The summary table lm-eval prints (utils.make_table), one row per metric. */
void assay_eval_print_table(const assay_eval_results *r, FILE *fp);
void assay_eval_print_table(const assay_eval_results *r, FILE *fp) {
    fprintf(fp, "|%-28s|n-shot|%-28s|%10s|   |%8s|%8s|\n", "Tasks", "Metric", "Value", "Stderr", "docs");
    fprintf(fp, "|%.28s|-----:|%.28s|%.10s|---|%.8s|%.8s|\n", "----------------------------", "----------------------------",
            "----------", "--------", "--------");
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        for (int m = 0; m < t->n_metrics; m++) {
            char se[32];
            if (isnan(t->stderr_[m])) snprintf(se, sizeof se, "N/A");
            else snprintf(se, sizeof se, "%.4f", t->stderr_[m]);
            fprintf(fp, "|%-28s|%6d|%-28s|%10.4f|±  |%8s|%8lld|\n", m ? "" : t->name, t->num_fewshot, t->metric_keys[m],
                    t->metric[m], se, (long long)t->n_effective);
        }
    }
}

static assay_status write_results(const assay_eval_results *res, const char *output, int force) {
    assay_strbuf js = {0};
    assay_eval_results_json(res, &js);
    assay_output_file out = {0};
    assay_status st = assay_output_file_open(&out, output, force);
    if (st == ASSAY_OK) {
        fwrite(js.data, 1, js.len, out.fp);
        st = assay_output_file_commit(&out);
    }
    assay_strbuf_free(&js);
    if (st == ASSAY_OK && !assay_output_is_stdout(output)) fprintf(stderr, "assay eval: wrote %s\n", output);
    return st;
}

/* Documents left out (failed or never tried), over all tasks; *first gets the first failure's message. */
static int64_t results_missing(const assay_eval_results *r, const char **first) {
    int64_t n = 0;
    *first = NULL;
    for (int i = 0; i < r->n_tasks; i++) {
        n += r->tasks[i].n_failed + r->tasks[i].n_skipped;
        if (!*first && r->tasks[i].first_error) *first = r->tasks[i].first_error;
    }
    return n;
}

/* `assay eval --base-url`: the tasks through the server; what was scored is printed and written even when some
 * documents failed or the run stopped, and then the exit status is 1. */
static int eval_endpoint(const assay_endpoint_options *eo, const char *tasks, const assay_eval_options *o,
                         const char *output, int force) {
    assay_lm *lm = NULL;
    assay_eval_results *res = NULL;
    assay_status st = assay_eval_endpoint_open(eo, &lm);
    if (st != ASSAY_OK) return cli_report_error("eval");
    fprintf(stderr, "assay eval: %s at %s (%s, %d in flight)\n", lm->name, eo->base_url,
            lm->tokenize ? "token-id prompts via /tokenize" : "text prompts", lm->concurrency);
    st = assay_eval_run(lm, tasks, o, &res);
    char *err = st != ASSAY_OK ? assay_xstrdup(assay_last_error()) : NULL;
    int64_t attempts = 0, retried = 0, failed = 0;
    assay_eval_endpoint_stats(lm, &attempts, &retried, &failed);
    fprintf(stderr, "assay eval: %lld requests, %lld of them retries, %lld failed after every retry\n", (long long)attempts,
            (long long)retried, (long long)failed);
    int missing_docs = 0, wrote = 0;
    if (res) {
        assay_strbuf margs = {0};
        assay_eval_endpoint_describe(lm, &margs);
        res->model_args = margs.data;
        assay_eval_print_table(res, assay_output_is_stdout(output) ? stderr : stdout); /* "-o -": the JSON alone on stdout */
        const char *first = NULL;
        int64_t missing = results_missing(res, &first);
        if (missing > 0) {
            fprintf(stderr, "assay eval: %lld document(s) left out of the results (failed or not tried); the first failure: %s\n",
                    (long long)missing, first ? first : "-");
            missing_docs = 1;
        }
        if (output) {
            assay_status ws = write_results(res, output, force);
            wrote = ws == ASSAY_OK;
            if (ws != ASSAY_OK && st == ASSAY_OK) {
                st = ws;
                err = assay_xstrdup(assay_last_error());
            }
        }
    }
    assay_eval_results_free(res);
    assay_eval_endpoint_close(lm);
    if (st != ASSAY_OK) {
        fprintf(stderr, "assay eval: %s%s\n", err, wrote ? " (the results so far are written)" : "");
        free(err);
        return CLI_EXIT_ERROR;
    }
    return missing_docs ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}

int assay_cmd_eval(int argc, char **argv) {
    const char *tasks = NULL, *output = NULL, *data_dir = NULL, *text = NULL, *dump = NULL, *kld_base = NULL;
    const char *base_url = NULL, *served = NULL, *api_key = NULL;
    int64_t fewshot = -1, limit = 0, ctx = 512, max_gen = 256, seed = 1234, concurrent = 1, retries = 3, max_failures = 5,
            max_length = 0, prefix_id = -1;
    double timeout = 300;
    int force = 0, quiet = 0, text_prompts = 0;
    engine_cli ec;
    engine_cli_init(&ec);
    const cli_option opts[] = {
        {NULL, "--tasks", CLI_STRING, &tasks, "LIST", "comma-separated: wikitext, heldout, kld, hellaswag, arc_challenge, piqa, mmlu, mmlu_<subject>, gsm8k"},
        {NULL, "--num-fewshot", CLI_INT, &fewshot, "K", "few-shot examples (default: each task's own: 0; mmlu 5; gsm8k 5)",
         CLI_AT_LEAST(0)},
        {NULL, "--limit", CLI_INT, &limit, "N", "only the first N documents of each task (windows for heldout/kld)",
         CLI_AT_LEAST(0)},
        {"-o", "--output", CLI_STRING, &output, "FILE", "write the results JSON (lm-eval's shape + samples) here (- for standard output)"},
        {NULL, "--force", CLI_FLAG, &force, NULL, "overwrite an existing output file"},
        {NULL, "--data-dir", CLI_STRING, &data_dir, "DIR", "task data root (default $ASSAY_SHARED/data)"},
        {NULL, "--text", CLI_STRING, &text, "FILE", "text for heldout/kld (default: the house model's heldout.txt)"},
        {"-c", "--ctx-size", CLI_INT, &ctx, "N", "window for heldout/kld perplexity in tokens (default 512)", CLI_AT_LEAST(2),
         .alias = "--ctx"},
        {NULL, "--max-gen-toks", CLI_INT, &max_gen, "N", "generation budget for gsm8k (default 256, as lm-eval)", CLI_AT_LEAST(1)},
        {NULL, "--fewshot-seed", CLI_INT, &seed, "N", "seed of the few-shot sampler (default 1234, as lm-eval)",
         CLI_IN(0, 4294967295.0)},
        {NULL, "--kld-base", CLI_STRING, &kld_base, "MODEL|FILE", "baseline of the kld task: a model, or logits saved by `assay perplexity --score-all --save-logits` (same --text and --ctx)"},
        {NULL, "--dump-requests", CLI_STRING, &dump, "FILE", "write the tasks' prompts as JSON lines and exit (no model needed)"},
        {NULL, "--quiet", CLI_FLAG, &quiet, NULL, "no progress bars"},
        {NULL, "--base-url", CLI_STRING, &base_url, "URL", "evaluate the model an OpenAI-compatible server serves (no MODEL)"},
        {NULL, "--model", CLI_STRING, &served, "NAME", "the served model's name (default: the first in /v1/models)"},
        {NULL, "--api-key", CLI_STRING, &api_key, "KEY", "sent as a bearer token (default: $OPENAI_API_KEY)"},
        {NULL, "--num-concurrent", CLI_INT, &concurrent, "N", "documents in flight at once (default 1)", CLI_AT_LEAST(1)},
        {NULL, "--timeout", CLI_FLOAT, &timeout, "S", "seconds per request before it is retried (default 300)", CLI_ABOVE(0)},
        {NULL, "--max-retries", CLI_INT, &retries, "N", "retries of a request after 429, 5xx or a transport error (default 3)", CLI_AT_LEAST(0)},
        {NULL, "--max-failures", CLI_INT, &max_failures, "N", "stop after N documents in a row failed (default 5)", CLI_AT_LEAST(1)},
        {NULL, "--max-length", CLI_INT, &max_length, "N", "context length for truncation (default: the server's max_model_len - 2)", CLI_AT_LEAST(0)},
        {NULL, "--prefix-token-id", CLI_INT, &prefix_id, "ID", "BOS/EOS id for empty contexts and wikitext (default: the BOS the server adds)", CLI_IN(-1, 2147483647)},
        {NULL, "--text-prompts", CLI_FLAG, &text_prompts, NULL, "send text, not token ids, even where the server has /tokenize"},
        ENGINE_CLI_OPTIONS(ec),
        {0}};
    const cli_spec spec = {"eval", "[MODEL | --base-url URL] --tasks LIST [options]",
                           "lm-evaluation-harness tasks on a model; results JSON in lm-eval's shape with per-sample records",
                           opts, 0, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (!tasks) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--tasks is required");
    }
    assay_engine_args ea;
    if ((rc = engine_cli_args(&ec, &spec, NULL, &ea)) != CLI_CONTINUE) {
        cli_args_free(&args);
        return rc;
    }
    assay_eval_options o;
    assay_eval_options_default(&o);
    if (data_dir) o.data_dir = data_dir;
    o.text_file = text;
    o.num_fewshot = (int)fewshot;
    o.limit = limit;
    o.ppl_ctx = ctx;
    o.max_gen_toks = max_gen;
    o.fewshot_seed = (int)seed;
    o.progress = !quiet;
    if (!o.data_dir) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "no task data: set ASSAY_SHARED (the folder holding data/) or pass --data-dir");
    }
    if (dump) {
        rc = dump_requests(tasks, &o, dump, force);
        cli_args_free(&args);
        return rc;
    }
    if (base_url) {
        if (args.count != 0 || kld_base) {
            cli_args_free(&args);
            return cli_usage_error(&spec, "--base-url evaluates the server's model: give no MODEL and no --kld-base");
        }
        if (concurrent < 1 || retries < 0 || max_failures < 1 || !(timeout > 0) || max_length < 0 || prefix_id < -1) {
            cli_args_free(&args);
            return cli_usage_error(&spec, "need --num-concurrent >= 1, --max-retries >= 0, --max-failures >= 1, --timeout > 0");
        }
        if (output && !force && !assay_output_is_stdout(output) && assay_path_exists(output)) {
            fprintf(stderr, "assay eval: %s exists (use --force to overwrite)\n", output);
            cli_args_free(&args);
            return CLI_EXIT_ERROR;
        }
        assay_endpoint_options eo;
        assay_endpoint_options_default(&eo);
        eo.base_url = base_url;
        eo.model = served;
        eo.api_key = api_key ? api_key : getenv("OPENAI_API_KEY");
        eo.num_concurrent = (int)concurrent;
        eo.timeout_s = timeout;
        eo.max_retries = (int)retries;
        eo.max_length = max_length;
        eo.prefix_token = (int32_t)prefix_id;
        eo.tokenized = text_prompts ? 0 : -1;
        o.max_failed_in_a_row = (int)max_failures;
        rc = eval_endpoint(&eo, tasks, &o, output, force);
        cli_args_free(&args);
        return rc;
    }
    if (args.count != 1) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "give a MODEL, --base-url URL, or --dump-requests FILE");
    }
    if (output && !force && !assay_output_is_stdout(output) && assay_path_exists(output)) {
        fprintf(stderr, "assay eval: %s exists (use --force to overwrite)\n", output);
        cli_args_free(&args);
        return CLI_EXIT_ERROR;
    }
    const char *model = args.positional[0];
    assay_lm *lm = NULL, *base = NULL;
    assay_logits_file base_file = {0};
    int have_base_file = 0;
    assay_eval_results *res = NULL;
    assay_status st = assay_eval_lm_open(model, &ea, &lm);
    if (st == ASSAY_OK && kld_base && is_logits_file(kld_base)) {
        st = assay_logits_file_open(&base_file, kld_base);
        have_base_file = st == ASSAY_OK;
        o.kld_base_file = have_base_file ? &base_file : NULL;
    } else if (st == ASSAY_OK && kld_base) {
        /* the baseline model as stored: same device, threads and length, no quantization, the default KV cache */
        assay_engine_args bf;
        assay_engine_args_default(&bf);
        bf.device = ea.device;
        bf.threads = ea.threads;
        bf.max_model_len = ea.max_model_len;
        st = assay_eval_lm_open(kld_base, &bf, &base);
        o.kld_base = base;
    }
    if (st == ASSAY_OK) st = assay_eval_run(lm, tasks, &o, &res);
    if (st == ASSAY_OK) {
        char hex[65];
        if (assay_sha256_path(model, hex) == ASSAY_OK) res->model_sha256 = assay_xstrdup(hex);
        assay_strbuf margs = {0};
        assay_strbuf_printf(&margs, "pretrained=%s", model);
        assay_strbuf fl = {0};
        assay_engine_args_format(&ea, &fl);
        if (fl.len) assay_strbuf_printf(&margs, ",engine=%s", fl.data);
        assay_strbuf_free(&fl);
        res->model_args = margs.data;
        res->device = assay_xstrdup(ea.device);
        assay_eval_print_table(res, assay_output_is_stdout(output) ? stderr : stdout); /* "-o -": the JSON alone on stdout */
        if (output) {
            assay_strbuf js = {0};
            assay_eval_results_json(res, &js);
            assay_output_file out = {0};
            st = assay_output_file_open(&out, output, force);
            if (st == ASSAY_OK) {
                fwrite(js.data, 1, js.len, out.fp);
                st = assay_output_file_commit(&out);
            }
            assay_strbuf_free(&js);
            if (st == ASSAY_OK && !assay_output_is_stdout(output)) fprintf(stderr, "assay eval: wrote %s\n", output);
        }
    }
    assay_eval_results_free(res);
    if (lm) assay_eval_lm_close(lm);
    if (base) assay_eval_lm_close(base);
    if (have_base_file) assay_logits_file_close(&base_file);
    cli_args_free(&args);
    if (st != ASSAY_OK) return cli_report_error("eval");
    return CLI_EXIT_OK;
}
