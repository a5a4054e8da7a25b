/* live_judge.c — see live_judge.h. One mutex guards the queue and the counters; the judge thread holds it only to
 * take a sample and to record the outcome, never during an HTTP call. */
#include "live_judge.h"

#include <ctype.h>
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/json.h"
#include "assay/status.h"

#define MAX_TEXT ((size_t)16 << 10) /* prompt and answer are cut to this many bytes before judging */
#define MAX_REPLY ((size_t)1 << 20)

const char live_judge_rubric[] =
    "You review answers an AI assistant gave to real user requests. You see one request and the answer the "
    "assistant produced. There is no reference answer: judge from the request itself and from what you know.\n"
    "Rate how helpful and correct the answer is, from 1 to 5:\n"
    "5 = correct and complete; it does what was asked, with nothing important wrong or missing.\n"
    "4 = correct and useful, with small omissions or rough edges.\n"
    "3 = partly right or partly useful: a real gap, or a minor error.\n"
    "2 = mostly unhelpful, or it contains a significant error.\n"
    "1 = wrong, off-topic, incoherent, repetitive or empty.\n"
    "A confident wrong answer is worse than an honest partial one. Reply with the number only.";

typedef struct sample {
    char *prompt, *answer;
} sample;

struct live_judge {
    char *url, *model, *name;
    struct curl_slist *headers;
    double rate, timeout_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stopping;
    sample *q;
    int cap, head, count;
    uint64_t rng;
    /* outcomes (under mu) */
    int64_t bucket[6]; /* scores 1..5 at [1..5] */
    int64_t judged, invalid, failed, dropped;
    double sum;
};

/* ---- parsing the judge's reply ------------------------------------------------------------------------------ */

/* The score 1-5 the reply gives, or 0. Accepted: the number alone, or with a little wrapping ("4", "4.", "**4**",
 * "Score: 4", "4/5", "4 out of 5"); text before a closing </think> is skipped. Refused: no number, a number outside
 * 1-5, a fraction ("4.5"), or more than one candidate ("3 or 4"). */
int live_judge_parse_score(const char *reply) {
    if (!reply) return 0;
    const char *think = NULL, *p = reply;
    while ((p = strstr(p, "</think>"))) think = p, p += 8;
    if (think) reply = think + 8;
    int score = 0;
    for (const char *s = reply; *s; s++) {
        if (!isdigit((unsigned char)*s)) continue;
        const char *start = s;
        long v = 0;
        while (isdigit((unsigned char)*s) && v < 1000) v = v * 10 + (*s++ - '0');
        while (isdigit((unsigned char)*s)) s++;
        int frac = *s == '.' && isdigit((unsigned char)s[1]);
        /* "/5" or "out of 5" after a score is the scale, not another candidate */
        const char *b = start;
        while (b > reply && isspace((unsigned char)b[-1])) b--;
        int is_scale = (b > reply && b[-1] == '/') || (b - reply >= 6 && strncasecmp(b - 6, "out of", 6) == 0);
        if (is_scale && score && v == 5 && !frac) {
            s--;
            continue;
        }
        if (score || frac || v < 1 || v > 5) return 0;
        score = (int)v;
        s--;
    }
    return score;
}

/* ---- the queue (the server's side) -------------------------------------------------------------------------- */

