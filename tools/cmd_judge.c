/* cmd_judge.c — `assay judge SAMPLES.jsonl --baseline-url A --candidate-url B --judge-url J`: the domain eval of
 * the FP8 workflow. Every sample's prompt goes to both candidate endpoints (chat completions, or completions with
 * --candidate-api completions for a model without a chat template); a judge model behind any OpenAI-compatible
 * chat API grades each answer 1-5 against the expected answer with the rubric (judge.h, or --judge-template);
 * the scores are compared pairwise (mean difference with a seeded bootstrap interval, Wilcoxon signed-rank) and
 * the workflow's thresholds give the verdict. The exit code says it: 0 ship, 3 ship with monitoring,
 * 4 investigate, 5 inconclusive; 1 error (an endpoint that cannot be reached, nothing scored, too many samples
 * unscored), 2 usage, 128 + the signal's number when interrupted (130 for SIGINT).
 *
 * Samples run --num-concurrent at a time, each on its own worker thread: both answers, then both judgements.
 * Every call has a deadline (--timeout) and failures that may pass are retried with backoff (judge_http.h). A
 * judge reply that is not a score is asked for once more, then recorded as invalid. Whatever fails is recorded
 * in the sample's record and counted; the results file is written in every case, after an interruption too
 * (SIGINT, SIGTERM and SIGHUP stop the run: calls in flight are abandoned, samples not started are marked so). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/file.h"
#include "assay/judge.h"
#include "assay/json.h"
#include "assay/progress.h"
#include "assay/strbuf.h"
#include "cli.h"
#include "commands.h"
#include "judge_http.h"

enum { BASE = 0, CAND = 1 };
static const char *const side_name[2] = {"baseline", "candidate"};

enum judge_state { J_NOT_JUDGED = 0, J_OK, J_INVALID, J_FAILED };
static const char *const judge_state_name[] = {"not judged", "ok", "invalid", "failed"};

typedef struct side_rec {
    char *answer;        /* NULL when the call failed */
    char *answer_error;
    char *finish_reason;
    double answer_seconds;
    int answer_attempts;
    int score;           /* 1..5, 0 none */
    int judge_state;
    char *reply[2];      /* the judge's raw replies (a second one after an invalid first) */
    int n_replies;
    char *judge_error;
    int judge_shared;    /* the other side's identical answer was graded once for both */
} side_rec;

typedef struct sample_rec {
    int state; /* 0 not started, 1 done, 2 interrupted */
    side_rec side[2];
} sample_rec;

typedef struct run_ctx {
    const assay_judge_sample *samples;
    int64_t n;
    sample_rec *rec;
    jh_endpoint ep[2], judge;
    int chat;                 /* candidates through chat completions */
    int rejudge_identical;    /* grade identical answers twice (default: once, the score shared) */
    int64_t max_tokens, judge_max_tokens;
    double temperature;
    const char *tmpl;
    jh_policy policy;         /* candidate calls */
    jh_policy judge_policy;   /* judge calls */
    pthread_mutex_t mu;
    int64_t next, done;
    assay_progress bar;
} run_ctx;

static volatile sig_atomic_t g_stop;
static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    g_stop = 1;
    g_signal = sig;
    signal(sig, SIG_DFL); /* a second one ends the process at once */
}

static char *dup_or_null(const char *s) { return s ? assay_xstrdup(s) : NULL; }

/* choices[0].message.content (chat) or choices[0].text (completions); NULL with *why when missing. */
static const char *answer_text(const assay_json *root, int chat, const char **finish, const char **why) {
    const assay_json *c0 = assay_json_at(assay_json_get(root, "choices"), 0);
    *finish = assay_json_string(assay_json_get(c0, "finish_reason"), NULL);
    if (!c0) {
        *why = "the answer has no choices";
        return NULL;
    }
    const assay_json *t = chat ? assay_json_get(assay_json_get(c0, "message"), "content") : assay_json_get(c0, "text");
    if (assay_json_is(t, ASSAY_JSON_STRING)) return t->str;
    if (chat && assay_json_is(t, ASSAY_JSON_NULL)) return ""; /* content null: an empty answer */
    *why = chat ? "the answer has no choices[0].message.content" : "the answer has no choices[0].text";
    return NULL;
}

static void model_field(assay_strbuf *b, const jh_endpoint *ep) {
    assay_strbuf_puts(b, "{");
    if (ep->model) {
        assay_strbuf_puts(b, "\"model\": ");
        assay_strbuf_json_string(b, ep->model, strlen(ep->model));
        assay_strbuf_puts(b, ", ");
    }
}

