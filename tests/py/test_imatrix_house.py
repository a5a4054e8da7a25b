"""assay imatrix on the house model: the file is llama.cpp's GGUF imatrix layout, read back by gguf-py.

Checks: general.type "imatrix", imatrix.chunk_count/chunk_size, one <w>.in_sum2 (f32, {n_in, 1}) and <w>.counts
({1, 1}) per blk.* weight, counts = tokens processed, q/k/v (one shared input) carry identical sums, and gate/up
too. When ASSAY_LLAMACPP_BIN names a directory with llama-imatrix, llama.cpp computes the same matrix from the
same text on an f32 GGUF of the model (assay convert) and every value must agree within 1e-3 relative.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

BIN = os.environ["ASSAY_BIN"]
HOUSE = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")
TEXT = os.path.join(os.environ["ASSAY_SHARED"], "data", "calibration", "shakespeare-hamlet.txt")


def load(path):
    r = gguf.GGUFReader(path)
    return r, {t.name: np.array(t.data, dtype=np.float64).reshape(-1) for t in r.tensors}, {t.name: t for t in r.tensors}


def main():
    fails = []
    with tempfile.TemporaryDirectory() as d:
        text = os.path.join(d, "calib.txt")
        with open(TEXT, "rb") as f:
            open(text, "wb").write(f.read(60000))
        out = os.path.join(d, "im.gguf")
        p = subprocess.run([BIN, "imatrix", HOUSE, "-f", text, "-o", out, "--chunks", "2", "--ctx", "256", "-t", "2"],
                           capture_output=True, text=True)
        if p.returncode:
            print(p.stderr)
            return 1
        r, v, t = load(out)
        if bytes(r.fields["general.type"].parts[-1]).decode() != "imatrix":
            fails.append("general.type is not imatrix")
        if int(r.fields["imatrix.chunk_count"].parts[-1][0]) != 2 or int(r.fields["imatrix.chunk_size"].parts[-1][0]) != 256:
            fails.append("chunk_count/chunk_size wrong")
        names = sorted(n[:-len(".in_sum2")] for n in v if n.endswith(".in_sum2"))
        if len(names) != 7 * 7:
            fails.append(f"{len(names)} weights, expected 49")
        for n in names:
            if v[n + ".counts"][0] != 512:
                fails.append(f"{n}: count {v[n + '.counts'][0]} != 512")
            width = 1408 if "ffn_down" in n else 512
            if list(t[n + ".in_sum2"].shape) != [width, 1] or not np.all(v[n + ".in_sum2"] > 0):
                fails.append(f"{n}: shape {list(t[n + '.in_sum2'].shape)} or non-positive sums")
        for l in range(7):
            q = v[f"blk.{l}.attn_q.weight.in_sum2"]
            for other in ("attn_k", "attn_v"):
                if not np.array_equal(q, v[f"blk.{l}.{other}.weight.in_sum2"]):
                    fails.append(f"blk.{l}: {other} sums differ from attn_q's (same input)")
            if not np.array_equal(v[f"blk.{l}.ffn_gate.weight.in_sum2"], v[f"blk.{l}.ffn_up.weight.in_sum2"]):
                fails.append(f"blk.{l}: ffn_up sums differ from ffn_gate's")
        bindir = os.environ.get("ASSAY_LLAMACPP_BIN")
        if bindir:
            f32 = os.path.join(d, "house-f32.gguf")
            subprocess.run([BIN, "convert", HOUSE, "-o", f32, "--dtype", "f32"], check=True, capture_output=True)
            ref = os.path.join(d, "ref.gguf")
            subprocess.run([os.path.join(bindir, "llama-imatrix"), "-m", f32, "-f", text, "-o", ref, "--chunks", "2",
                            "-c", "256", "-t", "2", "--no-ppl"], check=True, capture_output=True)
            _, rv, _ = load(ref)
            worst = max(float(np.max(np.abs(v[k] - rv[k])) / np.max(np.abs(rv[k]))) for k in rv)
            print(f"llama-imatrix comparison: max relative difference {worst:.2e}")
            if set(rv) != set(v) or worst > 1e-3:
                fails.append(f"differs from llama-imatrix (max rel {worst:.3g})")
        else:
            print("llama-imatrix comparison skipped (ASSAY_LLAMACPP_BIN not set)")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
