/* text.c — the text processing lm-evaluation-harness applies around its tasks, reproduced with PCRE2:
 *   - EleutherAI/wikitext_document_level's page split of wiki.*.raw and lm-eval's wikitext_detokenizer
 *     (lm_eval/tasks/wikitext/preprocess_wikitext.py), word counts as len(re.split(r"\s+", page));
 *   - gsm8k's regex filters (strict-match, flexible-extract) and exact_match with regexes_to_ignore
 *     (lm_eval/tasks/gsm8k/gsm8k.yaml, lm_eval/filters/extraction.py, lm_eval/api/metrics.py).
 * Python's re and PCRE2 agree on these patterns: no look-around, lazy and greedy quantifiers, `$` matching at
 * the end or before a final newline in both; UTF + UCP make \s Unicode-aware like Python's str patterns. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"
#include "assay/strbuf.h"

static char *xstrndup(const char *s, size_t n) {
    char *d = assay_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* str.replace(old, new) into a new string; frees `s`. */
static char *replace_all(char *s, const char *old, const char *repl) {
    size_t lo = strlen(old), lr = strlen(repl);
    if (!strstr(s, old)) return s;
    assay_strbuf b = {0};
    const char *p = s, *hit;
    while ((hit = strstr(p, old))) {
        assay_strbuf_append(&b, p, (size_t)(hit - p));
        assay_strbuf_append(&b, repl, lr);
        p = hit + lo;
    }
    assay_strbuf_puts(&b, p);
    free(s);
    return b.data;
}

static pcre2_code *compile(const char *pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    ASSAY_ASSERT(re != NULL); /* the patterns are ours */
    return re;
}

