/* tasks.c — the task table: data loaders and prompt builders with lm-evaluation-harness's templates.
 *
 * Each builder cites the lm-eval task yaml it reproduces (lm_eval/tasks/TASK/TASK.yaml, v0.4.x). The few-shot
 * prompt is lm-eval's ConfigurableTask.fewshot_context without a chat template:
 *   description + for each shot: doc_to_text(shot) + target_delimiter + target_text(shot) + fewshot_delimiter
 *               + doc_to_text(doc)
 * with target_delimiter " " and fewshot_delimiter "\n\n"; a multiple-choice request is
 * (context, target_delimiter + choice). tests/py/test_eval_prompts.py checks every builder against the
 * installed lm-evaluation-harness package on the bundled data. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"
#include "assay/file.h"
#include "assay/json.h"
#include "assay/strbuf.h"

const char *const assay_task_names[] = {"wikitext", "heldout", "kld", "hellaswag", "arc_challenge", "piqa",
                                        "mmlu", "gsm8k", NULL};

/* ---- small helpers -------------------------------------------------------------------------------------- */

static char *xstrndup(const char *s, size_t n) {
    char *d = assay_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static char *path2(const char *dir, const char *a, const char *b) {
    assay_strbuf p = {0};
    assay_strbuf_printf(&p, "%s/%s%s%s", dir, a, b ? "/" : "", b ? b : "");
    return p.data;
}

/* Python's str.strip() for ASCII whitespace (the bundled data is UTF-8; non-ASCII spaces do not occur at the
 * ends of MMLU questions). */
static char *strip_dup(const char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) n--;
    size_t b = 0;
    while (b < n && isspace((unsigned char)s[b])) b++;
    return xstrndup(s + b, n - b);
}

static void task_add(assay_task_docs **tasks, int *n, assay_task_docs *t) {
    *tasks = assay_xrealloc(*tasks, sizeof **tasks * (size_t)(*n + 1));
    (*tasks)[(*n)++] = *t;
}

static assay_eval_doc *doc_push(assay_task_docs *t) {
    if ((t->n_docs & (t->n_docs - 1)) == 0) /* grow at powers of two */
        t->docs = assay_xrealloc(t->docs, sizeof *t->docs * (size_t)(t->n_docs ? 2 * t->n_docs : 1));
    assay_eval_doc *d = &t->docs[t->n_docs];
    memset(d, 0, sizeof *d);
    d->doc_id = t->n_docs++;
    return d;
}

static void doc_free(assay_eval_doc *d) {
    free(d->context);
    for (int i = 0; i < d->n_choices; i++) free(d->choices[i]);
    free(d->choices);
    free(d->target);
}

void assay_task_docs_free(assay_task_docs *t) {
    if (!t) return;
    for (int64_t i = 0; i < t->n_docs; i++) doc_free(&t->docs[i]);
    free(t->docs);
    free(t->name);
    memset(t, 0, sizeof *t);
}

static void apply_limit(assay_task_docs *t, int64_t limit) {
    t->n_original = t->n_docs;
    if (limit > 0 && t->n_docs > limit) {
        for (int64_t i = limit; i < t->n_docs; i++) doc_free(&t->docs[i]);
        t->n_docs = limit;
    }
}

/* Iterates the lines of a JSON-lines file, parsing each. */
typedef assay_status (*jsonl_fn)(const assay_json *obj, int64_t line, void *user);
static assay_status read_jsonl(const char *path, jsonl_fn fn, void *user) {
    char *text = NULL;
    size_t len = 0;
    assay_status st = assay_read_file(path, &text, &len);
    if (st != ASSAY_OK) return st;
    int64_t line = 0;
    for (char *p = text; p < text + len && st == ASSAY_OK;) {
        char *e = memchr(p, '\n', (size_t)(text + len - p));
        if (!e) e = text + len;
        line++;
        if (e > p) {
            assay_json_doc *doc = NULL;
            st = assay_json_parse(p, (size_t)(e - p), &doc);
            if (st != ASSAY_OK) st = assay_fail_context(st, "%s line %lld", path, (long long)line);
            else {
                st = fn(assay_json_root(doc), line, user);
                assay_json_doc_free(doc);
            }
        }
        p = e + 1;
    }
    free(text);
    return st;
}

static const char *json_str(const assay_json *o, const char *key) { return assay_json_string(assay_json_get(o, key), NULL); }