static double next_uniform(live_judge *j) { /* xorshift64*, under mu */
    j->rng ^= j->rng >> 12;
    j->rng ^= j->rng << 25;
    j->rng ^= j->rng >> 27;
    return (double)((j->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static char *copy_cut(const char *s, size_t n) {
    if (n > MAX_TEXT) {
        n = MAX_TEXT;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 character */
    }
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

void live_judge_offer(void *ctx, const char *prompt, size_t prompt_len, const char *answer, size_t answer_len) {
    live_judge *j = ctx;
    pthread_mutex_lock(&j->mu);
    if (j->stopping || (j->rate < 1 && next_uniform(j) >= j->rate)) {
        pthread_mutex_unlock(&j->mu);
        return;
    }
    if (j->count == j->cap) {
        j->dropped++;
        pthread_mutex_unlock(&j->mu);
        return;
    }
    sample sm = {copy_cut(prompt, prompt_len), copy_cut(answer, answer_len)};
    if (!sm.prompt || !sm.answer) {
        free(sm.prompt);
        free(sm.answer);
        j->dropped++;
    } else {
        j->q[(j->head + j->count) % j->cap] = sm;
        j->count++;
        pthread_cond_signal(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
}

void live_judge_metrics(void *ctx, assay_strbuf *b, const char *model_label) {
    live_judge *j = ctx;
    pthread_mutex_lock(&j->mu);
    int64_t bucket[6], judged = j->judged, invalid = j->invalid, failed = j->failed, dropped = j->dropped, queued = j->count;
    memcpy(bucket, j->bucket, sizeof bucket);
    double sum = j->sum;
    pthread_mutex_unlock(&j->mu);
    assay_strbuf lab = {0};
    assay_strbuf_printf(&lab, "%s,name=\"", model_label);
    for (const char *p = j->name; *p; p++) { /* a label value's escapes */
        if (*p == '\\' || *p == '"') assay_strbuf_putc(&lab, '\\');
        if (*p == '\n') assay_strbuf_puts(&lab, "\\n");
        else assay_strbuf_putc(&lab, *p);
    }
    assay_strbuf_putc(&lab, '"');
    assay_strbuf_puts(b, "# HELP assay:judge_score Scores (1-5) an LLM judge gave a sample of live answers.\n"
                         "# TYPE assay:judge_score histogram\n");
    int64_t cum = 0;
    for (int s = 1; s <= 5; s++) {
        cum += bucket[s];
        assay_strbuf_printf(b, "assay:judge_score_bucket{%s,le=\"%d\"} %lld\n", lab.data, s, (long long)cum);
    }
    assay_strbuf_printf(b, "assay:judge_score_bucket{%s,le=\"+Inf\"} %lld\n", lab.data, (long long)cum);
    assay_strbuf_printf(b, "assay:judge_score_sum{%s} ", lab.data);
    assay_strbuf_json_number(b, sum);
    assay_strbuf_printf(b, "\nassay:judge_score_count{%s} %lld\n", lab.data, (long long)cum);
    const struct {
        const char *name, *type, *help;
        int64_t v;
    } m[] = {
        {"assay:judge_judged_total", "counter", "Judge replies that were a score.", judged},
        {"assay:judge_invalid_total", "counter", "Judge replies that were not a score from 1 to 5.", invalid},
        {"assay:judge_failed_total", "counter", "Judge calls without a usable reply (error, timeout, HTTP status).", failed},
        {"assay:judge_dropped_total", "counter", "Sampled answers dropped because the judge queue was full.", dropped},
        {"assay:judge_queue_length", "gauge", "Sampled answers waiting for the judge.", queued},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        assay_strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %lld\n", m[i].name, m[i].help, m[i].name, m[i].type,
                            m[i].name, lab.data, (long long)m[i].v);
    assay_strbuf_free(&lab);
}

/* ---- the judge thread --------------------------------------------------------------------------------------- */

static size_t collect(char *p, size_t size, size_t n, void *ud) {
    assay_strbuf *b = ud;
    if (b->len + size * n > MAX_REPLY) return 0; /* a reply this large is not a score: fail the transfer */
    assay_strbuf_append(b, p, size * n);
    return size * n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    live_judge *j = ud;
    pthread_mutex_lock(&j->mu);
    int stop = j->stopping;
    pthread_mutex_unlock(&j->mu);
    return stop; /* nonzero aborts the transfer */
}

/* One judge call: the score (1-5), 0 for a reply that is not one, -1 for no usable reply. */
static int judge_one(live_judge *j, CURL *h, const sample *sm) {
    assay_strbuf body = {0}, user = {0}, reply = {0};
    assay_strbuf_puts(&user, "Request:\n<<<\n");
    assay_strbuf_puts(&user, sm->prompt);
    assay_strbuf_puts(&user, "\n>>>\n\nAnswer:\n<<<\n");
    assay_strbuf_puts(&user, sm->answer);
    assay_strbuf_puts(&user, "\n>>>");
    assay_strbuf_putc(&body, '{');
    if (j->model) {
        assay_strbuf_puts(&body, "\"model\": ");
        assay_strbuf_json_string(&body, j->model, strlen(j->model));
        assay_strbuf_puts(&body, ", ");
    }
    assay_strbuf_puts(&body, "\"messages\": [{\"role\": \"system\", \"content\": ");
    assay_strbuf_json_string(&body, live_judge_rubric, strlen(live_judge_rubric));
    assay_strbuf_puts(&body, "}, {\"role\": \"user\", \"content\": ");
    assay_strbuf_json_string(&body, user.data, user.len);
    assay_strbuf_puts(&body, "}], \"temperature\": 0, \"max_tokens\": 32, \"stream\": false}");
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, j->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, j->headers);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body.len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
    long ms = (long)(j->timeout_s * 1000);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms < 10000 ? ms : 10000L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, j);
    long status = 0;
    int result = -1;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    assay_json_doc *doc = NULL;
    if (status >= 200 && status < 300 && reply.data && assay_json_parse(reply.data, reply.len, &doc) == ASSAY_OK) {
        const assay_json *msg = assay_json_get(assay_json_at(assay_json_get(assay_json_root(doc), "choices"), 0), "message");
        const char *content = assay_json_string(assay_json_get(msg, "content"), NULL);
        if (content) result = live_judge_parse_score(content);
        assay_json_doc_free(doc);
    }
    assay_strbuf_free(&body);
    assay_strbuf_free(&user);
    assay_strbuf_free(&reply);
    return result;
}

static void *judge_main(void *arg) {
    live_judge *j = arg;
    CURL *h = curl_easy_init();
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->stopping && j->count == 0) pthread_cond_wait(&j->cv, &j->mu);
        if (j->stopping) break;
        sample sm = j->q[j->head];
        j->head = (j->head + 1) % j->cap;
        j->count--;
        pthread_mutex_unlock(&j->mu);
        int score = h ? judge_one(j, h, &sm) : -1;
        free(sm.prompt);
        free(sm.answer);
        pthread_mutex_lock(&j->mu);
        if (j->stopping && score < 0) break; /* aborted by the stop: not the judge's failure */
        if (score > 0) {
            j->bucket[score]++;
            j->sum += score;
            j->judged++;
        } else if (score == 0)
            j->invalid++;
        else
            j->failed++;
    }
    pthread_mutex_unlock(&j->mu);
    if (h) curl_easy_cleanup(h);
    return NULL;
}

static char *chat_url(const char *base) {
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/') n--;
    assay_strbuf b = {0};
    assay_strbuf_append(&b, base, n);
    if (n >= 17 && strncmp(base + n - 17, "/chat/completions", 17) == 0)
        ;
    else if (n >= 3 && strncmp(base + n - 3, "/v1", 3) == 0)
        assay_strbuf_puts(&b, "/chat/completions");
    else
        assay_strbuf_puts(&b, "/v1/chat/completions");
    return b.data;
}

live_judge *live_judge_start(const live_judge_options *o) {
    if (!o->url || (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)) {
        assay_fail(ASSAY_ERR_ARG, "--judge-url must be an http:// or https:// URL, got '%s'", o->url ? o->url : "");
        return NULL;
    }
    if (!(o->sample_rate >= 0 && o->sample_rate <= 1)) {
        assay_fail(ASSAY_ERR_ARG, "--judge-sample-rate must be in [0, 1], got %g", o->sample_rate);
        return NULL;
    }
    if (!(o->timeout_s > 0 && o->timeout_s <= 3600)) {
        assay_fail(ASSAY_ERR_ARG, "--judge-timeout must be in (0, 3600] seconds, got %g", o->timeout_s);
        return NULL;
    }
    if (o->queue_size < 1 || o->queue_size > 1000000) {
        assay_fail(ASSAY_ERR_ARG, "--judge-queue-size must be in [1, 1000000], got %d", o->queue_size);
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        assay_fail(ASSAY_ERR_IO, "cannot initialise libcurl for the judge");
        return NULL;
    }
    live_judge *j = calloc(1, sizeof *j);
    j->url = chat_url(o->url);
    j->model = o->model && o->model[0] ? strdup(o->model) : NULL;
    j->name = strdup(o->name && o->name[0] ? o->name : "llm_judge_domain");
    j->rate = o->sample_rate;
    j->timeout_s = o->timeout_s;
    j->cap = o->queue_size;
    j->q = calloc((size_t)j->cap, sizeof *j->q);
    j->rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)o->seed * 0xBF58476D1CE4E5B9ULL);
    if (!j->rng) j->rng = 1;
    j->headers = curl_slist_append(NULL, "Content-Type: application/json");
    j->headers = curl_slist_append(j->headers, "Expect:");
    if (o->api_key && o->api_key[0]) {
        assay_strbuf a = {0};
        assay_strbuf_printf(&a, "Authorization: Bearer %s", o->api_key);
        j->headers = curl_slist_append(j->headers, a.data);
        assay_strbuf_free(&a);
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    if (pthread_create(&j->thread, NULL, judge_main, j) != 0) {
        assay_fail(ASSAY_ERR_IO, "cannot start the judge thread");
        j->thread = 0;
        live_judge_stop(j);
        return NULL;
    }
    return j;
}

void live_judge_stop(live_judge *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->stopping = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->thread) pthread_join(j->thread, NULL);
    for (int i = 0; i < j->count; i++) {
        sample *sm = &j->q[(j->head + i) % j->cap];
        free(sm->prompt);
        free(sm->answer);
    }
    curl_slist_free_all(j->headers);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->q);
    free(j->url);
    free(j->model);
    free(j->name);
    free(j);
}

void live_judge_cli_init(live_judge_cli *c) {
    memset(c, 0, sizeof *c);
    c->sample_rate = 0.1;
    c->timeout_s = 30;
    c->queue_size = 64;
}

live_judge *live_judge_cli_start(const live_judge_cli *c, int *failed) {
    *failed = 0;
    if (!c->url) return NULL;
    live_judge_options o = {0};
    o.url = c->url;
    o.model = c->model;
    o.api_key = c->api_key ? c->api_key : getenv("ASSAY_JUDGE_API_KEY");
    o.sample_rate = c->sample_rate;
    o.timeout_s = c->timeout_s;
    o.queue_size = (int)c->queue_size;
    o.seed = (unsigned)time(NULL);
    live_judge *j = live_judge_start(&o);
    if (!j) *failed = 1;
    return j;
}
