/* cmd_bench_serve.c — `assay bench-serve`: a load generator for any OpenAI-compatible server (assay serve, vLLM,
 * llama-server), measured the way `vllm bench serve` measures one, with its flag names, its summary block and the
 * keys of its result file.
 *
 *   assay bench-serve --base-url http://127.0.0.1:8000 --dataset-name random --random-input-len 256 \
 *       --random-output-len 128 --num-prompts 200 --max-concurrency 8 --result-file r.json
 *
 * Requests are streamed (SSE, stream_options.include_usage) through libcurl's multi interface: one thread drives
 * every connection, so the timestamps of the chunks are taken as they arrive whatever the concurrency. Requests
 * arrive all at once (--request-rate inf) or as a Poisson process (exponential gaps, seeded by --seed); at most
 * --max-concurrency of them are in flight, the others wait their turn in arrival order.
 *
 * Per request, as vLLM's client computes them: TTFT = the first chunk carrying text (a chat stream's delta.content)
 * minus the start; ITL = the gaps between the following text chunks; E2EL = the last text chunk minus the start;
 * TPOT = (E2EL - TTFT) / (output tokens - 1) for requests of more than one token. Output tokens come from the
 * server's usage; a server that gives none has the generated text counted with its /tokenize, else one token per
 * chunk. A request succeeds when the server answered 200 and at least one text chunk came.
 *
 * Datasets: `random` builds prompts of about --random-input-len tokens (lengths drawn uniformly within
 * +-range-ratio, as vLLM draws them) from random letter-words, cut to the exact token count with the server's
 * /tokenize and /detokenize (vLLM's and llama-server's request shapes are both tried); a server without them gets
 * prompts of about 4 characters per token. `sharegpt` reads a ShareGPT JSON file (a list of {"conversations":
 * [{"from", "value"}, ...]}): the first turn is the prompt, the second's token count the output length (or
 * --sharegpt-output-len), shuffled with --seed, filtered as vLLM filters (>= 4 tokens each, prompt <= 1024, prompt +
 * output <= 2048).
 *
 * Nothing waits forever: every call to the server fails when the server sends nothing for --request-timeout seconds
 * (default 600): /v1/models, /tokenize and /detokenize (each of these also within that time in all), the initial
 * test request and each benchmark request; the initial test request must end within --ready-check-timeout-sec
 * (vLLM's flag, default 600) and a benchmark request within 6 hours (vLLM's client's limit). A failed benchmark
 * request is counted as failed, with curl's reason in "errors"; a /tokenize or /detokenize that failed after it had
 * answered stops the preparation of the prompts with the reason (exit 1), and a random prompt is cut within
 * RANDOM_ROUNDS calls of /tokenize or gets the estimate. */
#include <ctype.h>
#include <curl/curl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/file.h"
#include "assay/json.h"
#include "assay/progress.h"
#include "assay/strbuf.h"
#include "cli.h"
#include "commands.h"

/* ---- randomness (seeded, the same on every machine) ------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); } /* [0, 1) */

static int64_t rng_range(uint64_t *s, int64_t lo, int64_t hi) { /* [lo, hi] */
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* ---- HTTP: blocking helpers ------------------------------------------------------------------------------- */

typedef struct client {
    const char *base; /* without a trailing slash */
    const char *api_key;
    struct curl_slist *headers;
    int tok_style;   /* /tokenize: 0 not tried yet, 1 vLLM/assay ({"prompt"}), 2 llama-server ({"content"}), -1 none */
    int detok_style; /* /detokenize: the same */
    const char *model;
    long timeout_s;  /* --request-timeout: a call that gets nothing for this long fails, a blocking one also in all */
    char err[CURL_ERROR_SIZE + 96]; /* why the last blocking call failed */
    char *broken;    /* set when /tokenize or /detokenize failed after it had answered: the reason */
} client;

/* A random prompt is cut with at most this many calls of /tokenize (a tokenizer that joins words needs more words:
 * each round adds the tokens still missing as words); past it the tokenizer is given up, as one that does not grow. */
#define RANDOM_ROUNDS 16
/* A benchmark request fails after this many seconds in all, as vLLM's client's (AIOHTTP_TIMEOUT, 6 hours). */
#define REQUEST_TOTAL_S (6L * 60 * 60)

/* curl gives up on a transfer that moves less than a byte a second for `stall` seconds, or that takes `total` in all
 * (0: no limit); its reason lands in errbuf. */
static void set_timeouts(CURL *h, long stall, long total, char *errbuf) {
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, stall < 60 ? stall : 60L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, total);
    errbuf[0] = 0;
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

static size_t collect(char *data, size_t size, size_t n, void *user) {
    assay_strbuf_append(user, data, size * n);
    return size * n;
}

/* One request, within --request-timeout; returns the HTTP status (0: no answer, the reason in c->err), the body in
 * *out. */
static long http_call(client *c, const char *method, const char *path, const char *body, assay_strbuf *out) {
    assay_strbuf url = {0};
    assay_strbuf_printf(&url, "%s%s", c->base, path);
    assay_strbuf_clear(out);
    c->err[0] = 0;
    CURL *h = curl_easy_init();
    if (!h) {
        assay_strbuf_free(&url);
        snprintf(c->err, sizeof c->err, "libcurl cannot make a request handle (out of memory)");
        return 0;
    }
    char errbuf[CURL_ERROR_SIZE];
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    set_timeouts(h, c->timeout_s, c->timeout_s, errbuf);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    long status = 0;
    CURLcode code = curl_easy_perform(h);
    if (code == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200) snprintf(c->err, sizeof c->err, "%s %s: HTTP %ld", method, path, status);
    } else
        snprintf(c->err, sizeof c->err, "%s %s: %s%s", method, path, errbuf[0] ? errbuf : curl_easy_strerror(code),
                 code == CURLE_OPERATION_TIMEDOUT ? " (--request-timeout)" : "");
    curl_easy_cleanup(h);
    assay_strbuf_free(&url);
    return status;
}

