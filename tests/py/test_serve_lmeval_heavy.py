"""test_serve_lmeval_heavy.py — lm-evaluation-harness's `local-completions` model pointed at `assay serve` (the house
model) gives the same per-sample results as `assay eval` in-process: hellaswag, arc_challenge and piqa, 0-shot,
--limit 50 each. For every document the loglikelihood of every choice agrees within 1e-4, is_greedy and the acc /
acc_norm verdicts are equal, and so are the tasks' scores.

lm-eval is run as a user runs it, through its command line:
    lm_eval --model local-completions --model_args model=house,base_url=http://127.0.0.1:PORT/v1/completions,
            tokenizer_backend=huggingface,tokenizer=<the house model's directory>,num_concurrent=4
            --tasks ... --include_path DIR --limit 50 --log_samples --output_path OUT
(4 requests in flight, so the server batches them). lm-eval normally downloads the datasets from the Hugging Face
hub, which a test cannot reach: each task here is lm-eval's own yaml (`include:` of the installed file, so the
prompts, targets and metrics are lm-eval's) with its dataset replaced by a local JSON-lines file that the test
writes from the bundled data ($ASSAY_SHARED/data) in the hub dataset's field layout (lmeval_local.py; hellaswag's
file is already preprocessed, so its process_docs is dropped). test_eval_prompts.py checks that those tasks give
exactly assay eval's prompts. The API model needs lm-eval's [api] extra (scripts/requirements-test.txt)."""
import glob
import json
import math
import os
import subprocess
import sys

os.environ["HF_DATASETS_OFFLINE"] = "1"
from lmeval_local import TASKS, arc_rows, hellaswag_docs, piqa_rows  # noqa: E402
import testlib  # noqa: E402
from testlib import check, finish, scratch_dir  # noqa: E402
from servelib import BIN, MODEL, NAME, start, stop  # noqa: E402

DATA = os.path.join(os.environ["ASSAY_SHARED"], "data")
LIMIT = 50
tmp = scratch_dir("serve-lmeval-")

# the bundled data as the hub's field layout, and lm-eval's task yamls pointed at it
rows = {"arc_challenge": arc_rows(os.path.join(DATA, "arc_challenge/ARC-Challenge-Test.4opt_subset.jsonl")),
        "piqa": piqa_rows(DATA), "hellaswag": hellaswag_docs(DATA)}
for name, rs in rows.items():
    with open(os.path.join(tmp, f"{name}.jsonl"), "w", encoding="utf-8") as f:
        for r in rs:
            f.write(json.dumps(r) + "\n")
yamls = {
    "hellaswag": ("hellaswag/hellaswag.yaml", "validation", "process_docs: null\n"),
    "arc_challenge": ("arc/arc_challenge.yaml", "test", "validation_split: null\n"),
    "piqa": ("piqa/piqa.yaml", "validation", ""),
}
for name, (inc, split, extra) in yamls.items():
    with open(os.path.join(tmp, f"{name}_local.yaml"), "w") as f:
        f.write(f"include: {os.path.join(TASKS, inc)}\ntask: {name}_local\ntag: []\ndataset_path: json\n"
                f"dataset_name: null\ndataset_kwargs:\n  data_files:\n    {split}: {os.path.join(tmp, name + '.jsonl')}\n"
                f"training_split: null\n{extra}")

# assay eval in-process: the reference
ref_path = os.path.join(tmp, "assay_eval.json")
p = subprocess.run([BIN, "eval", MODEL, "--tasks", ",".join(rows), "--limit", str(LIMIT), "--data-dir", DATA,
                    "--quiet", "--threads", "2", "-o", ref_path], capture_output=True, text=True)
check(p.returncode == 0, f"assay eval exit {p.returncode}: {p.stderr[-1500:]}")
ref = json.load(open(ref_path)) if p.returncode == 0 else {"samples": {}, "results": {}}

proc, base = start(["--max-model-len", "2048"])
try:
    if base is None:
        raise SystemExit
    out = os.path.join(tmp, "lm_eval_out")
    env = dict(os.environ, TQDM_DISABLE="1", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
           f"model={NAME},base_url={base}/v1/completions,tokenizer_backend=huggingface,tokenizer={MODEL},"
           f"num_concurrent=4,max_retries=1", "--tasks", ",".join(f"{t}_local" for t in rows), "--include_path", tmp,
           "--limit", str(LIMIT), "--log_samples", "--output_path", out]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    check(p.returncode == 0, f"lm_eval exit {p.returncode}: {p.stdout[-1500:]}\n{p.stderr[-3000:]}")
    for task in rows:
        files = glob.glob(os.path.join(out, "*", f"samples_{task}_local_*.jsonl"))
        if not check(len(files) == 1, f"{task}: lm-eval's samples file: {files}"):
            continue
        theirs = {s["doc_id"]: s for s in map(json.loads, open(files[0], encoding="utf-8"))}
        ours = {s["doc_id"]: s for s in ref["samples"].get(task, [])}
        check(sorted(theirs) == sorted(ours) == list(range(LIMIT)), f"{task}: the same {LIMIT} documents "
              f"({len(theirs)} from lm-eval, {len(ours)} from assay eval)")
        worst, bad = 0.0, []
        for d in sorted(set(theirs) & set(ours)):
            t, o = theirs[d], ours[d]
            lls = [float(x[0]) for x in t["filtered_resps"]]
            greedy = [x[1] in (True, "True") for x in t["filtered_resps"]]
            if len(lls) != len(o["loglikelihoods"]):
                bad.append((d, "choices", len(lls), len(o["loglikelihoods"])))
                continue
            diff = max(abs(a - b) for a, b in zip(lls, o["loglikelihoods"]))
            worst = max(worst, diff)
            if not diff <= 1e-4 or greedy != o["is_greedy"] or int(t["target"]) != o["target"] or \
                    t["acc"] != o["acc,none"] or t["acc_norm"] != o["acc_norm,none"]:
                bad.append((d, lls, o["loglikelihoods"], greedy, o["is_greedy"], t["acc"], o["acc,none"]))
        check(not bad, f"{task}: {len(bad)} documents differ, e.g. {bad[:2]}")
        agg = json.load(open(glob.glob(os.path.join(out, "*", "results_*.json"))[0]))["results"].get(f"{task}_local", {})
        mine = ref["results"].get(task, {})
        same = all(math.isclose(agg.get(m, -1), mine.get(m, -2), abs_tol=1e-12) for m in ("acc,none", "acc_norm,none"))
        check(same, f"{task}: scores {agg} vs assay eval's {mine}")
        print(f"{task}: acc {agg.get('acc,none')}, acc_norm {agg.get('acc_norm,none')} through the server and in-process; "
              f"largest loglikelihood difference {worst:.2e}")
finally:
    stop(proc, show_log=testlib.failures > 0)
finish("lm-eval local-completions vs assay eval")
