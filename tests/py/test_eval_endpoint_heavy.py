"""test_eval_endpoint_heavy.py — `assay eval --base-url` against `assay serve` on the house model gives the same
per-sample records as `assay eval` in-process: hellaswag, arc_challenge and piqa (50 documents each: every
continuation's log-likelihood and is_greedy flag, bit for bit), gsm8k (5 documents, 48 generated tokens: the same
responses) and heldout (4 windows of token ids). Token-id prompts with 4 documents in flight, and text prompts
(the server tokenizes, the context is counted by a prompt-only request) on piqa. Then `assay decide
--baseline-url --candidate-url` on the running server: the reports are written and the exit code is the verdict's.
The server is stopped with SIGTERM at the end, whatever happened."""
import json
import os
import subprocess
import sys
import time

import servelib
from testlib import check, finish, scratch_dir

BIN = servelib.BIN
MODEL = servelib.MODEL
MC, GSM, GEN = 50, 5, 48
tmp = scratch_dir("assay-endpoint-")


def run_eval(args, out):
    t0 = time.time()
    p = subprocess.run([BIN, "eval", *args, "-o", out, "--quiet", "--force"], capture_output=True, text=True)
    return p, time.time() - t0


def samples_equal(a, b, label):
    ra, rb = json.load(open(a)), json.load(open(b))
    for task, sa in ra["samples"].items():
        sb = rb["samples"].get(task)
        if not check(sb is not None and len(sa) == len(sb) and len(sa) > 0, f"{label}: {task} has {len(sa)} records both ways"):
            continue
        diff = [(x, y) for x, y in zip(sa, sb) if x != y]
        check(not diff, f"{label}: {task}: {len(diff)} records differ, the first: {diff[:1]}")
        check(ra["results"][task] == rb["results"][task], f"{label}: {task} metrics {ra['results'][task]} vs {rb['results'][task]}")
    # the same shape: the same top-level keys and the same keys in every record
    check(set(ra) == set(rb), f"{label}: top-level keys {sorted(set(ra) ^ set(rb))} differ")
    for task in ra["samples"]:
        ka = {k for s in ra["samples"][task] for k in s}
        kb = {k for s in rb["samples"].get(task, []) for k in s}
        check(ka == kb, f"{label}: {task} record keys {ka} vs {kb}")
    return rb


proc, base = servelib.start(("--max-model-len", "2048"))
try:
    if base:
        mc = ["--tasks", "hellaswag,arc_challenge,piqa", "--limit", str(MC)]
        gen = ["--tasks", "gsm8k", "--limit", str(GSM), "--max-gen-toks", str(GEN)]
        held = ["--tasks", "heldout", "--limit", "4"]
        timings = {}
        for name, args in (("mc", mc), ("gsm8k", gen), ("heldout", held)):
            local, t_local = run_eval([MODEL, "--threads", "1", *args], os.path.join(tmp, f"{name}-local.json"))
            remote, t_remote = run_eval(["--base-url", base + "/v1", "--num-concurrent", "4", *args],
                                        os.path.join(tmp, f"{name}-endpoint.json"))
            timings[name] = (t_local, t_remote)
            check(local.returncode == 0, f"{name} in-process: exit {local.returncode}: {local.stderr[-800:]}")
            check(remote.returncode == 0, f"{name} endpoint: exit {remote.returncode}: {remote.stderr[-800:]}")
            if local.returncode == 0 and remote.returncode == 0:
                r = samples_equal(os.path.join(tmp, f"{name}-local.json"), os.path.join(tmp, f"{name}-endpoint.json"), name)
                check("base_url=" in r["config"]["model_args"] and "tokenized_requests=True" in r["config"]["model_args"],
                      f"{name}: model_args {r['config']['model_args']}")
                check("token-id prompts via /tokenize, 4 in flight" in remote.stderr, f"{name}: {remote.stderr[:300]}")
        # text prompts: the server's tokenizer draws the context/continuation boundary, with the same result
        textp, t_text = run_eval(["--base-url", base, "--text-prompts", "--tasks", "piqa", "--limit", "20"],
                                 os.path.join(tmp, "piqa-text.json"))
        check(textp.returncode == 0 and "text prompts" in textp.stderr, f"text prompts: exit {textp.returncode}: {textp.stderr[-500:]}")
        if textp.returncode == 0:
            ra = json.load(open(os.path.join(tmp, "mc-local.json")))["samples"]["piqa"][:20]
            rb = json.load(open(os.path.join(tmp, "piqa-text.json")))["samples"]["piqa"]
            check(ra == rb, "text prompts: piqa's 20 records equal the in-process ones")
        # the staging workflow against two servers (the same one twice here): reports, and the verdict's exit code
        t0 = time.time()
        out = os.path.join(tmp, "decide")
        p = subprocess.run([BIN, "decide", "--baseline-url", base, "--candidate-url", base + "/v1", "--tasks", "piqa",
                            "--limit", "10", "-o", out, "--quiet"], capture_output=True, text=True)
        t_decide = time.time() - t0
        verdict = next((l for l in p.stdout.splitlines() if l.startswith("Verdict: ")), "")
        codes = {"ship": 0, "ship with monitoring": 3, "investigate": 4, "inconclusive": 5}
        name = verdict[len("Verdict: "):].split(" —")[0]
        check(name in codes and p.returncode == codes[name], f"decide: exit {p.returncode} for '{verdict}'\n{p.stderr[-600:]}")
        check(all(os.path.exists(os.path.join(out, f)) for f in ("baseline.json", "candidate.json", "report.md", "report.html")),
              "decide wrote baseline.json, candidate.json, report.md, report.html")
        check("Smoke run: --limit 10" in p.stdout, "decide: a --limit run says it is a smoke run")
        for k, (a, b) in timings.items():
            print(f"{k}: in-process {a:.1f} s, endpoint {b:.1f} s")
        print(f"piqa text prompts {t_text:.1f} s, decide {t_decide:.1f} s")
finally:
    servelib.stop(proc)
finish("eval through an endpoint")