/* A tokenizer that answered before failed now: the reason, kept for the caller. */
static void set_broken(client *c, const char *what) {
    if (c->broken) return;
    assay_strbuf b = {0};
    assay_strbuf_printf(&b, "the server's %s answered before and failed now: %s", what, c->err[0] ? c->err : "an answer without its field");
    c->broken = b.data;
}

/* The text's token ids through the server's /tokenize (without special tokens); 0 when it has none. A style whose
 * answer has no tokens for a text that is not empty is not the server's: llama-server ignores the fields it does not
 * know and answers vLLM's body ({"prompt"}, no "content") with 200 and an empty list. */
static int tokenize(client *c, const char *text, size_t len, int64_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    if (c->tok_style < 0) return 0;
    assay_strbuf body = {0}, out = {0};
    int ok = 0;
    for (int style = c->tok_style ? c->tok_style : 1; style <= 2 && !ok; style++) {
        assay_strbuf_clear(&body);
        if (style == 1) {
            assay_strbuf_puts(&body, "{\"model\": ");
            assay_strbuf_json_string(&body, c->model, strlen(c->model));
            assay_strbuf_puts(&body, ", \"add_special_tokens\": false, \"prompt\": ");
        } else
            assay_strbuf_puts(&body, "{\"add_special\": false, \"content\": ");
        assay_strbuf_json_string(&body, text, len);
        assay_strbuf_putc(&body, '}');
        assay_json_doc *doc = NULL;
        if (http_call(c, "POST", "/tokenize", body.data, &out) == 200 && assay_json_parse(out.data, out.len, &doc) == ASSAY_OK) {
            const assay_json *t = assay_json_get(assay_json_root(doc), "tokens");
            if (assay_json_is(t, ASSAY_JSON_ARRAY) && (t->count > 0 || len == 0)) {
                *ids = malloc((size_t)(t->count + 1) * sizeof **ids);
                for (const assay_json *x = t->first; x; x = x->next) (*ids)[(*n)++] = assay_json_int(x, 0);
                ok = 1;
                c->tok_style = style;
            }
        }
        assay_json_doc_free(doc);
        if (c->tok_style) break; /* the style that worked before failed now: no second guess */
    }
    if (!ok && c->tok_style > 0) set_broken(c, "/tokenize");
    if (!ok && !c->tok_style) c->tok_style = -1;
    assay_strbuf_free(&body);
    assay_strbuf_free(&out);
    return ok;
}

/* Token ids back to text through /detokenize; NULL when the server has none. */
static char *detokenize(client *c, const int64_t *ids, int64_t n) {
    if (c->detok_style < 0) return NULL;
    assay_strbuf body = {0}, out = {0};
    char *text = NULL;
    for (int style = c->detok_style ? c->detok_style : 1; style <= 2 && !text; style++) {
        assay_strbuf_clear(&body);
        assay_strbuf_puts(&body, "{");
        if (style == 1) {
            assay_strbuf_puts(&body, "\"model\": ");
            assay_strbuf_json_string(&body, c->model, strlen(c->model));
            assay_strbuf_puts(&body, ", ");
        }
        assay_strbuf_puts(&body, "\"tokens\": [");
        for (int64_t i = 0; i < n; i++) assay_strbuf_printf(&body, "%s%lld", i ? ", " : "", (long long)ids[i]);
        assay_strbuf_puts(&body, "]}");
        assay_json_doc *doc = NULL;
        if (http_call(c, "POST", "/detokenize", body.data, &out) == 200 && assay_json_parse(out.data, out.len, &doc) == ASSAY_OK) {
            const char *t = assay_json_string(assay_json_get(assay_json_root(doc), style == 1 ? "prompt" : "content"), NULL);
            if (t) {
                text = strdup(t);
                c->detok_style = style;
            }
        }
        assay_json_doc_free(doc);
        if (c->detok_style) break;
    }
    if (!text && c->detok_style > 0) set_broken(c, "/detokenize");
    if (!text && !c->detok_style) c->detok_style = -1;
    assay_strbuf_free(&body);
    assay_strbuf_free(&out);
    return text;
}

/* ---- datasets --------------------------------------------------------------------------------------------- */

typedef struct bench_prompt {
    char *text;
    int64_t prompt_len; /* tokens, as the server's tokenizer counts them (estimated without /tokenize) */
    int64_t output_len; /* max tokens asked for */
} bench_prompt;

static void random_words(assay_strbuf *b, uint64_t *rng, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (b->len) assay_strbuf_putc(b, ' ');
        int64_t len = rng_range(rng, 2, 8);
        for (int64_t k = 0; k < len; k++) assay_strbuf_putc(b, (char)('a' + rng_range(rng, 0, 25)));
    }
}

/* A prompt of n tokens: random words, tokenized, cut to n ids, detokenized, counted again (a cut can merge). At most
 * RANDOM_ROUNDS calls of /tokenize cut it; a tokenizer that failed after it had answered leaves c->broken set. */
