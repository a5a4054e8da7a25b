/* judge.c — samples, rubric, reply parsing, statistics and verdict of an LLM-as-judge comparison
 * (see include/assay/judge.h). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "assay/file.h"
#include "assay/judge.h"
#include "assay/json.h"
#include "assay/strbuf.h"

/* ---- samples ---------------------------------------------------------------------------------------------- */

static const char *const prompt_keys[] = {"prompt", "question", "input", "query", "instruction", NULL};
static const char *const expected_keys[] = {"expected", "expected_answer", "expected_output", "expectedOutput", "reference",
                                            "reference_answer", "answer", "ideal", "target", "output", NULL};

static const assay_json *first_key(const assay_json *obj, const char *const *keys, const char **which) {
    for (int i = 0; keys[i]; i++) {
        const assay_json *v = assay_json_get(obj, keys[i]);
        if (v) {
            *which = keys[i];
            return v;
        }
    }
    return NULL;
}

static void key_list(assay_strbuf *b, const char *const *keys) {
    for (int i = 0; keys[i]; i++) assay_strbuf_printf(b, "%s\"%s\"", i ? ", " : "", keys[i]);
}

void assay_judge_samples_free(assay_judge_sample *s, int64_t n) {
    for (int64_t i = 0; s && i < n; i++) {
        free(s[i].id);
        free(s[i].prompt);
        free(s[i].expected);
    }
    free(s);
}

assay_status assay_judge_parse_samples(const char *text, size_t len, const char *name, assay_judge_sample **out, int64_t *n_out) {
    *out = NULL;
    *n_out = 0;
    assay_judge_sample *s = NULL;
    int64_t n = 0, cap = 0, line = 0;
    assay_status st = ASSAY_OK;
    size_t pos = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3; /* a byte order mark */
    while (pos < len && st == ASSAY_OK) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        line++;
        size_t a = pos, b = end;
        pos = end + 1;
        while (a < b && isspace((unsigned char)text[a])) a++;
        while (b > a && isspace((unsigned char)text[b - 1])) b--;
        if (a == b) continue;
        assay_json_doc *doc = NULL;
        if (assay_json_parse(text + a, b - a, &doc) != ASSAY_OK) {
            st = assay_fail_context(ASSAY_ERR_FORMAT, "%s:%lld: not a JSON line", name, (long long)line);
            break;
        }
        const assay_json *root = assay_json_root(doc);
        const char *pk = NULL, *ek = NULL;
        const assay_json *p = first_key(root, prompt_keys, &pk), *e = first_key(root, expected_keys, &ek);
        assay_strbuf msg = {0};
        if (!assay_json_is(root, ASSAY_JSON_OBJECT))
            assay_strbuf_puts(&msg, "a sample is a JSON object such as {\"prompt\": \"...\", \"expected\": \"...\"}");
        else if (!p) {
            assay_strbuf_puts(&msg, "no prompt: the line needs one of ");
            key_list(&msg, prompt_keys);
        } else if (!assay_json_is(p, ASSAY_JSON_STRING))
            assay_strbuf_printf(&msg, "\"%s\" is not a string", pk);
        else if (!e) {
            assay_strbuf_puts(&msg, "no expected answer: the line needs one of ");
            key_list(&msg, expected_keys);
        } else if (!assay_json_is(e, ASSAY_JSON_STRING))
            assay_strbuf_printf(&msg, "\"%s\" is not a string", ek);
        if (msg.len) {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s:%lld: %s", name, (long long)line, msg.data);
            assay_strbuf_free(&msg);
            assay_json_doc_free(doc);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            s = assay_xrealloc(s, (size_t)cap * sizeof *s);
        }
        assay_judge_sample *x = &s[n++];
        memset(x, 0, sizeof *x);
        x->line = line;
        x->prompt = assay_xstrdup(p->str);
        x->expected = assay_xstrdup(e->str);
        const assay_json *id = assay_json_get(root, "id");
        if (assay_json_is(id, ASSAY_JSON_STRING) || assay_json_is(id, ASSAY_JSON_NUMBER)) x->id = assay_xstrdup(id->str);
        assay_json_doc_free(doc);
    }
    if (st == ASSAY_OK && n == 0) st = assay_fail(ASSAY_ERR_FORMAT, "%s: no samples (one JSON object a line is expected)", name);
    if (st != ASSAY_OK) {
        assay_judge_samples_free(s, n);
        return st;
    }
    *out = s;
    *n_out = n;
    return ASSAY_OK;
}

