/* cmd_compare.c — `assay compare BASE.json CAND.json`: paired statistics per task and metric, and a verdict whose
 * exit code can gate a CI pipeline: 0 ship, 3 ship with monitoring, 4 investigate, 5 inconclusive (too few documents
 * to decide; the report says how many would do), 1 error, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/compare.h"
#include "assay/file.h"
#include "cli.h"
#include "commands.h"

static assay_status write_text(const char *path, const assay_strbuf *b) {
    assay_output_file out = {0};
    assay_status st = assay_output_file_open(&out, path, 1);
    if (st != ASSAY_OK) return st;
    if (b->len) fwrite(b->data, 1, b->len, out.fp);
    return assay_output_file_commit(&out);
}

int assay_cmd_compare(int argc, char **argv) {
    double ship = 0.5, monitor = 1.5, conf = 0.95;
    int64_t iters = 2000, seed = 1234;
    int all = 0;
    const char *md = NULL, *html = NULL;
    const cli_option opts[] = {
        {NULL, "--ship-threshold", CLI_FLOAT, &ship, "PCT", "degradation below this is 'ship' (default 0.5)"},
        {NULL, "--monitor-threshold", CLI_FLOAT, &monitor, "PCT", "up to this is 'ship with monitoring', above 'investigate' (default 1.5)"},
        {NULL, "--confidence", CLI_FLOAT, &conf, "P", "level of the paired intervals (default 0.95)", CLI_IN_OPEN(0, 1)},
        {NULL, "--bootstrap-iters", CLI_INT, &iters, "N", "paired bootstrap resamples for perplexities (default 2000)",
         CLI_AT_LEAST(0)},
        {NULL, "--seed", CLI_INT, &seed, "N", "bootstrap seed (default 1234)", CLI_AT_LEAST(0)},
        {NULL, "--all-metrics", CLI_FLAG, &all, NULL, "every metric gates the verdict, not only each task's primary"},
        {NULL, "--markdown", CLI_STRING, &md, "FILE", "also write the report as Markdown"},
        {NULL, "--html", CLI_STRING, &html, "FILE", "also write a self-contained HTML report with charts"},
        {0}};
    const cli_spec spec = {"compare", "BASE.json CAND.json [options]",
                           "paired comparison of two results files; exit code 0 ship, 3 ship with monitoring, 4 investigate, 5 inconclusive",
                           opts, 2, 2};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (!(ship >= 0 && monitor >= ship) || !(conf > 0 && conf < 1) || iters < 0 || seed < 0) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "need 0 <= --ship-threshold <= --monitor-threshold, 0 < --confidence < 1, --bootstrap-iters >= 0");
    }
    assay_compare_options o;
    assay_compare_options_default(&o);
    o.ship_below = ship;
    o.monitor_up_to = monitor;
    o.confidence = conf;
    o.bootstrap_iters = (int)iters;
    o.seed = (uint64_t)seed;
    o.all_metrics_gate = all;
    assay_comparison *c = NULL;
    assay_status st = assay_compare_files(args.positional[0], args.positional[1], &o, &c);
    cli_args_free(&args);
    if (st != ASSAY_OK) return cli_report_error("compare");
    assay_strbuf t = {0};
    assay_compare_table(c, &t);
    fputs(t.data, stdout);
    assay_strbuf_free(&t);
    if (md) {
        assay_strbuf b = {0};
        assay_compare_markdown(c, &b);
        st = write_text(md, &b);
        assay_strbuf_free(&b);
    }
    if (st == ASSAY_OK && html) {
        assay_strbuf b = {0};
        assay_compare_html(c, &b);
        st = write_text(html, &b);
        assay_strbuf_free(&b);
    }
    int code = assay_verdict_exit_code(c->verdict);
    assay_comparison_free(c);
    if (st != ASSAY_OK) return cli_report_error("compare");
    return code;
}
