#!/usr/bin/env python3
"""End-to-end GPU engine throughput: assay --device cuda against llama.cpp built with CUDA, same GPU, same GGUF files,
one run.

  python3 bench/gpu_engine_bench.py --assay BIN/assay --llama-bin LLAMA_BUILD/bin --out OUT MODEL.gguf [MODEL.gguf ...]

For each model:
  - batch 1: llama-bench pp512 / tg128 (all layers on the GPU, flash attention on) against `assay bench -b 1 -p 512
    -n 128` (its prefill tokens/s of the 512-token prompt and decode tokens/s of the 128 generated);
  - batch 32: llama-batched-bench (32 sequences, 128-token prompts, 128 generated: S_TG, the aggregate decode rate)
    against `assay bench -b 32 -p 128 -n 128`;
  - the same assay runs with --quantization fp8 (W8A8, per-token activations) where the model is bf16: there is no
    llama.cpp FP8, its Q8_0 figure is the guides' comparison.
Writes OUT/gpu_engine_bench.json and .md (tokens/s and assay / llama.cpp ratios) and prints the table.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=600):
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    log(f"$ {' '.join(cmd)}  ({time.time() - t:.1f} s, rc {p.returncode})")
    if p.returncode != 0:
        log(p.stderr[-3000:])
    return p


def assay_bench(a, model, batch, prompt, gen, extra=()):
    p = run([a.assay, "bench", model, "--device", "cuda", "-b", str(batch), "-p", str(prompt), "-n", str(gen), "-r", "3",
             "--json", "--max-num-batched-tokens", "2048"] + list(extra))
    if p.returncode != 0:
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])["bench"]["points"][0]


def llama_bench(a, model):
    env = dict(os.environ, LD_LIBRARY_PATH=a.llama_bin + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    p = run([os.path.join(a.llama_bin, "llama-bench"), "-m", model, "-ngl", "99", "-fa", "1", "-p", "512", "-n", "128",
             "-r", "3", "-o", "json"], env=env)
    out = {}
    if p.returncode == 0:
        for row in json.loads(p.stdout):
            if row.get("n_prompt") == 512 and row.get("n_gen") == 0:
                out["pp512"] = row["avg_ts"]
            if row.get("n_gen") == 128 and row.get("n_prompt") == 0:
                out["tg128"] = row["avg_ts"]
    p = run([os.path.join(a.llama_bin, "llama-batched-bench"), "-m", model, "-ngl", "99", "-fa", "on", "-c", "9000",
             "-b", "2048", "-ub", "512", "-npp", "128", "-ntg", "128", "-npl", "32", "--output-format", "jsonl"], env=env)
    if p.returncode == 0:
        for line in p.stdout.splitlines() + p.stderr.splitlines():
            line = line.strip()
            if line.startswith("{") and '"speed_tg"' in line:
                j = json.loads(line)
                if j["pl"] == 32:
                    out["b32_tg"] = j["speed_tg"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assay", required=True)
    ap.add_argument("--llama-bin", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-fp8", action="store_true")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip()
    res = {"gpu": gpu, "models": {}}
    for m in a.models:
        r = {}
        name = os.path.basename(m)
        if a.llama_bin:
            r["llama.cpp"] = llama_bench(a, m)
        p1 = assay_bench(a, m, 1, 512, 128)
        p32 = assay_bench(a, m, 32, 128, 128)
        r["assay"] = {"pp512": p1 and p1["prefill_tps"], "tg128": p1 and p1["decode_tps"], "b32_tg": p32 and p32["decode_tps"]}
        if not a.no_fp8:
            f1 = assay_bench(a, m, 1, 512, 128, ["-q", "fp8"])
            f32 = assay_bench(a, m, 32, 128, 128, ["-q", "fp8"])
            r["assay fp8"] = {"pp512": f1 and f1["prefill_tps"], "tg128": f1 and f1["decode_tps"],
                              "b32_tg": f32 and f32["decode_tps"]}
        res["models"][name] = r
        log(json.dumps(r, indent=1))
    os.makedirs(a.out, exist_ok=True)
    json.dump(res, open(os.path.join(a.out, "gpu_engine_bench.json"), "w"), indent=1)
    lines = [f"# GPU engine throughput on {gpu} (tokens/s; one run, medians of 3)", "",
             "| model | engine | pp512 | tg128 (batch 1) | decode, batch 32 | vs llama.cpp (pp / tg / b32) |",
             "|---|---|---|---|---|---|"]
    for name, r in res["models"].items():
        ref = r.get("llama.cpp", {})
        for eng, v in r.items():
            def f(x):
                return f"{x:.0f}" if x else "-"
            ratio = ""
            if eng != "llama.cpp" and ref:
                ratio = " / ".join(f"{v[k] / ref[k]:.2f}x" if v.get(k) and ref.get(k) else "-" for k in ("pp512", "tg128", "b32_tg"))
            lines.append(f"| {name} | {eng} | {f(v.get('pp512'))} | {f(v.get('tg128'))} | {f(v.get('b32_tg'))} | {ratio} |")
    open(os.path.join(a.out, "gpu_engine_bench.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