/* ---- few-shot prompt assembly -------------------------------------------------------------------------- */

typedef struct shot {
    char *text;   /* doc_to_text */
    char *target; /* the answer text as it appears after the target delimiter */
} shot;

static char *fewshot_prompt(const char *description, const shot *shots, const int64_t *pick, int k,
                            const char *question) {
    assay_strbuf b = {0};
    assay_strbuf_puts(&b, description ? description : "");
    for (int i = 0; i < k; i++) {
        assay_strbuf_puts(&b, shots[pick[i]].text);
        assay_strbuf_puts(&b, " ");
        assay_strbuf_puts(&b, shots[pick[i]].target);
        assay_strbuf_puts(&b, "\n\n");
    }
    assay_strbuf_puts(&b, question);
    return b.data;
}

/* lm-eval's default ContextSampler: random.Random(fewshot_seed).sample(pool, k) once per evaluated document,
 * in document order, from one generator. */
static void random_shots(assay_pyrandom *rng, int64_t pool, int k, int64_t *pick) { assay_pyrandom_sample(rng, pool, k, pick); }

/* ---- hellaswag (lm_eval/tasks/hellaswag/hellaswag.yaml) -------------------------------------------------- */
/* The bundled file is llama.cpp's format (6 lines per task: context, gold label, 4 endings) made from
 * hellaswag_val.jsonl with lm-eval's preprocess(); doc_to_text is "{{query}}" and the choices are the endings. */
static assay_status load_hellaswag(const assay_eval_options *o, int k, assay_task_docs *t) {
    if (k > 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "hellaswag: --num-fewshot %d needs the train split, which is not bundled (only validation)", k);
    const char *parts[] = {"hellaswag_val_full.part1.txt", "hellaswag_val_full.part2.txt"};
    char *dir = path2(o->data_dir, "hellaswag", NULL);
    assay_strbuf all = {0};
    for (int i = 0; i < 2; i++) {
        char *p = path2(dir, parts[i], NULL), *text = NULL;
        size_t len = 0;
        assay_status st = assay_read_file(p, &text, &len);
        free(p);
        if (st != ASSAY_OK) {
            free(dir);
            assay_strbuf_free(&all);
            return assay_fail_context(st, "hellaswag data (override with --data-dir)");
        }
        assay_strbuf_append(&all, text, len);
        free(text);
    }
    free(dir);
    char *lines[6];
    int nl = 0;
    int64_t lineno = 0;
    for (char *p = all.data; p && *p;) {
        char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        lines[nl++] = xstrndup(p, n);
        lineno++;
        p = e ? e + 1 : p + n;
        if (nl == 6) {
            assay_eval_doc *d = doc_push(t);
            d->context = lines[0];
            char *end = NULL;
            long gold = strtol(lines[1], &end, 10);
            if (end == lines[1] || gold < 0 || gold > 3) {
                for (int i = 1; i < 6; i++) free(lines[i]);
                assay_strbuf_free(&all);
                return assay_fail(ASSAY_ERR_FORMAT, "hellaswag line %lld: the gold label is not 0-3",
                                  (long long)lineno - 4);
            }
            free(lines[1]);
            d->gold = (int)gold;
            d->n_choices = 4;
            d->choices = assay_xmalloc(sizeof(char *) * 4);
            for (int i = 0; i < 4; i++) d->choices[i] = lines[2 + i];
            nl = 0;
        }
    }
    for (int i = 0; i < nl; i++) free(lines[i]);
    assay_strbuf_free(&all);
    if (nl != 0 || t->n_docs == 0) return assay_fail(ASSAY_ERR_FORMAT, "hellaswag: file is not a whole number of 6-line tasks");
    return ASSAY_OK;
}

/* ---- arc_challenge (lm_eval/tasks/arc/arc_easy.yaml, dataset_name ARC-Challenge) ------------------------- */
/* doc_to_text "Question: {{question}}\nAnswer:", choices = choices.text, target = choices.label.index(answerKey).
 * Few-shot shots come from the training split in lm-eval; only Test and Dev are bundled, so shots are drawn
 * from Dev (recorded in the results' config). */
typedef struct mc_list {
    shot *shots;
    int64_t n;
    char ***choices;
    int *n_choices;
    int *gold;
} mc_list;

