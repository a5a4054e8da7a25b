/* results.c — writes results in lm-evaluation-harness's JSON shape (evaluator.py / evaluation_tracker.py):
 * "results" with "<metric>,<filter>" and "<metric>_stderr,<filter>" ("N/A" when there is none), "groups" and
 * "group_subtasks" for mmlu (size-weighted mean, pooled-variance stderr as api/metrics.py
 * pooled_sample_stderr), "configs", "versions", "n-shot", "higher_is_better", "n-samples", "config", plus the
 * per-sample records under "samples" (keyed like the metrics, so two runs can be paired) and an "assay" block
 * with timings and the model's hash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"

static const char *mmlu_groups[] = {"mmlu_stem", "mmlu_other", "mmlu_social_sciences", "mmlu_humanities"};

static void key(assay_strbuf *b, const char *k) {
    assay_strbuf_json_string(b, k, strlen(k));
    assay_strbuf_puts(b, ": ");
}

static void num_or_na(assay_strbuf *b, double v) {
    if (isnan(v)) assay_strbuf_puts(b, "\"N/A\"");
    else assay_strbuf_json_number(b, v);
}

/* "acc,none" -> "acc_stderr,none" */
static void stderr_key(char *out, size_t n, const char *metric_key) {
    const char *comma = strchr(metric_key, ',');
    if (!comma) snprintf(out, n, "%s_stderr", metric_key);
    else snprintf(out, n, "%.*s_stderr%s", (int)(comma - metric_key), metric_key, comma);
}

typedef struct group_acc {
    const char *name;
    double acc, se;
    int64_t n;
    int present;
} group_acc;

static double pooled_stderr(const double *se, const int64_t *n, int k) {
    double num = 0;
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        num += (double)(n[i] - 1) * se[i] * se[i] * (double)n[i];
        total += n[i];
    }
    return sqrt(num / (double)(total - k) / (double)total);
}

/* Size-weighted mean and pooled stderr of `acc,none` over the tasks whose group is `name`. */
static group_acc group_of_subjects(const assay_eval_results *r, const char *name) {
    group_acc g = {name, 0, 0, 0, 0};
    double se[64];
    int64_t n[64];
    int k = 0;
    double sum = 0;
    for (int i = 0; i < r->n_tasks && k < 64; i++) {
        const assay_task_result *t = &r->tasks[i];
        if (!t->group || strcmp(t->group, name) != 0 || t->n_metrics < 1) continue;
        sum += t->metric[0] * (double)t->n_effective;
        g.n += t->n_effective;
        se[k] = t->stderr_[0];
        n[k] = t->n_effective;
        k++;
    }
    if (k == 0 || g.n == 0) return g;
    g.present = 1;
    g.acc = sum / (double)g.n;
    g.se = pooled_stderr(se, n, k);
    return g;
}

static void write_group(assay_strbuf *b, const group_acc *g, const char *alias, int *first) {
    if (!*first) assay_strbuf_puts(b, ",\n");
    *first = 0;
    assay_strbuf_puts(b, "    ");
    key(b, g->name);
    assay_strbuf_puts(b, "{\"alias\": ");
    assay_strbuf_json_string(b, alias, strlen(alias));
    assay_strbuf_puts(b, ", \"acc,none\": ");
    assay_strbuf_json_number(b, g->acc);
    assay_strbuf_puts(b, ", \"acc_stderr,none\": ");
    num_or_na(b, g->se);
    assay_strbuf_puts(b, "}");
}

static const char *output_type(assay_task_kind k) {
    switch (k) {
    case ASSAY_TASK_MULTIPLE_CHOICE: return "multiple_choice";
    case ASSAY_TASK_GENERATE: return "generate_until";
    case ASSAY_TASK_ROLLING: return "loglikelihood_rolling";
    case ASSAY_TASK_TEXT_PPL: return "loglikelihood_windows";
    case ASSAY_TASK_KLD: return "kl_divergence";
    }
    return "?";
}

