"""test_convert_vocab.py — `assay convert X.gguf -o DIR --vocab-only` rebuilds tokenizer.json from tokenizer.ggml.*:
the `tokenizers` package, loading what we wrote from llama.cpp's gpt-2 vocab GGUF, must reproduce llama.cpp's
own tokenizer fixtures (ggml-vocab-gpt-2.gguf.inp -> .out, generated from the original HF tokenizer)."""
import os
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer

ASSAY = os.environ["ASSAY_BIN"]
VOCAB = os.path.join(os.environ["ASSAY_SHARED"], "data", "llamacpp_vocab")
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    base = os.path.join(VOCAB, "ggml-vocab-gpt-2.gguf")
    r = subprocess.run([ASSAY, "convert", base, "-o", os.path.join(tmp, "tok"), "--vocab-only", "--quiet"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"convert --vocab-only failed: {r.stderr}")
    tok = Tokenizer.from_file(os.path.join(tmp, "tok", "tokenizer.json"))
    cases = open(base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    want = open(base + ".out", encoding="utf-8").read().split("\n")
    for i, text in enumerate(cases):
        ids = [int(x) for x in want[i].split()]
        got = tok.encode(text, add_special_tokens=False).ids
        if got != ids:
            failures += 1
            print(f"FAIL case {i} {text!r}: {got} != {ids}")
    # A tokenizer we cannot rebuild is an error naming it, exit code 1.
    r = subprocess.run([ASSAY, "convert", os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf"), "-o", os.path.join(tmp, "spm"),
                        "--vocab-only"], capture_output=True, text=True)
    if r.returncode != 1 or "cannot be rebuilt" not in r.stderr:
        failures += 1
        print("FAIL: spm vocab:", r.returncode, r.stderr)
print(f"test_convert_vocab: {len(cases)} fixture cases, {failures} failures")
sys.exit(1 if failures else 0)
