#!/usr/bin/env python3
"""eval_vs_transformers.py — assay eval's task numbers against lm-evaluation-harness + Hugging Face transformers.

For each task, the same documents are scored twice:
  - by `assay eval MODEL --tasks T --limit N` (assay's engine, its prompts, its metrics), and
  - by lm-evaluation-harness itself: its task yaml (prompts, splits, metrics, filters) fed the bundled data
    (tests/py/lmeval_local.py), its HFLM model (`--model hf`: transformers AutoModelForCausalLM on the CPU, fp32
    compute from the checkpoint's bf16 weights), its evaluator — no assay code in that path.
Then per document: multiple choice — the acc/acc_norm verdicts and the per-choice log-likelihoods; gsm8k — the
generated text and the exact_match per filter; wikitext — each page's log-likelihood and the aggregate word/byte
perplexities and bits per byte. The acceptance criteria are the project's: accuracy within one sample of the
reference, perplexities within 0.1%.

  .venv/bin/python bench/eval_vs_transformers.py --model ../shared/models/house --limit 20 \\
      --md bench/results/eval_vs_transformers.md --json /tmp/evt.json
Exit code 0 when every task meets the criteria. Needs torch (pip install torch), transformers and lm-eval==0.4.13.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
import logging  # noqa: E402

logging.disable(logging.WARNING)


def run_assay(bin_, model, data, task, limit, fewshot, threads):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [bin_, "eval", model, "--tasks", task, "--data-dir", data, "--quiet", "-o", out]
        if limit:
            cmd += ["--limit", str(limit)]
        if fewshot is not None:
            cmd += ["--num-fewshot", str(fewshot)]
        if threads:
            cmd += ["--threads", str(threads)]
        t0 = time.time()
        subprocess.run(cmd, check=True, capture_output=True)
        r = json.load(open(out))
        r["_seconds"] = time.time() - t0
        r["_cmd"] = " ".join(cmd[:1] + ["eval"] + [c for c in cmd[2:] if c not in (out, "-o")])
        return r


def run_lm_eval(lm, task_obj, limit):
    from lm_eval.evaluator import evaluate
    from lm_eval.tasks import get_task_dict

    t0 = time.time()
    r = evaluate(lm=lm, task_dict=get_task_dict([task_obj]), limit=limit or None, bootstrap_iters=0, log_samples=True,
                 verbosity="ERROR")
    r["_seconds"] = time.time() - t0
    return r


def rel(a, b):
    return abs(a - b) / abs(b) if b else abs(a - b)


def compare_mc(name, ours, theirs):
    our_s = {s["doc_id"]: s for s in ours["samples"][name]}
    their_s = {s["doc_id"]: s for s in theirs["samples"][name]}
    keys = ["acc"] + (["acc_norm"] if not name.startswith("mmlu_") else [])
    row = {"task": name, "docs": len(their_s), "kind": "mc"}
    max_dll = 0.0
    for k in keys:
        diff = sum(1 for i, s in their_s.items() if int(round(s[k])) != int(round(our_s[i][k + ",none"])))
        row[k + "_mismatch"] = diff
        row[k + "_ours"] = ours["results"][name][k + ",none"]
        row[k + "_hf"] = theirs["results"][name][k + ",none"]
    for i, s in their_s.items():
        lls = [float(r[0]) for r in s["filtered_resps"]]
        for a, b in zip(lls, our_s[i]["loglikelihoods"]):
            max_dll = max(max_dll, abs(a - b))
    row["max_abs_dll"] = max_dll
    # the project's criterion: accuracy within one sample
    row["ok"] = all(row[k + "_mismatch"] <= 1 for k in keys) and len(our_s) == len(their_s)
    return row


def compare_gsm8k(ours, theirs):
    our_s = {s["doc_id"]: s for s in ours["samples"]["gsm8k"]}
    their = {}
    for s in theirs["samples"]["gsm8k"]:  # one record per filter
        their.setdefault(s["doc_id"], {})[s["filter"]] = s
    row = {"task": "gsm8k", "docs": len(their), "kind": "gen"}
    same_text = 0
    for f in ("strict-match", "flexible-extract"):
        key = "exact_match," + f
        row[f + "_ours"] = ours["results"]["gsm8k"][key]
        row[f + "_hf"] = theirs["results"]["gsm8k"][key]
        row[f + "_mismatch"] = sum(1 for i, d in their.items() if int(d[f]["exact_match"]) != int(our_s[i][key]))
    for i, d in their.items():
        resp = d["strict-match"]["resps"][0][0]
        same_text += resp == our_s[i]["resps"][0][0]
    row["same_text"] = same_text
    row["ok"] = row["strict-match_mismatch"] <= 1 and row["flexible-extract_mismatch"] <= 1
    return row


def compare_wikitext(ours, theirs):
    o, t = ours["results"]["wikitext"], theirs["results"]["wikitext"]
    row = {"task": "wikitext", "docs": len(theirs["samples"]["wikitext"]), "kind": "rolling"}
    worst = 0.0
    for k in ("word_perplexity", "byte_perplexity", "bits_per_byte"):
        row[k + "_ours"], row[k + "_hf"] = o[k + ",none"], t[k + ",none"]
        worst = max(worst, rel(o[k + ",none"], t[k + ",none"]))
    our_s = {s["doc_id"]: s for s in ours["samples"]["wikitext"]}
    dll = 0.0
    for s in theirs["samples"]["wikitext"]:
        ll_hf = s["word_perplexity"][0]  # (loglikelihood, words) as process_results returns it
        dll = max(dll, rel(our_s[s["doc_id"]]["loglikelihood"], ll_hf))
    row["max_rel_doc_ll"] = dll
    row["max_rel"] = worst
    row["ok"] = worst <= 1e-3
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "shared", "models", "house"))
    ap.add_argument("--data", default=None, help="task data root (default: MODEL/../../data)")
    ap.add_argument("--assay", default=os.path.join(HERE, "..", "build", "assay"))
    ap.add_argument("--limit", type=int, default=20, help="documents per multiple-choice task")
    ap.add_argument("--mmlu", default="abstract_algebra,anatomy,high_school_us_history,marketing",
                    help="mmlu subjects (5-shot)")
    ap.add_argument("--mmlu-limit", type=int, default=10)
    ap.add_argument("--gsm8k-limit", type=int, default=5)
    ap.add_argument("--wikitext-limit", type=int, default=4)
    ap.add_argument("--tasks", default="hellaswag,arc_challenge,piqa,mmlu,wikitext,gsm8k")
    ap.add_argument("--threads", type=int, default=1, help="assay's engine threads; torch gets the same")
    ap.add_argument("--batch-size", type=int, default=8, help="HFLM batch size")
    ap.add_argument("--md", help="write the comparison table here (markdown)")
    ap.add_argument("--json", help="write every number here")
    a = ap.parse_args()
    data = a.data or os.path.normpath(os.path.join(a.model, "..", "..", "data"))

    import torch
    import transformers
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    import lmeval_local

    torch.set_num_threads(max(1, a.threads))
    lm = HFLM(pretrained=a.model, device="cpu", dtype="float32", batch_size=a.batch_size)
    plan = []
    for t in a.tasks.split(","):
        if t in ("hellaswag", "arc_challenge", "piqa"):
            plan.append((t, t, a.limit, None))
        elif t == "mmlu":
            plan += [("mmlu_" + s, "mmlu_" + s, a.mmlu_limit, 5) for s in a.mmlu.split(",") if s]
        elif t == "wikitext":
            plan.append((t, t, a.wikitext_limit, None))
        elif t == "gsm8k":
            plan.append((t, t, a.gsm8k_limit, 5))
        else:
            raise SystemExit(f"unknown task {t}")
    rows = []
    for name, ours_name, limit, fewshot in plan:
        print(f"== {name} (limit {limit})", flush=True)
        ours = run_assay(a.assay, a.model, data, ours_name, limit, fewshot, a.threads)
        theirs = run_lm_eval(lm, lmeval_local.task(name, data, fewshot), limit)
        if name == "wikitext":
            row = compare_wikitext(ours, theirs)
        elif name == "gsm8k":
            row = compare_gsm8k(ours, theirs)
        else:
            row = compare_mc(name, ours, theirs)
        row["seconds_ours"], row["seconds_hf"], row["limit"] = ours["_seconds"], theirs["_seconds"], limit
        row["assay_cmd"] = ours["_cmd"]
        print(json.dumps(row), flush=True)
        rows.append(row)
        write(rows, a)  # after every task: a long run that is stopped keeps what it measured
    bad = [r["task"] for r in rows if not r["ok"]]
    print("all tasks within the criteria" if not bad else f"outside the criteria: {', '.join(bad)}")
    return 1 if bad else 0


def write(rows, a):
    import torch
    import transformers
    from importlib.metadata import version

    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "lm_eval": version("lm_eval")}
    if a.json:
        json.dump({"versions": versions, "rows": rows}, open(a.json, "w"), indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(table(rows, versions, a))


def table(rows, versions, a):
    out = [f"versions: torch {versions['torch']}, transformers {versions['transformers']}, lm_eval {versions['lm_eval']}\n\n",
           "| task | docs | metric | assay | transformers (lm-eval) | docs that differ | max abs Δ ll per choice / rel Δ | within criterion |\n",
           "|---|---|---|---|---|---|---|---|\n"]
    for r in rows:
        if r["kind"] == "mc":
            for k in ("acc", "acc_norm"):
                if k + "_ours" not in r:
                    continue
                out.append(f"| {r['task']} | {r['docs']} | {k} | {r[k + '_ours']:.4f} | {r[k + '_hf']:.4f} | "
                           f"{r[k + '_mismatch']} | {r['max_abs_dll']:.2e} | {'yes' if r['ok'] else 'NO'} |\n")
        elif r["kind"] == "gen":
            for f in ("strict-match", "flexible-extract"):
                out.append(f"| gsm8k | {r['docs']} | exact_match,{f} | {r[f + '_ours']:.4f} | {r[f + '_hf']:.4f} | "
                           f"{r[f + '_mismatch']} | same text {r['same_text']}/{r['docs']} | {'yes' if r['ok'] else 'NO'} |\n")
        else:
            for k in ("word_perplexity", "byte_perplexity", "bits_per_byte"):
                out.append(f"| wikitext | {r['docs']} | {k} | {r[k + '_ours']:.6g} | {r[k + '_hf']:.6g} | - | "
                           f"{rel(r[k + '_ours'], r[k + '_hf']):.2e} (docs max {r['max_rel_doc_ll']:.2e}) | "
                           f"{'yes' if r['ok'] else 'NO'} |\n")
    return "".join(out)


if __name__ == "__main__":
    sys.exit(main())