static void write_sample(assay_strbuf *b, const assay_task_result *t, const assay_eval_sample *s) {
    assay_strbuf_printf(b, "{\"doc_id\": %lld", (long long)s->doc_id);
    if (t->kind == ASSAY_TASK_MULTIPLE_CHOICE) {
        assay_strbuf_printf(b, ", \"target\": %d, \"loglikelihoods\": [", s->gold);
        for (int c = 0; c < s->n_choices; c++) {
            if (c) assay_strbuf_puts(b, ", ");
            assay_strbuf_json_number(b, s->lls[c]);
        }
        assay_strbuf_puts(b, "], \"is_greedy\": [");
        for (int c = 0; c < s->n_choices; c++) assay_strbuf_printf(b, "%s%s", c ? ", " : "", s->greedy[c] ? "true" : "false");
        assay_strbuf_puts(b, "]");
        for (int m = 0; m < t->n_metrics && m < s->n_values; m++) {
            assay_strbuf_puts(b, ", ");
            key(b, t->metric_keys[m]);
            assay_strbuf_json_number(b, s->values[m]);
        }
    } else if (t->kind == ASSAY_TASK_GENERATE) {
        assay_strbuf_puts(b, ", \"resps\": [[");
        assay_strbuf_json_string(b, s->response, strlen(s->response));
        assay_strbuf_puts(b, "]], \"filtered_resps\": {\"strict-match\": ");
        assay_strbuf_json_string(b, s->filtered[0], strlen(s->filtered[0]));
        assay_strbuf_puts(b, ", \"flexible-extract\": ");
        assay_strbuf_json_string(b, s->filtered[1], strlen(s->filtered[1]));
        assay_strbuf_puts(b, "}");
        for (int m = 0; m < t->n_metrics && m < s->n_values; m++) {
            assay_strbuf_puts(b, ", ");
            key(b, t->metric_keys[m]);
            assay_strbuf_json_number(b, s->values[m]);
        }
    } else {
        assay_strbuf_puts(b, ", \"loglikelihood\": ");
        assay_strbuf_json_number(b, s->ll);
        assay_strbuf_printf(b, ", \"tokens\": %lld", (long long)s->tokens);
        if (t->kind == ASSAY_TASK_ROLLING) assay_strbuf_printf(b, ", \"words\": %lld, \"bytes\": %lld", (long long)s->words, (long long)s->bytes);
        if (t->kind == ASSAY_TASK_KLD) {
            assay_strbuf_puts(b, ", \"kld_sum\": ");
            assay_strbuf_json_number(b, s->values[0]);
            assay_strbuf_printf(b, ", \"same_top\": %lld, \"loglikelihood_base\": ", (long long)s->values[1]);
            assay_strbuf_json_number(b, s->values[2]);
        }
    }
    assay_strbuf_puts(b, "}");
}