static assay_status arc_line(const assay_json *o, int64_t line, void *user) {
    mc_list *l = user;
    const assay_json *q = assay_json_get(o, "question");
    const char *stem = json_str(q, "stem"), *key = json_str(o, "answerKey");
    const assay_json *ch = assay_json_get(q, "choices");
    if (!stem || !key || !assay_json_is(ch, ASSAY_JSON_ARRAY) || ch->count < 2)
        return assay_fail(ASSAY_ERR_FORMAT, "line %lld: expected question.stem, question.choices and answerKey", (long long)line);
    l->shots = assay_xrealloc(l->shots, sizeof *l->shots * (size_t)(l->n + 1));
    l->choices = assay_xrealloc(l->choices, sizeof *l->choices * (size_t)(l->n + 1));
    l->n_choices = assay_xrealloc(l->n_choices, sizeof *l->n_choices * (size_t)(l->n + 1));
    l->gold = assay_xrealloc(l->gold, sizeof *l->gold * (size_t)(l->n + 1));
    int n = (int)ch->count, gold = -1, i = 0;
    char **c = assay_xmalloc(sizeof(char *) * (size_t)n);
    for (const assay_json *e = ch->first; e; e = e->next, i++) {
        const char *text = json_str(e, "text"), *label = json_str(e, "label");
        c[i] = assay_xstrdup(text ? text : "");
        if (label && gold < 0 && strcmp(label, key) == 0) gold = i;
    }
    if (gold < 0) {
        for (int j = 0; j < n; j++) free(c[j]);
        free(c);
        return assay_fail(ASSAY_ERR_FORMAT, "line %lld: answerKey '%s' is not among the labels", (long long)line, key);
    }
    assay_strbuf b = {0};
    assay_strbuf_printf(&b, "Question: %s\nAnswer:", stem);
    l->shots[l->n] = (shot){b.data, assay_xstrdup(c[gold])};
    l->choices[l->n] = c;
    l->n_choices[l->n] = n;
    l->gold[l->n] = gold;
    l->n++;
    return ASSAY_OK;
}

static void mc_list_free(mc_list *l, int keep_choices) {
    for (int64_t i = 0; i < l->n; i++) {
        free(l->shots[i].text);
        free(l->shots[i].target);
        if (!keep_choices) {
            for (int j = 0; j < l->n_choices[i]; j++) free(l->choices[i][j]);
            free(l->choices[i]);
        }
    }
    free(l->shots);
    free(l->choices);
    free(l->n_choices);
    free(l->gold);
    memset(l, 0, sizeof *l);
}

/* Turns a parsed list into documents, adding k random shots from `pool` (NULL when k == 0). */
static void mc_docs(assay_task_docs *t, mc_list *l, const mc_list *pool, int k, int seed, const char *description) {
    assay_pyrandom rng;
    assay_pyrandom_seed(&rng, (uint32_t)seed);
    int64_t pick[64];
    for (int64_t i = 0; i < l->n; i++) {
        assay_eval_doc *d = doc_push(t);
        if (k > 0) random_shots(&rng, pool->n, k, pick);
        d->context = fewshot_prompt(description, pool ? pool->shots : NULL, pick, k, l->shots[i].text);
        d->n_choices = l->n_choices[i];
        d->choices = l->choices[i];
        d->gold = l->gold[i];
    }
}

static assay_status load_arc(const assay_eval_options *o, int k, assay_task_docs *t) {
    mc_list test = {0}, dev = {0};
    char *p = path2(o->data_dir, "arc_challenge", "ARC-Challenge-Test.4opt_subset.jsonl");
    assay_status st = read_jsonl(p, arc_line, &test);
    free(p);
    if (st == ASSAY_OK && k > 0) {
        p = path2(o->data_dir, "arc_challenge", "ARC-Challenge-Dev.4opt_subset.jsonl");
        st = read_jsonl(p, arc_line, &dev);
        free(p);
        if (st == ASSAY_OK && k > dev.n) st = assay_fail(ASSAY_ERR_ARG, "arc_challenge: --num-fewshot %d exceeds the %lld Dev questions", k, (long long)dev.n);
    }
    if (st == ASSAY_OK) mc_docs(t, &test, k > 0 ? &dev : NULL, k, o->fewshot_seed, NULL);
    mc_list_free(&test, st == ASSAY_OK);
    mc_list_free(&dev, 0);
    return st == ASSAY_OK ? st : assay_fail_context(st, "arc_challenge data (override with --data-dir)");
}

