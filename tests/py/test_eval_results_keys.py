"""test_eval_results_keys.py — assay's results JSON read with lm-evaluation-harness's own conventions.

A results file is produced by the eval layer on a toy model (test_eval_tasks --write-results: arc_challenge, piqa,
a few mmlu subjects, wikitext; no engine needed) and then read the way lm-eval's tooling reads its own files:
  - lm_eval.utils.make_table renders "results" and "groups" from "<metric>,<filter>" / "<metric>_stderr,<filter>",
    "versions", "n-shot", "higher_is_better" and "group_subtasks";
  - the values in the rendered table equal the file's values, stderr "N/A" where lm-eval writes it;
  - the mean metrics equal the mean of the per-sample records (what pairing in `assay compare` relies on), the
    stderr is lm-eval's mean_stderr of them, and the mmlu group is the size-weighted mean of its subjects with
    lm-eval's pooled_sample_stderr.
Exit code 0 = all checks passed.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import logging

logging.disable(logging.WARNING)
from lm_eval.api.metrics import mean_stderr, pooled_sample_stderr  # noqa: E402
from lm_eval.utils import make_table  # noqa: E402
import testlib  # noqa: E402
from testlib import check  # noqa: E402

build = os.environ["ASSAY_BUILD_DIR"]




with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "toy.json")
    subprocess.run([os.path.join(build, "test_eval_tasks"), "--write-results", path], check=True, capture_output=True)
    res = json.load(open(path, encoding="utf-8"))

for key in ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples",
            "config", "samples", "model_name", "date", "total_evaluation_time_seconds"):
    check(key in res, f"top-level key {key}")

table = make_table(res)
groups = make_table(res, "groups")
rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()[2:]]
check(len(rows) > 0, "make_table rendered rows")
# every metric in results appears in the rendered table with the file's value
current = None
seen = 0
for r in rows:
    name, _version, filt, _nshot, metric, _hib, value, _pm, se = r
    if name:
        current = name.lstrip(" -")
    task = next(k for k, v in res["results"].items() if v.get("alias", k) == current)
    v = res["results"][task][f"{metric},{filt}"]
    check(abs(float(value) - v) < 6e-5, f"{task} {metric}: table {value} vs file {v}")
    s = res["results"][task][f"{metric}_stderr,{filt}"]
    check((se == "N/A") == (s == "N/A"), f"{task} {metric} stderr rendering {se!r} vs {s!r}")
    seen += 1
check(seen >= 8, f"{seen} metric rows rendered")
check("mmlu" in groups and "stem" in groups, "groups table lists mmlu and its categories")

# per-sample records back the aggregates
for task, samples in res["samples"].items():
    r = res["results"][task]
    for key in [k for k in r if k.endswith(",none") and "_stderr" not in k and k.split(",")[0] in ("acc", "acc_norm")]:
        vals = [s[key] for s in samples]
        check(abs(sum(vals) / len(vals) - r[key]) < 1e-12, f"{task} {key} is the mean of its samples")
        se = mean_stderr(vals)
        check(abs(se - r[key.replace(",", "_stderr,")]) < 1e-12, f"{task} {key} stderr is lm-eval's mean_stderr")
    if task == "wikitext":
        ll = sum(s["loglikelihood"] for s in samples)
        words = sum(s["words"] for s in samples)
        nbytes = sum(s["bytes"] for s in samples)
        check(abs(math.exp(-ll / words) - r["word_perplexity,none"]) < 1e-9 * r["word_perplexity,none"], "word_perplexity")
        check(abs(-ll / nbytes / math.log(2) - r["bits_per_byte,none"]) < 1e-12, "bits_per_byte")
        check(r["word_perplexity_stderr,none"] == "N/A", "perplexity stderr is N/A as in lm-eval")

subjects = res["group_subtasks"]["mmlu_stem"]
accs = [res["results"][s]["acc,none"] for s in subjects]
ses = [res["results"][s]["acc_stderr,none"] for s in subjects]
ns = [res["n-samples"][s]["effective"] for s in subjects]
stem = res["groups"]["mmlu_stem"]
check(abs(sum(a * n for a, n in zip(accs, ns)) / sum(ns) - stem["acc,none"]) < 1e-12, "mmlu_stem is the size-weighted mean")
check(abs(pooled_sample_stderr(ses, ns) - stem["acc_stderr,none"]) < 1e-12, "mmlu_stem stderr is lm-eval's pooled_sample_stderr")
check(res["higher_is_better"]["wikitext"]["word_perplexity"] is False, "higher_is_better for perplexity is false")

testlib.finish()
