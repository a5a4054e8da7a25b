#!/usr/bin/env python3
"""The house model on one GPU: assay --device cuda against Hugging Face transformers (bf16, same GPU, same run).

  python3 bench/gpu_house_peers.py --model HOUSE_DIR --assay BIN/assay --engine-json OUT/engine_cuda.json --out OUT

Correctness (must-show of the GPU engine):
  - perplexity on heldout.txt, context 512, non-overlapping windows, every token after a window's first scored
    (the house README's convention): assay bf16 on the GPU within 0.05% of transformers bf16 on the GPU, and within
    0.3% of assay's CPU f32 figure (44.6262);
  - greedy 32 tokens of the reference prompt: assay (test_engine_cuda's ids) identical to transformers bf16.
Throughput (same GPU, same run): decode tokens/s at batch 1 and 32 (128 tokens after a 16-token prompt) and
prefill tokens/s of a 512-token prompt; transformers with its static KV cache (and torch.compile when it works),
assay through `assay bench`.
Writes OUT/house_gpu.json and OUT/house_gpu.md; exits 1 when a correctness check fails.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

# What each configuration gives on the CPU engine (the same files and flags without --device cuda), and how far the GPU
# may be from it: bf16 compute against the CPU's f32 within 0.3%, the quantized configurations within 0.1%.
CPU_REF = {
    "bf16": (44.6262, 0.003),
    # assay perplexity house -f heldout.txt --score-all -q fp8 --kv-cache-dtype fp8 --calculate-kv-scales (CPU, 2 threads)
    "fp8": (44.678521928453165, 0.001),
}
PPL_CONFIGS = [
    ("bf16", []),
    ("fp8", ["-q", "fp8", "--kv-cache-dtype", "fp8", "--calculate-kv-scales"]),
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def transformers_ppl(model, ids, ctx, torch):
    nll, n = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(ids), ctx):
            w = ids[s:s + ctx]
            if len(w) < 2:
                continue
            x = torch.tensor([w], device="cuda")
            lg = model(x).logits[0].float()
            lp = torch.log_softmax(lg[:-1], dim=-1)
            tgt = x[0, 1:]
            nll -= lp.gather(1, tgt[:, None]).sum().item()
            n += len(w) - 1
    return math.exp(nll / n), n


def timed_generate(model, torch, batch, prompt_len, gen, static):
    x = torch.randint(10, 8000, (batch, prompt_len), device="cuda")
    kw = dict(do_sample=False, min_new_tokens=gen, max_new_tokens=gen, pad_token_id=0)
    if static:
        kw["cache_implementation"] = "static"
    model.generate(x, **kw)  # warm-up (and compile)
    torch.cuda.synchronize()
    t = time.perf_counter()
    model.generate(x, **dict(kw, min_new_tokens=1, max_new_tokens=1))
    torch.cuda.synchronize()
    t_prefill = time.perf_counter() - t
    reps = []
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        model.generate(x, **kw)
        torch.cuda.synchronize()
        reps.append(time.perf_counter() - t)
    reps.sort()
    dt = max(reps[1] - t_prefill, 1e-9)
    return batch * (gen - 1) / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--assay", required=True)
    ap.add_argument("--engine-json", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-speed", action="store_true")
    a = ap.parse_args()
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    import transformers
    res["transformers"] = transformers.__version__
    fails = []

    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    text = open(os.path.join(a.model, "heldout.txt"), encoding="utf-8").read()
    ids = tok.encode(text, add_special_tokens=False).ids
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    t = time.perf_counter()
    ppl_tf, n_tf = transformers_ppl(model, ids, 512, torch)
    res["transformers_bf16_ppl"] = ppl_tf
    res["scored_tokens"] = n_tf
    log(f"transformers bf16 ppl {ppl_tf:.4f} over {n_tf} tokens ({time.perf_counter() - t:.1f} s)")

    for name, flags in PPL_CONFIGS:
        cmd = [a.assay, "perplexity", a.model, "-f", os.path.join(a.model, "heldout.txt"), "--ctx", "512",
               "--score-all", "--device", "cuda", "--json"] + flags
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log(p.stderr[-3000:])
            fails.append(f"assay perplexity --device cuda {' '.join(flags)} failed")
            continue
        aj = json.loads(p.stdout.strip().splitlines()[-1])
        res[f"assay_cuda_ppl_{name}"] = aj["ppl"]
        res[f"assay_cuda_ppl_{name}_seconds"] = aj.get("seconds")
        cpu = CPU_REF.get(name)
        if name == "bf16":
            d_tf = abs(aj["ppl"] / ppl_tf - 1)
            res["ppl_rel_diff_vs_transformers_bf16"] = d_tf
            log(f"assay cuda bf16 ppl {aj['ppl']:.4f}: {100 * d_tf:.4f}% from transformers bf16")
            if d_tf > 0.0005:
                fails.append(f"ppl {aj['ppl']:.4f} is {100 * d_tf:.3f}% from transformers bf16 {ppl_tf:.4f} (> 0.05%)")
        d_cpu = abs(aj["ppl"] / cpu[0] - 1)
        res[f"ppl_{name}_rel_diff_vs_assay_cpu"] = d_cpu
        log(f"assay cuda {name} ppl {aj['ppl']:.4f}: {100 * d_cpu:.4f}% from the CPU engine's {cpu[0]} (limit {100 * cpu[1]}%)")
        if d_cpu > cpu[1]:
            fails.append(f"{name} ppl {aj['ppl']:.4f} is {100 * d_cpu:.3f}% from the CPU engine's {cpu[0]} (> {100 * cpu[1]}%)")

    ref = json.load(open(os.path.join(a.model, "reference.json")))
    x = torch.tensor([ref["prompt_ids"]], device="cuda")
    with torch.no_grad():
        g = model.generate(x, do_sample=False, max_new_tokens=32, min_new_tokens=32, pad_token_id=0)
    tf_greedy = g[0, x.shape[1]:].tolist()
    res["transformers_bf16_greedy"] = tf_greedy
    try:
        ej = json.load(open(a.engine_json))
        res["assay_cuda_greedy"] = ej["greedy_ids"]
        same = 0
        while same < 32 and ej["greedy_ids"][same] == tf_greedy[same]:
            same += 1
        res["greedy_same_prefix"] = same
        log(f"greedy: {same} of 32 tokens identical to transformers bf16")
        if same < 32:
            fails.append(f"greedy 32 tokens: only the first {same} equal transformers bf16")
    except Exception as ex:  # the engine test did not run
        fails.append(f"no engine test output ({ex})")

    if not a.no_speed:
        speed = {}
        for static in (True,):
            for b in (1, 32):
                try:
                    speed[f"transformers_decode_b{b}"] = timed_generate(model, torch, b, 16, 128, static)
                except Exception as ex:
                    log(f"transformers b{b}: {ex}")
        with torch.no_grad():
            x = torch.randint(10, 8000, (1, 512), device="cuda")
            model(x)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(10):
                model(x)
            torch.cuda.synchronize()
            speed["transformers_prefill_512"] = 5120 / (time.perf_counter() - t)
        for graphs in ("1", "0"):
            for b in (1, 32):
                p = subprocess.run([a.assay, "bench", a.model, "--device", "cuda", "-b", str(b), "-p", "16", "-n", "128",
                                    "-r", "3", "--json"], capture_output=True, text=True,
                                   env=dict(os.environ, ASSAY_CUDA_GRAPHS=graphs))
                if p.returncode == 0:
                    pt = json.loads(p.stdout.strip().splitlines()[-1])["bench"]["points"][0]
                    speed[f"assay_decode_b{b}" + ("" if graphs == "1" else "_no_graphs")] = pt["decode_tps"]
                else:
                    log(p.stderr[-2000:])
        p = subprocess.run([a.assay, "bench", a.model, "--device", "cuda", "-b", "1", "-p", "512", "-n", "1", "-r", "5",
                            "--json"], capture_output=True, text=True)
        if p.returncode == 0:
            speed["assay_prefill_512"] = json.loads(p.stdout.strip().splitlines()[-1])["bench"]["points"][0]["prefill_tps"]
        res["speed"] = speed
        log(json.dumps(speed, indent=1))

    res["failures"] = fails
    os.makedirs(a.out, exist_ok=True)
    json.dump(res, open(os.path.join(a.out, "house_gpu.json"), "w"), indent=1)
    with open(os.path.join(a.out, "house_gpu.md"), "w") as f:
        f.write(f"# House model on {res['gpu']}: assay --device cuda vs transformers {res['transformers']} bf16\n\n")
        f.write("| check | assay | transformers bf16 | difference |\n|---|---|---|---|\n")
        if "assay_cuda_ppl_bf16" in res:
            f.write(f"| heldout ppl, bf16 (ctx 512, score-all) | {res['assay_cuda_ppl_bf16']:.4f} | {ppl_tf:.4f} | "
                    f"{100 * res['ppl_rel_diff_vs_transformers_bf16']:.4f}% |\n")
        for name, flags in PPL_CONFIGS:
            if f"assay_cuda_ppl_{name}" in res:
                f.write(f"| heldout ppl {name} ({' '.join(flags) or 'bf16'}) vs the CPU engine | "
                        f"{res[f'assay_cuda_ppl_{name}']:.4f} | CPU {CPU_REF[name][0]} | "
                        f"{100 * res[f'ppl_{name}_rel_diff_vs_assay_cpu']:.4f}% |\n")
        if "greedy_same_prefix" in res:
            f.write(f"| greedy 32 tokens | | | {res['greedy_same_prefix']} of 32 identical |\n")
        if "speed" in res:
            s = res["speed"]
            f.write("\n| tokens/s | assay | transformers | ratio |\n|---|---|---|---|\n")
            for k in ("decode_b1", "decode_b32", "prefill_512"):
                av, tv = s.get("assay_" + k), s.get("transformers_" + k)
                if av and tv:
                    f.write(f"| {k} | {av:.0f} | {tv:.0f} | {av / tv:.2f}x |\n")
        f.write("\nfailures: " + ("; ".join(fails) if fails else "none") + "\n")
    for x in fails:
        log("FAIL", x)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
