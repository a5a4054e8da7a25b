#!/usr/bin/env bash
# seeds_fuzz_gguf.sh CORPUS_DIR — seeds for fuzz_gguf: the metadata and tensor infos of stories260K (a real
# llama.cpp GGUF; its tensor data cut off and the tensor count set to 0, so the file stays valid and small), the
# first 4 KiB of each llama.cpp tokenizer fixture (their full 0.7-2 MB vocabularies would slow every run), and
# small files written by gguf-py with every value type, nested arrays and quantized tensors.
set -euo pipefail
dir=$1
mkdir -p "$dir"
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${ASSAY_SHARED:-$here/../shared}
stories=$shared/data/stories260K/stories260K.gguf
if [ -f "$stories" ]; then
  head -c 16384 "$stories" > "$dir/stories260K-meta.gguf"
  printf '\x00\x00\x00\x00\x00\x00\x00\x00' | dd of="$dir/stories260K-meta.gguf" bs=1 seek=8 conv=notrunc status=none
fi
for f in "$shared"/data/llamacpp_vocab/*.gguf; do
  [ -f "$f" ] && head -c 4096 "$f" > "$dir/head4k-$(basename "$f")"
done
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' > "$dir/empty-v3.gguf"
py=$here/.venv/bin/python
[ -x "$py" ] || exit 0
"$py" - "$dir" <<'PY'
import sys, numpy as np, gguf
from gguf import GGUFValueType as VT
d = sys.argv[1]
for i, align in enumerate((32, 8, 64)):
    w = gguf.GGUFWriter(f"{d}/gguf-py-{i}.gguf", arch="llama")
    if align != 32:
        w.add_custom_alignment(align)
    w.add_key_value("a.u8", 7, VT.UINT8); w.add_key_value("a.i8", -7, VT.INT8)
    w.add_key_value("a.u16", 700, VT.UINT16); w.add_key_value("a.i16", -700, VT.INT16)
    w.add_key_value("a.u32", 70000, VT.UINT32); w.add_key_value("a.i32", -70000, VT.INT32)
    w.add_key_value("a.u64", 2**40, VT.UINT64); w.add_key_value("a.i64", -2**40, VT.INT64)
    w.add_key_value("a.f32", 0.5, VT.FLOAT32); w.add_key_value("a.f64", 0.25, VT.FLOAT64)
    w.add_key_value("a.bool", True, VT.BOOL); w.add_key_value("a.str", "héllo", VT.STRING)
    w.add_key_value("a.arr", [1, 2, 3], VT.ARRAY, sub_type=VT.UINT16)
    w.add_key_value("a.strs", ["x", "yz"], VT.ARRAY)
    w.add_key_value("a.nest", [[1, 2], ["s"], [[0.5]]], VT.ARRAY)
    w.add_tensor("f32", np.arange(8, dtype=np.float32).reshape(2, 4))
    w.add_tensor("q4_K", np.zeros((1, 144), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.add_tensor("q8_0", np.ones((2, 34), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
