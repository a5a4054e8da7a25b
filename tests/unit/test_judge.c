/* test_judge.c — the offline half of `assay judge`: samples files (key spellings, blank lines, errors naming the
 * line, an empty file), the rubric template and its placeholders, the score read out of judge replies (plain,
 * decorated, labelled, "x/5", reasoning blocks; invalid and ambiguous ones), the paired bootstrap, and the verdict
 * with the thresholds on the 1-5 scale (hand-made score sets on each side of them). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "assay/judge.h"
#include "check.h"

static void test_samples(void) {
    const char *text = "\xEF\xBB\xBF{\"prompt\": \"What is 2+2?\", \"expected\": \"4\", \"id\": \"a1\"}\n"
                       "\n"
                       "   \r\n"
                       "{\"question\": \"Capital of France?\", \"answer\": \"Paris\", \"id\": 7}\n"
                       "{\"input\": \"Say hi\", \"expected_output\": \"hi\"}\r\n"
                       "{\"query\": \"q\", \"reference\": \"r\"}";
    assay_judge_sample *s = NULL;
    int64_t n = 0;
    CHECK_OK(assay_judge_parse_samples(text, strlen(text), "t.jsonl", &s, &n));
    CHECK(n == 4);
    if (n == 4) {
        CHECK(strcmp(s[0].prompt, "What is 2+2?") == 0 && strcmp(s[0].expected, "4") == 0 && strcmp(s[0].id, "a1") == 0);
        CHECK(s[0].line == 1 && s[1].line == 4 && s[3].line == 6);
        CHECK(strcmp(s[1].prompt, "Capital of France?") == 0 && strcmp(s[1].expected, "Paris") == 0 && strcmp(s[1].id, "7") == 0);
        CHECK(strcmp(s[2].expected, "hi") == 0 && s[2].id == NULL);
        CHECK(strcmp(s[3].prompt, "q") == 0 && strcmp(s[3].expected, "r") == 0);
    }
    assay_judge_samples_free(s, n);

    const struct {
        const char *text, *error;
    } bad[] = {
        {"", "no samples"},
        {"\n\n  \n", "no samples"},
        {"{\"prompt\": \"a\", \"expected\": \"b\"}\n{\"prompt\": \"a\"\n", "t.jsonl:2: not a JSON line"},
        {"{\"prompt\": \"a\", \"expected\": \"b\"}\n[1, 2]\n", "t.jsonl:2: a sample is a JSON object"},
        {"{\"text\": \"a\", \"expected\": \"b\"}\n", "t.jsonl:1: no prompt"},
        {"{\"prompt\": \"a\"}\n", "t.jsonl:1: no expected answer"},
        {"{\"prompt\": [\"a\"], \"expected\": \"b\"}\n", "\"prompt\" is not a string"},
        {"{\"prompt\": \"a\", \"expected\": 4}\n", "\"expected\" is not a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = NULL;
        n = -1;
        assay_status st = assay_judge_parse_samples(bad[i].text, strlen(bad[i].text), "t.jsonl", &s, &n);
        CHECK(st == ASSAY_ERR_FORMAT && s == NULL && n == 0);
        if (!strstr(assay_last_error(), bad[i].error)) fprintf(stderr, "case %zu: error \"%s\"\n", i, assay_last_error());
        CHECK(strstr(assay_last_error(), bad[i].error) != NULL);
    }
}

static void test_template(void) {
    int has_expected = -1;
    CHECK_OK(assay_judge_check_template(assay_judge_default_template(), &has_expected));
    CHECK(has_expected == 1);
    char *r = assay_judge_render(assay_judge_default_template(), "Q?", "E.", "A!");
    CHECK(strstr(r, "Question:\nQ?\n") && strstr(r, "Expected answer:\nE.\n") && strstr(r, "Answer to grade:\nA!\n"));
    CHECK(strstr(r, "{") == NULL && strstr(r, "number only"));
    free(r);

    r = assay_judge_render("{question}|{reference}|{response}|{{answer}}|{other}|{expected_answer}{candidate_answer}{prompt}",
                           "p {answer}", "e", "a");
    CHECK(strcmp(r, "p {answer}|e|a|{answer}|{other}|eap {answer}") == 0); /* values are not expanded again */
    free(r);
    CHECK_OK(assay_judge_check_template("Rate this reply: {response}", &has_expected));
    CHECK(has_expected == 0);
    CHECK(assay_judge_check_template("Rate {prompt} against {expected} ({{answer}})", NULL) == ASSAY_ERR_ARG);
    CHECK(strstr(assay_last_error(), "{answer}") != NULL);
}