/* ---- piqa (lm_eval/tasks/piqa/piqa.yaml) ------------------------------------------------------------------- */
/* doc_to_text "Question: {{goal}}\nAnswer:", choices [sol1, sol2], target label (valid-labels.lst). */
static assay_status piqa_line(const assay_json *o, int64_t line, void *user) {
    mc_list *l = user;
    const char *goal = json_str(o, "goal"), *s1 = json_str(o, "sol1"), *s2 = json_str(o, "sol2");
    if (!goal || !s1 || !s2) return assay_fail(ASSAY_ERR_FORMAT, "line %lld: expected goal, sol1, sol2", (long long)line);
    l->shots = assay_xrealloc(l->shots, sizeof *l->shots * (size_t)(l->n + 1));
    l->choices = assay_xrealloc(l->choices, sizeof *l->choices * (size_t)(l->n + 1));
    l->n_choices = assay_xrealloc(l->n_choices, sizeof *l->n_choices * (size_t)(l->n + 1));
    l->gold = assay_xrealloc(l->gold, sizeof *l->gold * (size_t)(l->n + 1));
    assay_strbuf b = {0};
    assay_strbuf_printf(&b, "Question: %s\nAnswer:", goal);
    l->shots[l->n] = (shot){b.data, NULL};
    l->choices[l->n] = assay_xmalloc(sizeof(char *) * 2);
    l->choices[l->n][0] = assay_xstrdup(s1);
    l->choices[l->n][1] = assay_xstrdup(s2);
    l->n_choices[l->n] = 2;
    l->gold[l->n] = -1;
    l->n++;
    return ASSAY_OK;
}

static assay_status load_piqa(const assay_eval_options *o, int k, assay_task_docs *t) {
    if (k > 0) return assay_fail(ASSAY_ERR_UNSUPPORTED, "piqa: --num-fewshot %d needs the train split, which is not bundled", k);
    mc_list l = {0};
    char *p = path2(o->data_dir, "piqa", "valid.jsonl");
    assay_status st = read_jsonl(p, piqa_line, &l);
    free(p);
    char *labels = NULL;
    size_t len = 0;
    if (st == ASSAY_OK) {
        p = path2(o->data_dir, "piqa", "valid-labels.lst");
        st = assay_read_file(p, &labels, &len);
        free(p);
    }
    if (st == ASSAY_OK) {
        int64_t i = 0;
        for (char *q = labels; *q && i < l.n; q++) {
            if (*q == '0' || *q == '1') l.gold[i++] = *q - '0';
        }
        if (i != l.n) st = assay_fail(ASSAY_ERR_FORMAT, "piqa: %lld labels for %lld questions", (long long)i, (long long)l.n);
    }
    free(labels);
    if (st == ASSAY_OK) mc_docs(t, &l, NULL, 0, o->fewshot_seed, NULL);
    mc_list_free(&l, st == ASSAY_OK);
    return st == ASSAY_OK ? st : assay_fail_context(st, "piqa data (override with --data-dir)");
}

/* ---- mmlu (lm_eval/tasks/mmlu/default/_default_template_yaml + mmlu_<subject>.yaml) --------------------------- */
/* description "The following are multiple choice questions (with answers) about <subject, _ -> space>.\n\n",
 * doc_to_text "{{question.strip()}}\nA. {{choices[0]}}\nB. ...\nD. {{choices[3]}}\nAnswer:", choices A B C D,
 * few-shot: the first k rows of the subject's dev split (sampler first_n). Groups as lm-eval's _mmlu_*.yaml. */
