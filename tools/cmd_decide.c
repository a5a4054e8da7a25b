/* cmd_decide.c — `assay decide MODEL --candidate 'ENGINE FLAGS'`: the whole workflow in one command. The baseline
 * and the candidate configuration run the same eval tasks (the candidate also its KL divergence against the
 * baseline) and a throughput bench, the two results are compared with paired statistics, and DIR gets
 * baseline.json, candidate.json, report.md and report.html. `assay decide --baseline-url A --candidate-url B` runs
 * the same tasks against two running OpenAI-compatible servers (a staging pair: BF16 and FP8) instead; there is no
 * KL divergence (a server gives no logits) and no engine bench (the report shows the eval's own scoring rate). Exit code: the verdict's (0 ship, 3 ship with
 * monitoring, 4 investigate, 5 inconclusive), 1 on errors, 2 on usage errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/bench.h"
#include "assay/compare.h"
#include "assay/eval.h"
#include "assay/file.h"
#include "assay/sha256.h"
#include "cli.h"
#include "engine_cli.h"
#include "commands.h"

static assay_status write_file(const char *dir, const char *name, const assay_strbuf *b) {
    char *p = assay_path_join(dir, name);
    assay_output_file out = {0};
    assay_status st = assay_output_file_open(&out, p, 1);
    if (st == ASSAY_OK) {
        if (b->len) fwrite(b->data, 1, b->len, out.fp);
        st = assay_output_file_commit(&out);
    }
    if (st == ASSAY_OK) fprintf(stderr, "assay decide: wrote %s\n", p);
    free(p);
    return st;
}

typedef struct config_run {
    const char *label, *model, *flags_text;
    const char *url; /* a server instead of an in-process model */
    assay_engine_args args;
    char *flags_storage;
    assay_lm *lm;
    assay_eval_results *res;
    assay_bench_result bench;
    double prefill_tps, decode_tps, bytes; /* the largest batch's medians */
    char emulated[96]; /* the quantized activations a CPU emulates for this model ("" when none) */
} config_run;

static double path_bytes(const char *path) {
    struct stat s;
    if (stat(path, &s) != 0) return 0;
    if (!S_ISDIR(s.st_mode)) return (double)s.st_size;
    return 0; /* a directory: the engine's figure is not exposed here; the report leaves it out */
}