static void random_prompt(client *c, uint64_t *rng, int64_t n, bench_prompt *p) {
    assay_strbuf text = {0};
    int64_t *ids = NULL, n_ids = 0;
    random_words(&text, rng, n); /* every word is at least one token */
    int have = tokenize(c, text.data, text.len, &ids, &n_ids);
    for (int round = 1; have && n_ids < n; round++) { /* a tokenizer that joins words: more of them */
        int64_t before = n_ids;
        free(ids);
        ids = NULL;
        if (round == RANDOM_ROUNDS) { /* still short: not a tokenizer that this cut converges with */
            fprintf(stderr, "assay bench-serve: /tokenize gave %lld tokens for a text of %zu bytes after %d calls, not %lld: "
                    "it is given up\n", (long long)before, text.len, round, (long long)n);
            c->tok_style = -1;
            have = 0;
            break;
        }
        random_words(&text, rng, n - n_ids);
        have = tokenize(c, text.data, text.len, &ids, &n_ids);
        if (have && n_ids <= before) { /* more words, no more tokens: not a tokenizer of this text */
            c->tok_style = -1;
            have = 0;
        }
    }
    if (!have) { /* no tokenizer on the server: about 4 characters per token */
        free(ids);
        assay_strbuf_clear(&text);
        while ((int64_t)text.len < 4 * n) random_words(&text, rng, 1);
        text.len = (size_t)(4 * n);
        text.data[text.len] = 0;
        p->text = text.data;
        p->prompt_len = n;
        return;
    }
    char *cut = detokenize(c, ids, n);
    free(ids);
    ids = NULL;
    if (cut) {
        assay_strbuf_free(&text);
        p->text = cut;
    } else { /* no /detokenize: the share of the words that the token count allows */
        if (n_ids > n) {
            size_t keep = (size_t)((double)text.len * (double)n / (double)n_ids);
            while (keep > 0 && text.data[keep] != ' ') keep--;
            text.len = keep;
            text.data[keep] = 0;
        }
        p->text = text.data ? text.data : strdup("");
    }
    p->prompt_len = tokenize(c, p->text, strlen(p->text), &ids, &n_ids) ? n_ids : n;
    free(ids);
}

static int64_t count_tokens(client *c, const char *text) {
    int64_t *ids = NULL, n = 0;
    if (tokenize(c, text, strlen(text), &ids, &n)) {
        free(ids);
        return n;
    }
    return (int64_t)(strlen(text) + 3) / 4;
}

static assay_status load_sharegpt(client *c, const char *path, int64_t want, int64_t fixed_out, uint64_t seed,
                                  bench_prompt **out, int64_t *n_out) {
    assay_json_doc *doc = NULL;
    assay_status st = assay_json_parse_file(path, &doc);
    if (st) return st;
    const assay_json *root = assay_json_root(doc);
    if (!assay_json_is(root, ASSAY_JSON_ARRAY)) {
        assay_json_doc_free(doc);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: a ShareGPT file is a JSON list of conversations", path);
    }
    /* conversations with at least two turns, shuffled */
    const assay_json **conv = malloc((size_t)(root->count + 1) * sizeof *conv);
    int64_t n = 0;
    for (const assay_json *x = root->first; x; x = x->next) {
        const assay_json *t = assay_json_get(x, "conversations");
        if (assay_json_is(t, ASSAY_JSON_ARRAY) && t->count >= 2 && assay_json_string(assay_json_get(t->first, "value"), NULL) &&
            assay_json_string(assay_json_get(t->first->next, "value"), NULL))
            conv[n++] = t;
    }
    uint64_t rng = seed;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = rng_range(&rng, 0, i);
        const assay_json *t = conv[i];
        conv[i] = conv[j];
        conv[j] = t;
    }
    bench_prompt *p = calloc((size_t)(want + 1), sizeof *p);
    int64_t k = 0;
    for (int64_t i = 0; i < n && k < want; i++) {
        const char *prompt = assay_json_string(assay_json_get(conv[i]->first, "value"), "");
        const char *completion = assay_json_string(assay_json_get(conv[i]->first->next, "value"), "");
        int64_t pl = count_tokens(c, prompt), ol = fixed_out > 0 ? fixed_out : count_tokens(c, completion);
        if (c->broken) {
            for (int64_t j = 0; j < k; j++) free(p[j].text);
            free(p);
            free(conv);
            assay_json_doc_free(doc);
            return assay_fail(ASSAY_ERR_IO, "%s: counting the tokens of conversation %lld: %s", path, (long long)i + 1, c->broken);
        }
        if (pl < 4 || (fixed_out <= 0 && ol < 4)) continue;     /* too short */
        if (pl > 1024 || pl + ol > 2048) continue;              /* too long */
        p[k].text = strdup(prompt);
        p[k].prompt_len = pl;
        p[k].output_len = ol;
        k++;
    }
    free(conv);
    assay_json_doc_free(doc);
    if (k == 0) {
        free(p);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: no conversation fits (two turns of >= 4 tokens, prompt <= 1024, "
                          "prompt + output <= 2048)", path);
    }
    if (k < want)
        fprintf(stderr, "assay bench-serve: %s has %lld usable conversations of the %lld asked for\n", path, (long long)k,
                (long long)want);
    *out = p;
    *n_out = k;
    return ASSAY_OK;
}

/* ---- streamed requests ------------------------------------------------------------------------------------ */

typedef struct result {
    int success;
    double start, ttft, latency; /* seconds; start on the monotonic clock */
    double last;                 /* the latest text chunk */
    double *itl;
    int64_t n_itl, cap_itl;
    int64_t output_tokens;       /* from usage; -1 when the server gave none */
    int64_t chunks;              /* text chunks */
    int got_first;
    long status;
    assay_strbuf text;           /* generated */
    assay_strbuf line;           /* an SSE line not complete yet */
    assay_strbuf raw;            /* the body of a non-200 answer */
    char *error;
    char *payload;
    CURL *h;
    const struct run *rn;
    const char *timeout_flag;    /* the flag whose limit a timeout of this request is (for its error) */
    char errbuf[CURL_ERROR_SIZE]; /* curl's reason for a failed transfer */
} result;

typedef struct run {
    client *c;
    int chat, ignore_eos;
    const char *endpoint;
} run;

static void set_error(result *r, const char *msg) {
    if (!r->error) r->error = strdup(msg);
}