assay_status assay_judge_read_samples(const char *path, assay_judge_sample **out, int64_t *n) {
    char *text = NULL;
    size_t len = 0;
    assay_status st = assay_read_file(path, &text, &len);
    if (st != ASSAY_OK) return st;
    st = assay_judge_parse_samples(text, len, path, out, n);
    free(text);
    return st;
}

/* ---- the rubric prompt -------------------------------------------------------------------------------------- */

static const char default_template[] =
    "You are grading an answer given by an AI assistant.\n"
    "\n"
    "Question:\n"
    "{prompt}\n"
    "\n"
    "Expected answer:\n"
    "{expected}\n"
    "\n"
    "Answer to grade:\n"
    "{answer}\n"
    "\n"
    "Compare the answer with the expected answer and rate it from 1 to 5 for accuracy and completeness:\n"
    "5 = correct and complete\n"
    "4 = correct, with a minor omission or imprecision\n"
    "3 = partly correct, or missing an important part\n"
    "2 = mostly incorrect\n"
    "1 = incorrect, off-topic or empty\n"
    "\n"
    "Reply with the number only.\n";

const char *assay_judge_default_template(void) { return default_template; }

enum { PH_NONE, PH_PROMPT, PH_EXPECTED, PH_ANSWER };

/* The placeholder at t (which points at '{'), and its length in *len. */
static int placeholder(const char *t, size_t *len) {
    static const struct {
        const char *name;
        int kind;
    } names[] = {{"{prompt}", PH_PROMPT},          {"{question}", PH_PROMPT},     {"{expected}", PH_EXPECTED},
                 {"{reference}", PH_EXPECTED},     {"{expected_answer}", PH_EXPECTED}, {"{answer}", PH_ANSWER},
                 {"{response}", PH_ANSWER},        {"{candidate_answer}", PH_ANSWER}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t l = strlen(names[i].name);
        if (strncmp(t, names[i].name, l) == 0) {
            *len = l;
            return names[i].kind;
        }
    }
    return PH_NONE;
}

assay_status assay_judge_check_template(const char *tmpl, int *has_expected) {
    int seen[4] = {0};
    for (const char *t = tmpl; *t; t++) {
        size_t l;
        if ((t[0] == '{' && t[1] == '{') || (t[0] == '}' && t[1] == '}')) t++;
        else if (*t == '{') seen[placeholder(t, &l)] = 1;
    }
    if (has_expected) *has_expected = seen[PH_EXPECTED];
    if (!seen[PH_ANSWER])
        return assay_fail(ASSAY_ERR_ARG, "the judge template has no {answer} placeholder (or {response}, {candidate_answer}): "
                                         "the judge would not see the answer it grades");
    return ASSAY_OK;
}

char *assay_judge_render(const char *tmpl, const char *prompt, const char *expected, const char *answer) {
    assay_strbuf b = {0};
    assay_strbuf_puts(&b, "");
    for (const char *t = tmpl; *t; t++) {
        size_t l;
        int k;
        if ((t[0] == '{' && t[1] == '{') || (t[0] == '}' && t[1] == '}')) {
            assay_strbuf_putc(&b, *t);
            t++;
        } else if (*t == '{' && (k = placeholder(t, &l)) != PH_NONE) {
            const char *v = k == PH_PROMPT ? prompt : k == PH_EXPECTED ? expected : answer;
            assay_strbuf_puts(&b, v ? v : "");
            t += l - 1;
        } else
            assay_strbuf_putc(&b, *t);
    }
    return b.data;
}