/* Runs the tasks (and, for the candidate, kld against the baseline) and the bench for one configuration. */
static assay_status run_config(config_run *c, const char *tasks, const assay_eval_options *o, int64_t kld_windows,
                               const assay_lm *kld_base, const assay_bench_options *bo) {
    fprintf(stderr, "assay decide: %s: %s %s\n", c->label, c->url ? c->url : c->model, c->flags_text ? c->flags_text : "");
    assay_status st = assay_eval_run(c->lm, tasks, o, &c->res);
    if (st != ASSAY_OK) return assay_fail_context(st, "%s", c->label);
    if (c->url) { /* a server: no logits for kld, no engine to bench */
        assay_strbuf margs = {0};
        assay_eval_endpoint_describe(c->lm, &margs);
        c->res->model_args = margs.data;
        for (int i = 0; i < c->res->n_tasks; i++)
            if (c->res->tasks[i].n_failed)
                fprintf(stderr, "assay decide: %s: %s: %lld document(s) failed and are left out (the first: %s)\n", c->label,
                        c->res->tasks[i].name, (long long)c->res->tasks[i].n_failed, c->res->tasks[i].first_error);
        return ASSAY_OK;
    }
    if (kld_base) {
        assay_eval_options ko = *o;
        ko.kld_base = kld_base;
        ko.limit = kld_windows;
        assay_eval_results *k = NULL;
        st = assay_eval_run(c->lm, "kld", &ko, &k);
        if (st != ASSAY_OK) return assay_fail_context(st, "%s: kld", c->label);
        /* move kld's task result into the main results */
        c->res->tasks = assay_xrealloc(c->res->tasks, sizeof *c->res->tasks * (size_t)(c->res->n_tasks + k->n_tasks));
        for (int i = 0; i < k->n_tasks; i++) c->res->tasks[c->res->n_tasks++] = k->tasks[i];
        k->n_tasks = 0;
        assay_eval_results_free(k);
    }
    /* the batched bench on the very model and KV-cache type the eval ran (bench.h) */
    assay_model *m = NULL;
    assay_session_options so;
    assay_eval_lm_engine(c->lm, &m, &so);
    assay_model_emulates_quantized_activations(m, c->emulated, sizeof c->emulated);
    st = assay_bench_model(m, &so, bo, &c->bench);
    if (st != ASSAY_OK) return assay_fail_context(st, "%s: throughput bench", c->label);
    for (int i = 0; i < c->bench.n_points; i++)
        fprintf(stderr, "assay decide: %s: batch %d: prompt %.1f tok/s, generation %.1f tok/s (median of %d)\n", c->label,
                c->bench.points[i].batch, c->bench.points[i].prefill_tps, c->bench.points[i].decode_tps, c->bench.reps);
    const assay_bench_point *top = &c->bench.points[c->bench.n_points - 1];
    c->prefill_tps = top->prefill_tps;
    c->decode_tps = top->decode_tps;
    char hex[65];
    if (assay_sha256_path(c->model, hex) == ASSAY_OK) c->res->model_sha256 = assay_xstrdup(hex);
    assay_strbuf margs = {0};
    assay_strbuf_printf(&margs, "pretrained=%s", c->model);
    if (c->flags_text && *c->flags_text) assay_strbuf_printf(&margs, ",engine=%s", c->flags_text);
    c->res->model_args = margs.data;
    c->res->device = assay_xstrdup(c->args.device);
    c->bytes = path_bytes(c->model);
    return ASSAY_OK;
}

/* The eval, compare and reports of two servers. */
static int decide_servers(const char *base_url, const char *cand_url, const char *served, const char *api_key, int concurrent,
                          double timeout, int retries, int max_failures, const char *tasks, const char *out_dir,
                          const char *data_dir, const char *text, int64_t limit, double ship, double monitor, int64_t iters,
                          int quiet, int force, cli_args *args) {
    config_run base = {.label = "baseline", .url = base_url}, cand = {.label = "candidate", .url = cand_url};
    assay_endpoint_options eo;
    assay_endpoint_options_default(&eo);
    eo.model = served;
    eo.api_key = api_key ? api_key : getenv("OPENAI_API_KEY");
    eo.num_concurrent = concurrent;
    eo.timeout_s = timeout;
    eo.max_retries = retries;
    assay_eval_options o;
    assay_eval_options_default(&o);
    if (data_dir) o.data_dir = data_dir;
    o.text_file = text;
    o.limit = limit;
    o.progress = !quiet;
    o.max_failed_in_a_row = max_failures;
    assay_status st = ASSAY_OK;
    if (!o.data_dir) st = assay_fail(ASSAY_ERR_ARG, "no task data: set ASSAY_SHARED (the folder holding data/) or pass --data-dir");
    if (st == ASSAY_OK && !force && assay_path_exists(out_dir))
        st = assay_fail(ASSAY_ERR_ARG, "%s already exists (pass --force to replace its reports)", out_dir);
    if (st == ASSAY_OK && mkdir(out_dir, 0777) != 0 && !assay_path_is_dir(out_dir))
        st = assay_fail(ASSAY_ERR_IO, "%s: cannot create the report directory", out_dir);
    eo.base_url = base_url;
    if (st == ASSAY_OK && (st = assay_eval_endpoint_open(&eo, &base.lm)) != ASSAY_OK) st = assay_fail_context(st, "baseline");
    eo.base_url = cand_url;
    if (st == ASSAY_OK && (st = assay_eval_endpoint_open(&eo, &cand.lm)) != ASSAY_OK) st = assay_fail_context(st, "candidate");
    if (st == ASSAY_OK) st = run_config(&base, tasks, &o, 0, NULL, NULL);
    if (st == ASSAY_OK) st = run_config(&cand, tasks, &o, 0, NULL, NULL);
    assay_strbuf jb = {0}, jc = {0}, md = {0}, html = {0};
    /* what was scored is written, even when a run stopped */
    if (base.res) {
        assay_eval_results_json(base.res, &jb);
        assay_status ws = write_file(out_dir, "baseline.json", &jb);
        if (st == ASSAY_OK) st = ws;
    }
    if (cand.res) {
        assay_eval_results_json(cand.res, &jc);
        assay_status ws = write_file(out_dir, "candidate.json", &jc);
        if (st == ASSAY_OK) st = ws;
    }
    assay_comparison *cmp = NULL;
    if (st == ASSAY_OK) {
        assay_compare_options co;
        assay_compare_options_default(&co);
        co.ship_below = ship;
        co.monitor_up_to = monitor;
        co.bootstrap_iters = (int)iters;
        st = assay_compare_texts(jb.data, jb.len, jc.data, jc.len, &co, &cmp);
    }
    if (st == ASSAY_OK) {
        free(cmp->base_args);
        free(cmp->cand_args);
        cmp->base_args = assay_xstrdup(base.res->model_args);
        cmp->cand_args = assay_xstrdup(cand.res->model_args);
        assay_compare_markdown(cmp, &md);
        assay_compare_html(cmp, &html);
        st = write_file(out_dir, "report.md", &md);
        if (st == ASSAY_OK) st = write_file(out_dir, "report.html", &html);
    }
    int code = CLI_EXIT_ERROR;
    if (st == ASSAY_OK) {
        assay_strbuf t = {0};
        assay_compare_table(cmp, &t);
        fputs(t.data, stdout);
        assay_strbuf_free(&t);
        code = assay_verdict_exit_code(cmp->verdict);
    }
    assay_comparison_free(cmp);
    assay_strbuf_free(&jb);
    assay_strbuf_free(&jc);
    assay_strbuf_free(&md);
    assay_strbuf_free(&html);
    assay_eval_results_free(base.res);
    assay_eval_results_free(cand.res);
    if (base.lm) assay_eval_endpoint_close(base.lm);
    if (cand.lm) assay_eval_endpoint_close(cand.lm);
    cli_args_free(args);
    if (st != ASSAY_OK) return cli_report_error("decide");
    return code;
}

