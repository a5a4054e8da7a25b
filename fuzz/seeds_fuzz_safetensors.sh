#!/usr/bin/env bash
# seeds_fuzz_safetensors.sh CORPUS — small safetensors files for fuzz_safetensors: written by the reference
# `safetensors` package (every dtype we read), plus the real house shard headers with their data cut short.
set -u
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
py=${ASSAY_PYTHON:-$root/.venv/bin/python}
"$py" - "$out" <<'PY' || true
import sys, numpy as np
from safetensors.numpy import save
out = sys.argv[1]
dts = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i32": np.int32, "u8": np.uint8, "i64": np.int64,
       "f64": np.float64, "b": np.bool_, "i16": np.int16}
for i, (k, dt) in enumerate(dts.items()):
    t = {f"{k}.w": np.arange(6).reshape(2, 3).astype(dt), f"{k}.s": np.zeros((), dt), "e": np.zeros((0, 4), dt)}
    open(f"{out}/seed_{k}.safetensors", "wb").write(save(t, metadata={"format": "pt"} if i % 2 else None))
PY
shared=${ASSAY_SHARED:-$root/../shared}
for f in "$shared"/models/house/model-0000*-of-00004.safetensors; do
  [ -f "$f" ] || continue
  n=$(od -An -tu8 -N8 "$f" | tr -d ' ')
  head -c $((8 + n + 64)) "$f" >"$out/house_$(basename "$f" .safetensors)_head"
done