/* One SSE line of a streamed answer, at time t. */
static void sse_line(result *r, const char *line, size_t len, double t) {
    const run *rn = r->rn;
    if (len == 0 || line[0] == ':') return; /* blank separator or a comment (keep-alive) */
    if (len < 5 || memcmp(line, "data:", 5) != 0) return;
    line += 5, len -= 5;
    while (len && *line == ' ') line++, len--;
    if (len == 6 && memcmp(line, "[DONE]", 6) == 0) return;
    assay_json_doc *doc = NULL;
    if (assay_json_parse(line, len, &doc) != ASSAY_OK) {
        set_error(r, "a streamed chunk is not JSON");
        return;
    }
    const assay_json *root = assay_json_root(doc);
    const assay_json *err = assay_json_get(root, "error");
    if (err) set_error(r, assay_json_string(assay_json_get(err, "message"), assay_json_string(err, "the server sent an error")));
    const assay_json *choices = assay_json_get(root, "choices");
    if (assay_json_is(choices, ASSAY_JSON_ARRAY) && choices->count > 0) {
        const assay_json *ch = choices->first;
        const assay_json *tx = rn->chat ? assay_json_get(assay_json_get(ch, "delta"), "content") : assay_json_get(ch, "text");
        if (tx && tx->type == ASSAY_JSON_STRING && tx->str_len > 0) {
            if (!r->got_first) {
                r->got_first = 1;
                r->ttft = t - r->start;
            } else {
                if (r->n_itl == r->cap_itl) {
                    r->cap_itl = r->cap_itl ? 2 * r->cap_itl : 64;
                    r->itl = realloc(r->itl, (size_t)r->cap_itl * sizeof *r->itl);
                }
                r->itl[r->n_itl++] = t - r->last;
            }
            r->last = t;
            r->chunks++;
            assay_strbuf_append(&r->text, tx->str, tx->str_len);
        }
    }
    const assay_json *usage = assay_json_get(root, "usage");
    if (assay_json_is(usage, ASSAY_JSON_OBJECT)) {
        int64_t ct = assay_json_int(assay_json_get(usage, "completion_tokens"), -1);
        if (ct >= 0) r->output_tokens = ct;
    }
    assay_json_doc_free(doc);
}

static size_t on_stream(char *data, size_t size, size_t n, void *user) {
    result *r = user;
    size_t len = size * n;
    double t = assay_now_seconds();
    if (!r->status) curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status != 200) {
        if (r->raw.len < 4096) assay_strbuf_append(&r->raw, data, len);
        return len;
    }
    for (size_t i = 0; i < len; i++) {
        if (data[i] != '\n') {
            assay_strbuf_putc(&r->line, data[i]);
            continue;
        }
        size_t l = r->line.len;
        if (l && r->line.data[l - 1] == '\r') l--;
        sse_line(r, r->line.data ? r->line.data : "", l, t);
        assay_strbuf_clear(&r->line);
    }
    return len;
}

static char *request_body(const run *rn, const char *model, const bench_prompt *p) {
    assay_strbuf b = {0};
    assay_strbuf_puts(&b, "{\"model\": ");
    assay_strbuf_json_string(&b, model, strlen(model));
    if (rn->chat) {
        assay_strbuf_puts(&b, ", \"messages\": [{\"role\": \"user\", \"content\": ");
        assay_strbuf_json_string(&b, p->text, strlen(p->text));
        assay_strbuf_printf(&b, "}], \"max_completion_tokens\": %lld", (long long)p->output_len);
    } else {
        assay_strbuf_puts(&b, ", \"prompt\": ");
        assay_strbuf_json_string(&b, p->text, strlen(p->text));
        assay_strbuf_printf(&b, ", \"max_tokens\": %lld", (long long)p->output_len);
    }
    assay_strbuf_puts(&b, ", \"temperature\": 0.0, \"stream\": true, \"stream_options\": {\"include_usage\": true}");
    if (rn->ignore_eos) assay_strbuf_puts(&b, ", \"ignore_eos\": true");
    assay_strbuf_putc(&b, '}');
    return b.data;
}

/* A streamed request, not started yet: it fails when the server sends nothing for --request-timeout seconds or when
 * it takes total_s in all (the initial test request: --ready-check-timeout-sec; the others: REQUEST_TOTAL_S). */
static CURL *request_start(const run *rn, const char *model, const bench_prompt *p, result *r, long total_s,
                           const char *timeout_flag) {
    memset(r, 0, sizeof *r);
    r->output_tokens = -1;
    r->rn = rn;
    r->timeout_flag = timeout_flag;
    r->payload = request_body(rn, model, p);
    assay_strbuf url = {0};
    assay_strbuf_printf(&url, "%s%s", rn->c->base, rn->endpoint);
    CURL *h = curl_easy_init();
    if (!h) {
        fprintf(stderr, "assay bench-serve: libcurl cannot make a request handle (out of memory)\n");
        exit(CLI_EXIT_ERROR);
    }
    r->h = h;
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, rn->c->headers);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->payload);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(r->payload));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    set_timeouts(h, rn->c->timeout_s, total_s, r->errbuf);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    assay_strbuf_free(&url);
    r->start = assay_now_seconds();
    return h;
}

