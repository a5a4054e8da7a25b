"""Writes dequantization fixtures for tests/unit/test_dequant_gguf.c: raw GGUF blocks and gguf-py's
(gguf.quants.dequantize, numpy) float32 output for each block type.

Sources: rows of real tensors from the PyPI GGUF models (.models/) for the types they contain, and blocks of
random bytes (with finite, moderate fp16 scales) for every type, so all bit patterns of the packed fields occur.

Record format (little-endian): u32 type, u64 n_elems, u64 n_bytes, bytes, n_elems * f32 expected.
Usage: dequant_fixture.py OUT_FILE SOURCE_DIR
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader
from gguf.quants import GGML_QUANT_SIZES, dequantize

# byte offsets of fp16 scale fields inside each block (the rest is packed integers)
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def record(out, qtype, raw):
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    block, size = GGML_QUANT_SIZES[qtype]
    nblk = raw.size // size
    want = dequantize(raw.reshape(nblk, size), qtype).astype(np.float32).reshape(-1)
    assert want.size == nblk * block
    out.write(struct.pack("<IQQ", int(qtype), want.size, raw.size))
    out.write(raw.tobytes())
    out.write(want.tobytes())


def main():
    path, src = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(1234)
    with open(path, "wb") as out:
        for qtype, offs in HALF_FIELDS.items():
            block, size = GGML_QUANT_SIZES[qtype]
            raw = rng.integers(0, 256, size=(64, size), dtype=np.uint8)
            for off in offs:
                h = (rng.standard_normal(64) * 0.05).astype(np.float16)
                raw[:, off:off + 2] = h.view(np.uint8).reshape(64, 2)
            record(out, qtype, raw)
        seen = set()
        for name in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"):
            p = os.path.join(src, ".models", name)
            if not os.path.exists(p):
                continue
            for t in GGUFReader(p).tensors:
                if t.tensor_type in seen or t.tensor_type not in HALF_FIELDS:
                    continue
                seen.add(t.tensor_type)
                data = np.asarray(t.data).reshape(-1).view(np.uint8)
                size = GGML_QUANT_SIZES[t.tensor_type][1]
                nbytes = min(data.size, 1 << 20) // size * size  # whole blocks, up to 1 MiB
                record(out, t.tensor_type, data[:nbytes])
    print("types from real tensors:", sorted(x.name for x in seen))


if __name__ == "__main__":
    main()
