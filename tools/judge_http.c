/* judge_http.c — blocking JSON-over-HTTP calls with deadlines and retries (see judge_http.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "assay/progress.h"
#include "assay/status.h"
#include "judge_http.h"

void jh_endpoint_init(jh_endpoint *ep, const char *label, const char *url, const char *api_key) {
    memset(ep, 0, sizeof *ep);
    ep->label = label;
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/') n--;
    if (n >= 3 && strncmp(url + n - 3, "/v1", 3) == 0) n -= 3; /* an OpenAI-style base URL ending in /v1 */
    while (n > 0 && url[n - 1] == '/') n--;
    ep->base = assay_xmalloc(n + 1);
    memcpy(ep->base, url, n);
    ep->base[n] = 0;
    ep->headers = curl_slist_append(NULL, "Content-Type: application/json");
    ep->headers = curl_slist_append(ep->headers, "Expect:");
    if (api_key && api_key[0]) {
        assay_strbuf h = {0};
        assay_strbuf_printf(&h, "Authorization: Bearer %s", api_key);
        ep->headers = curl_slist_append(ep->headers, h.data);
        assay_strbuf_free(&h);
    }
}

void jh_endpoint_free(jh_endpoint *ep) {
    free(ep->base);
    free(ep->model);
    curl_slist_free_all(ep->headers);
    memset(ep, 0, sizeof *ep);
}

void jh_response_free(jh_response *r) { assay_strbuf_free(&r->body); }

typedef struct attempt {
    assay_strbuf *body;
    double retry_after; /* seconds the server asked for, 0: none */
    volatile sig_atomic_t *stop;
} attempt;

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    attempt *a = user;
    if (a->body->len > (64u << 20)) return 0; /* more than 64 MB: not an answer we want */
    assay_strbuf_append(a->body, data, size * n);
    return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    attempt *a = user;
    size_t len = size * n;
    if (len > 12 && strncasecmp(data, "retry-after:", 12) == 0) {
        char tmp[64];
        size_t k = len - 12 < sizeof tmp - 1 ? len - 12 : sizeof tmp - 1;
        memcpy(tmp, data + 12, k);
        tmp[k] = 0;
        char *end;
        double s = strtod(tmp, &end);
        if (end != tmp && s >= 0) a->retry_after = s; /* the HTTP-date form is ignored: our own backoff applies */
    }
    return len;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    attempt *a = user;
    return a->stop && *a->stop ? 1 : 0;
}

/* Sleeps `seconds`, waking early when *stop is set. */
static void nap(double seconds, volatile sig_atomic_t *stop) {
    double until = assay_now_seconds() + seconds;
    while (!(stop && *stop)) {
        double left = until - assay_now_seconds();
        if (left <= 0) break;
        if (left > 0.05) left = 0.05;
        struct timespec ts = {0, (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static int retryable_status(long s) { return s == 408 || s == 429 || s >= 500; }

/* A short description of an error body: OpenAI's {"error": {"message"}}, FastAPI's {"detail"}, else the text. */
static void describe_body(const assay_strbuf *b, char *out, size_t cap) {
    assay_json_doc *doc = NULL;
    const char *m = NULL;
    if (b->len && assay_json_parse(b->data, b->len, &doc) == ASSAY_OK) {
        const assay_json *root = assay_json_root(doc), *e = assay_json_get(root, "error");
        m = assay_json_string(assay_json_get(e, "message"), assay_json_string(e, NULL));
        if (!m) m = assay_json_string(assay_json_get(root, "detail"), NULL);
        if (!m) m = assay_json_string(assay_json_get(root, "message"), NULL);
    }
    const char *src = m ? m : b->data ? b->data : "";
    size_t k = 0;
    for (const char *s = src; *s && k + 1 < cap && k < 200; s++) out[k++] = isspace((unsigned char)*s) ? ' ' : *s;
    out[k] = 0;
    assay_json_doc_free(doc);
}

static int call(const jh_endpoint *ep, const char *path, const char *body, const jh_policy *p, jh_response *r,
                assay_json_doc **doc) {
    memset(r, 0, sizeof *r);
    if (doc) *doc = NULL;
    assay_strbuf url = {0};
    assay_strbuf_printf(&url, "%s%s", ep->base, path);
    double t0 = assay_now_seconds(), wait = p->backoff_s > 0 ? p->backoff_s : 0.5;
    int ok = 0;
    for (int tries = 0;; tries++) {
        attempt a = {&r->body, 0, p->stop};
        assay_strbuf_clear(&r->body);
        r->error[0] = 0;
        r->status = 0;
        r->timed_out = 0;
        r->attempts = tries + 1;
        int retry = 0;
        CURL *h = curl_easy_init();
        if (!h) {
            snprintf(r->error, sizeof r->error, "libcurl could not make a request handle");
            break;
        }
        curl_easy_setopt(h, CURLOPT_URL, url.data);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, ep->headers);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &a);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(p->timeout_s * 1000));
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(p->connect_timeout_s * 1000));
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* whatever compression libcurl can undo */
        if (body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        }
        CURLcode code = curl_easy_perform(h);
        if (code == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_cleanup(h);
        if (p->stop && *p->stop) {
            r->stopped = 1;
            snprintf(r->error, sizeof r->error, "interrupted");
            break;
        }
        if (code == CURLE_OPERATION_TIMEDOUT) {
            r->timed_out = 1;
            snprintf(r->error, sizeof r->error, "no answer within %g s (%s)", p->timeout_s, url.data);
            retry = 1;
        } else if (code != CURLE_OK) {
            snprintf(r->error, sizeof r->error, "%s: %s", url.data, curl_easy_strerror(code));
            retry = code != CURLE_URL_MALFORMAT && code != CURLE_UNSUPPORTED_PROTOCOL;
        } else if (r->status != 200) {
            char m[256];
            describe_body(&r->body, m, sizeof m);
            snprintf(r->error, sizeof r->error, "HTTP %ld from %s%s%s", r->status, url.data, m[0] ? ": " : "", m);
            retry = retryable_status(r->status);
        } else if (doc) {
            if (assay_json_parse(r->body.data ? r->body.data : "", r->body.len, doc) == ASSAY_OK) ok = 1;
            else {
                char m[256];
                describe_body(&r->body, m, sizeof m);
                snprintf(r->error, sizeof r->error, "%s answered 200 with a body that is not JSON: \"%.80s\"", url.data, m);
                retry = 1;
            }
        } else
            ok = 1;
        if (ok || !retry || tries >= p->max_retries) break;
        double w = a.retry_after > 0 ? fmin(a.retry_after, 60) : fmin(wait, 30);
        nap(w, p->stop);
        wait *= 2;
        if (p->stop && *p->stop) {
            r->stopped = 1;
            snprintf(r->error, sizeof r->error, "interrupted");
            break;
        }
    }
    if (!ok && r->attempts > 1 && !r->stopped) {
        char tmp[sizeof r->error];
        snprintf(tmp, sizeof tmp, "%s (after %d attempts)", r->error, r->attempts);
        memcpy(r->error, tmp, sizeof tmp);
    }
    r->seconds = assay_now_seconds() - t0;
    assay_strbuf_free(&url);
    return ok;
}

int jh_request(const jh_endpoint *ep, const char *path, const char *body, const jh_policy *p, jh_response *r) {
    return call(ep, path, body, p, r, NULL);
}

int jh_json(const jh_endpoint *ep, const char *path, const char *body, const jh_policy *p, jh_response *r,
                 assay_json_doc **doc) {
    return call(ep, path, body, p, r, doc);
}
