/* http.h — a small HTTP client for JSON APIs (OpenAI-compatible servers), on libcurl's easy interface.
 *
 *   assay_http_options o;
 *   assay_http_options_default(&o);                  // 300 s per attempt, 3 retries, backoff 0.5 s doubling to 8 s
 *   o.api_key = key;                                 // "Authorization: Bearer KEY" (NULL or "": none)
 *   assay_http_client *c;
 *   if (assay_http_client_open("http://127.0.0.1:8000", &o, &c) != ASSAY_OK) ...
 *   assay_http_response r = {0};
 *   if (assay_http_request(c, "/v1/completions", body, len, &r) != ASSAY_OK) ... assay_last_error()
 *   else if (r.status != 200) ...                    // a final answer the caller judges (400, 404, ...)
 *   assay_http_response_free(&r);
 *   assay_http_client_close(c);
 *
 * Every attempt has a connect timeout and a whole-request timeout, so no call waits forever. Transport failures
 * (refused, reset, timed out, an empty reply) and the statuses 408, 429 and 5xx are retried after an exponential
 * backoff with jitter (a Retry-After header in seconds lengthens the wait, up to a minute); when every attempt
 * failed the call returns ASSAY_ERR_IO with the URL, the last cause and the number of attempts. Any number of
 * threads may call at once: each takes an easy handle from the client's pool, and a handle keeps its connection
 * alive for the next request. assay_http_client_cancel makes every call in flight or waiting give up at once.
 */
#ifndef ASSAY_HTTP_H
#define ASSAY_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"
#include "assay/strbuf.h"

typedef struct assay_http_options {
    double timeout_s;         /* one attempt, connection to last byte (default 300) */
    double connect_timeout_s; /* default 10 */
    int max_retries;          /* attempts after the first (default 3) */
    double backoff_s;         /* wait before the first retry (default 0.5), doubled for each further one ... */
    double backoff_max_s;     /* ... up to this (default 8) */
    const char *api_key;      /* copied at open */
} assay_http_options;

void assay_http_options_default(assay_http_options *o);

typedef struct assay_http_client assay_http_client;

typedef struct assay_http_response {
    long status;       /* HTTP status of the answer */
    assay_strbuf body; /* its body */
    int attempts;      /* how many it took */
} assay_http_response;

/* base_url: scheme, host and port, perhaps a path prefix; a trailing slash is dropped. */
assay_status assay_http_client_open(const char *base_url, const assay_http_options *o, assay_http_client **out);
void assay_http_client_close(assay_http_client *c);
const char *assay_http_client_base(const assay_http_client *c);

/* POSTs `body` (JSON, `len` bytes) to base + path, or GETs it when body is NULL. ASSAY_OK when an answer came that is
 * not retried (any 2xx, or a status such as 400 or 404 that a retry would not change): the caller reads r->status.
 * ASSAY_ERR_IO when all attempts failed or the client was cancelled. r is reset first; free it either way. */
assay_status assay_http_request(assay_http_client *c, const char *path, const char *body, size_t len, assay_http_response *r);
void assay_http_response_free(assay_http_response *r);

/* Every call in flight returns ASSAY_ERR_IO within a fraction of a second, and later calls at once. */
void assay_http_client_cancel(assay_http_client *c);

/* Totals since open: requests made (attempts), retries among them, calls that failed after all their attempts. */
void assay_http_client_stats(const assay_http_client *c, int64_t *attempts, int64_t *retries, int64_t *failed);

#endif