/* ---- the judge's reply -------------------------------------------------------------------------------------- */

static int is_decoration(char c) {
    return isspace((unsigned char)c) || strchr("*_\"'`#.[](){}<>:", c) != NULL;
}

/* A lone digit 1-5 with nothing but decoration around it, in [a, b). */
static int lone_digit(const char *a, const char *b) {
    while (a < b && is_decoration(*a)) a++;
    while (b > a && is_decoration(b[-1])) b--;
    return b - a == 1 && *a >= '1' && *a <= '5' ? *a - '0' : 0;
}

/* A digit 1-5 at p that is a whole integer: no digit or letter right before, no digit, letter or decimal
 * fraction right after. */
static int score_digit_at(const char *s, const char *p, const char *end) {
    if (p >= end || *p < '1' || *p > '5') return 0;
    if (p > s && (isalnum((unsigned char)p[-1]) || (p[-1] == '.' && p - 1 > s && isdigit((unsigned char)p[-2])))) return 0;
    const char *q = p + 1;
    if (q < end && isalnum((unsigned char)*q)) return 0;
    if (q + 1 < end && (*q == '.' || *q == ',') && isdigit((unsigned char)q[1])) return 0;
    return *p - '0';
}

static int word_at(const char *p, const char *end, const char *w) {
    size_t l = strlen(w);
    if ((size_t)(end - p) < l) return 0;
    for (size_t i = 0; i < l; i++)
        if (tolower((unsigned char)p[i]) != w[i]) return 0;
    return 1;
}

/* A label ("score", "rating", "rated", "grade", ...) followed, within a few characters of punctuation and small
 * words ("is", "a", "of", "would be", "final", "I give"), by a score digit. The last such label wins. */
static int labelled(const char *s, const char *end) {
    static const char *const labels[] = {"score", "scored", "scores", "rating", "rated", "rate", "grade", "graded", NULL};
    static const char *const fillers[] = {"is", "a", "an", "of", "be", "would", "final", "overall", "i", "give", "it", NULL};
    int found = 0;
    for (const char *p = s; p < end; p++) {
        if (p > s && isalpha((unsigned char)p[-1])) continue;
        const char *q = NULL;
        for (int k = 0; labels[k] && !q; k++) {
            size_t l = strlen(labels[k]);
            if (word_at(p, end, labels[k]) && (p + l >= end || !isalpha((unsigned char)p[l]))) q = p + l;
        }
        if (!q) continue;
        const char *limit = q + 32 < end ? q + 32 : end;
        while (q < limit) {
            if (!isalnum((unsigned char)*q)) {
                q++;
                continue;
            }
            int filler = 0;
            for (int f = 0; fillers[f] && !filler; f++) {
                size_t l = strlen(fillers[f]);
                if (word_at(q, end, fillers[f]) && (q + l >= end || !isalnum((unsigned char)q[l]))) {
                    q += l;
                    filler = 1;
                }
            }
            if (!filler) break;
        }
        int d = q < limit ? score_digit_at(s, q, end) : 0;
        if (d) found = d;
    }
    return found;
}

/* "N/5", "N / 5", "N out of 5": the last one. */
static int out_of_five(const char *s, const char *end) {
    int found = 0;
    for (const char *p = s; p < end; p++) {
        int d = score_digit_at(s, p, end);
        if (!d) continue;
        const char *q = p + 1;
        while (q < end && *q == ' ') q++;
        if (q < end && *q == '/') q++;
        else if (word_at(q, end, "out of")) q += 6;
        else continue;
        while (q < end && *q == ' ') q++;
        if (q < end && *q == '5' && (q + 1 >= end || !isalnum((unsigned char)q[1]))) found = d;
    }
    return found;
}

