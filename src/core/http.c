/* http.c — JSON over HTTP with timeouts, retries and backoff, on libcurl's easy interface (see include/assay/http.h). */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "assay/http.h"
#include "assay/progress.h"

struct assay_http_client {
    char *base;
    assay_http_options o;
    char *api_key;
    struct curl_slist *headers;
    pthread_mutex_t mu;
    CURL **idle; /* handles not in use (each may hold a live connection) */
    int n_idle, cap_idle;
    volatile int cancelled;
    int64_t attempts, retries, failed;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;
static void curl_init_once(void) { curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

void assay_http_options_default(assay_http_options *o) {
    memset(o, 0, sizeof *o);
    o->timeout_s = 300;
    o->connect_timeout_s = 10;
    o->max_retries = 3;
    o->backoff_s = 0.5;
    o->backoff_max_s = 8;
}

assay_status assay_http_client_open(const char *base_url, const assay_http_options *o, assay_http_client **out) {
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ok) return assay_fail(ASSAY_ERR_IO, "libcurl failed to initialise");
    if (!base_url || !(strncmp(base_url, "http://", 7) == 0 || strncmp(base_url, "https://", 8) == 0))
        return assay_fail(ASSAY_ERR_ARG, "'%s' is not an http:// or https:// URL", base_url ? base_url : "");
    if (!(o->timeout_s > 0) || !(o->connect_timeout_s > 0) || o->max_retries < 0 || !(o->backoff_s >= 0))
        return assay_fail(ASSAY_ERR_ARG, "HTTP timeouts must be positive and retries non-negative");
    assay_http_client *c = assay_xcalloc(1, sizeof *c);
    c->base = assay_xstrdup(base_url);
    size_t n = strlen(c->base);
    while (n > 0 && c->base[n - 1] == '/') c->base[--n] = 0;
    c->o = *o;
    c->o.api_key = NULL;
    pthread_mutex_init(&c->mu, NULL);
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    c->headers = curl_slist_append(c->headers, "Expect:"); /* no 100-continue round trip before large bodies */
    if (o->api_key && o->api_key[0]) {
        assay_strbuf h = {0};
        assay_strbuf_printf(&h, "Authorization: Bearer %s", o->api_key);
        c->headers = curl_slist_append(c->headers, h.data);
        assay_strbuf_free(&h);
    }
    *out = c;
    return ASSAY_OK;
}

void assay_http_client_close(assay_http_client *c) {
    if (!c) return;
    for (int i = 0; i < c->n_idle; i++) curl_easy_cleanup(c->idle[i]);
    free(c->idle);
    curl_slist_free_all(c->headers);
    pthread_mutex_destroy(&c->mu);
    free(c->base);
    free(c);
}

const char *assay_http_client_base(const assay_http_client *c) { return c->base; }

void assay_http_client_cancel(assay_http_client *c) { __atomic_store_n(&c->cancelled, 1, __ATOMIC_SEQ_CST); }

static int is_cancelled(assay_http_client *c) { return __atomic_load_n(&c->cancelled, __ATOMIC_SEQ_CST); }

void assay_http_client_stats(const assay_http_client *c, int64_t *attempts, int64_t *retries, int64_t *failed) {
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    if (attempts) *attempts = c->attempts;
    if (retries) *retries = c->retries;
    if (failed) *failed = c->failed;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
}

void assay_http_response_free(assay_http_response *r) {
    assay_strbuf_free(&r->body);
    memset(r, 0, sizeof *r);
}

static CURL *take_handle(assay_http_client *c) {
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->n_idle > 0) h = c->idle[--c->n_idle];
    pthread_mutex_unlock(&c->mu);
    return h ? h : curl_easy_init();
}

static void give_handle(assay_http_client *c, CURL *h) {
    pthread_mutex_lock(&c->mu);
    if (c->n_idle == c->cap_idle) {
        c->cap_idle = c->cap_idle ? 2 * c->cap_idle : 8;
        c->idle = assay_xrealloc(c->idle, sizeof *c->idle * (size_t)c->cap_idle);
    }
    c->idle[c->n_idle++] = h;
    pthread_mutex_unlock(&c->mu);
}

typedef struct attempt {
    assay_http_client *c;
    assay_strbuf *body;
    double retry_after; /* seconds, from a Retry-After header; 0 if none */
} attempt;

