/* cmd_serve.c — `assay serve MODEL [--host H] [--port P] [--api-key KEY] [--served-model-name NAME]
 * [--chat-template T] [--max-queued-requests N] [--timeout SECONDS] [engine flags]`: the OpenAI-compatible server (server.h) over one engine, until SIGINT or SIGTERM
 * (then in-flight requests are aborted and it exits 0). --host defaults to 127.0.0.1 (this machine only; vLLM listens
 * on every address by default: pass --host 0.0.0.0 for that). The API key may also come from the environment
 * (ASSAY_API_KEY). --chat-template, as vLLM's: a file or the template text, or one of chat_template.h's families by
 * name, for a model without a template (or to replace its own). --max-queued-requests bounds the waiting queue
 * (503 beyond it); --timeout closes a connection that stays silent while the server waits on the client. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/engine.h"
#include "assay/file.h"
#include "assay/server.h"
#include "cli.h"
#include "commands.h"
#include "engine_cli.h"
#include "live_judge.h"

int assay_cmd_serve(int argc, char **argv) {
    const char *host = "127.0.0.1", *api_key = NULL, *name = NULL, *chat_template = NULL;
    int64_t port = 8000, max_queued = 1024, timeout = 600;
    engine_cli ec;
    engine_cli_init(&ec);
    live_judge_cli jc;
    live_judge_cli_init(&jc);
    const cli_option opts[] = {
        {NULL, "--host", CLI_STRING, &host, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0: every interface)"},
        {NULL, "--port", CLI_INT, &port, "N", "port (default 8000; 0: any free port)", CLI_IN(0, 65535)},
        {NULL, "--api-key", CLI_STRING, &api_key, "KEY",
         "require \"Authorization: Bearer KEY\" on /v1/ paths (default: $ASSAY_API_KEY, else none)"},
        {NULL, "--served-model-name", CLI_STRING, &name, "NAME", "the model's name in the API (default: MODEL as given)"},
        {NULL, "--chat-template", CLI_STRING, &chat_template, "T",
         "chat template: a file, the template itself, or chatml|llama3|gemma|llama2|mistral (default: the model's)"},
        {NULL, "--max-queued-requests", CLI_INT, &max_queued, "N",
         "requests that may wait beyond the --max-num-seqs running ones; more get 503 (default 1024)",
         CLI_AT_LEAST(0)},
        {NULL, "--timeout", CLI_INT, &timeout, "SECONDS",
         "close a client connection silent this long: a stalled upload, a response not read, an idle keep-alive "
         "(not the wait for tokens; default 600, as llama-server's; 0: never)", CLI_AT_LEAST(0)},
        LIVE_JUDGE_CLI_OPTIONS(jc),
        ENGINE_CLI_OPTIONS(ec),
        {0}};
    const cli_spec spec = {"serve", "MODEL [--host ADDR] [--port N] [--api-key KEY] [--served-model-name NAME] [--chat-template T] "
                           "[--max-queued-requests N] [--timeout SECONDS] [engine flags]",
                           "OpenAI-compatible HTTP server with Prometheus metrics", opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    assay_engine_args ea;
    rc = engine_cli_args(&ec, &spec, args.positional[0], &ea);
    if (rc != CLI_CONTINUE) {
        cli_args_free(&args);
        return rc;
    }
    if (!api_key) api_key = getenv("ASSAY_API_KEY");
    const char *model = args.positional[0];
    /* SIGINT/SIGTERM are taken by sigwait below; every thread started from here on inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int exit_code = CLI_EXIT_ERROR;
    assay_engine *e = NULL;
    assay_server *s = NULL;
    live_judge *judge = NULL;
    int judge_failed = 0;
    char *template_text = NULL;
    size_t template_len = 0;
    if (chat_template && access(chat_template, R_OK) == 0 &&
        assay_read_file(chat_template, &template_text, &template_len) != ASSAY_OK)
        goto done;
    if (!(judge = live_judge_cli_start(&jc, &judge_failed)) && judge_failed) goto done;
    if (assay_engine_open(&e, &ea) != ASSAY_OK) goto done;
    assay_server_options so;
    assay_server_options_default(&so);
    so.host = host;
    so.port = (int)port;
    so.api_key = api_key;
    so.served_model_name = name ? name : model;
    so.model_path = model;
    so.chat_template = template_text ? template_text : chat_template;
    if (judge) so.on_done = live_judge_offer, so.metrics_extra = live_judge_metrics, so.hook_ctx = judge;
    so.max_queued_requests = max_queued > INT32_MAX ? INT32_MAX : (int)max_queued; /* beyond: no bound in practice */
    so.timeout = timeout > INT32_MAX ? INT32_MAX : (int)timeout;
    if (assay_server_start(&s, e, &so) != ASSAY_OK) goto done;
    fprintf(stderr, "assay serve: %s as \"%s\" on http://%s:%d (max-model-len %lld%s)\n", model, so.served_model_name,
            host, assay_server_port(s), (long long)assay_engine_max_model_len(e), api_key && api_key[0] ? ", API key required" : "");
    if (ec.verbose) fprintf(stderr, "assay serve: %s\n", assay_engine_describe(e));
    if (judge) fprintf(stderr, "assay serve: judging %g%% of finished requests with %s\n", jc.sample_rate * 100, jc.url);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "assay serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    assay_server_stop(s);
    exit_code = CLI_EXIT_OK;
done:
    if (exit_code != CLI_EXIT_OK) cli_report_error("serve");
    live_judge_stop(judge); /* after the server: nothing offers samples any more */
    assay_engine_close(e);
    free(template_text);
    cli_args_free(&args);
    return exit_code;
}