/* re.sub(pattern, repl, s) with PCRE2 replacement syntax ($1); frees `s`. Invalid UTF-8 input is left as is. */
static char *regex_sub(char *s, const char *pattern, const char *repl) {
    pcre2_code *re = compile(pattern);
    size_t len = strlen(s);
    PCRE2_SIZE cap = len * 2 + 64;
    for (;;) {
        PCRE2_UCHAR *out = assay_xmalloc(cap);
        PCRE2_SIZE outlen = cap;
        int rc = pcre2_substitute(re, (PCRE2_SPTR)s, len, 0, PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
                                  NULL, NULL, (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED, out, &outlen);
        if (rc == PCRE2_ERROR_NOMEMORY) {
            free(out);
            cap = outlen + 1;
            continue;
        }
        pcre2_code_free(re);
        if (rc < 0) {
            free(out);
            return s;
        }
        free(s);
        return (char *)out;
    }
}

char *assay_wikitext_detokenize(const char *page) {
    char *s = assay_xstrdup(page);
    /* contractions */
    s = replace_all(s, "s '", "s'");
    s = regex_sub(s, "/' [0-9]/", "/'[0-9]/");
    /* number separators */
    s = replace_all(s, " @-@ ", "-");
    s = replace_all(s, " @,@ ", ",");
    s = replace_all(s, " @.@ ", ".");
    /* punctuation */
    s = replace_all(s, " : ", ": ");
    s = replace_all(s, " ; ", "; ");
    s = replace_all(s, " . ", ". ");
    s = replace_all(s, " ! ", "! ");
    s = replace_all(s, " ? ", "? ");
    s = replace_all(s, " , ", ", ");
    /* double brackets */
    s = regex_sub(s, "\\(\\s*([^\\)]*?)\\s*\\)", "($1)");
    s = regex_sub(s, "\\[\\s*([^\\]]*?)\\s*\\]", "[$1]");
    s = regex_sub(s, "{\\s*([^}]*?)\\s*}", "{$1}");
    s = regex_sub(s, "\\\"\\s*([^\\\"]*?)\\s*\\\"", "\"$1\"");
    s = regex_sub(s, "'\\s*([^']*?)\\s*'", "'$1'");
    /* miscellaneous */
    s = replace_all(s, "= = = =", "====");
    s = replace_all(s, "= = =", "===");
    s = replace_all(s, "= =", "==");
    s = replace_all(s, " \xC2\xB0 ", "\xC2\xB0"); /* " " + chr(176) + " " */
    s = replace_all(s, " \n", "\n");
    s = replace_all(s, "\n ", "\n");
    s = replace_all(s, " N ", " 1 ");
    s = replace_all(s, " 's", "'s");
    return s;
}

/* Python's str.isspace() set, which `\s` matches in str patterns. */
static int py_space(uint32_t c) {
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0) return 1;
    return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

static uint32_t utf8_next(const unsigned char **p) {
    const unsigned char *s = *p;
    uint32_t c = s[0];
    int n = 1;
    if (c >= 0xf0 && s[1] && s[2] && s[3]) c = ((c & 7u) << 18) | ((s[1] & 63u) << 12) | ((s[2] & 63u) << 6) | (s[3] & 63u), n = 4;
    else if (c >= 0xe0 && s[1] && s[2]) c = ((c & 15u) << 12) | ((s[1] & 63u) << 6) | (s[2] & 63u), n = 3;
    else if (c >= 0xc0 && s[1]) c = ((c & 31u) << 6) | (s[1] & 63u), n = 2;
    *p = s + n;
    return c;
}

int64_t assay_count_words_python(const char *page) {
    int64_t runs = 0;
    int in_space = 0;
    for (const unsigned char *p = (const unsigned char *)page; *p;) {
        int sp = py_space(utf8_next(&p));
        if (sp && !in_space) runs++;
        in_space = sp;
    }
    return runs + 1;
}

static int starts_heading(const char *line, size_t n) {
    char *r = xstrndup(line, n);
    r = replace_all(r, "= = =", "===");
    r = replace_all(r, "= =", "==");
    size_t b = 0, e = strlen(r);
    while (b < e && (r[b] == ' ' || (r[b] >= '\t' && r[b] <= '\r'))) b++;
    while (e > b && (r[e - 1] == ' ' || (r[e - 1] >= '\t' && r[e - 1] <= '\r'))) e--;
    int yes = e - b >= 2 && r[b] == '=' && r[b + 1] == ' ' && r[e - 1] == '=' && r[e - 2] == ' ';
    free(r);
    return yes;
}

assay_status assay_wikitext_documents(const char *raw, size_t len, char ***docs, int64_t *n_docs) {
    char **out = NULL;
    int64_t n = 0;
    assay_strbuf page = {0};
    int has_lines = 0, nonblank = 0;
    const char *p = raw, *end = raw + len;
    for (;;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t ln = e ? (size_t)(e - p) : (size_t)(end - p);
        if (starts_heading(p, ln)) {
            if (has_lines && nonblank) {
                out = assay_xrealloc(out, sizeof(char *) * (size_t)(n + 1));
                out[n++] = page.data ? page.data : assay_xstrdup("");
                page = (assay_strbuf){0};
            } else {
                assay_strbuf_clear(&page);
            }
            has_lines = 0;
            nonblank = 0;
        }
        if (has_lines) assay_strbuf_putc(&page, '\n');
        assay_strbuf_append(&page, p, ln);
        has_lines = 1;
        for (size_t i = 0; i < ln; i++)
            if (!(p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r'))) nonblank = 1;
        if (!e) break;
        p = e + 1;
    }
    /* the loader yields the last page unconditionally */
    out = assay_xrealloc(out, sizeof(char *) * (size_t)(n + 1));
    out[n++] = page.data ? page.data : assay_xstrdup("");
    *docs = out;
    *n_docs = n;
    return ASSAY_OK;
}

/* re.findall(pattern, s)[select] with lm-eval's RegexFilter rules: a tuple of groups yields its first non-empty
 * member, the result is strip()ped, no match yields "[invalid]". */
static char *regex_filter(const char *s, const char *pattern, int select_last) {
    pcre2_code *re = compile(pattern);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    uint32_t ngroups = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &ngroups);
    size_t len = strlen(s), start = 0;
    char *found = NULL;
    while (start <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, len, start, 0, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char *val = NULL;
        if (ngroups == 0) val = xstrndup(s + ov[0], ov[1] - ov[0]);
        else {
            for (uint32_t g = 1; g <= ngroups && !val; g++) {
                if ((int)g < rc && ov[2 * g] != PCRE2_UNSET && ov[2 * g + 1] > ov[2 * g])
                    val = xstrndup(s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
            }
            if (!val) val = assay_xstrdup(ngroups == 1 ? "" : "[invalid]");
        }
        free(found);
        found = val;
        if (!select_last) break;
        start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (!found) return assay_xstrdup("[invalid]");
    /* str.strip() */
    size_t b = 0, e = strlen(found);
    while (b < e && py_space((unsigned char)found[b])) b++;
    while (e > b && py_space((unsigned char)found[e - 1])) e--;
    char *r = xstrndup(found + b, e - b);
    free(found);
    return r;
}

char *assay_gsm8k_strict(const char *response) { return regex_filter(response, "#### (\\-?[0-9\\.\\,]+)", 0); }

char *assay_gsm8k_flexible(const char *response) { return regex_filter(response, "(-?[$0-9.,]{2,})|(-?[0-9]+)", 1); }

static char *em_normalize(const char *s) {
    char *t = assay_xstrdup(s);
    t = regex_sub(t, ",", "");
    t = regex_sub(t, "\\$", "");
    t = regex_sub(t, "(?s).*#### ", "");
    t = regex_sub(t, "\\.$", "");
    for (char *c = t; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    return t;
}

int assay_gsm8k_exact_match(const char *prediction, const char *reference) {
    char *a = em_normalize(prediction), *b = em_normalize(reference);
    int eq = strcmp(a, b) == 0;
    free(a);
    free(b);
    return eq;
}
