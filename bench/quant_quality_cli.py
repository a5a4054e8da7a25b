"""quant_quality_cli.py — weight quantization quality on one model, measured through the CLI exactly as a user
(or the maintainers' check) runs it: `assay quantize` writes each scheme's checkpoint, `assay perplexity` runs it
natively (compressed-tensors fp8 / int8, GPTQ, AWQ and GGUF all through the engine's own loaders) over the whole
text with --score-all --ctx 512, and compares every scored position's distribution with the bf16 model's saved
log-probabilities (--save-logits / --kl-divergence-base).

    python3 bench/quant_quality_cli.py --assay build/assay --model $ASSAY_SHARED/models/house \
        --text $ASSAY_SHARED/models/house/heldout.txt --work /tmp/qq \
        --out bench/results/quant_quality_house [--calib DIR] [--calib-samples 32] [--jobs 4] [--threads 4]

Writes OUT.json (every number, the exact commands, timings) and OUT.md (the table). Standard library only.
Columns: bits per weight = bytes of the written weight files x 8 / parameters of the source (every tensor counts:
the bf16 embedding and lm_head dominate a small model); PPL and its change against bf16; mean KL divergence
(bf16 || scheme) and same-top-token % over every scored position; seconds `assay quantize` took (wall).
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import struct
import subprocess
import sys
import threading
import time

SCHEMES = ["fp8", "fp8-dynamic", "fp8-block", "w8a8-int8", "int4-rtn", "int4-gptq", "int4-awq", "q8_0", "q4_k_m"]
CALIBRATED = {"fp8", "fp8-e5m2", "w8a8-int8", "int4-gptq", "int4-awq"}


def n_params(model_dir):
    n = 0
    for f in glob.glob(os.path.join(model_dir, "*.safetensors")):
        with open(f, "rb") as fh:
            (hl,) = struct.unpack("<Q", fh.read(8))
            for k, v in json.loads(fh.read(hl)).items():
                if k != "__metadata__":
                    c = 1
                    for d in v["shape"]:
                        c *= d
                    n += c
    return n


def weight_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.safetensors")))


def run(cmd, log):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.time() - t0
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + f"\n# exit {r.returncode}, {dt:.1f} s\n{r.stderr}\n")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-1500:]}")
    return r, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assay", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True, help="output path without extension (.json and .md are written)")
    ap.add_argument("--calib", default=None, help="calibration text (default: the CLI's, $ASSAY_SHARED/data/calibration)")
    ap.add_argument("--calib-samples", type=int, default=32)
    ap.add_argument("--calib-seq-len", type=int, default=512)
    ap.add_argument("--jobs", type=int, default=1, help="schemes measured at once")
    ap.add_argument("--threads", type=int, default=2, help="threads per assay process")
    ap.add_argument("--base-threads", type=int, default=0, help="threads of the bf16 baseline run (default --threads)")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=0, help="score only the first N windows (0: the whole text)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    log = os.path.join(a.work, "commands.log")
    base = os.path.join(a.work, "bf16.logits")
    ppl_args = ["-f", a.text, "--ctx", str(a.ctx), "--score-all", "--json"] + (["--chunks", str(a.chunks)] if a.chunks else [])
    t_all = time.time()
    params = n_params(a.model)
    rows = []
    base_done = threading.Event()

    def baseline():
        bt = str(a.base_threads or a.threads)
        cmd = [a.assay, "perplexity", a.model] + ppl_args + ["-t", bt, "--save-logits", base]
        r, dt = run(cmd, log)
        b = json.loads(r.stdout)
        print(f"bf16 ppl {b['ppl']:.4f} over {b['tokens']} tokens ({dt:.0f} s)", flush=True)
        return {"scheme": "bf16", "bpw": 8 * weight_bytes(a.model) / params, "mb": weight_bytes(a.model) / 1e6,
                "ppl": b["ppl"], "ppl_stderr": b["ppl_stderr"], "dppl_pct": 0.0, "kld_mean": 0.0, "same_top_pct": 100.0,
                "tokens": b["tokens"], "quantize_s": 0.0, "perplexity_s": dt, "commands": [" ".join(cmd)]}

    def one(s):
        out = os.path.join(a.work, s + (".gguf" if s.startswith("q") else ""))
        q = [a.assay, "quantize", a.model, "-o", out, "--scheme", s, "-t", str(a.threads), "--force"]
        if s in CALIBRATED:
            q += ["--calib-samples", str(a.calib_samples), "--calib-seq-len", str(a.calib_seq_len)]
            if a.calib:
                q += ["--calib", a.calib]
        _, tq = run(q, log)
        base_done.wait()  # quantizing overlaps the baseline run; scoring needs its logits
        p = [a.assay, "perplexity", out] + ppl_args + ["-t", str(a.threads), "--kl-divergence-base", base]
        r, tp = run(p, log)
        j = json.loads(r.stdout)
        wb = weight_bytes(out)
        return {"scheme": s, "bpw": 8 * wb / params, "mb": wb / 1e6, "ppl": j["ppl"], "ppl_stderr": j["ppl_stderr"],
                "dppl_pct": 100 * (j["ppl_ratio"] - 1), "ppl_ratio_stderr": j["ppl_ratio_stderr"],
                "kld_mean": j["kld_mean"], "kld_stderr": j["kld_stderr"], "kld_p99": j["kld_p99"],
                "same_top_pct": 100 * j["same_top"], "same_top_stderr_pct": 100 * j["same_top_stderr"],
                "tokens": j["tokens"], "quantize_s": tq, "perplexity_s": tp, "commands": [" ".join(q), " ".join(p)],
                "load_note": [ln for ln in r.stderr.splitlines() if ln.startswith(("loaded", "quantized"))]}

    schemes = [s for s in a.schemes.split(",") if s]
    with cf.ThreadPoolExecutor(a.jobs + 1) as ex:
        bfut = ex.submit(baseline)
        futs = {ex.submit(one, s): s for s in schemes}
        try:
            rows.append(bfut.result())
        finally:
            base_done.set()
        write(a, rows, schemes, params, t_all)
        for f in cf.as_completed(futs):
            try:
                row = f.result()
                rows.append(row)
                print(f"{row['scheme']:12s} ppl {row['ppl']:.4f} ({row['dppl_pct']:+.3f}%) kld {row['kld_mean']:.5f} "
                      f"same-top {row['same_top_pct']:.2f}% quantize {row['quantize_s']:.0f} s", flush=True)
            except Exception as e:  # keep the others
                rows.append({"scheme": futs[f], "error": str(e)})
                print(f"{futs[f]}: {e}", flush=True)
            write(a, rows, schemes, params, t_all)  # after each scheme, so a cut-off run keeps what finished
    return 0 if all("error" not in r for r in rows) else 1


def write(a, rows, schemes, params, t_all):
    rows = list(rows)
    order = {s: i for i, s in enumerate(["bf16"] + schemes)}
    rows.sort(key=lambda r: order[r["scheme"]])
    meta = {"model": a.model, "text": a.text, "ctx": a.ctx, "convention": "score-all", "kv_cache_dtype": "f16 (default)",
            "params": params, "calib_samples": a.calib_samples, "calib_seq_len": a.calib_seq_len,
            "calib": a.calib or "CLI default ($ASSAY_SHARED/data/calibration)", "threads_per_process": a.threads,
            "jobs": a.jobs, "cpus": os.cpu_count(), "chunks": a.chunks or "all", "total_s": time.time() - t_all}
    with open(a.out + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write("| scheme | bpw | MB | PPL | dPPL % | mean KLD | same top % | quantize s |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "error" in r:
                f.write(f"| {r['scheme']} | failed: {r['error'][:120]} |||||||\n")
                continue
            f.write(f"| {r['scheme']} | {r['bpw']:.3f} | {r['mb']:.2f} | {r['ppl']:.4f} | {r['dppl_pct']:+.3f} | "
                    f"{r['kld_mean']:.5f} | {r['same_top_pct']:.2f} | {r['quantize_s']:.1f} |\n")


if __name__ == "__main__":
    sys.exit(main())