/* The transfer ended (code: curl's verdict): success or the reason, and the output token count. */
static void request_end(client *c, result *r, CURLcode code) {
    if (r->line.len) { /* a last line without its newline */
        sse_line(r, r->line.data, r->line.len, assay_now_seconds());
        assay_strbuf_clear(&r->line);
    }
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
    if (code != CURLE_OK) {
        char msg[CURL_ERROR_SIZE + 160];
        snprintf(msg, sizeof msg, "%s", r->errbuf[0] ? r->errbuf : curl_easy_strerror(code));
        if (code == CURLE_OPERATION_TIMEDOUT) /* curl says which: "too slow" (nothing came) or "timed out" (in all) */
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (%s)",
                     strstr(r->errbuf, "too slow") ? "--request-timeout: the server sent nothing for that long" : r->timeout_flag);
        set_error(r, msg);
    }
    else if (r->status != 200) {
        char msg[512];
        assay_json_doc *doc = NULL;
        const char *m = NULL;
        if (r->raw.len && assay_json_parse(r->raw.data, r->raw.len, &doc) == ASSAY_OK) {
            const assay_json *e = assay_json_get(assay_json_root(doc), "error");
            m = assay_json_string(assay_json_get(e, "message"), assay_json_string(e, NULL));
            if (!m) m = assay_json_string(assay_json_get(assay_json_root(doc), "detail"), NULL);
        }
        snprintf(msg, sizeof msg, "HTTP %ld: %.400s", r->status, m ? m : r->raw.data ? r->raw.data : "");
        set_error(r, msg);
        assay_json_doc_free(doc);
    } else if (!r->got_first && !r->error)
        set_error(r, "no text chunk came: TTFT cannot be measured");
    r->success = !r->error && r->got_first;
    if (r->success) {
        r->latency = r->last - r->start;
        if (r->output_tokens < 0) {
            int64_t *ids = NULL, n = 0;
            if (tokenize(c, r->text.data ? r->text.data : "", r->text.len, &ids, &n)) r->output_tokens = n;
            else r->output_tokens = r->chunks;
            free(ids);
        }
    }
    free(r->payload);
    r->payload = NULL;
    assay_strbuf_free(&r->line);
    assay_strbuf_free(&r->raw);
}

/* ---- statistics (numpy's: population std, linear-interpolated percentiles) ------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct stats {
    double mean, median, std, p99;
} stats;

static double percentile(const double *sorted, int64_t n, double p) {
    if (n == 0) return 0;
    double pos = p / 100.0 * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    if (lo >= n - 1) return sorted[n - 1];
    return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * (pos - (double)lo);
}

/* Statistics of v (seconds) in milliseconds; all 0 for no values, as vLLM reports them. */
static stats stats_ms(const double *v, int64_t n) {
    stats s = {0, 0, 0, 0};
    if (n == 0) return s;
    double *x = malloc((size_t)n * sizeof *x), sum = 0, sq = 0;
    memcpy(x, v, (size_t)n * sizeof *x);
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    for (int64_t i = 0; i < n; i++) sum += x[i];
    s.mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) sq += (x[i] - s.mean) * (x[i] - s.mean);
    s.std = sqrt(sq / (double)n);
    s.median = percentile(x, n, 50);
    s.p99 = percentile(x, n, 99);
    free(x);
    s.mean *= 1000, s.median *= 1000, s.std *= 1000, s.p99 *= 1000;
    return s;
}

/* "{s:{c}^{n}}": s centered in n columns of c (an odd spare column goes right, as Python pads). */
static void print_centered(const char *s, int n, char c) {
    int len = (int)strlen(s), left = (n - len) / 2, right = n - len - left;
    for (int i = 0; i < left; i++) putchar(c);
    fputs(s, stdout);
    for (int i = 0; i < right; i++) putchar(c);
    putchar('\n');
}

/* ---- the command ------------------------------------------------------------------------------------------ */

/* The first model /v1/models lists (what vLLM's client does without --model). */
static char *first_model(client *c) {
    assay_strbuf out = {0};
    char *name = NULL;
    assay_json_doc *doc = NULL;
    if (http_call(c, "GET", "/v1/models", NULL, &out) == 200 && assay_json_parse(out.data, out.len, &doc) == ASSAY_OK) {
        const char *id = assay_json_string(assay_json_get(assay_json_at(assay_json_get(assay_json_root(doc), "data"), 0), "id"), NULL);
        if (id) name = strdup(id);
    }
    assay_json_doc_free(doc);
    assay_strbuf_free(&out);
    return name;
}

static void json_key_stats(assay_strbuf *b, const char *key, stats s) {
    assay_strbuf_printf(b, ", \"mean_%s_ms\": ", key);
    assay_strbuf_json_number(b, s.mean);
    assay_strbuf_printf(b, ", \"median_%s_ms\": ", key);
    assay_strbuf_json_number(b, s.median);
    assay_strbuf_printf(b, ", \"std_%s_ms\": ", key);
    assay_strbuf_json_number(b, s.std);
    assay_strbuf_printf(b, ", \"p99_%s_ms\": ", key);
    assay_strbuf_json_number(b, s.p99);
}