static const struct {
    const char *subject, *group;
} mmlu_subjects[] = {
    {"abstract_algebra", "mmlu_stem"}, {"anatomy", "mmlu_stem"}, {"astronomy", "mmlu_stem"},
    {"business_ethics", "mmlu_other"}, {"clinical_knowledge", "mmlu_other"}, {"college_biology", "mmlu_stem"},
    {"college_chemistry", "mmlu_stem"}, {"college_computer_science", "mmlu_stem"},
    {"college_mathematics", "mmlu_stem"}, {"college_medicine", "mmlu_other"}, {"college_physics", "mmlu_stem"},
    {"computer_security", "mmlu_stem"}, {"conceptual_physics", "mmlu_stem"},
    {"econometrics", "mmlu_social_sciences"}, {"electrical_engineering", "mmlu_stem"},
    {"elementary_mathematics", "mmlu_stem"}, {"formal_logic", "mmlu_humanities"}, {"global_facts", "mmlu_other"},
    {"high_school_biology", "mmlu_stem"}, {"high_school_chemistry", "mmlu_stem"},
    {"high_school_computer_science", "mmlu_stem"}, {"high_school_european_history", "mmlu_humanities"},
    {"high_school_geography", "mmlu_social_sciences"},
    {"high_school_government_and_politics", "mmlu_social_sciences"},
    {"high_school_macroeconomics", "mmlu_social_sciences"}, {"high_school_mathematics", "mmlu_stem"},
    {"high_school_microeconomics", "mmlu_social_sciences"}, {"high_school_physics", "mmlu_stem"},
    {"high_school_psychology", "mmlu_social_sciences"}, {"high_school_statistics", "mmlu_stem"},
    {"high_school_us_history", "mmlu_humanities"}, {"high_school_world_history", "mmlu_humanities"},
    {"human_aging", "mmlu_other"}, {"human_sexuality", "mmlu_social_sciences"},
    {"international_law", "mmlu_humanities"}, {"jurisprudence", "mmlu_humanities"},
    {"logical_fallacies", "mmlu_humanities"}, {"machine_learning", "mmlu_stem"}, {"management", "mmlu_other"},
    {"marketing", "mmlu_other"}, {"medical_genetics", "mmlu_other"}, {"miscellaneous", "mmlu_other"},
    {"moral_disputes", "mmlu_humanities"}, {"moral_scenarios", "mmlu_humanities"}, {"nutrition", "mmlu_other"},
    {"philosophy", "mmlu_humanities"}, {"prehistory", "mmlu_humanities"},
    {"professional_accounting", "mmlu_other"}, {"professional_law", "mmlu_humanities"},
    {"professional_medicine", "mmlu_other"}, {"professional_psychology", "mmlu_social_sciences"},
    {"public_relations", "mmlu_social_sciences"}, {"security_studies", "mmlu_social_sciences"},
    {"sociology", "mmlu_social_sciences"}, {"us_foreign_policy", "mmlu_social_sciences"},
    {"virology", "mmlu_other"}, {"world_religions", "mmlu_humanities"},
};
enum { MMLU_N_SUBJECTS = sizeof mmlu_subjects / sizeof mmlu_subjects[0] };