static void ask_candidate(run_ctx *c, int side, const assay_judge_sample *s, side_rec *r) {
    assay_strbuf b = {0};
    model_field(&b, &c->ep[side]);
    if (c->chat) {
        assay_strbuf_puts(&b, "\"messages\": [{\"role\": \"user\", \"content\": ");
        assay_strbuf_json_string(&b, s->prompt, strlen(s->prompt));
        assay_strbuf_puts(&b, "}]");
    } else {
        assay_strbuf_puts(&b, "\"prompt\": ");
        assay_strbuf_json_string(&b, s->prompt, strlen(s->prompt));
    }
    assay_strbuf_printf(&b, ", \"max_tokens\": %lld, \"temperature\": ", (long long)c->max_tokens);
    assay_strbuf_json_number(&b, c->temperature);
    assay_strbuf_puts(&b, "}");
    jh_response resp;
    assay_json_doc *doc = NULL;
    const char *path = c->chat ? "/v1/chat/completions" : "/v1/completions";
    if (jh_json(&c->ep[side], path, b.data, &c->policy, &resp, &doc)) {
        const char *finish = NULL, *why = NULL;
        const char *text = answer_text(assay_json_root(doc), c->chat, &finish, &why);
        if (text) r->answer = assay_xstrdup(text);
        else r->answer_error = assay_xstrdup(why);
        r->finish_reason = dup_or_null(finish);
    } else
        r->answer_error = assay_xstrdup(resp.error);
    r->answer_seconds = resp.seconds;
    r->answer_attempts = resp.attempts;
    assay_json_doc_free(doc);
    jh_response_free(&resp);
    assay_strbuf_free(&b);
}

/* One judge call: 1 with the reply's text in *reply, 0 with the reason in r->judge_error. */
static int ask_judge_once(run_ctx *c, const char *body, side_rec *r, char **reply) {
    jh_response resp;
    assay_json_doc *doc = NULL;
    int ok = 0;
    *reply = NULL;
    if (jh_json(&c->judge, "/v1/chat/completions", body, &c->judge_policy, &resp, &doc)) {
        const char *finish = NULL, *why = NULL;
        const char *text = answer_text(assay_json_root(doc), 1, &finish, &why);
        if (text) {
            *reply = assay_xstrdup(text);
            ok = 1;
        } else {
            free(r->judge_error);
            r->judge_error = assay_xstrdup(why);
        }
    } else {
        free(r->judge_error);
        r->judge_error = assay_xstrdup(resp.error);
    }
    assay_json_doc_free(doc);
    jh_response_free(&resp);
    return ok;
}

static void judge_answer(run_ctx *c, const assay_judge_sample *s, side_rec *r) {
    char *msg = assay_judge_render(c->tmpl, s->prompt, s->expected, r->answer);
    assay_strbuf b = {0};
    model_field(&b, &c->judge);
    assay_strbuf_puts(&b, "\"messages\": [{\"role\": \"user\", \"content\": ");
    assay_strbuf_json_string(&b, msg, strlen(msg));
    assay_strbuf_puts(&b, "}], \"temperature\": 0");
    if (c->judge_max_tokens > 0) assay_strbuf_printf(&b, ", \"max_tokens\": %lld", (long long)c->judge_max_tokens);
    assay_strbuf_puts(&b, "}");
    r->judge_state = J_FAILED;
    for (int attempt = 0; attempt < 2 && !g_stop; attempt++) {
        char *reply = NULL;
        if (!ask_judge_once(c, b.data, r, &reply)) {
            r->judge_state = J_FAILED;
            break;
        }
        r->reply[r->n_replies++] = reply;
        r->score = assay_judge_parse_score(reply, strlen(reply));
        if (r->score) {
            r->judge_state = J_OK;
            free(r->judge_error);
            r->judge_error = NULL;
            break;
        }
        r->judge_state = J_INVALID; /* asked once more, then left invalid */
    }
    if (r->judge_state == J_INVALID && !r->judge_error) r->judge_error = assay_xstrdup("the judge's replies hold no score 1-5");
    if (r->judge_state == J_FAILED && !r->judge_error) r->judge_error = assay_xstrdup("interrupted");
    free(msg);
    assay_strbuf_free(&b);
}