int assay_cmd_decide(int argc, char **argv) {
    const char *cand_flags = NULL, *base_flags = NULL, *cand_model = NULL, *tasks = "heldout,hellaswag,arc_challenge,piqa";
    const char *out_dir = "assay-report", *data_dir = NULL, *text = NULL;
    int64_t limit = 100, kld_windows = 8, bench_prompt = 256, bench_gen = 32, threads = 0, iters = 2000, bench_reps = 3;
    const char *bench_batches = "1,4";
    double ship = 0.5, monitor = 1.5, timeout = 300;
    int no_kld = 0, quiet = 0, force = 0;
    const char *base_url = NULL, *cand_url = NULL, *served = NULL, *api_key = NULL;
    int64_t concurrent = 1, retries = 3, max_failures = 5;
    const cli_option opts[] = {
        {NULL, "--candidate", CLI_STRING, &cand_flags, "'FLAGS'", "engine flags of the candidate, e.g. '--kv-cache-dtype fp8'"},
        {NULL, "--candidate-model", CLI_STRING, &cand_model, "PATH", "the candidate is another file (e.g. made by assay quantize)"},
        {NULL, "--baseline", CLI_STRING, &base_flags, "'FLAGS'", "engine flags of the baseline (default: none)"},
        {NULL, "--tasks", CLI_STRING, &tasks, "LIST", "eval tasks (default heldout,hellaswag,arc_challenge,piqa)"},
        {NULL, "--limit", CLI_INT, &limit, "N", "documents per task (default 100; 0: all)"},
        {NULL, "--kld-windows", CLI_INT, &kld_windows, "N", "windows of the KL-divergence check (default 8)"},
        {NULL, "--no-kld", CLI_FLAG, &no_kld, NULL, "skip the KL divergence of the candidate against the baseline"},
        {"-o", "--out", CLI_STRING, &out_dir, "DIR", "where the reports go (default assay-report)"},
        {NULL, "--ship-threshold", CLI_FLOAT, &ship, "PCT", "degradation below this ships (default 0.5)"},
        {NULL, "--monitor-threshold", CLI_FLOAT, &monitor, "PCT", "up to this: ship with monitoring (default 1.5)"},
        {NULL, "--bootstrap-iters", CLI_INT, &iters, "N", "paired bootstrap resamples (default 2000)"},
        {NULL, "--bench-prompt", CLI_INT, &bench_prompt, "N", "prompt tokens of the throughput bench (default 256)"},
        {NULL, "--bench-gen", CLI_INT, &bench_gen, "N", "generated tokens per sequence of the throughput bench (default 32)"},
        {NULL, "--bench-batches", CLI_STRING, &bench_batches, "LIST", "sequences per batch of the throughput bench (default 1,4)"},
        {NULL, "--bench-reps", CLI_INT, &bench_reps, "N", "repeats of the throughput bench; the median is reported (default 3)"},
        {NULL, "--threads", CLI_INT, &threads, "N", "CPU threads for both configurations"},
        {NULL, "--data-dir", CLI_STRING, &data_dir, "DIR", "task data root (default $ASSAY_SHARED/data)"},
        {NULL, "--text", CLI_STRING, &text, "FILE", "text for heldout/kld (default: the house model's heldout.txt)"},
        {NULL, "--quiet", CLI_FLAG, &quiet, NULL, "no progress bars"},
        {NULL, "--force", CLI_FLAG, &force, NULL, "replace the reports of an existing report directory"},
        {NULL, "--baseline-url", CLI_STRING, &base_url, "URL", "the baseline is the model this OpenAI-compatible server serves"},
        {NULL, "--candidate-url", CLI_STRING, &cand_url, "URL", "the candidate's server (with --baseline-url; no MODEL)"},
        {NULL, "--model", CLI_STRING, &served, "NAME", "the served model's name on both servers (default: each one's first)"},
        {NULL, "--api-key", CLI_STRING, &api_key, "KEY", "bearer token for both servers (default: $OPENAI_API_KEY)"},
        {NULL, "--num-concurrent", CLI_INT, &concurrent, "N", "documents in flight at once per server (default 1)", CLI_AT_LEAST(1)},
        {NULL, "--timeout", CLI_FLOAT, &timeout, "S", "seconds per request before it is retried (default 300)", CLI_ABOVE(0)},
        {NULL, "--max-retries", CLI_INT, &retries, "N", "retries after 429, 5xx or a transport error (default 3)", CLI_AT_LEAST(0)},
        {NULL, "--max-failures", CLI_INT, &max_failures, "N", "a run stops after N documents in a row failed (default 5)", CLI_AT_LEAST(1)},
        {0}};
    const cli_spec spec = {"decide", "MODEL --candidate 'ENGINE FLAGS' | --baseline-url A --candidate-url B [options]",
                           "baseline vs candidate: eval + KL divergence + throughput + paired compare -> report.md, report.html",
                           opts, 0, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    int servers = base_url || cand_url;
    if (servers && (!base_url || !cand_url || args.count || cand_flags || cand_model || base_flags)) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "servers: give both --baseline-url and --candidate-url, and no MODEL or engine flags");
    }
    if (!servers && args.count != 1) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "give a MODEL, or --baseline-url and --candidate-url");
    }
    if (!servers && !cand_flags && !cand_model) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "give --candidate 'ENGINE FLAGS' and/or --candidate-model PATH");
    }
    if (servers && (concurrent < 1 || retries < 0 || max_failures < 1 || !(timeout > 0))) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "need --num-concurrent >= 1, --max-retries >= 0, --max-failures >= 1, --timeout > 0");
    }
    if (limit < 0 || kld_windows < 1 || bench_prompt < 2 || bench_gen < 2 || bench_reps < 1 || !(ship >= 0 && monitor >= ship) ||
        iters < 0) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "need --limit >= 0, --kld-windows >= 1, bench sizes >= 2, --bench-reps >= 1, "
                                      "0 <= ship <= monitor thresholds");
    }
    assay_bench_options bo;
    assay_bench_options_default(&bo);
    bo.n_prompt = bench_prompt;
    bo.n_gen = bench_gen;
    bo.reps = (int)bench_reps;
    if (assay_bench_parse_batches(bench_batches, &bo) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--bench-batches: %s", assay_last_error());
    }
    if (servers) return decide_servers(base_url, cand_url, served, api_key, (int)concurrent, timeout, (int)retries,
                                       (int)max_failures, tasks, out_dir, data_dir, text, limit, ship, monitor, iters, quiet,
                                       force, &args);
    const char *model = args.positional[0];
    config_run base = {.label = "baseline", .model = model, .flags_text = base_flags ? base_flags : ""};
    config_run cand = {.label = "candidate", .model = cand_model ? cand_model : model, .flags_text = cand_flags ? cand_flags : ""};
    rc = engine_cli_parse_text(base.flags_text, "decide --baseline", base.model, &base.args, &base.flags_storage);
    if (rc == CLI_CONTINUE)
        rc = engine_cli_parse_text(cand.flags_text, "decide --candidate", cand.model, &cand.args, &cand.flags_storage);
    if (rc != CLI_CONTINUE) {
        free(base.flags_storage);
        free(cand.flags_storage);
        cli_args_free(&args);
        return rc;
    }
    assay_status st = ASSAY_OK;
    if (threads > 0) base.args.threads = cand.args.threads = (int)threads;
    if (strcmp(base.model, cand.model) == 0 && strcmp(base.flags_text, cand.flags_text) == 0)
        fprintf(stderr, "assay decide: note: the candidate is configured like the baseline; expect 'no difference'\n");
    assay_eval_options o;
    assay_eval_options_default(&o);
    if (data_dir) o.data_dir = data_dir;
    o.text_file = text;
    o.limit = limit;
    o.progress = !quiet;
    if (!o.data_dir) st = assay_fail(ASSAY_ERR_ARG, "no task data: set ASSAY_SHARED (the folder holding data/) or pass --data-dir");
    if (st == ASSAY_OK && !force && assay_path_exists(out_dir))
        st = assay_fail(ASSAY_ERR_ARG, "%s already exists (pass --force to replace its reports)", out_dir);
    if (st == ASSAY_OK && mkdir(out_dir, 0777) != 0 && !assay_path_is_dir(out_dir))
        st = assay_fail(ASSAY_ERR_IO, "%s: cannot create the report directory", out_dir);
    if (st == ASSAY_OK) st = assay_eval_lm_open(base.model, &base.args, &base.lm);
    if (st == ASSAY_OK) st = assay_eval_lm_open(cand.model, &cand.args, &cand.lm);
    if (st == ASSAY_OK) st = run_config(&base, tasks, &o, 0, NULL, &bo);
    if (st == ASSAY_OK) st = run_config(&cand, tasks, &o, kld_windows, no_kld ? NULL : base.lm, &bo);
    assay_strbuf jb = {0}, jc = {0}, md = {0}, html = {0};
    assay_comparison *cmp = NULL;
    if (st == ASSAY_OK) {
        assay_eval_results_json(base.res, &jb);
        assay_eval_results_json(cand.res, &jc);
        st = write_file(out_dir, "baseline.json", &jb);
        if (st == ASSAY_OK) st = write_file(out_dir, "candidate.json", &jc);
        assay_strbuf bj = {0};
        assay_strbuf_puts(&bj, "{\"baseline\": ");
        assay_bench_result_json(&base.bench, &bj);
        assay_strbuf_puts(&bj, ",\n \"candidate\": ");
        assay_bench_result_json(&cand.bench, &bj);
        assay_strbuf_puts(&bj, "}\n");
        if (st == ASSAY_OK) st = write_file(out_dir, "bench.json", &bj);
        assay_strbuf_free(&bj);
    }
    if (st == ASSAY_OK) {
        assay_compare_options co;
        assay_compare_options_default(&co);
        co.ship_below = ship;
        co.monitor_up_to = monitor;
        co.bootstrap_iters = (int)iters;
        st = assay_compare_texts(jb.data, jb.len, jc.data, jc.len, &co, &cmp);
    }
    if (st == ASSAY_OK) {
        cmp->base_prefill_tps = base.prefill_tps;
        cmp->cand_prefill_tps = cand.prefill_tps;
        cmp->base_decode_tps = base.decode_tps;
        cmp->cand_decode_tps = cand.decode_tps;
        cmp->bench_batch = base.bench.points[base.bench.n_points - 1].batch;
        cmp->n_bench = base.bench.n_points;
        cmp->bench_prompt = bo.n_prompt;
        cmp->bench_gen = bo.n_gen;
        cmp->bench_reps = bo.reps;
        for (int i = 0; i < cmp->n_bench; i++) {
            cmp->bench_batches[i] = base.bench.points[i].batch;
            cmp->bench_base_prefill[i] = base.bench.points[i].prefill_tps;
            cmp->bench_cand_prefill[i] = cand.bench.points[i].prefill_tps;
            cmp->bench_base_decode[i] = base.bench.points[i].decode_tps;
            cmp->bench_cand_decode[i] = cand.bench.points[i].decode_tps;
        }
        cmp->base_model_bytes = base.bytes;
        cmp->cand_model_bytes = cand.bytes;
        const config_run *emu = cand.emulated[0] ? &cand : base.emulated[0] ? &base : NULL;
        if (emu) {
            assay_strbuf n = {0};
            assay_strbuf_printf(&n, "The %s's throughput here is not its format's speed: the CPU emulates its quantized activations "
                                    "(%s) exactly, quantizing and dequantizing every activation before a float matmul, so "
                                    "that the quality numbers are the format's; the format's speed comes from its kernels on "
                                    "a GPU (--device cuda).", emu->label, emu->emulated);
            cmp->throughput_note = n.data;
        }
        free(cmp->base_args);
        free(cmp->cand_args);
        assay_strbuf a = {0}, b = {0};
        assay_strbuf_printf(&a, "%s", base.flags_text[0] ? base.flags_text : "(engine defaults)");
        assay_strbuf_printf(&b, "%s", cand.flags_text[0] ? cand.flags_text : "(engine defaults)");
        cmp->base_args = a.data;
        cmp->cand_args = b.data;
        assay_compare_markdown(cmp, &md);
        assay_compare_html(cmp, &html);
        st = write_file(out_dir, "report.md", &md);
        if (st == ASSAY_OK) st = write_file(out_dir, "report.html", &html);
    }
    int code = CLI_EXIT_ERROR;
    if (st == ASSAY_OK) {
        assay_strbuf t = {0};
        assay_compare_table(cmp, &t);
        fputs(t.data, stdout);
        for (int i = 0; i < base.bench.n_points; i++)
            printf("throughput, batch %d: prompt %.1f -> %.1f tok/s, generation %.1f -> %.1f tok/s\n", base.bench.points[i].batch,
                   base.bench.points[i].prefill_tps, cand.bench.points[i].prefill_tps, base.bench.points[i].decode_tps,
                   cand.bench.points[i].decode_tps);
        if (cmp->throughput_note) printf("%s\n", cmp->throughput_note);
        assay_strbuf_free(&t);
        code = assay_verdict_exit_code(cmp->verdict);
    }
    assay_comparison_free(cmp);
    assay_strbuf_free(&jb);
    assay_strbuf_free(&jc);
    assay_strbuf_free(&md);
    assay_strbuf_free(&html);
    assay_eval_results_free(base.res);
    assay_eval_results_free(cand.res);
    assay_eval_lm_close(base.lm);
    assay_eval_lm_close(cand.lm);
    free(base.flags_storage);
    free(cand.flags_storage);
    cli_args_free(&args);
    if (st != ASSAY_OK) return cli_report_error("decide");
    return code;
}