/* RFC 4180 CSV: quoted fields with "" escapes and embedded commas/newlines. Calls back once per record. */
typedef assay_status (*csv_fn)(char **fields, int n, int64_t record, void *user);
static assay_status read_csv(const char *path, csv_fn fn, void *user) {
    char *text = NULL;
    size_t len = 0;
    assay_status st = assay_read_file(path, &text, &len);
    if (st != ASSAY_OK) return st;
    char *fields[16];
    int nf = 0;
    int64_t record = 0;
    assay_strbuf cur = {0};
    size_t i = 0;
    while (i <= len && st == ASSAY_OK) {
        if (i == len && nf == 0 && cur.len == 0) break; /* no trailing record */
        int quoted = 0;
        assay_strbuf_clear(&cur);
        assay_strbuf_append(&cur, "", 0);
        if (i < len && text[i] == '"') {
            quoted = 1;
            i++;
            for (;;) {
                if (i >= len) {
                    st = assay_fail(ASSAY_ERR_FORMAT, "%s: unterminated quoted field in record %lld", path, (long long)record + 1);
                    break;
                }
                if (text[i] == '"') {
                    if (i + 1 < len && text[i + 1] == '"') {
                        assay_strbuf_putc(&cur, '"');
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                assay_strbuf_putc(&cur, text[i++]);
            }
        }
        while (st == ASSAY_OK && i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
            if (quoted) {
                st = assay_fail(ASSAY_ERR_FORMAT, "%s: text after a closing quote in record %lld", path, (long long)record + 1);
                break;
            }
            assay_strbuf_putc(&cur, text[i++]);
        }
        if (st != ASSAY_OK) break;
        if (nf == 16) {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: more than 16 fields in record %lld", path, (long long)record + 1);
            break;
        }
        fields[nf++] = xstrndup(cur.data, cur.len);
        if (i < len && text[i] == ',') {
            i++;
            continue;
        }
        if (i < len && text[i] == '\r') i++;
        if (i < len && text[i] == '\n') i++;
        if (i >= len) i = len + 1;
        st = fn(fields, nf, record++, user);
        for (int f = 0; f < nf; f++) free(fields[f]);
        nf = 0;
    }
    for (int f = 0; f < nf; f++) free(fields[f]);
    assay_strbuf_free(&cur);
    free(text);
    return st;
}

typedef struct mmlu_rows {
    mc_list l;
    const char *path;
} mmlu_rows;

static assay_status mmlu_row(char **f, int n, int64_t record, void *user) {
    mmlu_rows *r = user;
    if (record == 0) {
        if (n != 6 || strcmp(f[0], "question") != 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: expected the header question,choice0..choice3,answer", r->path);
        return ASSAY_OK;
    }
    char *end = NULL;
    long answer = n == 6 ? strtol(f[5], &end, 10) : -1;
    if (n != 6 || end == f[5] || *end || answer < 0 || answer > 3)
        return assay_fail(ASSAY_ERR_FORMAT, "%s record %lld: expected 6 fields with an answer 0-3", r->path, (long long)record);
    mc_list *l = &r->l;
    l->shots = assay_xrealloc(l->shots, sizeof *l->shots * (size_t)(l->n + 1));
    l->choices = assay_xrealloc(l->choices, sizeof *l->choices * (size_t)(l->n + 1));
    l->n_choices = assay_xrealloc(l->n_choices, sizeof *l->n_choices * (size_t)(l->n + 1));
    l->gold = assay_xrealloc(l->gold, sizeof *l->gold * (size_t)(l->n + 1));
    char *q = strip_dup(f[0]);
    assay_strbuf b = {0};
    assay_strbuf_printf(&b, "%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer:", q, f[1], f[2], f[3], f[4]);
    free(q);
    static const char *letters[] = {"A", "B", "C", "D"};
    l->shots[l->n] = (shot){b.data, assay_xstrdup(letters[answer])};
    l->choices[l->n] = assay_xmalloc(sizeof(char *) * 4);
    for (int i = 0; i < 4; i++) l->choices[l->n][i] = assay_xstrdup(letters[i]);
    l->n_choices[l->n] = 4;
    l->gold[l->n] = (int)answer;
    l->n++;
    return ASSAY_OK;
}

static assay_status load_mmlu_subject(const assay_eval_options *o, int si, int k, assay_task_docs *t) {
    const char *subject = mmlu_subjects[si].subject;
    assay_strbuf name = {0};
    assay_strbuf_printf(&name, "test/%s_test.csv", subject);
    mmlu_rows test = {{0}, NULL}, dev = {{0}, NULL};
    char *p = path2(o->data_dir, "mmlu", name.data);
    test.path = p;
    assay_status st = read_csv(p, mmlu_row, &test);
    free(p);
    if (st == ASSAY_OK && k > 0) {
        assay_strbuf_clear(&name);
        assay_strbuf_printf(&name, "dev/%s_dev.csv", subject);
        p = path2(o->data_dir, "mmlu", name.data);
        dev.path = p;
        st = read_csv(p, mmlu_row, &dev);
        free(p);
        if (st == ASSAY_OK && k > dev.l.n)
            st = assay_fail(ASSAY_ERR_ARG, "mmlu_%s: --num-fewshot %d exceeds the %lld dev questions", subject, k, (long long)dev.l.n);
    }
    if (st == ASSAY_OK) {
        assay_strbuf desc = {0};
        assay_strbuf_puts(&desc, "The following are multiple choice questions (with answers) about ");
        for (const char *c = subject; *c; c++) assay_strbuf_putc(&desc, *c == '_' ? ' ' : *c);
        assay_strbuf_puts(&desc, ".\n\n");
        int64_t pick[64];
        for (int i = 0; i < k; i++) pick[i] = i; /* first_n */
        for (int64_t i = 0; i < test.l.n; i++) {
            assay_eval_doc *d = doc_push(t);
            d->context = fewshot_prompt(desc.data, dev.l.shots, pick, k, test.l.shots[i].text);
            d->n_choices = 4;
            d->choices = test.l.choices[i];
            d->gold = test.l.gold[i];
        }
        assay_strbuf_free(&desc);
    }
    assay_strbuf_free(&name);
    mc_list_free(&test.l, st == ASSAY_OK);
    mc_list_free(&dev.l, 0);
    return st;
}

/* ---- gsm8k (lm_eval/tasks/gsm8k/gsm8k.yaml, version 3) ------------------------------------------------------- */
/* doc_to_text "Question: {{question}}\nAnswer:", target "{{answer}}", 5 shots drawn from train with the default
 * sampler; generation until "Question:", "</s>", "<|im_end|>". */
static assay_status gsm_line(const assay_json *o, int64_t line, void *user) {
    mc_list *l = user;
    const char *q = json_str(o, "question"), *a = json_str(o, "answer");
    if (!q || !a) return assay_fail(ASSAY_ERR_FORMAT, "line %lld: expected question and answer", (long long)line);
    l->shots = assay_xrealloc(l->shots, sizeof *l->shots * (size_t)(l->n + 1));
    assay_strbuf b = {0};
    assay_strbuf_printf(&b, "Question: %s\nAnswer:", q);
    l->shots[l->n] = (shot){b.data, assay_xstrdup(a)};
    l->n++;
    return ASSAY_OK;
}

static void shots_free(mc_list *l) {
    for (int64_t i = 0; i < l->n; i++) {
        free(l->shots[i].text);
        free(l->shots[i].target);
    }
    free(l->shots);
    memset(l, 0, sizeof *l);
}

static assay_status load_gsm8k(const assay_eval_options *o, int k, assay_task_docs *t) {
    mc_list test = {0}, train = {0};
    char *p = path2(o->data_dir, "gsm8k", "test.jsonl");
    assay_status st = read_jsonl(p, gsm_line, &test);
    free(p);
    if (st == ASSAY_OK && k > 0) {
        p = path2(o->data_dir, "gsm8k", "train.jsonl");
        st = read_jsonl(p, gsm_line, &train);
        free(p);
        if (st == ASSAY_OK && k > 64) st = assay_fail(ASSAY_ERR_ARG, "gsm8k: --num-fewshot %d is more than 64", k);
    }
    if (st == ASSAY_OK) {
        assay_pyrandom rng;
        assay_pyrandom_seed(&rng, (uint32_t)o->fewshot_seed);
        int64_t pick[64];
        /* Shots are drawn for every document in order, so a --limit run sees the same prompts as a full run. */
        int64_t n = test.n;
        if (o->limit > 0 && o->limit < n) n = o->limit;
        for (int64_t i = 0; i < n; i++) {
            assay_eval_doc *d = doc_push(t);
            if (k > 0) random_shots(&rng, train.n, k, pick);
            d->context = fewshot_prompt(NULL, train.shots, pick, k, test.shots[i].text);
            d->target = assay_xstrdup(test.shots[i].target);
        }
        t->n_original = test.n;
    }
    shots_free(&test);
    shots_free(&train);
    return st == ASSAY_OK ? st : assay_fail_context(st, "gsm8k data (override with --data-dir)");
}

/* ---- wikitext (lm_eval/tasks/wikitext/wikitext.yaml, EleutherAI/wikitext_document_level) ---------------------- */
static assay_status load_wikitext(const assay_eval_options *o, int k, assay_task_docs *t) {
    char *p = path2(o->data_dir, "wikitext2_raw", "wiki.test.raw"), *raw = NULL;
    size_t len = 0;
    assay_status st = assay_read_file(p, &raw, &len);
    free(p);
    if (st != ASSAY_OK) return assay_fail_context(st, "wikitext data (override with --data-dir)");
    char **pages = NULL;
    int64_t n = 0;
    st = assay_wikitext_documents(raw, len, &pages, &n);
    free(raw);
    if (st != ASSAY_OK) return st;
    for (int64_t i = 0; i < n; i++) {
        assay_eval_doc *d = doc_push(t);
        d->context = assay_wikitext_detokenize(pages[i]);
        d->target = pages[i];
    }
    free(pages);
    return ASSAY_OK;
}

/* ---- text perplexity and KL divergence over a text file --------------------------------------------------- */
static assay_status load_text(const assay_eval_options *o, const char *what, assay_task_docs *t) {
    const char *file = o->text_file;
    char *fallback = NULL;
    if (!file) {
        /* heldout: the house model's held-out prose, next to the data folder */
        fallback = path2(o->data_dir, "..", "models/house/heldout.txt");
        file = fallback;
    }
    char *text = NULL;
    size_t len = 0;
    assay_status st = assay_read_file(file, &text, &len);
    if (st != ASSAY_OK) {
        free(fallback);
        return assay_fail_context(st, "%s text (choose one with --text FILE)", what);
    }
    assay_eval_doc *d = doc_push(t);
    d->context = text;
    d->target = assay_xstrdup(file);
    free(fallback);
    return ASSAY_OK;
}

/* ---- the table -------------------------------------------------------------------------------------------- */

static assay_task_docs new_task(const char *name, assay_task_kind kind, int k) {
    assay_task_docs t;
    memset(&t, 0, sizeof t);
    t.name = assay_xstrdup(name);
    t.kind = kind;
    t.num_fewshot = k;
    t.target_delimiter = " ";
    return t;
}

assay_status assay_task_load(const char *name, const assay_eval_options *o, assay_task_docs **tasks, int *n_tasks) {
    assay_status st = ASSAY_OK;
    int k = o->num_fewshot;
    if (strcmp(name, "mmlu") == 0 || strncmp(name, "mmlu_", 5) == 0) {
        if (k < 0) k = 5; /* MMLU's own protocol (lm-eval's yaml leaves it at 0: pass --num-fewshot 0 for that) */
        int found = 0;
        for (int i = 0; i < MMLU_N_SUBJECTS && st == ASSAY_OK; i++) {
            int want = strcmp(name, "mmlu") == 0 || strcmp(name + 5, mmlu_subjects[i].subject) == 0 ||
                       strcmp(name, mmlu_subjects[i].group) == 0;
            if (!want) continue;
            found = 1;
            assay_strbuf n = {0};
            assay_strbuf_printf(&n, "mmlu_%s", mmlu_subjects[i].subject);
            assay_task_docs t = new_task(n.data, ASSAY_TASK_MULTIPLE_CHOICE, k);
            assay_strbuf_free(&n);
            t.group = mmlu_subjects[i].group;
            st = load_mmlu_subject(o, i, k, &t);
            if (st != ASSAY_OK) {
                assay_task_docs_free(&t);
                return assay_fail_context(st, "mmlu data (override with --data-dir)");
            }
            apply_limit(&t, o->limit);
            task_add(tasks, n_tasks, &t);
        }
        if (!found) return assay_fail(ASSAY_ERR_ARG, "unknown task '%s' (mmlu subjects are mmlu_<subject>)", name);
        return ASSAY_OK;
    }
    assay_task_docs t;
    if (strcmp(name, "hellaswag") == 0) {
        t = new_task(name, ASSAY_TASK_MULTIPLE_CHOICE, k < 0 ? 0 : k);
        st = load_hellaswag(o, t.num_fewshot, &t);
    } else if (strcmp(name, "arc_challenge") == 0) {
        t = new_task(name, ASSAY_TASK_MULTIPLE_CHOICE, k < 0 ? 0 : k);
        st = load_arc(o, t.num_fewshot, &t);
    } else if (strcmp(name, "piqa") == 0) {
        t = new_task(name, ASSAY_TASK_MULTIPLE_CHOICE, k < 0 ? 0 : k);
        st = load_piqa(o, t.num_fewshot, &t);
    } else if (strcmp(name, "gsm8k") == 0) {
        t = new_task(name, ASSAY_TASK_GENERATE, k < 0 ? 5 : k);
        st = load_gsm8k(o, t.num_fewshot, &t);
    } else if (strcmp(name, "wikitext") == 0) {
        t = new_task(name, ASSAY_TASK_ROLLING, 0);
        st = load_wikitext(o, 0, &t);
    } else if (strcmp(name, "heldout") == 0 || strcmp(name, "text") == 0) {
        t = new_task(name, ASSAY_TASK_TEXT_PPL, 0);
        st = load_text(o, name, &t);
    } else if (strcmp(name, "kld") == 0) {
        t = new_task(name, ASSAY_TASK_KLD, 0);
        st = load_text(o, name, &t);
    } else {
        return assay_fail(ASSAY_ERR_ARG,
                          "unknown task '%s' (known: wikitext, heldout, kld, hellaswag, arc_challenge, piqa, mmlu, "
                          "mmlu_<subject>, gsm8k)",
                          name);
    }
    if (st != ASSAY_OK) {
        assay_task_docs_free(&t);
        return st;
    }
    if (t.n_original == 0) t.n_original = t.n_docs;
    if (t.kind != ASSAY_TASK_TEXT_PPL && t.kind != ASSAY_TASK_KLD) {
        int64_t orig = t.n_original;
        apply_limit(&t, o->limit);
        if (orig > t.n_original) t.n_original = orig;
    }
    task_add(tasks, n_tasks, &t);
    return ASSAY_OK;
}