static void *worker(void *arg) {
    run_ctx *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int64_t i = g_stop ? c->n : c->next++;
        pthread_mutex_unlock(&c->mu);
        if (i >= c->n) break;
        const assay_judge_sample *s = &c->samples[i];
        sample_rec *rec = &c->rec[i];
        for (int side = 0; side < 2 && !g_stop; side++) ask_candidate(c, side, s, &rec->side[side]);
        side_rec *b = &rec->side[BASE], *k = &rec->side[CAND];
        if (b->answer && !g_stop) judge_answer(c, s, b);
        if (k->answer && !g_stop) {
            if (b->answer && !c->rejudge_identical && strcmp(b->answer, k->answer) == 0 && b->judge_state != J_NOT_JUDGED) {
                /* the same text gets the same grade: asking again would only add the judge's own noise */
                k->score = b->score;
                k->judge_state = b->judge_state;
                for (int r = 0; r < b->n_replies; r++) k->reply[k->n_replies++] = assay_xstrdup(b->reply[r]);
                k->judge_error = dup_or_null(b->judge_error);
                k->judge_shared = 1;
            } else
                judge_answer(c, s, k);
        }
        rec->state = g_stop ? 2 : 1;
        pthread_mutex_lock(&c->mu);
        c->done++;
        assay_progress_update(&c->bar, c->done);
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

/* The first model /v1/models lists; 1 when the endpoint answered at all (even without a list), 0 with *error. */
static int probe(jh_endpoint *ep, const jh_policy *p, char *error, size_t cap) {
    jh_response r;
    assay_json_doc *doc = NULL;
    int reached = 1;
    if (jh_json(ep, "/v1/models", NULL, p, &r, &doc)) {
        const char *id = assay_json_string(assay_json_get(assay_json_at(assay_json_get(assay_json_root(doc), "data"), 0), "id"), NULL);
        if (!ep->model && id) ep->model = assay_xstrdup(id);
    } else if (r.status == 0 || r.timed_out) {
        reached = 0;
        snprintf(error, cap, "cannot reach the %s endpoint: %s", ep->label, r.error);
    } else if (r.status == 401 || r.status == 403) {
        reached = 0;
        snprintf(error, cap, "the %s endpoint refused the API key: %s", ep->label, r.error);
    }
    assay_json_doc_free(doc);
    jh_response_free(&r);
    return reached;
}

/* ---- the results ------------------------------------------------------------------------------------------ */

typedef struct tally {
    int64_t answered[2], answer_failed[2], scored[2], invalid[2], judge_failed[2], retried[2], pairs, not_run, interrupted;
    int64_t identical; /* samples whose two answers are the same text */
    int64_t hist[2][6];
    double sum[2];
} tally;

static void count(const run_ctx *c, tally *t) {
    memset(t, 0, sizeof *t);
    for (int64_t i = 0; i < c->n; i++) {
        const sample_rec *r = &c->rec[i];
        if (r->state == 0) {
            t->not_run++;
            continue;
        }
        if (r->state == 2) t->interrupted++;
        for (int s = 0; s < 2; s++) {
            const side_rec *x = &r->side[s];
            if (x->answer) t->answered[s]++;
            else if (x->answer_error) t->answer_failed[s]++;
            if (x->judge_state == J_OK) t->scored[s]++, t->hist[s][x->score]++, t->sum[s] += x->score;
            if (x->judge_state == J_INVALID) t->invalid[s]++;
            if (x->judge_state == J_FAILED) t->judge_failed[s]++;
            if (x->n_replies > 1) t->retried[s]++;
        }
        if (r->side[0].judge_state == J_OK && r->side[1].judge_state == J_OK) t->pairs++;
        if (r->side[0].answer && r->side[1].answer && strcmp(r->side[0].answer, r->side[1].answer) == 0) t->identical++;
    }
}

static void json_str(assay_strbuf *b, const char *s) {
    if (s) assay_strbuf_json_string(b, s, strlen(s));
    else assay_strbuf_puts(b, "null");
}

static void json_num(assay_strbuf *b, const char *key, double v) {
    assay_strbuf_printf(b, "\"%s\": ", key);
    assay_strbuf_json_number(b, v);
}

static void write_side(assay_strbuf *b, const side_rec *x) {
    assay_strbuf_puts(b, "{\"answer\": ");
    json_str(b, x->answer);
    assay_strbuf_puts(b, ", \"answer_error\": ");
    json_str(b, x->answer_error);
    assay_strbuf_puts(b, ", \"finish_reason\": ");
    json_str(b, x->finish_reason);
    assay_strbuf_puts(b, ", ");
    json_num(b, "answer_seconds", x->answer_seconds);
    assay_strbuf_printf(b, ", \"answer_attempts\": %d, \"score\": ", x->answer_attempts);
    if (x->score) assay_strbuf_printf(b, "%d", x->score);
    else assay_strbuf_puts(b, "null");
    assay_strbuf_printf(b, ", \"judge_status\": \"%s\", \"judge_replies\": [", judge_state_name[x->judge_state]);
    for (int k = 0; k < x->n_replies; k++) {
        if (k) assay_strbuf_puts(b, ", ");
        json_str(b, x->reply[k]);
    }
    assay_strbuf_puts(b, "], \"judge_error\": ");
    json_str(b, x->judge_error);
    assay_strbuf_printf(b, ", \"judge_shared\": %s}", x->judge_shared ? "true" : "false");
}

static void write_endpoint(assay_strbuf *b, const char *key, const jh_endpoint *ep, const char *api) {
    assay_strbuf_printf(b, "  \"%s\": {\"url\": ", key);
    json_str(b, ep->base);
    assay_strbuf_puts(b, ", \"model\": ");
    json_str(b, ep->model);
    if (api) assay_strbuf_printf(b, ", \"api\": \"%s\"", api);
}

typedef struct run_info {
    const char *samples_path, *template_path;
    int64_t n_file;
    int64_t num_concurrent;
    const assay_judge_options *o;
    const char *verdict_reason;
    int exit_code;
} run_info;

static void results_json(const run_ctx *c, const tally *t, const assay_judge_summary *s, const run_info *ri, assay_strbuf *b) {
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    assay_strbuf_printf(b, "{\n  \"command\": \"judge\",\n  \"assay_version\": \"%s\",\n  \"date\": \"%s\",\n  \"samples_file\": ",
#ifdef ASSAY_VERSION
                        ASSAY_VERSION,
#else
                        "?",
#endif
                        date);
    json_str(b, ri->samples_path);
    assay_strbuf_printf(b, ",\n  \"n_samples_in_file\": %lld,\n  \"n_samples\": %lld,\n", (long long)ri->n_file, (long long)c->n);
    write_endpoint(b, "baseline", &c->ep[BASE], c->chat ? "chat" : "completions");
    assay_strbuf_puts(b, "},\n");
    write_endpoint(b, "candidate", &c->ep[CAND], c->chat ? "chat" : "completions");
    assay_strbuf_puts(b, "},\n");
    write_endpoint(b, "judge", &c->judge, "chat");
    assay_strbuf_puts(b, ", \"template\": ");
    json_str(b, ri->template_path ? ri->template_path : "default");
    assay_strbuf_puts(b, ", \"template_text\": ");
    json_str(b, c->tmpl);
    assay_strbuf_printf(b, ", \"max_tokens\": %lld},\n", (long long)c->judge_max_tokens);
    assay_strbuf_printf(b, "  \"settings\": {\"max_tokens\": %lld, ", (long long)c->max_tokens);
    json_num(b, "temperature", c->temperature);
    assay_strbuf_puts(b, ", ");
    json_num(b, "timeout_s", c->policy.timeout_s);
    assay_strbuf_puts(b, ", ");
    json_num(b, "judge_timeout_s", c->judge_policy.timeout_s);
    assay_strbuf_printf(b, ", \"max_retries\": %d, \"num_concurrent\": %lld, \"rejudge_identical\": %s, \"bootstrap_iters\": %d, ",
                        c->policy.max_retries, (long long)ri->num_concurrent, c->rejudge_identical ? "true" : "false",
                        ri->o->bootstrap_iters);
    json_num(b, "confidence", ri->o->confidence);
    assay_strbuf_printf(b, ", \"seed\": %llu},\n", (unsigned long long)ri->o->seed);
    assay_strbuf_printf(b, "  \"interrupted\": %s,\n", g_stop ? "true" : "false");
    assay_strbuf_puts(b, "  \"counts\": {");
    for (int k = 0; k < 2; k++)
        assay_strbuf_printf(b, "\"%s\": {\"answered\": %lld, \"answer_failed\": %lld, \"scored\": %lld, \"judge_invalid\": %lld, "
                               "\"judge_failed\": %lld, \"judge_retried\": %lld}, ",
                            side_name[k], (long long)t->answered[k], (long long)t->answer_failed[k], (long long)t->scored[k],
                            (long long)t->invalid[k], (long long)t->judge_failed[k], (long long)t->retried[k]);
    assay_strbuf_printf(b, "\"pairs\": %lld, \"identical_answers\": %lld, \"not_run\": %lld, \"interrupted\": %lld},\n",
                        (long long)t->pairs, (long long)t->identical, (long long)t->not_run, (long long)t->interrupted);
    assay_strbuf_puts(b, "  \"scores\": {");
    for (int k = 0; k < 2; k++) {
        assay_strbuf_printf(b, "\"%s_mean\": ", side_name[k]);
        assay_strbuf_json_number(b, t->scored[k] ? t->sum[k] / (double)t->scored[k] : NAN);
        assay_strbuf_printf(b, ", \"%s_histogram\": [%lld, %lld, %lld, %lld, %lld], ", side_name[k], (long long)t->hist[k][1],
                            (long long)t->hist[k][2], (long long)t->hist[k][3], (long long)t->hist[k][4], (long long)t->hist[k][5]);
    }
    assay_strbuf_printf(b, "\"pairs\": %lld, ", (long long)s->n);
    json_num(b, "baseline_mean_paired", s->mean_base);
    assay_strbuf_puts(b, ", ");
    json_num(b, "candidate_mean_paired", s->mean_cand);
    assay_strbuf_puts(b, ", ");
    json_num(b, "mean_difference", s->mean_diff);
    assay_strbuf_puts(b, ", ");
    json_num(b, "sd_difference", s->sd_diff);
    assay_strbuf_puts(b, ", ");
    json_num(b, "mean_difference_lo", s->diff_lo);
    assay_strbuf_puts(b, ", ");
    json_num(b, "mean_difference_hi", s->diff_hi);
    assay_strbuf_puts(b, ", ");
    json_num(b, "degradation_pct", s->degradation);
    assay_strbuf_puts(b, ", ");
    json_num(b, "degradation_lo_pct", s->degradation_lo);
    assay_strbuf_puts(b, ", ");
    json_num(b, "degradation_hi_pct", s->degradation_hi);
    assay_strbuf_printf(b, ",\n    \"wilcoxon\": {\"n\": %lld, \"n_zero\": %lld, ", (long long)s->wilcoxon.n, (long long)s->wilcoxon.n_zero);
    json_num(b, "statistic", s->wilcoxon.statistic);
    assay_strbuf_puts(b, ", ");
    json_num(b, "r_plus", s->wilcoxon.r_plus);
    assay_strbuf_puts(b, ", ");
    json_num(b, "z", s->wilcoxon.z);
    assay_strbuf_puts(b, ", ");
    json_num(b, "p_value", s->wilcoxon.p_value);
    assay_strbuf_printf(b, ", \"method\": \"%s\", \"order\": \"candidate - baseline\"}},\n",
                        assay_wilcoxon_method_name(s->wilcoxon.method));
    assay_strbuf_printf(b, "  \"verdict\": {\"name\": \"%s\", \"exit_code\": %d, \"reason\": ", assay_judge_verdict_name(s->verdict),
                        ri->exit_code);
    json_str(b, ri->verdict_reason);
    assay_strbuf_puts(b, ", ");
    json_num(b, "ship_threshold_pct", ri->o->ship_below);
    assay_strbuf_puts(b, ", ");
    json_num(b, "monitor_threshold_pct", ri->o->monitor_up_to);
    assay_strbuf_puts(b, ", ");
    json_num(b, "ship_threshold_points", s->ship_points);
    assay_strbuf_puts(b, ", ");
    json_num(b, "monitor_threshold_points", s->monitor_points);
    assay_strbuf_puts(b, ", \"samples_needed\": ");
    if (s->samples_needed > 0) assay_strbuf_printf(b, "%lld", (long long)s->samples_needed);
    else assay_strbuf_puts(b, "null");
    assay_strbuf_puts(b, "},\n  \"samples\": [");
    for (int64_t i = 0; i < c->n; i++) {
        const assay_judge_sample *x = &c->samples[i];
        const sample_rec *r = &c->rec[i];
        assay_strbuf_printf(b, "%s\n    {\"index\": %lld, \"line\": %lld, \"id\": ", i ? "," : "", (long long)i, (long long)x->line);
        json_str(b, x->id);
        assay_strbuf_printf(b, ", \"status\": \"%s\", \"prompt\": ", r->state == 1 ? "done" : r->state == 2 ? "interrupted" : "not run");
        json_str(b, x->prompt);
        assay_strbuf_puts(b, ", \"expected\": ");
        json_str(b, x->expected);
        assay_strbuf_puts(b, ",\n     \"baseline\": ");
        write_side(b, &r->side[BASE]);
        assay_strbuf_puts(b, ",\n     \"candidate\": ");
        write_side(b, &r->side[CAND]);
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "\n  ]\n}\n");
}

/* ---- the command ------------------------------------------------------------------------------------------ */

static const char *key_from(const char *flag, const char *env1) {
    if (flag) return flag;
    const char *k = getenv(env1);
    if (k && k[0]) return k;
    k = getenv("OPENAI_API_KEY");
    return k && k[0] ? k : NULL;
}

int assay_cmd_judge(int argc, char **argv) {
    const char *base_url = NULL, *cand_url = NULL, *judge_url = NULL, *base_model = NULL, *cand_model = NULL,
               *judge_model = NULL, *base_key = NULL, *cand_key = NULL, *judge_key = NULL, *template_path = NULL,
               *api = "chat", *output = "judge-results.json";
    int rejudge_identical = 0;
    int64_t max_tokens = 512, judge_max_tokens = 32, num_concurrent = 8, max_retries = 3, limit = 0, iters = 2000, seed = 1234;
    double temperature = 0, timeout = 120, judge_timeout = 0, ship = 0.5, monitor = 1.5, confidence = 0.95, max_unscored = 0.1;
    const cli_option opts[] = {
        {NULL, "--baseline-url", CLI_STRING, &base_url, "URL", "the baseline's OpenAI-compatible server (e.g. http://127.0.0.1:8000)"},
        {NULL, "--baseline-model", CLI_STRING, &base_model, "NAME", "model name sent to it (default: the first of its /v1/models)"},
        {NULL, "--baseline-api-key", CLI_STRING, &base_key, "KEY", "default $ASSAY_BASELINE_API_KEY, else $OPENAI_API_KEY"},
        {NULL, "--candidate-url", CLI_STRING, &cand_url, "URL", "the candidate's server"},
        {NULL, "--candidate-model", CLI_STRING, &cand_model, "NAME", "model name sent to it (default: the first of its /v1/models)"},
        {NULL, "--candidate-api-key", CLI_STRING, &cand_key, "KEY", "default $ASSAY_CANDIDATE_API_KEY, else $OPENAI_API_KEY"},
        {NULL, "--candidate-api", CLI_STRING, &api, "chat|completions",
         "how both candidates are asked: chat completions (default) or plain completions (a model without a chat template)"},
        {NULL, "--judge-url", CLI_STRING, &judge_url, "URL", "the judge's server (chat completions)"},
        {NULL, "--judge-model", CLI_STRING, &judge_model, "NAME", "judge model name (default: the first of its /v1/models)"},
        {NULL, "--judge-api-key", CLI_STRING, &judge_key, "KEY", "default $ASSAY_JUDGE_API_KEY, else $OPENAI_API_KEY"},
        {NULL, "--judge-template", CLI_STRING, &template_path, "FILE",
         "the judge's prompt, with {prompt}, {expected} and {answer} placeholders (default: the workflow's rubric)"},
        {NULL, "--rejudge-identical", CLI_FLAG, &rejudge_identical, NULL,
         "grade both answers even when they are the same text (default: graded once, the score shared)"},
        {NULL, "--judge-max-tokens", CLI_INT, &judge_max_tokens, "N", "token limit of a judge reply (default 32; 0: none sent)",
         CLI_AT_LEAST(0)},
        {NULL, "--max-tokens", CLI_INT, &max_tokens, "N", "token limit of a candidate's answer (default 512)", CLI_AT_LEAST(1)},
        {NULL, "--temperature", CLI_FLOAT, &temperature, "T", "candidates' sampling temperature (default 0: greedy)", CLI_IN(0, 2)},
        {"-o", "--output", CLI_STRING, &output, "FILE", "results JSON (default judge-results.json; - for standard output)"},
        {NULL, "--limit", CLI_INT, &limit, "N", "only the first N samples (default 0: all)", CLI_AT_LEAST(0)},
        {NULL, "--num-concurrent", CLI_INT, &num_concurrent, "N", "samples in flight at once (default 8)", CLI_IN(1, 256)},
        {NULL, "--timeout", CLI_FLOAT, &timeout, "S", "seconds allowed for each call (default 120)", CLI_ABOVE(0)},
        {NULL, "--judge-timeout", CLI_FLOAT, &judge_timeout, "S", "seconds allowed for each judge call (default 0: --timeout's)",
         CLI_AT_LEAST(0)},
        {NULL, "--max-retries", CLI_INT, &max_retries, "N",
         "retries of a call after no answer, a timeout, 408, 429 or 5xx, with exponential backoff (default 3)", CLI_IN(0, 20)},
        {NULL, "--ship-threshold", CLI_FLOAT, &ship, "PCT", "degradation below this is 'ship' (default 0.5)", CLI_AT_LEAST(0)},
        {NULL, "--monitor-threshold", CLI_FLOAT, &monitor, "PCT", "up to this 'ship with monitoring', above 'investigate' (default 1.5)",
         CLI_AT_LEAST(0)},
        {NULL, "--confidence", CLI_FLOAT, &confidence, "P", "level of the bootstrap interval (default 0.95)", CLI_IN_OPEN(0, 1)},
        {NULL, "--bootstrap-iters", CLI_INT, &iters, "N", "bootstrap resamples (default 2000)", CLI_IN(0, 1000000)},
        {NULL, "--seed", CLI_INT, &seed, "N", "bootstrap seed (default 1234)", CLI_AT_LEAST(0)},
        {NULL, "--max-unscored", CLI_FLOAT, &max_unscored, "F",
         "fail (exit 1) when more than this fraction of the samples has no pair of scores (default 0.1)", CLI_IN(0, 1)},
        {0}};
    const cli_spec spec = {"judge", "SAMPLES.jsonl --baseline-url URL --candidate-url URL --judge-url URL [options]",
                           "LLM-as-judge domain eval of two endpoints; exit code 0 ship, 3 ship with monitoring, 4 investigate, 5 inconclusive",
                           opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    const char *samples_path = args.positional[0];
    const char *problem = !base_url ? "--baseline-url is required"
                          : !cand_url ? "--candidate-url is required"
                          : !judge_url ? "--judge-url is required"
                          : strcmp(api, "chat") != 0 && strcmp(api, "completions") != 0 ? "--candidate-api must be chat or completions"
                          : monitor < ship ? "--monitor-threshold must be >= --ship-threshold"
                          : NULL;
    if (problem) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "%s", problem);
    }

    /* the samples and the template, before any network call */
    assay_judge_sample *samples = NULL;
    int64_t n_file = 0;
    char *tmpl_owned = NULL;
    size_t tmpl_len = 0;
    int has_expected = 1;
    if (assay_judge_read_samples(samples_path, &samples, &n_file) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_report_error("judge");
    }
    assay_status tst = ASSAY_OK;
    if (template_path && (tst = assay_read_file(template_path, &tmpl_owned, &tmpl_len)) == ASSAY_OK &&
        (tst = assay_judge_check_template(tmpl_owned, &has_expected)) != ASSAY_OK)
        assay_fail_context(tst, "%s", template_path);
    if (tst != ASSAY_OK) {
        assay_judge_samples_free(samples, n_file);
        free(tmpl_owned);
        cli_args_free(&args);
        return cli_report_error("judge");
    }
    if (!has_expected)
        fprintf(stderr, "assay judge: note: %s has no {expected} placeholder: the judge grades without the expected answers\n",
                template_path);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "assay judge: libcurl failed to start\n");
        assay_judge_samples_free(samples, n_file);
        free(tmpl_owned);
        cli_args_free(&args);
        return CLI_EXIT_ERROR;
    }
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.samples = samples;
    c.n = limit > 0 && limit < n_file ? limit : n_file;
    c.rec = assay_xcalloc((size_t)c.n, sizeof *c.rec);
    c.chat = strcmp(api, "chat") == 0;
    c.rejudge_identical = rejudge_identical;
    c.max_tokens = max_tokens;
    c.judge_max_tokens = judge_max_tokens;
    c.temperature = temperature;
    c.tmpl = tmpl_owned ? tmpl_owned : assay_judge_default_template();
    if (judge_timeout == 0) judge_timeout = timeout;
    c.policy = (jh_policy){timeout, timeout < 10 ? timeout : 10, (int)max_retries, 0.5, &g_stop};
    c.judge_policy = (jh_policy){judge_timeout, judge_timeout < 10 ? judge_timeout : 10, (int)max_retries, 0.5, &g_stop};
    jh_endpoint_init(&c.ep[BASE], "baseline", base_url, key_from(base_key, "ASSAY_BASELINE_API_KEY"));
    jh_endpoint_init(&c.ep[CAND], "candidate", cand_url, key_from(cand_key, "ASSAY_CANDIDATE_API_KEY"));
    jh_endpoint_init(&c.judge, "judge", judge_url, key_from(judge_key, "ASSAY_JUDGE_API_KEY"));
    if (base_model) c.ep[BASE].model = assay_xstrdup(base_model);
    if (cand_model) c.ep[CAND].model = assay_xstrdup(cand_model);
    if (judge_model) c.judge.model = assay_xstrdup(judge_model);
    pthread_mutex_init(&c.mu, NULL);
    int exit_code = CLI_EXIT_ERROR;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* judge takes its signals itself (the command line leaves them to it, as to serve): the run stops, and the
     * results of what finished are written before it exits with 128 + the signal's number */
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int k = 0; k < 3; k++) {
        struct sigaction old;
        if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue; /* nohup and the like */
        sigaction(sigs[k], &sa, NULL);
    }

    /* every endpoint answers (and names its model when none was given) before the run starts */
    jh_policy quick = c.policy;
    quick.timeout_s = timeout < 30 ? timeout : 30;
    quick.max_retries = max_retries < 1 ? (int)max_retries : 1;
    jh_policy quick_judge = quick;
    quick_judge.timeout_s = judge_timeout < 30 ? judge_timeout : 30;
    jh_endpoint *eps[3] = {&c.ep[BASE], &c.ep[CAND], &c.judge};
    for (int k = 0; k < 3; k++) {
        char error[700];
        if (!probe(eps[k], k == 2 ? &quick_judge : &quick, error, sizeof error)) {
            if (g_stop) {
                fprintf(stderr, "assay judge: interrupted by %s\n",
                        g_signal == SIGTERM ? "SIGTERM" : g_signal == SIGHUP ? "SIGHUP" : "SIGINT");
                exit_code = 128 + (int)g_signal;
            } else
                fprintf(stderr, "assay judge: %s\n", error);
            goto done;
        }
    }
    fprintf(stderr, "assay judge: %lld samples%s; baseline %s (%s), candidate %s (%s), judge %s (%s)\n", (long long)c.n,
            c.n < n_file ? " (--limit)" : "", c.ep[BASE].base, c.ep[BASE].model ? c.ep[BASE].model : "no model name",
            c.ep[CAND].base, c.ep[CAND].model ? c.ep[CAND].model : "no model name", c.judge.base,
            c.judge.model ? c.judge.model : "no model name");

    /* the run */
    int64_t nt = num_concurrent < c.n ? num_concurrent : c.n;
    pthread_t *th = assay_xcalloc((size_t)nt, sizeof *th);
    assay_progress_begin(&c.bar, "judge", c.n, "sample");
    int64_t started = 0;
    for (int64_t k = 0; k < nt; k++)
        if (pthread_create(&th[started], NULL, worker, &c) == 0) started++;
    for (int64_t k = 0; k < started; k++) pthread_join(th[k], NULL);
    free(th);
    assay_progress_end(&c.bar);
    if (started == 0) worker(&c); /* no thread could start: run here */

    /* the statistics over the samples both sides got a score for */
    tally t;
    count(&c, &t);
    double *sb = assay_xmalloc((size_t)(t.pairs + 1) * sizeof *sb), *sc = assay_xmalloc((size_t)(t.pairs + 1) * sizeof *sc);
    int64_t np = 0;
    for (int64_t i = 0; i < c.n; i++)
        if (c.rec[i].side[BASE].judge_state == J_OK && c.rec[i].side[CAND].judge_state == J_OK)
            sb[np] = c.rec[i].side[BASE].score, sc[np] = c.rec[i].side[CAND].score, np++;
    assay_judge_options o;
    assay_judge_options_default(&o);
    o.ship_below = ship;
    o.monitor_up_to = monitor;
    o.confidence = confidence;
    o.bootstrap_iters = (int)iters;
    o.seed = (uint64_t)seed;
    assay_judge_summary s;
    assay_judge_summarize(sb, sc, np, &o, &s);
    free(sb);
    free(sc);

    /* the verdict, the reason, and whether the run itself is good enough to stand on */
    assay_strbuf reason = {0};
    double unscored = c.n ? (double)(c.n - np) / (double)c.n : 1;
    switch (s.verdict) {
    case ASSAY_JUDGE_SHIP:
        if (s.mean_base == 1) assay_strbuf_puts(&reason, "every baseline score is 1: nothing to lose");
        else assay_strbuf_printf(&reason, "the interval lies below %g%% (%.3g points)", ship, s.ship_points);
        break;
    case ASSAY_JUDGE_MONITOR:
        assay_strbuf_printf(&reason, "the interval lies within %g-%g%% (%.3g-%.3g points)", ship, monitor, s.ship_points,
                            s.monitor_points);
        break;
    case ASSAY_JUDGE_INVESTIGATE:
        assay_strbuf_printf(&reason, "the interval lies above %g%% (%.3g points)", monitor, s.monitor_points);
        break;
    case ASSAY_JUDGE_INCONCLUSIVE:
        if (np < 2) assay_strbuf_printf(&reason, "%lld scored pair%s: too few to decide", (long long)np, np == 1 ? "" : "s");
        else {
            double g = -s.mean_diff;
            double t = fabs(g - s.ship_points) < fabs(g - s.monitor_points) ? ship : monitor;
            assay_strbuf_printf(&reason, "the interval spans %g%% (%.3g points)", t, t == ship ? s.ship_points : s.monitor_points);
            if (s.samples_needed > 0)
                assay_strbuf_printf(&reason, "; about %lld pairs would settle it at the observed spread", (long long)s.samples_needed);
            else
                assay_strbuf_puts(&reason, "; the estimate sits on the threshold: no sample count would settle it");
        }
        break;
    }
    exit_code = assay_judge_verdict_exit_code(s.verdict);
    const char *failure = NULL;
    char failure_buf[256];
    if (g_stop) {
        snprintf(failure_buf, sizeof failure_buf, "interrupted by %s",
                 g_signal == SIGTERM ? "SIGTERM" : g_signal == SIGHUP ? "SIGHUP" : "SIGINT");
        failure = failure_buf;
        exit_code = 128 + (int)g_signal;
    } else if (np == 0) {
        failure = "no sample has both scores";
        exit_code = CLI_EXIT_ERROR;
    } else if (unscored > max_unscored) {
        snprintf(failure_buf, sizeof failure_buf, "%lld of %lld samples (%.0f%%) have no pair of scores, more than --max-unscored %g allows",
                 (long long)(c.n - np), (long long)c.n, 100 * unscored, max_unscored);
        failure = failure_buf;
        exit_code = CLI_EXIT_ERROR;
    }

    /* the results file, in every case */
    run_info ri = {samples_path, template_path, n_file, num_concurrent, &o, reason.data, exit_code};
    assay_strbuf out = {0};
    results_json(&c, &t, &s, &ri, &out);
    assay_output_file of;
    int written = 0;
    if (assay_output_file_open(&of, output, 1) == ASSAY_OK && fwrite(out.data, 1, out.len, of.fp) == out.len &&
        assay_output_file_commit(&of) == ASSAY_OK)
        written = 1;
    else {
        assay_output_file_abort(&of);
        cli_report_error("judge");
        exit_code = CLI_EXIT_ERROR;
    }
    assay_strbuf_free(&out);

    /* the summary (on standard error when the results JSON goes to standard output) */
    FILE *sum = assay_output_is_stdout(output) ? stderr : stdout;
    fprintf(sum, "%-22s %12s %12s\n", "", "baseline", "candidate");
    fprintf(sum, "%-22s %12lld %12lld\n", "answered", (long long)t.answered[BASE], (long long)t.answered[CAND]);
    fprintf(sum, "%-22s %12lld %12lld\n", "answer failed", (long long)t.answer_failed[BASE], (long long)t.answer_failed[CAND]);
    fprintf(sum, "%-22s %12lld %12lld\n", "scored", (long long)t.scored[BASE], (long long)t.scored[CAND]);
    fprintf(sum, "%-22s %12lld %12lld\n", "judge invalid", (long long)t.invalid[BASE], (long long)t.invalid[CAND]);
    fprintf(sum, "%-22s %12lld %12lld\n", "judge failed", (long long)t.judge_failed[BASE], (long long)t.judge_failed[CAND]);
    fprintf(sum, "%-22s %12.3f %12.3f\n", "mean score", t.scored[BASE] ? t.sum[BASE] / (double)t.scored[BASE] : NAN,
                 t.scored[CAND] ? t.sum[CAND] / (double)t.scored[CAND] : NAN);
    fprintf(sum, "%-22s %5lld %5lld %5lld %5lld %5lld | %5lld %5lld %5lld %5lld %5lld\n", "scores 1..5", (long long)t.hist[BASE][1],
                 (long long)t.hist[BASE][2], (long long)t.hist[BASE][3], (long long)t.hist[BASE][4], (long long)t.hist[BASE][5],
                 (long long)t.hist[CAND][1], (long long)t.hist[CAND][2], (long long)t.hist[CAND][3], (long long)t.hist[CAND][4],
                 (long long)t.hist[CAND][5]);
    fprintf(sum, "identical answers: %lld of %lld samples%s\n", (long long)t.identical, (long long)c.n,
                 t.identical && !rejudge_identical ? " (graded once, the score shared)" : "");
    if (t.not_run || t.interrupted) fprintf(sum, "not run: %lld, interrupted: %lld\n", (long long)t.not_run, (long long)t.interrupted);
    fprintf(sum, "pairs: %lld; mean %.3f -> %.3f, difference %+.3f points, %g%% bootstrap interval [%+.3f, %+.3f]\n", (long long)np,
                 s.mean_base, s.mean_cand, s.mean_diff, 100 * confidence, s.diff_lo, s.diff_hi);
    if (!isnan(s.degradation))
        fprintf(sum, "degradation: %.2f%% [%.2f%%, %.2f%%] of the baseline's %.3f points above the floor; thresholds %g%% = %.3f points, "
                     "%g%% = %.3f points\n",
                     s.degradation, s.degradation_lo, s.degradation_hi, s.mean_base - 1, ship, s.ship_points, monitor, s.monitor_points);
    fprintf(sum, "Wilcoxon signed-rank: W = %g, p = %.4g (%s, %lld zero differences dropped)\n", s.wilcoxon.statistic,
                 s.wilcoxon.p_value, assay_wilcoxon_method_name(s.wilcoxon.method), (long long)s.wilcoxon.n_zero);
    fprintf(sum, "Verdict: %s (%s)\n", assay_judge_verdict_name(s.verdict), reason.data);
    if (written && sum == stdout) fprintf(sum, "results: %s\n", output);
    fflush(sum);
    if (failure) fprintf(stderr, "assay judge: %s%s\n", failure, written ? "; partial results are in the results file" : "");
    assay_strbuf_free(&reason);

done:
    for (int64_t i = 0; i < c.n; i++)
        for (int k = 0; k < 2; k++) {
            side_rec *x = &c.rec[i].side[k];
            free(x->answer);
            free(x->answer_error);
            free(x->finish_reason);
            free(x->judge_error);
            for (int r = 0; r < x->n_replies; r++) free(x->reply[r]);
        }
    free(c.rec);
    jh_endpoint_free(&c.ep[BASE]);
    jh_endpoint_free(&c.ep[CAND]);
    jh_endpoint_free(&c.judge);
    pthread_mutex_destroy(&c.mu);
    assay_judge_samples_free(samples, n_file);
    free(tmpl_owned);
    cli_args_free(&args);
    curl_global_cleanup();
    for (int k = 0; k < 3; k++) signal(sigs[k], SIG_DFL);
    return exit_code;
}