static int score(const char *s) { return assay_judge_parse_score(s, strlen(s)); }

static void test_parse(void) {
    const struct {
        const char *reply;
        int want;
    } cases[] = {
        {"4", 4}, {" 5\n", 5}, {"**3**", 3}, {"\"2\"", 2}, {"1.", 1}, {"`4`", 4}, {"[5]", 5},
        {"Score: 4", 4}, {"score:4", 4}, {"**Score:** 3", 3}, {"Rating = 2", 2}, {"The final score is 5.", 5},
        {"I would rate it a 4.", 4}, {"Grade: 3/5", 3}, {"Rating: 3\nReason: it misses 2 of the 4 steps.", 3},
        {"Step 1: check the facts. Step 2: ... Score: 2", 2}, {"score: 2 ... on reflection, final score: 4", 4},
        {"4/5", 4}, {"I give it 3 / 5.", 3}, {"4 out of 5", 4}, {"It covers 2 of 3 points; overall 4/5", 4},
        {"4\n\nThe answer is correct but brief.", 4}, {"The answer is correct but brief.\n\n4", 4},
        {"The answer matches the expected one. 5", 5}, {"5 (correct and complete)", 5},
        {"On a scale of 1-5 I give it 4", 4}, {"On a scale of 1 to 5: 2", 2}, {"Scale 1\xE2\x80\x93" "5: 3", 3},
        {"<think>The answer says 3 but expected 4; partly right.</think>\n3", 3},
        {"<THINK>maybe 2, maybe 5</THINK> Score: 5", 5},
        {"Scored 4", 4}, {"rated 2", 2}, {"rating is 1", 1},
        /* not a score */
        {"", 0}, {"   ", 0}, {"0", 0}, {"6", 0}, {"10", 0}, {"4.5", 0}, {"Score: 4.5", 0}, {"10/10", 0},
        {"Excellent answer!", 0}, {"3 or 4", 0}, {"4\n\n3", 0}, {"The answer has 2 errors and 3 omissions.", 0},
        {"<think>I would say 4", 0}, {"scores 12", 0}, {"1,5", 0}, {"v4", 0}, {"4th", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = score(cases[i].reply);
        if (got != cases[i].want) fprintf(stderr, "reply \"%s\": %d, want %d\n", cases[i].reply, got, cases[i].want);
        CHECK(got == cases[i].want);
    }
    CHECK(assay_judge_parse_score(NULL, 0) == 0);
    CHECK(assay_judge_parse_score("4\0" "5", 3) == 0); /* a NUL inside is a separator, not an end */
}

static void test_bootstrap(void) {
    double base[200], cand[200], lo, hi, lo2, hi2;
    for (int i = 0; i < 200; i++) base[i] = 1 + i % 5, cand[i] = base[i] - (i % 4 == 0);
    assay_paired_bootstrap_mean(base, cand, 200, 2000, 0.95, 7, &lo, &hi);
    CHECK(lo < -0.25 && hi > -0.25 && lo > -0.4 && hi < -0.1); /* mean difference -0.25 */
    assay_paired_bootstrap_mean(base, cand, 200, 2000, 0.95, 7, &lo2, &hi2);
    CHECK(lo == lo2 && hi == hi2); /* seeded */
    assay_paired_bootstrap_mean(base, cand, 1, 2000, 0.95, 7, &lo, &hi);
    CHECK(isnan(lo) && isnan(hi));
    assay_paired_bootstrap_mean(base, base, 50, 2000, 0.95, 7, &lo, &hi);
    CHECK(lo == 0 && hi == 0);
}

/* n pairs: the baseline scores 4 everywhere, the candidate loses one point on `lost` of them. */
static assay_judge_summary scenario(int64_t n, int64_t lost) {
    static double base[100000], cand[100000];
    for (int64_t i = 0; i < n; i++) base[i] = 4, cand[i] = 4 - (i * lost / n != (i + 1) * lost / n);
    assay_judge_options o;
    assay_judge_options_default(&o);
    assay_judge_summary s;
    assay_judge_summarize(base, cand, n, &o, &s);
    return s;
}

static void test_verdict(void) {
    /* identical scores: no degradation at all */
    assay_judge_summary s = scenario(200, 0);
    CHECK(s.verdict == ASSAY_JUDGE_SHIP && s.mean_diff == 0 && s.degradation == 0);
    CHECK_NEAR(s.ship_points, 0.015, 1e-12); /* 0.5% of the 3 points above the floor */
    CHECK_NEAR(s.monitor_points, 0.045, 1e-12);
    CHECK(s.wilcoxon.n_zero == 200);

    /* 1 point lost on 4 of 200 pairs: -0.02 points = 0.67%; the bootstrap interval [-0.04, -0.005] of the
     * difference puts the degradation in [0.005, 0.04] points, across 0.015 (0.5%): inconclusive, and the estimate
     * is 0.005 from that threshold, the nearer one */
    s = scenario(200, 4);
    CHECK_NEAR(s.mean_diff, -0.02, 1e-12);
    CHECK_NEAR(s.degradation, 100 * 0.02 / 3, 1e-9);
    CHECK_NEAR(s.diff_lo, -0.04, 1e-12);
    CHECK_NEAR(s.diff_hi, -0.005, 1e-12);
    const double z = 1.959963984540054;
    CHECK(s.verdict == ASSAY_JUDGE_INCONCLUSIVE);
    CHECK(s.samples_needed == (int64_t)ceil(z * z * s.sd_diff * s.sd_diff / pow(0.02 - 0.015, 2)) && s.samples_needed > 200);

    /* a small sample with a 10% loss: inconclusive, and the count that would decide it is larger than n */
    s = scenario(20, 1);
    CHECK(s.verdict == ASSAY_JUDGE_INCONCLUSIVE || s.verdict == ASSAY_JUDGE_INVESTIGATE);
    s = scenario(30, 1); /* -0.033 points: 1.1% */
    CHECK(s.verdict == ASSAY_JUDGE_INCONCLUSIVE && s.samples_needed > 30);
    /* the projection, to the nearer threshold (0.045 is 0.0117 away, 0.015 is 0.0183): z^2 sd^2 / (0.045 - 0.0333)^2 */
    double sd = s.sd_diff, need = ceil(z * z * sd * sd / pow(0.045 - 1.0 / 30, 2));
    CHECK(s.samples_needed == (int64_t)need);

    /* a clear loss: investigate */
    s = scenario(200, 40);
    CHECK(s.verdict == ASSAY_JUDGE_INVESTIGATE && s.samples_needed == -1);
    CHECK(s.wilcoxon.p_value < 1e-6);

    /* large samples: the interval lies below 0.5% (ship) or within 0.5-1.5% (ship with monitoring) */
    s = scenario(20000, 200); /* -0.01 points: 0.33%, interval about +-0.0028 */
    CHECK(s.verdict == ASSAY_JUDGE_SHIP);
    s = scenario(20000, 500); /* -0.025 points: 0.83% */
    CHECK(s.verdict == ASSAY_JUDGE_MONITOR && s.samples_needed == -1);
    CHECK(s.diff_hi < -0.015 && s.diff_lo > -0.045);
    s = scenario(3000, 12); /* -0.004 points: 0.13%, interval about +-0.0023: ship */
    CHECK(s.verdict == ASSAY_JUDGE_SHIP);
    s = scenario(400, 4); /* -0.01: 0.33%, but the interval reaches past 0.015: inconclusive, 0.005 from ship */
    CHECK(s.verdict == ASSAY_JUDGE_INCONCLUSIVE && s.samples_needed == (int64_t)ceil(z * z * s.sd_diff * s.sd_diff / pow(0.005, 2)));

    /* the floor: a baseline of all 1s cannot degrade; the relative degradation is undefined */
    double ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, some[10] = {1, 2, 1, 1, 3, 1, 1, 1, 1, 1};
    assay_judge_options o;
    assay_judge_options_default(&o);
    assay_judge_summarize(ones, some, 10, &o, &s);
    CHECK(isnan(s.degradation) && s.verdict == ASSAY_JUDGE_SHIP);
    /* one pair: no interval */
    assay_judge_summarize(ones, some, 1, &o, &s);
    CHECK(s.verdict == ASSAY_JUDGE_INCONCLUSIVE);
    CHECK(assay_judge_verdict_exit_code(ASSAY_JUDGE_INCONCLUSIVE) == 5 && strcmp(assay_judge_verdict_name(ASSAY_JUDGE_MONITOR), "ship with monitoring") == 0);
}

int main(void) {
    test_samples();
    test_template();
    test_parse();
    test_bootstrap();
    test_verdict();
    return check_finish("judge");
}
