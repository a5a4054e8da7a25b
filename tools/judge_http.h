/* judge_http.h — the small HTTP client `assay judge` talks to OpenAI-compatible endpoints with (libcurl's easy
 * interface, one handle per call, safe to use from several threads at once).
 *
 *   jh_endpoint ep;
 *   jh_endpoint_init(&ep, "judge", "http://127.0.0.1:8000/v1", getenv("OPENAI_API_KEY"));  // "/v1" is optional
 *   jh_policy p = {.timeout_s = 60, .connect_timeout_s = 10, .max_retries = 3, .backoff_s = 0.5, .stop = &flag};
 *   jh_response r;
 *   assay_json_doc *doc = NULL;
 *   if (jh_json(&ep, "/v1/chat/completions", body, &p, &r, &doc)) ... use doc ... else r.error says why
 *   jh_response_free(&r); assay_json_doc_free(doc);
 *   jh_endpoint_free(&ep);
 *
 * Every attempt has a deadline (timeout_s for the whole exchange, connect_timeout_s to connect). Failures that
 * may pass are retried up to max_retries times, waiting backoff_s, then twice that, and so on (at most 30 s, or
 * the server's Retry-After when it sends one, up to 60 s): no connection, a timeout, a broken transfer, 408, 429,
 * every 5xx, and a 200 whose body is not JSON. Other statuses are final. Setting *stop (a signal handler may)
 * aborts a transfer in progress and any wait. */
#ifndef ASSAY_TOOLS_JUDGE_HTTP_H
#define ASSAY_TOOLS_JUDGE_HTTP_H

#include <curl/curl.h>
#include <signal.h>

#include "assay/json.h"
#include "assay/strbuf.h"

typedef struct jh_endpoint {
    const char *label;  /* "baseline", "candidate", "judge": named in messages */
    char *base;         /* scheme://host[:port][/prefix], without a trailing slash or "/v1" */
    char *model;        /* the model name sent (NULL until known) */
    struct curl_slist *headers;
} jh_endpoint;

void jh_endpoint_init(jh_endpoint *ep, const char *label, const char *url, const char *api_key);
void jh_endpoint_free(jh_endpoint *ep);

typedef struct jh_policy {
    double timeout_s;
    double connect_timeout_s;
    int max_retries;
    double backoff_s;
    volatile sig_atomic_t *stop; /* may be NULL */
} jh_policy;

typedef struct jh_response {
    long status;        /* the last attempt's HTTP status; 0: no HTTP answer */
    assay_strbuf body;  /* the last attempt's body */
    char error[512];    /* why the call failed; empty when it succeeded */
    int attempts;
    int timed_out;      /* the last attempt ran out of time */
    int stopped;        /* *stop was set */
    double seconds;     /* from the first attempt's start to the end */
} jh_response;

/* One GET or POST (body != NULL) with retries; returns 1 when the server answered 200, else 0 with r->error. */
int jh_request(const jh_endpoint *ep, const char *path, const char *body, const jh_policy *p, jh_response *r);
/* jh_request, then the body parsed as JSON into *doc; a 200 whose body is not JSON counts as a failed attempt. */
int jh_json(const jh_endpoint *ep, const char *path, const char *body, const jh_policy *p, jh_response *r,
                 assay_json_doc **doc);
void jh_response_free(jh_response *r);

#endif
