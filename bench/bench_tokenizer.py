#!/usr/bin/env python3
"""bench_tokenizer.py — tokenizer throughput on the WikiText-2 test text (1.29 MB), one core, assay next to
the Hugging Face `tokenizers` package measured in the same run on the same vocabulary.

  .venv/bin/python bench/bench_tokenizer.py [--build build] [--repeat 5] [--gguf]

Reported per tokenizer: encode throughput in MB/s from thread CPU time (stable on a loaded machine) and from
wall time, best of --repeat runs; the token counts must agree. assay's figure is the encode call alone
(`assay tokenize --time`, no loading or printing); HF's is Tokenizer.encode on the same text in-process, and
encode_batch over its lines (HF's usual path; line boundaries change a few tokens, so that count differs). The end-to-end command (load + encode + print) is timed with
hyperfine when it is installed. --gguf adds SmolLM2 (byte-level BPE) and Gemma 3 (SentencePiece) from
.models/, with HF tokenizers built from the same GGUF by transformers' GGUF builders (slow to build for Gemma).
Ceiling: a single pass of the text through a byte-level regex pre-tokenizer is what both implementations
must at least do; the HF figure is the practical peer."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("ASSAY_SHARED", os.path.join(ROOT, "..", "shared"))
WIKI = os.path.join(SHARED, "data", "wikitext2_raw", "wiki.test.raw")

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--gguf", action="store_true")
args = ap.parse_args()
BIN = os.path.join(args.build, "assay")
data = open(WIKI, "rb").read()
text = data.decode("utf-8")
mb = len(data) / 1e6


def assay_run(model):
    best_cpu = best_wall = 1e9
    n = None
    for _ in range(args.repeat):
        r = subprocess.run([BIN, "tokenize", model, "-f", WIKI, "--ids", "--time"], capture_output=True, text=True, check=True)
        m = re.search(r"-> (\d+) tokens in ([\d.]+) ms wall .*, ([\d.]+) ms cpu", r.stderr)
        n = int(m.group(1))
        best_wall = min(best_wall, float(m.group(2)) / 1e3)
        best_cpu = min(best_cpu, float(m.group(3)) / 1e3)
    return n, best_cpu, best_wall


def hf_run(tok, lines=False):
    """Process CPU time (rayon may run work on its own threads; RAYON_NUM_THREADS=1 keeps it to one core)."""
    best_cpu = best_wall = 1e9
    n = None
    chunks = text.splitlines(keepends=True)
    for _ in range(args.repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        if lines:
            n = sum(len(e.ids) for e in tok.encode_batch(chunks, add_special_tokens=False))
        else:
            n = len(tok.encode(text, add_special_tokens=False).ids)
        c1, w1 = time.process_time(), time.perf_counter()
        best_cpu, best_wall = min(best_cpu, c1 - c0), min(best_wall, w1 - w0)
    return n, best_cpu, best_wall


def row(name, impl, n, cpu, wall):
    print(f"{name:34s} {impl:22s} {n:8d} tokens  {mb / cpu:8.2f} MB/s cpu  {mb / wall:8.2f} MB/s wall  ({cpu * 1e3:7.1f} ms cpu)")


os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

print(f"WikiText-2 test: {len(data)} bytes; best of {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
cases = [("house (tokenizer.json, byte BPE)", os.path.join(SHARED, "models", "house"),
          lambda: Tokenizer.from_file(os.path.join(SHARED, "models", "house", "tokenizer.json")))]
if args.gguf:
    sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
    os.environ.setdefault("ASSAY_SOURCE_DIR", ROOT)
    os.environ.setdefault("ASSAY_BIN", BIN)

    def ref(name):
        # the reference builder of the GGUF test, without running its checks
        from gguf import GGUFReader
        from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer
        md = {k: f.contents() for k, f in GGUFReader(name).fields.items() if k.startswith("tokenizer.") or k == "general.architecture"}
        tk = {n: md[f"tokenizer.{k}"] for k, n in GGUF_TOKENIZER_MAPPING["tokenizer"].items() if f"tokenizer.{k}" in md}
        return convert_gguf_tokenizer(md["general.architecture"], tk)[0]

    for f, label in [("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2 (GGUF, byte BPE)"), ("gemma-3-270m-q4_k_m.gguf", "Gemma 3 (GGUF, SentencePiece)")]:
        p = os.path.join(ROOT, ".models", f)
        cases.append((label, p, lambda p=p: ref(p)))

for label, model, make_hf in cases:
    n_a, cpu_a, wall_a = assay_run(model)
    row(label, "assay", n_a, cpu_a, wall_a)
    hf = make_hf()
    n_h, cpu_h, wall_h = hf_run(hf)
    row("", "HF tokenizers", n_h, cpu_h, wall_h)
    n_l, cpu_l, wall_l = hf_run(hf, lines=True)
    row("", "HF tokenizers per line", n_l, cpu_l, wall_l)
    print(f"{'':34s} assay vs HF (cpu): {cpu_h / cpu_a:.1f}x the whole-text encode, {cpu_l / cpu_a:.1f}x the per-line batch"
          f"{'' if n_a == n_h else f'  (token counts differ: {n_a} vs {n_h})'}")

if shutil.which("hyperfine"):
    subprocess.run(["hyperfine", "--warmup", "1", "--runs", str(args.repeat), "-N",
                    f"{BIN} tokenize {cases[0][1]} -f {WIKI} --ids --time"], check=False)