int assay_judge_parse_score(const char *reply, size_t len) {
    if (!reply) return 0;
    /* without the reasoning: <think>...</think> blocks, and an unclosed one to the end */
    assay_strbuf t = {0};
    assay_strbuf_puts(&t, "");
    for (size_t i = 0; i < len;) {
        if (len - i >= 7 && strncasecmp(reply + i, "<think>", 7) == 0) {
            size_t j = i + 7;
            while (j < len && !(len - j >= 8 && strncasecmp(reply + j, "</think>", 8) == 0)) j++;
            i = j < len ? j + 8 : len;
            continue;
        }
        assay_strbuf_putc(&t, reply[i] ? reply[i] : ' ');
        i++;
    }
    const char *s = t.data, *end = t.data + t.len;
    int score = lone_digit(s, end);
    if (!score) score = labelled(s, end);
    if (!score) score = out_of_five(s, end);
    if (!score) { /* lines that are a lone digit, all the same */
        int seen = 0, conflict = 0;
        for (const char *a = s; a < end;) {
            const char *b = a;
            while (b < end && *b != '\n') b++;
            int d = lone_digit(a, b);
            if (d && seen && d != seen) conflict = 1;
            if (d) seen = d;
            a = b + 1;
        }
        if (seen && !conflict) score = seen;
    }
    if (!score) { /* the only number in the reply, scale mentions ("1-5", "1 to 5") aside */
        int seen = 0, other = 0;
        for (const char *p = s; p < end; p++) {
            if (!isdigit((unsigned char)*p) || (p > s && isdigit((unsigned char)p[-1]))) continue;
            if (*p == '1' && (p == s || !isalnum((unsigned char)p[-1]))) {
                const char *q = p + 1;
                while (q < end && *q == ' ') q++;
                int skip = 0;
                if (q < end && *q == '-') q++, skip = 1;
                else if (end - q >= 3 && memcmp(q, "\xE2\x80\x93", 3) == 0) q += 3, skip = 1; /* en dash */
                else if (word_at(q, end, "to")) q += 2, skip = 1;
                while (skip && q < end && *q == ' ') q++;
                if (skip && q < end && *q == '5' && (q + 1 >= end || !isalnum((unsigned char)q[1]))) {
                    p = q;
                    continue;
                }
            }
            int d = score_digit_at(s, p, end);
            if (!d) other = 1;
            else if (seen && d != seen) other = 1;
            else seen = d;
        }
        if (seen && !other) score = seen;
    }
    assay_strbuf_free(&t);
    return score;
}

/* ---- statistics and verdict --------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void assay_paired_bootstrap_mean(const double *base, const double *cand, int64_t n, int iters, double confidence,
                                 uint64_t seed, double *lo, double *hi) {
    *lo = *hi = NAN;
    if (n < 2 || iters < 10) return;
    double *d = assay_xmalloc((size_t)n * sizeof *d), *stats = assay_xmalloc((size_t)iters * sizeof *stats);
    for (int64_t i = 0; i < n; i++) d[i] = cand[i] - base[i];
    uint64_t s = seed;
    for (int it = 0; it < iters; it++) {
        double sum = 0;
        for (int64_t k = 0; k < n; k++) sum += d[(int64_t)(((unsigned __int128)splitmix64(&s) * (uint64_t)n) >> 64)];
        stats[it] = sum / (double)n;
    }
    qsort(stats, (size_t)iters, sizeof *stats, cmp_double);
    double alpha = 1 - confidence;
    int64_t ilo = (int64_t)floor(alpha / 2 * (double)(iters - 1)), ihi = (int64_t)ceil((1 - alpha / 2) * (double)(iters - 1));
    *lo = stats[ilo];
    *hi = stats[ihi];
    free(stats);
    free(d);
}

const char *assay_judge_verdict_name(assay_judge_verdict v) {
    switch (v) {
    case ASSAY_JUDGE_SHIP: return "ship";
    case ASSAY_JUDGE_MONITOR: return "ship with monitoring";
    case ASSAY_JUDGE_INVESTIGATE: return "investigate";
    case ASSAY_JUDGE_INCONCLUSIVE: return "inconclusive";
    }
    return "?";
}

int assay_judge_verdict_exit_code(assay_judge_verdict v) {
    static const int codes[] = {0, 3, 4, 5};
    return codes[v];
}

void assay_judge_options_default(assay_judge_options *o) {
    o->ship_below = 0.5;
    o->monitor_up_to = 1.5;
    o->bootstrap_iters = 2000;
    o->confidence = 0.95;
    o->seed = 1234;
}

/* The two-sided normal quantile for `confidence` (1.959964 for 0.95), by bisection on erfc. */
static double normal_quantile(double confidence) {
    double lo = 0, hi = 40, target = 1 - confidence;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (erfc(mid / sqrt(2.0)) > target) lo = mid;
        else hi = mid;
    }
    return (lo + hi) / 2;
}

