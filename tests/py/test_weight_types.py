"""The weight type table (src/quant/weight_type.c) against gguf-py's GGML_QUANT_SIZES and type numbering:
every ggml type gguf-py knows has the same id, name, block size and block bytes in assay, and assay has no
ggml-numbered type gguf-py lacks."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gguf  # noqa: E402
import gguf_common as gc  # noqa: E402

out = subprocess.run([gc.tool("gguf_dump"), "--types"], stdout=subprocess.PIPE, check=True).stdout
ours = {t["id"]: t for t in json.loads(out)}
errors = []
# ggml's block_q8_1 holds two f16 (d, s) and 32 int8: 36 bytes (ggml-common.h static_assert). gguf-py's table
# still lists the older f32 layout (40 bytes); assay follows ggml, whose gguf reader sizes tensors.
KNOWN = {gguf.GGMLQuantizationType.Q8_1: (32, 36)}
for qt, (blk, size) in gguf.GGML_QUANT_SIZES.items():
    want = KNOWN.get(qt, (blk, size))
    t = ours.get(int(qt))
    if t is None:
        errors.append(f"{qt.name} ({int(qt)}) missing from assay's table")
        continue
    if t["name"].lower() != qt.name.lower():
        errors.append(f"id {int(qt)}: assay calls it {t['name']}, gguf-py {qt.name}")
    if (t["block_elems"], t["block_bytes"]) != want:
        errors.append(f"{qt.name}: assay {t['block_elems']} elements in {t['block_bytes']} bytes, gguf-py {want}")
    if t["row_bytes_4096"] != 4096 // want[0] * want[1]:
        errors.append(f"{qt.name}: row of 4096 is {t['row_bytes_4096']} bytes")
    plain = qt.name in ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")
    if t["quantized"] != (0 if plain else 1):
        errors.append(f"{qt.name}: is_quantized {t['quantized']}")
for i, t in ours.items():
    if i < 100 and i not in {int(q) for q in gguf.GGML_QUANT_SIZES}:
        errors.append(f"assay has ggml id {i} ({t['name']}) that gguf-py does not know")
for e in errors:
    print("FAIL", e)
print(f"weight types: {len(ours)} types, {len(errors)} failures")
sys.exit(1 if errors else 0)
