"""Oracle for tests/unit/test_ggml_quant.c (run by it; not a ctest of its own).

  ggml_quant_oracle.py export DIR   write real.src (house blk.0 ffn_gate as f32, 1408 x 512) and real.imatrix
  ggml_quant_oracle.py check DIR    check every DIR/<set>.<type>[.im].bin our encoder wrote:
    - gguf-py's dequantizer reads our blocks and gives the values our own dequantization gave;
    - for the types gguf-py can quantize (q8_0 q4_0 q4_1 q5_0 q5_1; no imatrix), its bytes equal ours;
    - when ASSAY_LLAMACPP_LIB names llama.cpp's libggml-base.so, ggml_quantize_chunk gives our bytes for every
      type, with and without the importance matrix;
    - error sanity on real weights: RMSE falls with the bit width, and the imatrix lowers the imatrix-weighted
      error of the k-quants.
Exit code 0 = pass.
"""
import ctypes
import json
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1,
         "q2_K": T.Q2_K, "q3_K": T.Q3_K, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K}
GGUFPY_QUANTIZES = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}
SETS = {"syn": (48, 512), "real": (1408, 512)}


def load_house_tensor(name):
    root = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")
    index = json.load(open(os.path.join(root, "model.safetensors.index.json")))
    path = os.path.join(root, index["weight_map"][name])
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
        info = header[name]
        assert info["dtype"] == "BF16", info
        a, b = info["data_offsets"]
        f.seek(8 + hlen + a)
        raw = np.frombuffer(f.read(b - a), dtype=np.uint16)
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])


def export(d):
    w = load_house_tensor("model.layers.0.mlp.gate_proj.weight")  # HF [out 1408, in 512] = ggml rows of 512
    assert w.shape == (1408, 512)
    w.astype(np.float32).tofile(os.path.join(d, "real.src"))
    rng = np.random.default_rng(7)
    im = (rng.gamma(0.7, 1.0, 512) + 1e-3).astype(np.float32)  # heavy-tailed, like real activation energies
    im.tofile(os.path.join(d, "real.imatrix"))


def llamacpp_quantizer():
    lib = os.environ.get("ASSAY_LLAMACPP_LIB")
    if not lib:
        return None
    g = ctypes.CDLL(lib)
    f = g.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_int64, ctypes.c_void_p]

    def quantize(qtype, src, imatrix):
        rows, cols = src.shape
        bs, ts = quants.GGML_QUANT_SIZES[qtype]
        out = np.zeros(rows * cols // bs * ts, dtype=np.uint8)
        src = np.ascontiguousarray(src, dtype=np.float32)
        imp = None if imatrix is None else np.ascontiguousarray(imatrix, dtype=np.float32)
        n = f(int(qtype), src.ctypes.data, out.ctypes.data, 0, rows, cols,
              None if imp is None else imp.ctypes.data)
        assert n == out.size
        return out
    return quantize


def check(d):
    failures = []
    ref = llamacpp_quantizer()
    for tag, (rows, cols) in SETS.items():
        src = np.fromfile(os.path.join(d, f"{tag}.src"), dtype=np.float32).reshape(rows, cols)
        im = np.fromfile(os.path.join(d, f"{tag}.imatrix"), dtype=np.float32)
        rmse = {}
        werr = {}
        for name, qt in TYPES.items():
            bs, ts = quants.GGML_QUANT_SIZES[qt]
            for suffix in ("", ".im"):
                path = os.path.join(d, f"{tag}.{name}{suffix}.bin")
                if not os.path.exists(path):
                    failures.append(f"{path} missing")
                    continue
                blocks = np.fromfile(path, dtype=np.uint8).reshape(rows, cols // bs * ts)
                ours = np.fromfile(os.path.join(d, f"{tag}.{name}{suffix}.deq"), dtype=np.float32).reshape(rows, cols)
                theirs = quants.dequantize(blocks, qt)
                # same formulas in float32; allow for a different order of the two multiplications
                tol = 4e-7 * np.abs(theirs) + 1e-30
                bad = np.abs(theirs - ours) > tol
                if bad.any():
                    failures.append(f"{tag}.{name}{suffix}: gguf-py dequant differs from ours at {bad.sum()} values "
                                    f"(max {np.abs(theirs - ours).max():.3g})")
                if suffix == "" and name in GGUFPY_QUANTIZES:
                    want = quants.quantize(src, qt)
                    nbad = int((want.reshape(-1, ts) != blocks.reshape(-1, ts)).any(axis=1).sum())
                    if nbad:
                        failures.append(f"{tag}.{name}: {nbad} blocks differ from gguf-py's quantizer")
                if ref is not None:
                    want = ref(qt, src, im if suffix else None)
                    diff = (want.reshape(-1, ts) != blocks.reshape(-1, ts)).any(axis=1)
                    if diff.any():
                        failures.append(f"{tag}.{name}{suffix}: {int(diff.sum())}/{diff.size} blocks differ from "
                                        "llama.cpp's ggml_quantize_chunk")
                e = theirs - src
                rmse[name + suffix] = float(np.sqrt(np.mean(e * e)))
                werr[name + suffix] = float(np.mean(e * e * im[None, :]))
        scale = float(np.sqrt(np.mean(src * src)))
        print(f"{tag}: relative RMSE " + " ".join(f"{k}={v / scale:.4f}" for k, v in rmse.items()))
        if tag == "real":
            order = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_0"]
            for a, b in zip(order, order[1:]):
                if not rmse[a] > rmse[b]:
                    failures.append(f"real: RMSE of {a} ({rmse[a]:.3g}) not above {b} ({rmse[b]:.3g})")
            for a, b in (("q4_0", "q5_0"), ("q4_1", "q5_1"), ("q5_0", "q8_0")):
                if not rmse[a] > rmse[b]:
                    failures.append(f"real: RMSE of {a} not above {b}")
            for k in ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q4_0", "q4_1", "q5_0", "q5_1"):
                if not werr[k + ".im"] < werr[k]:
                    failures.append(f"real: imatrix did not lower the weighted error of {k} "
                                    f"({werr[k + '.im']:.4g} vs {werr[k]:.4g})")
    print("llama.cpp byte comparison:", "done" if ref else "skipped (ASSAY_LLAMACPP_LIB not set)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "export":
        export(d)
        sys.exit(0)
    sys.exit(check(d))
