/* live_judge.h — `assay serve --judge-url`: an LLM judge scores a sample of live answers in the background.
 *
 * The server's on_done hook (server.h) offers each finished generation; a sample of them (the sample rate) is copied
 * into a bounded queue without waiting: when the queue is full the sample is dropped and counted. One background
 * thread takes samples off the queue and asks the judge (any OpenAI-compatible chat endpoint) for a 1-5 score of
 * the answer's helpfulness and correctness; the judge sees the prompt and the answer, no expected answer. Every
 * judge call has a connect timeout and a total timeout, and stopping aborts the call in flight.
 *
 * /metrics gains (through the server's metrics_extra hook):
 *   assay:judge_score            histogram, buckets le 1..5, labels model_name and name="llm_judge_domain"
 *   assay:judge_judged_total     replies that were a score
 *   assay:judge_invalid_total    replies that were not a score 1-5
 *   assay:judge_failed_total     calls with no usable reply (connection error, timeout, HTTP error, bad JSON)
 *   assay:judge_dropped_total    samples dropped because the queue was full
 *   assay:judge_queue_length     samples waiting now */
#ifndef ASSAY_TOOLS_LIVE_JUDGE_H
#define ASSAY_TOOLS_LIVE_JUDGE_H

#include <stddef.h>

#include <stdint.h>

#include "assay/strbuf.h"
#include "cli.h"

typedef struct live_judge live_judge;

typedef struct live_judge_options {
    const char *url;     /* the judge's base URL (http://host:port or .../v1) or its full .../chat/completions URL */
    const char *model;   /* the judge's model name (NULL: none sent; the server's default) */
    const char *api_key; /* NULL: no Authorization header */
    double sample_rate;  /* fraction of finished requests judged, in [0, 1] */
    int queue_size;      /* samples waiting at most (default 64) */
    double timeout_s;    /* one judge call, connection included (default 30) */
    const char *name;    /* the score's name label (default "llm_judge_domain") */
    unsigned seed;       /* sampling */
} live_judge_options;

/* The system prompt the judge gets: the rubric for a live answer with no expected answer. */
extern const char live_judge_rubric[];

/* Starts the judge thread; NULL with assay_last_error() set on a bad option. */
live_judge *live_judge_start(const live_judge_options *o);
/* The server's hooks (ctx is the live_judge). Neither blocks on the judge. */
void live_judge_offer(void *ctx, const char *prompt, size_t prompt_len, const char *answer, size_t answer_len);
void live_judge_metrics(void *ctx, assay_strbuf *out, const char *model_label);
/* Parses a judge reply: the score 1-5, or 0 when the reply is not one. */
int live_judge_parse_score(const char *reply);
/* The command-line side, for `assay serve`: the options as parsed, their rows, and a start from them. */
typedef struct live_judge_cli {
    const char *url, *model, *api_key;
    double sample_rate, timeout_s;
    int64_t queue_size;
} live_judge_cli;
void live_judge_cli_init(live_judge_cli *c);
#define LIVE_JUDGE_CLI_OPTIONS(c)                                                                                        \
    {NULL, "--judge-url", CLI_STRING, &(c).url, "URL",                                                                   \
     "judge a sample of live answers with this OpenAI-compatible chat endpoint; scores in /metrics (assay:judge_score)"}, \
    {NULL, "--judge-model", CLI_STRING, &(c).model, "NAME", "the judge's model name (default: none sent)"},               \
    {NULL, "--judge-api-key", CLI_STRING, &(c).api_key, "KEY", "the judge's API key (default: $ASSAY_JUDGE_API_KEY)"},   \
    {NULL, "--judge-sample-rate", CLI_FLOAT, &(c).sample_rate, "R",                                                     \
     "fraction of finished requests sent to the judge (default 0.1)", CLI_IN(0, 1)},                                   \
    {NULL, "--judge-timeout", CLI_FLOAT, &(c).timeout_s, "S", "seconds one judge call may take (default 30)",            \
     CLI_IN_OPEN_CLOSED(0, 3600)},                                                                                       \
    {NULL, "--judge-queue-size", CLI_INT, &(c).queue_size, "N",                                                         \
     "sampled answers waiting for the judge at most; more are dropped and counted (default 64)", CLI_IN(1, 1000000)}
/* NULL when no --judge-url was given or on an error (assay_last_error() set; *failed = 1). */
live_judge *live_judge_cli_start(const live_judge_cli *c, int *failed);

/* Aborts the call in flight, joins the thread, frees what is queued. NULL: nothing. */
void live_judge_stop(live_judge *j);

#endif