/* Pairs for a normal interval of half-width `gap` at spread sd; -1 when no count would do. */
static int64_t pairs_for(double z, double sd, double gap, int64_t have) {
    if (!(gap > 0)) return -1;
    double need = ceil(z * z * sd * sd / (gap * gap));
    if (need > 1e12) return -1;
    int64_t k = (int64_t)need;
    return k > have ? k : have + 1;
}

void assay_judge_summarize(const double *base, const double *cand, int64_t n, const assay_judge_options *o,
                           assay_judge_summary *s) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->samples_needed = -1;
    double sb = 0, sc = 0;
    for (int64_t i = 0; i < n; i++) sb += base[i], sc += cand[i];
    s->mean_base = n ? sb / (double)n : NAN;
    s->mean_cand = n ? sc / (double)n : NAN;
    s->mean_diff = s->mean_cand - s->mean_base;
    double v = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = cand[i] - base[i] - s->mean_diff;
        v += d * d;
    }
    s->sd_diff = n > 1 ? sqrt(v / (double)(n - 1)) : NAN;
    assay_paired_bootstrap_mean(base, cand, n, o->bootstrap_iters, o->confidence, o->seed, &s->diff_lo, &s->diff_hi);
    assay_wilcoxon_signed_rank(cand, base, n, &s->wilcoxon);

    double headroom = s->mean_base - 1; /* the baseline mean above the floor of the scale */
    s->ship_points = o->ship_below / 100 * headroom;
    s->monitor_points = o->monitor_up_to / 100 * headroom;
    s->degradation = s->degradation_lo = s->degradation_hi = NAN;
    if (headroom > 0) {
        s->degradation = -100 * s->mean_diff / headroom + 0.0; /* + 0.0: no negative zero */
        s->degradation_lo = -100 * s->diff_hi / headroom + 0.0;
        s->degradation_hi = -100 * s->diff_lo / headroom + 0.0;
    }
    /* degradation in points, and its interval; the rules are those of compare.h, on the judge's scale */
    double g = -s->mean_diff, g_lo = -s->diff_hi, g_hi = -s->diff_lo;
    if (n < 2 || isnan(g_lo)) {
        s->verdict = ASSAY_JUDGE_INCONCLUSIVE;
        return;
    }
    if (!(headroom > 0)) { /* every baseline score is 1: the candidate cannot do worse */
        s->verdict = ASSAY_JUDGE_SHIP;
        return;
    }
    const double eps = 1e-12; /* rounding: an interval ending a hair past a threshold still reaches it */
    double t1 = s->ship_points, t2 = s->monitor_points;
    if (g_hi < t1 - eps) s->verdict = ASSAY_JUDGE_SHIP;
    else if (g_lo > t2 + eps) s->verdict = ASSAY_JUDGE_INVESTIGATE;
    else if (g_lo >= t1 - eps && g_hi <= t2 + eps) s->verdict = ASSAY_JUDGE_MONITOR;
    else {
        /* the interval spans a threshold: the pairs that would shrink it, at the observed spread, inside the gap
         * between the estimate and the threshold nearest to it */
        s->verdict = ASSAY_JUDGE_INCONCLUSIVE;
        double gap = fabs(g - t1) < fabs(g - t2) ? fabs(g - t1) : fabs(g - t2);
        s->samples_needed = pairs_for(normal_quantile(o->confidence), s->sd_diff, gap, n);
    }
}
