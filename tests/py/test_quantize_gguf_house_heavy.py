"""assay quantize --scheme q4_k_m / q8_0 / int4-rtn on the house model (HF bf16), through the CLI.

gguf-py reads the GGUF outputs: the mix put llama.cpp's types where llama_tensor_get_type puts them for this model
(7 layers, GQA 4, ffn rows of 1408 -> fallbacks), the metadata is convert's, values decode close to the source.
With an importance matrix from `assay imatrix`, the file records it (quantize.imatrix.*). An existing output is
refused without --force. When ASSAY_LLAMACPP_BIN names llama.cpp's binaries, llama-quantize quantizes an f32 GGUF of
the same weights (assay convert --dtype f32) under Q4_K_M (with and without the same imatrix), Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1, and every
tensor must be byte-identical to ours.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

BIN = os.environ["ASSAY_BIN"]
HOUSE = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")
CALIB = os.path.join(os.environ["ASSAY_SHARED"], "data", "calibration", "shakespeare-hamlet.txt")


def run(*args, ok=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if ok and p.returncode:
        raise SystemExit(f"assay {' '.join(args)} failed:\n{p.stderr}")
    return p


def types(path):
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}


def main():
    fails = []
    with tempfile.TemporaryDirectory() as d:
        q4 = os.path.join(d, "house-q4_k_m.gguf")
        run("quantize", HOUSE, "-o", q4, "--scheme", "q4_k_m", "-t", "2")
        t = types(q4)
        want = {"token_embd.weight": "Q4_K", "output.weight": "Q6_K", "output_norm.weight": "F32",
                "blk.0.attn_q.weight": "Q4_K", "blk.0.attn_norm.weight": "F32"}
        for l in range(7):
            more = l in (2, 5, 6)  # use_more_bits(l, 7)
            want[f"blk.{l}.attn_v.weight"] = "Q6_K" if more else "Q4_K"
            want[f"blk.{l}.ffn_down.weight"] = "Q8_0" if more else "Q5_0"  # 1408 % 256 != 0: q6_K->q8_0, q4_K->q5_0
        for k, v in want.items():
            if t.get(k) != v:
                fails.append(f"q4_k_m: {k} is {t.get(k)}, llama.cpp's rules give {v}")
        r = gguf.GGUFReader(q4)
        if int(r.fields["general.file_type"].parts[-1][0]) != 15:
            fails.append("q4_k_m: general.file_type != 15")
        if bytes(r.fields["general.architecture"].parts[-1]).decode() != "llama":
            fails.append("q4_k_m: general.architecture missing")
        if "tokenizer.ggml.tokens" not in r.fields:
            fails.append("q4_k_m: tokenizer metadata missing")
        p = run("quantize", HOUSE, "-o", q4, "--scheme", "q4_k_m", ok=False)
        if p.returncode == 0 or "exists" not in p.stderr:
            fails.append("an existing output was not refused without --force")
        im = os.path.join(d, "imatrix.gguf")
        run("imatrix", HOUSE, "-f", CALIB, "-o", im, "--chunks", "4", "-t", "2")
        q4i = os.path.join(d, "house-q4_k_m-im.gguf")
        run("quantize", HOUSE, "-o", q4i, "--scheme", "q4_k_m", "--imatrix", im, "-t", "2")
        if "quantize.imatrix.file" not in gguf.GGUFReader(q4i).fields:
            fails.append("imatrix: quantize.imatrix.file not recorded")
        q8 = os.path.join(d, "house-q8_0.gguf")
        run("quantize", HOUSE, "-o", q8, "--scheme", "q8_0", "-t", "2")
        legacy = []
        for mix in ("q4_0", "q4_1", "q5_0", "q5_1"):
            path = os.path.join(d, f"house-{mix}.gguf")
            run("quantize", HOUSE, "-o", path, "--scheme", mix, "-t", "2")
            legacy.append((path, mix.upper(), None))
        rtn = os.path.join(d, "house-int4-rtn")
        run("quantize", HOUSE, "-o", rtn, "--scheme", "int4-rtn")
        qc = json.load(open(os.path.join(rtn, "config.json")))["quantization_config"]
        if qc.get("quant_method") != "gptq" or not os.path.exists(os.path.join(rtn, "tokenizer.json")):
            fails.append(f"int4-rtn: checkpoint incomplete ({qc})")
        bindir = os.environ.get("ASSAY_LLAMACPP_BIN")
        if bindir:
            f32 = os.path.join(d, "house-f32.gguf")
            run("convert", HOUSE, "-o", f32, "--dtype", "f32")
            for ours, mix, imat in [(q4, "Q4_K_M", None), (q4i, "Q4_K_M", im), (q8, "Q8_0", None)] + legacy:
                ref = os.path.join(d, "ref.gguf")
                cmd = [os.path.join(bindir, "llama-quantize")] + (["--imatrix", imat] if imat else []) + [f32, ref, mix]
                subprocess.run(cmd, check=True, capture_output=True)
                a = {x.name: x for x in gguf.GGUFReader(ours).tensors}
                b = {x.name: x for x in gguf.GGUFReader(ref).tensors}
                same = sum(1 for k in b if k in a and a[k].tensor_type == b[k].tensor_type and
                           np.array_equal(np.array(a[k].data).view(np.uint8), np.array(b[k].data).view(np.uint8)))
                print(f"{mix}{' +imatrix' if imat else ''}: {same}/{len(b)} tensors byte-identical to llama-quantize")
                if same != len(b) or set(a) != set(b):
                    fails.append(f"{mix}{' +imatrix' if imat else ''}: {len(b) - same} tensors differ from llama-quantize")
        else:
            print("llama-quantize comparison skipped (ASSAY_LLAMACPP_BIN not set)")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
