/* cmd_bench.c — `assay bench MODEL [--batch LIST] [--prompt N] [--gen N] [--reps N] [engine flags] [--json]`:
 * offline throughput of the engine (bench.h): prompt and generation tokens/s per batch size, median of repeats. */
#include <stdio.h>
#include <string.h>

#include "assay/bench.h"
#include "assay/engine.h"
#include "assay/eval.h"
#include "assay/model.h"
#include "cli.h"
#include "engine_cli.h"
#include "commands.h"

int assay_cmd_bench(int argc, char **argv) {
    const char *batches = "1,4";
    int64_t prompt = 256, gen = 32, reps = 3, top_k = 0;
    double temp = 0, top_p = 1, min_p = 0;
    int json = 0;
    engine_cli ec;
    engine_cli_init(&ec);
    const cli_option opts[] = {
        {"-b", "--batch", CLI_STRING, &batches, "LIST", "sequences per batch, comma-separated (default 1,4)"},
        {"-p", "--prompt", CLI_INT, &prompt, "N", "prompt tokens per sequence (default 256)", CLI_AT_LEAST(1)},
        {"-n", "--gen", CLI_INT, &gen, "N", "generated tokens per sequence (default 32)", CLI_AT_LEAST(1)},
        {"-r", "--reps", CLI_INT, &reps, "N", "repeats; the median is reported (default 3)", CLI_AT_LEAST(1)},
        {NULL, "--temp", CLI_FLOAT, &temp, "T", "sample the generated tokens at temperature T (default 0: greedy)",
         CLI_AT_LEAST(0)},
        {NULL, "--top-k", CLI_INT, &top_k, "K", "with --temp: keep the K most likely tokens (default 0: off)", CLI_AT_LEAST(0)},
        {NULL, "--top-p", CLI_FLOAT, &top_p, "P", "with --temp: nucleus (default 1: off)", CLI_IN_OPEN_CLOSED(0, 1)},
        {NULL, "--min-p", CLI_FLOAT, &min_p, "P", "with --temp: drop tokens below P x the top probability (default 0: off)",
         CLI_IN(0, 1)},
        {NULL, "--json", CLI_FLAG, &json, NULL, "print one JSON object"},
        ENGINE_CLI_OPTIONS(ec),
        {0}};
    const cli_spec spec = {"bench", "MODEL [--batch LIST] [--prompt N] [--gen N] [--reps N] [engine flags] [--json]",
                           "prompt (prefill) and generation (decode) tokens/s at several batch sizes, median of repeats",
                           opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    assay_bench_options bo;
    assay_bench_options_default(&bo);
    bo.n_prompt = prompt;
    bo.n_gen = gen;
    bo.reps = (int)reps;
    bo.temp = (float)temp;
    bo.top_k = (int)top_k;
    bo.top_p = (float)top_p;
    bo.min_p = (float)min_p;
    if (assay_bench_parse_batches(batches, &bo) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--batch: %s", assay_last_error());
    }
    assay_engine_args ea;
    if ((rc = engine_cli_args(&ec, &spec, args.positional[0], &ea)) != CLI_CONTINUE) {
        cli_args_free(&args);
        return rc;
    }
    const char *model = args.positional[0];
    assay_lm *lm = NULL;
    assay_bench_result r;
    assay_status st = assay_eval_lm_open(model, &ea, &lm);
    if (st == ASSAY_OK) {
        assay_model *m = NULL;
        assay_session_options so;
        assay_eval_lm_engine(lm, &m, &so);
        st = assay_bench_model(m, &so, &bo, &r);
    }
    if (st == ASSAY_OK) {
        if (json) {
            assay_strbuf b = {0}, f = {0};
            assay_engine_args_format(&ea, &f);
            assay_strbuf_puts(&b, "{\"model\": ");
            assay_strbuf_json_string(&b, model, strlen(model));
            assay_strbuf_puts(&b, ", \"engine\": ");
            assay_strbuf_json_string(&b, f.data, f.len);
            assay_strbuf_puts(&b, ", \"bench\": ");
            assay_bench_result_json(&r, &b);
            assay_strbuf_puts(&b, "}\n");
            fputs(b.data, stdout);
            assay_strbuf_free(&b);
            assay_strbuf_free(&f);
        } else {
            printf("%s: %lld prompt + %lld generated tokens per sequence, median of %d\n", model, (long long)r.n_prompt,
                   (long long)r.n_gen, r.reps);
            printf("| batch | prompt tok/s | (min..max) | generation tok/s | (min..max) |\n|---:|---:|---|---:|---|\n");
            for (int i = 0; i < r.n_points; i++) {
                const assay_bench_point *p = &r.points[i];
                printf("| %d | %.1f | %.1f..%.1f | %.1f | %.1f..%.1f |\n", p->batch, p->prefill_tps, p->prefill_tps_min,
                       p->prefill_tps_max, p->decode_tps, p->decode_tps_min, p->decode_tps_max);
            }
        }
    }
    if (lm) assay_eval_lm_close(lm);
    cli_args_free(&args);
    if (st != ASSAY_OK) return cli_report_error("bench");
    return CLI_EXIT_OK;
}
