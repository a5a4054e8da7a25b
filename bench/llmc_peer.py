"""llmc_peer.py — an independent INT4 peer for assay's int4-awq / int4-gptq: llm-compressor's own AWQModifier and
GPTQModifier (W4A16_ASYM: 4-bit asymmetric weights, groups of 128, lm_head left alone) run on the same model with
the same calibration windows assay's `quantize` uses, saved in compressed-tensors `pack-quantized` form (which
assay's engine loads natively), then measured with assay's CLI exactly as bench/quant_quality_cli.py measures our
own checkpoints (whole text, --score-all --ctx 512, KL divergence against the bf16 logits saved by --save-logits).

llm-compressor (with its own torch/transformers pins) lives in a separate virtual environment; this script runs
with any python3 and starts that environment's python for the quantization step only:

    python3 -m venv PEER && PEER/bin/pip install llmcompressor
    python3 bench/llmc_peer.py --peer-python PEER/bin/python --assay build/assay \
        --model $ASSAY_SHARED/models/house --calib $ASSAY_SHARED/data/calibration \
        --text $ASSAY_SHARED/models/house/heldout.txt --base W/bf16.logits --work W \
        --schemes awq,gptq --samples 128 --seq-len 512 --threads 2 --out bench/results/llmc_peer_house

--base is a bf16 logits file written by `assay perplexity MODEL -f TEXT --ctx 512 --score-all --save-logits FILE`
(made here when it does not exist). Calibration windows: the .txt files of --calib in name order joined by a blank
line (as src/quant/calib.c reads a directory), tokenized by `assay tokenize --ids` (so the bytes and ids are
assay's), cut into seq-len windows and spread evenly over the corpus (window c = floor(c * avail / samples),
assay_calib_text_spread). Not part of ctest: it needs the peer environment and takes minutes.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def calib_ids(a):
    names = sorted(f for f in os.listdir(a.calib) if f.endswith(".txt")) if os.path.isdir(a.calib) else None
    data = b""
    if names is None:
        with open(a.calib, "rb") as f:
            data = f.read()
    else:
        for n in names:
            with open(os.path.join(a.calib, n), "rb") as f:
                part = f.read()
            data = data + (b"\n\n" if data else b"") + part
    cat = os.path.join(a.work, "calib_concat.txt")
    with open(cat, "wb") as f:
        f.write(data)
    r = subprocess.run([a.assay, "tokenize", a.model, "-f", cat, "--ids"], capture_output=True, text=True, check=True)
    ids = [int(t) for t in r.stdout.split()]
    T, n = a.seq_len, a.samples
    avail = len(ids) // T
    if n >= avail:
        n = avail
        wins = list(range(avail))
    else:
        wins = [c * avail // n for c in range(n)]
    return [ids[w * T:(w + 1) * T] for w in wins], len(ids)


def worker(a):
    """runs inside the peer environment"""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    import llmcompressor
    from llmcompressor import oneshot

    torch.set_num_threads(a.threads)
    if not torch.cuda.is_available():
        # AWQModifier pins its cached batches before each grid search (a host-to-GPU copy speed-up); pinning needs
        # a CUDA driver, so on a CPU-only machine the cache stays in ordinary memory (same values)
        from llmcompressor.pipelines.cache import IntermediatesCache
        IntermediatesCache.pin_memory = lambda self, *args, **kwargs: None
    with open(a.ids) as f:
        chunks = json.load(f)
    ds = Dataset.from_dict({"input_ids": chunks, "attention_mask": [[1] * len(c) for c in chunks]})
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=a.dtype)
    if a.scheme == "awq":
        from llmcompressor.modifiers.awq import AWQModifier
        recipe = [AWQModifier(targets=["Linear"], scheme="W4A16_ASYM", ignore=["lm_head"])]
    elif a.scheme == "gptq":
        from llmcompressor.modifiers.quantization import GPTQModifier
        recipe = [GPTQModifier(targets=["Linear"], scheme="W4A16_ASYM", ignore=["lm_head"])]
    elif a.scheme == "rtn":
        from llmcompressor.modifiers.quantization import QuantizationModifier
        recipe = [QuantizationModifier(targets=["Linear"], scheme="W4A16_ASYM", ignore=["lm_head"])]
    else:
        raise SystemExit(f"unknown scheme {a.scheme}")
    t0 = time.time()
    oneshot(model=model, dataset=ds, recipe=recipe, max_seq_length=a.seq_len, num_calibration_samples=len(chunks),
            pipeline=a.pipeline or None)
    dt = time.time() - t0
    model.save_pretrained(a.out, save_compressed=True)
    from transformers import AutoTokenizer
    AutoTokenizer.from_pretrained(a.model).save_pretrained(a.out)
    import compressed_tensors
    with open(os.path.join(a.out, "llmc_peer.json"), "w") as f:
        json.dump({"llmcompressor": llmcompressor.__version__, "compressed_tensors": compressed_tensors.__version__,
                   "torch": torch.__version__, "recipe": str(recipe), "oneshot_s": dt, "threads": a.threads,
                   "dtype": a.dtype, "samples": len(chunks), "seq_len": a.seq_len}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--scheme", help=argparse.SUPPRESS)
    ap.add_argument("--peer-python", help="python of the virtual environment that has llmcompressor")
    ap.add_argument("--assay", default="build/assay")
    ap.add_argument("--model", required=True)
    ap.add_argument("--calib", help="calibration text: a file or a directory of .txt files")
    ap.add_argument("--text", help="evaluation text (heldout.txt)")
    ap.add_argument("--base", help="bf16 logits from assay perplexity --save-logits (made when missing)")
    ap.add_argument("--work", help="work directory")
    ap.add_argument("--out", help="results path without extension (.json and .md); in worker mode the checkpoint")
    ap.add_argument("--schemes", default="awq,gptq")
    ap.add_argument("--samples", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="auto", help="dtype the peer loads the model in (auto: the checkpoint's bf16)")
    ap.add_argument("--pipeline", default="", help="llm-compressor pipeline (default: its own choice, sequential)")
    ap.add_argument("--chunks", type=int, default=0, help="score only the first N windows (0: the whole text)")
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return 0
    os.makedirs(a.work, exist_ok=True)
    log = os.path.join(a.work, "llmc_peer.log")

    def run(cmd, env=None):
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        dt = time.time() - t0
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + f"\n# exit {r.returncode}, {dt:.1f} s\n{r.stderr[-4000:]}\n")
        if r.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
        return r, dt

    chunks, n_tok = calib_ids(a)
    ids_path = os.path.join(a.work, "calib_ids.json")
    with open(ids_path, "w") as f:
        json.dump(chunks, f)
    print(f"calibration: {len(chunks)} windows x {a.seq_len} tokens from {n_tok} tokens", flush=True)
    ppl = ["-f", a.text, "--ctx", "512", "--score-all", "--json", "-t", str(a.threads)]
    ppl += ["--chunks", str(a.chunks)] if a.chunks else []
    if not os.path.exists(a.base):
        run([a.assay, "perplexity", a.model] + ppl + ["--save-logits", a.base])
    rows = []
    if os.path.exists(a.out + ".json"):  # rows of other schemes from an earlier run stay
        with open(a.out + ".json") as f:
            rows = json.load(f)["rows"]
    for s in [x for x in a.schemes.split(",") if x]:
        out = os.path.join(a.work, "llmc-" + s)
        q = [a.peer_python, os.path.abspath(__file__), "--worker", "--scheme", s, "--ids", ids_path, "--model", a.model,
             "--out", out, "--seq-len", str(a.seq_len), "--threads", str(a.threads), "--dtype", a.dtype]
        q += ["--pipeline", a.pipeline] if a.pipeline else []
        _, tq = run(q, env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
        with open(os.path.join(out, "llmc_peer.json")) as f:
            info = json.load(f)
        p = [a.assay, "perplexity", out] + ppl + ["--kl-divergence-base", a.base]
        r, tp = run(p)
        j = json.loads(r.stdout)
        row = {"scheme": "llm-compressor " + s, "ppl": j["ppl"], "ppl_stderr": j["ppl_stderr"],
               "dppl_pct": 100 * (j["ppl_ratio"] - 1), "ppl_ratio_stderr": j["ppl_ratio_stderr"],
               "kld_mean": j["kld_mean"], "kld_p99": j["kld_p99"], "same_top_pct": 100 * j["same_top"],
               "tokens": j["tokens"], "quantize_s": tq, "oneshot_s": info["oneshot_s"], "perplexity_s": tp,
               "peer": info, "commands": [" ".join(q), " ".join(p)],
               "load_note": [ln for ln in r.stderr.splitlines() if ln.startswith(("loaded", "quantized"))]}
        rows = [r for r in rows if r["scheme"] != row["scheme"]] + [row]
        print(f"{row['scheme']}: ppl {row['ppl']:.4f} ({row['dppl_pct']:+.3f}%) kld {row['kld_mean']:.5f} "
              f"same-top {row['same_top_pct']:.2f}% oneshot {info['oneshot_s']:.0f} s", flush=True)
        with open(a.out + ".json", "w") as f:
            json.dump({"meta": {"model": a.model, "text": a.text, "calib": a.calib, "samples": len(chunks),
                                "seq_len": a.seq_len, "base": a.base, "chunks": a.chunks or "all"}, "rows": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