void assay_eval_results_json(const assay_eval_results *r, assay_strbuf *b) {
    group_acc groups[4];
    int any_mmlu = 0;
    for (int g = 0; g < 4; g++) {
        groups[g] = group_of_subjects(r, mmlu_groups[g]);
        any_mmlu |= groups[g].present;
    }
    group_acc top = {"mmlu", 0, 0, 0, 0};
    if (any_mmlu) {
        double se[4], sum = 0;
        int64_t n[4];
        int k = 0;
        for (int g = 0; g < 4; g++) {
            if (!groups[g].present) continue;
            sum += groups[g].acc * (double)groups[g].n;
            top.n += groups[g].n;
            se[k] = groups[g].se;
            n[k++] = groups[g].n;
        }
        top.acc = sum / (double)top.n;
        top.se = pooled_stderr(se, n, k);
        top.present = 1;
    }

    assay_strbuf_puts(b, "{\n  \"results\": {\n");
    int first = 1;
    if (any_mmlu) {
        write_group(b, &top, "mmlu", &first);
        for (int g = 0; g < 4; g++)
            if (groups[g].present) write_group(b, &groups[g], mmlu_groups[g] + 5, &first);
    }
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        if (!first) assay_strbuf_puts(b, ",\n");
        first = 0;
        assay_strbuf_puts(b, "    ");
        key(b, t->name);
        assay_strbuf_puts(b, "{\"alias\": ");
        const char *alias = t->group ? t->name + 5 : t->name;
        assay_strbuf_json_string(b, alias, strlen(alias));
        for (int m = 0; m < t->n_metrics; m++) {
            char sk[128];
            stderr_key(sk, sizeof sk, t->metric_keys[m]);
            assay_strbuf_puts(b, ", ");
            key(b, t->metric_keys[m]);
            assay_strbuf_json_number(b, t->metric[m]);
            assay_strbuf_puts(b, ", ");
            key(b, sk);
            num_or_na(b, t->stderr_[m]);
        }
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "\n  },\n  \"groups\": {");
    if (any_mmlu) {
        first = 1;
        assay_strbuf_puts(b, "\n");
        write_group(b, &top, "mmlu", &first);
        for (int g = 0; g < 4; g++)
            if (groups[g].present) write_group(b, &groups[g], mmlu_groups[g] + 5, &first);
        assay_strbuf_puts(b, "\n  ");
    }
    assay_strbuf_puts(b, "},\n  \"group_subtasks\": {");
    if (any_mmlu) {
        assay_strbuf_puts(b, "\"mmlu\": [");
        int f = 1;
        for (int g = 0; g < 4; g++)
            if (groups[g].present) {
                assay_strbuf_printf(b, "%s\"%s\"", f ? "" : ", ", mmlu_groups[g]);
                f = 0;
            }
        assay_strbuf_puts(b, "]");
        for (int g = 0; g < 4; g++) {
            if (!groups[g].present) continue;
            assay_strbuf_printf(b, ", \"%s\": [", mmlu_groups[g]);
            f = 1;
            for (int i = 0; i < r->n_tasks; i++)
                if (r->tasks[i].group && strcmp(r->tasks[i].group, mmlu_groups[g]) == 0) {
                    assay_strbuf_printf(b, "%s\"%s\"", f ? "" : ", ", r->tasks[i].name);
                    f = 0;
                }
            assay_strbuf_puts(b, "]");
        }
    }
    assay_strbuf_puts(b, "},\n  \"configs\": {");
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        assay_strbuf_printf(b, "%s\n    ", i ? "," : "");
        key(b, t->name);
        assay_strbuf_puts(b, "{\"task\": ");
        assay_strbuf_json_string(b, t->name, strlen(t->name));
        assay_strbuf_printf(b, ", \"output_type\": \"%s\", \"num_fewshot\": %d, \"target_delimiter\": \" \", "
                               "\"fewshot_delimiter\": \"\\n\\n\"",
                            output_type(t->kind), t->num_fewshot);
        if (strcmp(t->name, "arc_challenge") == 0 && t->num_fewshot > 0)
            assay_strbuf_puts(b, ", \"fewshot_split\": \"dev (the train split is not bundled)\"");
        if (t->group) assay_strbuf_puts(b, ", \"fewshot_split\": \"dev\", \"fewshot_config\": {\"sampler\": \"first_n\"}");
        if (t->kind == ASSAY_TASK_GENERATE)
            assay_strbuf_printf(b, ", \"generation_kwargs\": {\"until\": [\"Question:\", \"</s>\", \"<|im_end|>\"], "
                                   "\"do_sample\": false, \"temperature\": 0.0}");
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "\n  },\n  \"versions\": {");
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        double v = t->kind == ASSAY_TASK_GENERATE ? 3.0 : t->kind == ASSAY_TASK_ROLLING ? 2.0 : 1.0;
        assay_strbuf_printf(b, "%s", i ? ", " : "");
        key(b, t->name);
        assay_strbuf_json_number(b, v);
    }
    assay_strbuf_puts(b, "},\n  \"n-shot\": {");
    for (int i = 0; i < r->n_tasks; i++) {
        assay_strbuf_printf(b, "%s", i ? ", " : "");
        key(b, r->tasks[i].name);
        assay_strbuf_printf(b, "%d", r->tasks[i].num_fewshot);
    }
    assay_strbuf_puts(b, "},\n  \"higher_is_better\": {");
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        assay_strbuf_printf(b, "%s", i ? ", " : "");
        key(b, t->name);
        assay_strbuf_puts(b, "{");
        for (int m = 0; m < t->n_metrics; m++) {
            const char *comma = strchr(t->metric_keys[m], ',');
            size_t n = comma ? (size_t)(comma - t->metric_keys[m]) : strlen(t->metric_keys[m]);
            int dup = 0; /* exact_match appears once per filter */
            for (int q = 0; q < m; q++)
                if (strncmp(t->metric_keys[q], t->metric_keys[m], n) == 0 && t->metric_keys[q][n] == ',') dup = 1;
            if (dup) continue;
            assay_strbuf_printf(b, "%s", m ? ", " : "");
            assay_strbuf_json_string(b, t->metric_keys[m], n);
            assay_strbuf_printf(b, ": %s", t->higher_is_better[m] ? "true" : "false");
        }
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "},\n  \"n-samples\": {");
    for (int i = 0; i < r->n_tasks; i++) {
        assay_strbuf_printf(b, "%s", i ? ", " : "");
        key(b, r->tasks[i].name);
        assay_strbuf_printf(b, "{\"original\": %lld, \"effective\": %lld}", (long long)r->tasks[i].n_original,
                            (long long)r->tasks[i].n_effective);
    }
    assay_strbuf_puts(b, "},\n  \"config\": {\"model\": \"assay\", \"model_args\": ");
    const char *margs = r->model_args ? r->model_args : "";
    assay_strbuf_json_string(b, margs, strlen(margs));
    assay_strbuf_puts(b, ", \"batch_size\": 1, \"batch_sizes\": [], \"device\": ");
    if (r->device) assay_strbuf_json_string(b, r->device, strlen(r->device));
    else assay_strbuf_puts(b, "null"); /* a model behind a server */
    assay_strbuf_puts(b, ", \"use_cache\": null, \"limit\": ");
    if (r->limit > 0) assay_strbuf_printf(b, "%lld", (long long)r->limit);
    else assay_strbuf_puts(b, "null");
    assay_strbuf_printf(b, ", \"bootstrap_iters\": 0, \"gen_kwargs\": null, \"random_seed\": 0, \"numpy_seed\": 1234, "
                           "\"torch_seed\": 1234, \"fewshot_seed\": %d},\n",
                        r->fewshot_seed);
    assay_strbuf_puts(b, "  \"model_name\": ");
    assay_strbuf_json_string(b, r->model_name, strlen(r->model_name));
    assay_strbuf_puts(b, ",\n  \"model_sha256\": ");
    if (r->model_sha256) assay_strbuf_json_string(b, r->model_sha256, strlen(r->model_sha256));
    else assay_strbuf_puts(b, "null");
    assay_strbuf_printf(b, ",\n  \"date\": %.0f,\n  \"start_time\": %.3f,\n  \"end_time\": %.3f,\n", r->start_time,
                        r->start_time, r->end_time);
    assay_strbuf_printf(b, "  \"total_evaluation_time_seconds\": \"%.3f\",\n", r->total_seconds);
    assay_strbuf_printf(b, "  \"assay\": {\"version\": \"%s\", \"max_length\": %lld, \"timings\": {",
#ifdef ASSAY_VERSION
                        ASSAY_VERSION,
#else
                        "0",
#endif
                        (long long)r->max_length);
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        assay_strbuf_printf(b, "%s", i ? ", " : "");
        key(b, t->name);
        assay_strbuf_puts(b, "{\"seconds\": ");
        assay_strbuf_json_number(b, t->seconds);
        assay_strbuf_printf(b, ", \"tokens\": %lld, \"tokens_per_second\": ", (long long)t->tokens_scored);
        assay_strbuf_json_number(b, t->seconds > 0 ? (double)t->tokens_scored / t->seconds : 0);
        if (t->n_failed || t->n_skipped) { /* documents left out of the metrics and the records */
            assay_strbuf_printf(b, ", \"failed\": %lld, \"skipped\": %lld, \"first_error\": ", (long long)t->n_failed,
                                (long long)t->n_skipped);
            const char *e = t->first_error ? t->first_error : "";
            assay_strbuf_json_string(b, e, strlen(e));
        }
        assay_strbuf_puts(b, "}");
    }
    assay_strbuf_puts(b, "}");
    if (r->error) { /* the run stopped early: why */
        assay_strbuf_puts(b, ", \"error\": ");
        assay_strbuf_json_string(b, r->error, strlen(r->error));
    }
    assay_strbuf_puts(b, "},\n  \"samples\": {");
    for (int i = 0; i < r->n_tasks; i++) {
        const assay_task_result *t = &r->tasks[i];
        assay_strbuf_printf(b, "%s\n    ", i ? "," : "");
        key(b, t->name);
        assay_strbuf_puts(b, "[");
        for (int64_t s = 0; s < t->n_samples; s++) {
            assay_strbuf_puts(b, s ? ",\n      " : "\n      ");
            write_sample(b, t, &t->samples[s]);
        }
        assay_strbuf_puts(b, "]");
    }
    assay_strbuf_puts(b, "\n  }\n}\n");
}