static size_t on_body(char *p, size_t size, size_t n, void *user) {
    attempt *a = user;
    assay_strbuf_append(a->body, p, size * n);
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *user) {
    attempt *a = user;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
        char buf[32];
        size_t k = len - (sizeof name - 1);
        if (k >= sizeof buf) k = sizeof buf - 1;
        memcpy(buf, p + sizeof name - 1, k);
        buf[k] = 0;
        char *end = NULL;
        double s = strtod(buf, &end);
        if (end != buf && s > 0) a->retry_after = s > 60 ? 60 : s; /* an HTTP date is ignored: the backoff stands */
    }
    return len;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    return is_cancelled(user); /* nonzero aborts the transfer */
}

static int retryable_status(long s) { return s == 408 || s == 429 || (s >= 500 && s <= 599); }

/* Sleeps `s` seconds in slices, returning early (nonzero) when the client is cancelled. */
static int sleep_cancellable(assay_http_client *c, double s) {
    double end = assay_now_seconds() + s;
    for (;;) {
        if (is_cancelled(c)) return 1;
        double left = end - assay_now_seconds();
        if (left <= 0) return 0;
        if (left > 0.05) left = 0.05;
        struct timespec ts = {0, (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static double jitter(void) {
    static _Thread_local uint64_t s;
    if (!s) s = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return 0.75 + 0.5 * (double)(s >> 11) / 9007199254740992.0; /* [0.75, 1.25) */
}

assay_status assay_http_request(assay_http_client *c, const char *path, const char *body, size_t len, assay_http_response *r) {
    memset(r, 0, sizeof *r);
    assay_strbuf url = {0};
    assay_strbuf_printf(&url, "%s%s", c->base, path);
    const char *method = body ? "POST" : "GET";
    char cause[CURL_ERROR_SIZE + 256] = "";
    assay_status st = ASSAY_ERR_IO;
    int tries = 0;
    for (int k = 0; k <= c->o.max_retries; k++) {
        if (is_cancelled(c)) {
            snprintf(cause, sizeof cause, "cancelled");
            break;
        }
        CURL *h = take_handle(c);
        if (!h) {
            snprintf(cause, sizeof cause, "libcurl could not make a handle");
            break;
        }
        curl_easy_reset(h);
        assay_strbuf_clear(&r->body);
        attempt a = {c, &r->body, 0};
        char err[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(h, CURLOPT_URL, url.data);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->o.connect_timeout_s * 1000));
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->o.timeout_s * 1000));
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        if (body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        } else {
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        }
        CURLcode code = curl_easy_perform(h);
        long status = 0;
        if (code == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        /* a handle whose transfer broke may hold a broken connection: drop it rather than pool it */
        if (code == CURLE_OK) give_handle(c, h);
        else curl_easy_cleanup(h);
        tries++;
        pthread_mutex_lock(&c->mu);
        c->attempts++;
        if (k > 0) c->retries++;
        pthread_mutex_unlock(&c->mu);
        if (code == CURLE_OK && !retryable_status(status)) {
            r->status = status;
            st = ASSAY_OK;
            break;
        }
        if (code == CURLE_ABORTED_BY_CALLBACK) {
            snprintf(cause, sizeof cause, "cancelled");
            break;
        }
        if (code != CURLE_OK) {
            snprintf(cause, sizeof cause, "%s%s%s%s", curl_easy_strerror(code), err[0] ? " (" : "", err,
                     err[0] ? ")" : "");
            if (code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_URL_MALFORMAT) break; /* no retry helps */
        } else {
            /* the status and the start of what the server said */
            size_t show = r->body.len < 200 ? r->body.len : 200;
            snprintf(cause, sizeof cause, "HTTP %ld%s%.*s", status, show ? ": " : "", (int)show, r->body.data ? r->body.data : "");
            r->status = status;
        }
        if (k == c->o.max_retries) break;
        double wait = c->o.backoff_s * pow(2, k);
        if (wait > c->o.backoff_max_s) wait = c->o.backoff_max_s;
        wait *= jitter();
        if (a.retry_after > wait) wait = a.retry_after;
        if (sleep_cancellable(c, wait)) {
            snprintf(cause, sizeof cause, "cancelled");
            break;
        }
    }
    r->attempts = tries;
    if (st != ASSAY_OK) {
        pthread_mutex_lock(&c->mu);
        c->failed++;
        pthread_mutex_unlock(&c->mu);
        st = assay_fail(ASSAY_ERR_IO, "%s %s: %s (%d attempt%s)", method, url.data, cause, tries, tries == 1 ? "" : "s");
    }
    assay_strbuf_free(&url);
    return st;
}