int assay_cmd_bench_serve(int argc, char **argv) {
    const char *backend = "openai", *base_url = "http://127.0.0.1:8000", *endpoint = NULL, *model = NULL;
    const char *dataset = "random", *dataset_path = NULL, *rate_s = "inf", *result_file = NULL;
    int64_t num_prompts = 1000, in_len = 1024, out_len = 128, max_conc = 0, seed = 0, sharegpt_out = 0;
    int64_t request_timeout = 600, ready_timeout = 600;
    double range_ratio = 0;
    int ignore_eos = 0;
    const cli_option opts[] = {
        {NULL, "--backend", CLI_STRING, &backend, "openai|openai-chat", "the API: completions or chat completions (default openai)"},
        {NULL, "--base-url", CLI_STRING, &base_url, "URL", "the server (default http://127.0.0.1:8000)"},
        {NULL, "--endpoint", CLI_STRING, &endpoint, "PATH", "default /v1/completions, or /v1/chat/completions for openai-chat"},
        {NULL, "--model", CLI_STRING, &model, "NAME", "the model name sent (default: the first of /v1/models)"},
        {NULL, "--dataset-name", CLI_STRING, &dataset, "random|sharegpt", "where prompts come from (default random)"},
        {NULL, "--dataset-path", CLI_STRING, &dataset_path, "FILE", "sharegpt: a ShareGPT-format JSON file"},
        {NULL, "--random-input-len", CLI_INT, &in_len, "N", "random: prompt tokens (default 1024)"},
        {NULL, "--random-output-len", CLI_INT, &out_len, "N", "random: output tokens asked for (default 128)"},
        {NULL, "--random-range-ratio", CLI_FLOAT, &range_ratio, "R",
         "random: lengths uniform in [len x (1 - R), len x (1 + R)], R in [0, 1) (default 0)"},
        {NULL, "--sharegpt-output-len", CLI_INT, &sharegpt_out, "N", "sharegpt: output tokens (default: the reply's)"},
        {NULL, "--num-prompts", CLI_INT, &num_prompts, "N", "requests to send (default 1000)"},
        {NULL, "--request-rate", CLI_STRING, &rate_s, "R", "requests per second, Poisson arrivals; inf: all at once (default)"},
        {NULL, "--max-concurrency", CLI_INT, &max_conc, "N", "at most N requests in flight (default: no limit)"},
        {NULL, "--seed", CLI_INT, &seed, "N", "seeds the prompts, their order and the arrival times (default 0)"},
        {NULL, "--ignore-eos", CLI_FLAG, &ignore_eos, NULL, "ask for every output token (ignore_eos: true)"},
        {NULL, "--result-file", CLI_STRING, &result_file, "FILE", "write the results as JSON (vLLM's keys)"},
        {NULL, "--request-timeout", CLI_INT, &request_timeout, "S",
         "a call to the server fails when it sends nothing for S seconds (default 600)", CLI_IN(1, 86400)},
        {NULL, "--ready-check-timeout-sec", CLI_INT, &ready_timeout, "S",
         "the initial test request fails when not done in S seconds (default 600)", CLI_IN(1, 86400)},
        {0}};
    const cli_spec spec = {"bench-serve", "[--backend openai|openai-chat] [--base-url URL] [--model NAME] [--dataset-name "
                                          "random|sharegpt] [--num-prompts N] [--request-rate R] [--max-concurrency N] ...",
                           "load generator for any OpenAI-compatible server: TTFT, TPOT, ITL, E2E", opts, 0, 0};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    cli_args_free(&args);
    int chat = strcmp(backend, "openai-chat") == 0;
    char *end = NULL;
    double rate = strtod(rate_s, &end);
    if (!chat && strcmp(backend, "openai") != 0)
        return cli_usage_error(&spec, "--backend must be openai or openai-chat, got '%s'", backend);
    if (!end || *end || !(rate > 0)) return cli_usage_error(&spec, "--request-rate must be a positive number or inf, got '%s'", rate_s);
    if (num_prompts < 1) return cli_usage_error(&spec, "--num-prompts must be >= 1");
    if (max_conc < 0) return cli_usage_error(&spec, "--max-concurrency must be >= 1 (or left out: no limit)");
    if (strcmp(dataset, "random") != 0 && strcmp(dataset, "sharegpt") != 0)
        return cli_usage_error(&spec, "--dataset-name must be random or sharegpt, got '%s'", dataset);
    if (strcmp(dataset, "sharegpt") == 0 && !dataset_path) return cli_usage_error(&spec, "--dataset-name sharegpt needs --dataset-path");
    if (in_len < 1 || out_len < 1) return cli_usage_error(&spec, "--random-input-len and --random-output-len must be >= 1");
    if (!(range_ratio >= 0 && range_ratio < 1)) return cli_usage_error(&spec, "--random-range-ratio must be in [0, 1)");
    if (!endpoint) endpoint = chat ? "/v1/chat/completions" : "/v1/completions";

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "assay bench-serve: libcurl failed to start\n");
        return CLI_EXIT_ERROR;
    }
    client c = {0};
    size_t bl = strlen(base_url);
    char *base = strdup(base_url);
    while (bl > 0 && base[bl - 1] == '/') base[--bl] = 0;
    c.base = base;
    c.timeout_s = (long)request_timeout;
    c.api_key = getenv("OPENAI_API_KEY");
    c.headers = curl_slist_append(NULL, "Content-Type: application/json");
    c.headers = curl_slist_append(c.headers, "Expect:"); /* no 100-continue round trip before large bodies */
    if (c.api_key && c.api_key[0]) {
        assay_strbuf h = {0};
        assay_strbuf_printf(&h, "Authorization: Bearer %s", c.api_key);
        c.headers = curl_slist_append(c.headers, h.data);
        assay_strbuf_free(&h);
    }
    int exit_code = CLI_EXIT_ERROR;
    char *model_owned = NULL;
    bench_prompt *prompts = NULL;
    int64_t n = 0;
    result *res = NULL;
    double *arrival = NULL;
    CURLM *multi = NULL;
    if (!model) {
        model = model_owned = first_model(&c);
        if (!model) {
            fprintf(stderr, "assay bench-serve: %s/v1/models names no model (is the server up? %s); pass --model\n", c.base,
                    c.err[0] ? c.err : "no \"data\" list with an \"id\"");
            goto done;
        }
    }
    c.model = model;

    /* the prompts */
    uint64_t rng = (uint64_t)seed;
    if (strcmp(dataset, "sharegpt") == 0) {
        if (load_sharegpt(&c, dataset_path, num_prompts, sharegpt_out, (uint64_t)seed, &prompts, &n) != ASSAY_OK) {
            cli_report_error("bench-serve");
            goto done;
        }
    } else {
        n = num_prompts;
        prompts = calloc((size_t)n, sizeof *prompts);
        int64_t in_lo = (int64_t)floor((double)in_len * (1 - range_ratio)), in_hi = (int64_t)floor((double)in_len * (1 + range_ratio));
        int64_t out_lo = (int64_t)floor((double)out_len * (1 - range_ratio)), out_hi = (int64_t)floor((double)out_len * (1 + range_ratio));
        if (in_lo < 1) in_lo = 1;
        if (out_lo < 1) out_lo = 1;
        assay_progress bar;
        assay_progress_begin(&bar, "prompts", n, "prompt");
        for (int64_t i = 0; i < n; i++) {
            int64_t il = rng_range(&rng, in_lo, in_hi);
            prompts[i].output_len = rng_range(&rng, out_lo, out_hi);
            random_prompt(&c, &rng, il, &prompts[i]);
            assay_progress_update(&bar, i + 1);
            if (c.broken) {
                assay_progress_end(&bar);
                fprintf(stderr, "assay bench-serve: preparing prompt %lld of %lld: %s\n", (long long)i + 1, (long long)n, c.broken);
                goto done;
            }
        }
        assay_progress_end(&bar);
        if (c.tok_style < 0)
            fprintf(stderr, "assay bench-serve: the server's /tokenize did not answer: prompt lengths are estimates (4 characters a token)\n");
    }

    run rn = {&c, chat, ignore_eos, endpoint};
    res = calloc((size_t)n, sizeof *res);
    arrival = calloc((size_t)n, sizeof *arrival);

    /* one request first: the arguments are right and the server answers (not counted) */
    fprintf(stderr, "Starting initial single prompt test run...\n");
    {
        result probe;
        CURL *h = request_start(&rn, model, &prompts[0], &probe, (long)ready_timeout, "--ready-check-timeout-sec");
        CURLcode code = curl_easy_perform(h);
        request_end(&c, &probe, code);
        curl_easy_cleanup(h);
        int ok = probe.success;
        if (!ok)
            fprintf(stderr, "assay bench-serve: the initial test request to %s%s failed: %s\n", c.base, endpoint,
                    probe.error ? probe.error : "?");
        free(probe.error);
        free(probe.itl);
        assay_strbuf_free(&probe.text);
        if (!ok) goto done;
    }
    fprintf(stderr, "Initial test run completed. Starting main benchmark run...\n");
    printf("Traffic request rate: %s\n", isinf(rate) ? "inf" : rate_s);
    if (max_conc > 0) printf("Maximum request concurrency: %lld\n", (long long)max_conc);
    else printf("Maximum request concurrency: None\n");
    fflush(stdout);

    /* arrival times: all at 0, or a Poisson process (exponential gaps) */
    uint64_t arng = (uint64_t)seed ^ 0x5DEECE66Dull;
    for (int64_t i = 1; i < n; i++) arrival[i] = isinf(rate) ? 0 : arrival[i - 1] - log(1 - rng_unit(&arng)) / rate;

    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    assay_progress bar;
    assay_progress_begin(&bar, "bench-serve", n, "req");
    double t0 = assay_now_seconds();
    int64_t next = 0, started = 0, finished = 0, inflight = 0;
    while (finished < n) {
        double t = assay_now_seconds() - t0;
        while (next < n && arrival[next] <= t) next++;
        while (started < next && (max_conc <= 0 || inflight < max_conc)) {
            CURL *h = request_start(&rn, model, &prompts[started], &res[started], REQUEST_TOTAL_S, "6 hours in all, as vLLM's client");
            curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)(intptr_t)started);
            curl_multi_add_handle(multi, h);
            started++, inflight++;
        }
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            void *priv = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
            int64_t i = (int64_t)(intptr_t)priv;
            CURL *h = msg->easy_handle;
            CURLcode code = msg->data.result;
            curl_multi_remove_handle(multi, h);
            request_end(&c, &res[i], code);
            curl_easy_cleanup(h);
            res[i].h = NULL;
            finished++, inflight--;
            assay_progress_update(&bar, finished);
        }
        if (finished == n) break;
        if (started < next && (max_conc <= 0 || inflight < max_conc)) continue;
        int wait_ms = 100;
        if (next < n) {
            double dt = arrival[next] - (assay_now_seconds() - t0);
            wait_ms = dt <= 0 ? 0 : dt * 1000 < 100 ? (int)ceil(dt * 1000) : 100;
        }
        curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    }
    double duration = assay_now_seconds() - t0;
    assay_progress_end(&bar);

    /* metrics, as vLLM's calculate_metrics */
    int64_t completed = 0, total_in = 0, total_out = 0, n_itl = 0, n_tpot = 0;
    for (int64_t i = 0; i < n; i++) n_itl += res[i].n_itl;
    double *ttfts = malloc((size_t)n * sizeof *ttfts), *tpots = malloc((size_t)n * sizeof *tpots);
    double *e2els = malloc((size_t)n * sizeof *e2els), *itls = malloc((size_t)(n_itl + 1) * sizeof *itls);
    n_itl = 0;
    for (int64_t i = 0; i < n; i++) {
        result *r = &res[i];
        if (!r->success) continue;
        int64_t ol = r->output_tokens;
        if (ol > 1) tpots[n_tpot++] = (r->latency - r->ttft) / (double)(ol - 1);
        memcpy(itls + n_itl, r->itl, (size_t)r->n_itl * sizeof *itls);
        n_itl += r->n_itl;
        ttfts[completed] = r->ttft;
        e2els[completed] = r->latency;
        total_in += prompts[i].prompt_len;
        total_out += ol;
        completed++;
    }
    stats s_ttft = stats_ms(ttfts, completed), s_tpot = stats_ms(tpots, n_tpot), s_itl = stats_ms(itls, n_itl),
          s_e2el = stats_ms(e2els, completed);
    double req_tput = (double)completed / duration, out_tput = (double)total_out / duration,
           tot_tput = (double)(total_in + total_out) / duration;
    if (completed < n) {
        for (int64_t i = 0, shown = 0; i < n && shown < 3; i++)
            if (!res[i].success) fprintf(stderr, "assay bench-serve: request %lld failed: %s\n", (long long)i, res[i].error), shown++;
    }
    print_centered(" Serving Benchmark Result ", 50, '=');
    printf("%-40s %-10lld\n", "Successful requests:", (long long)completed);
    printf("%-40s %-10lld\n", "Failed requests:", (long long)(n - completed));
    if (max_conc > 0) printf("%-40s %-10lld\n", "Maximum request concurrency:", (long long)max_conc);
    printf("%-40s %-10.2f\n", "Benchmark duration (s):", duration);
    printf("%-40s %-10lld\n", "Total input tokens:", (long long)total_in);
    printf("%-40s %-10lld\n", "Total generated tokens:", (long long)total_out);
    printf("%-40s %-10.2f\n", "Request throughput (req/s):", req_tput);
    printf("%-40s %-10.2f\n", "Output token throughput (tok/s):", out_tput);
    printf("%-40s %-10.2f\n", "Total Token throughput (tok/s):", tot_tput);
    const struct {
        const char *header, *name;
        stats s;
    } blocks[] = {{"Time to First Token", "TTFT", s_ttft},
                  {"Time per Output Token (excl. 1st token)", "TPOT", s_tpot},
                  {"Inter-token Latency", "ITL", s_itl},
                  {"End-to-end Latency", "E2EL", s_e2el}};
    for (int k = 0; k < 4; k++) {
        char label[64];
        print_centered(blocks[k].header, 50, '-');
        snprintf(label, sizeof label, "Mean %s (ms):", blocks[k].name);
        printf("%-40s %-10.2f\n", label, blocks[k].s.mean);
        snprintf(label, sizeof label, "Median %s (ms):", blocks[k].name);
        printf("%-40s %-10.2f\n", label, blocks[k].s.median);
        snprintf(label, sizeof label, "P99 %s (ms):", blocks[k].name);
        printf("%-40s %-10.2f\n", label, blocks[k].s.p99);
    }
    print_centered("", 50, '=');
    fflush(stdout);

    exit_code = completed > 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    if (result_file) {
        assay_strbuf b = {0};
        char date[32];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
        assay_strbuf_printf(&b, "{\"date\": \"%s\", \"backend\": \"%s\", \"model_id\": ", date, backend);
        assay_strbuf_json_string(&b, model, strlen(model));
        assay_strbuf_puts(&b, ", \"tokenizer_id\": ");
        assay_strbuf_json_string(&b, model, strlen(model));
        assay_strbuf_printf(&b, ", \"dataset_name\": \"%s\", \"num_prompts\": %lld, \"request_rate\": ", dataset, (long long)n);
        if (isinf(rate)) assay_strbuf_puts(&b, "\"inf\"");
        else assay_strbuf_json_number(&b, rate);
        assay_strbuf_puts(&b, ", \"burstiness\": 1.0, \"max_concurrency\": ");
        if (max_conc > 0) assay_strbuf_printf(&b, "%lld", (long long)max_conc);
        else assay_strbuf_puts(&b, "null");
        assay_strbuf_puts(&b, ", \"duration\": ");
        assay_strbuf_json_number(&b, duration);
        assay_strbuf_printf(&b, ", \"completed\": %lld, \"failed\": %lld, \"total_input_tokens\": %lld, "
                                "\"total_output_tokens\": %lld, \"request_throughput\": ",
                            (long long)completed, (long long)(n - completed), (long long)total_in, (long long)total_out);
        assay_strbuf_json_number(&b, req_tput);
        assay_strbuf_puts(&b, ", \"output_throughput\": ");
        assay_strbuf_json_number(&b, out_tput);
        assay_strbuf_puts(&b, ", \"total_token_throughput\": ");
        assay_strbuf_json_number(&b, tot_tput);
        /* per request, in request order; a failed request has output length 0, TTFT 0, no ITLs, its error */
        const char *lists[] = {"input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"};
        for (int k = 0; k < 6; k++) {
            assay_strbuf_printf(&b, ", \"%s\": [", lists[k]);
            for (int64_t i = 0; i < n; i++) {
                const result *r = &res[i];
                if (i) assay_strbuf_puts(&b, ", ");
                switch (k) {
                case 0: assay_strbuf_printf(&b, "%lld", (long long)prompts[i].prompt_len); break;
                case 1: assay_strbuf_printf(&b, "%lld", (long long)(r->success ? r->output_tokens : 0)); break;
                case 2: assay_strbuf_json_number(&b, r->success ? r->ttft : 0); break;
                case 3:
                    assay_strbuf_putc(&b, '[');
                    for (int64_t j = 0; r->success && j < r->n_itl; j++) {
                        if (j) assay_strbuf_puts(&b, ", ");
                        assay_strbuf_json_number(&b, r->itl[j]);
                    }
                    assay_strbuf_putc(&b, ']');
                    break;
                case 4: assay_strbuf_json_string(&b, r->text.data ? r->text.data : "", r->text.len); break;
                default: assay_strbuf_json_string(&b, r->error ? r->error : "", r->error ? strlen(r->error) : 0);
                }
            }
            assay_strbuf_putc(&b, ']');
        }
        json_key_stats(&b, "ttft", s_ttft);
        json_key_stats(&b, "tpot", s_tpot);
        json_key_stats(&b, "itl", s_itl);
        json_key_stats(&b, "e2el", s_e2el);
        assay_strbuf_puts(&b, "}\n");
        assay_output_file of;
        if (assay_output_file_open(&of, result_file, 1) != ASSAY_OK || fwrite(b.data, 1, b.len, of.fp) != b.len ||
            assay_output_file_commit(&of) != ASSAY_OK) {
            assay_output_file_abort(&of);
            cli_report_error("bench-serve");
            exit_code = CLI_EXIT_ERROR;
        }
        assay_strbuf_free(&b);
    }
    free(ttfts);
    free(tpots);
    free(e2els);
    free(itls);
done:
    if (multi) curl_multi_cleanup(multi);
    for (int64_t i = 0; res && i < n; i++) {
        free(res[i].itl);
        free(res[i].error);
        free(res[i].payload);
        assay_strbuf_free(&res[i].text);
        assay_strbuf_free(&res[i].line);
        assay_strbuf_free(&res[i].raw);
    }
    for (int64_t i = 0; prompts && i < n; i++) free(prompts[i].text);
    free(prompts);
    free(res);
    free(arrival);
    free(model_owned);
    free(c.broken);
    curl_slist_free_all(c.headers);
    free(base);
    curl_global_cleanup();
    return exit_code;
}
