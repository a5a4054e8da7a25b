"""Oracle for tests/unit/test_ggml_quantize_model.c: ggml_model_oracle.py SOURCE.gguf BUILD_DIR

For every BUILD_DIR/stories260K.<mix>[.im].gguf written by the C test:
  - gguf-py reads it; every metadata key of the source is there with its value; general.file_type is
    llama.cpp's ftype number for the mix and general.quantization_version is 2;
  - the tensors are the source's (names, order, shapes), each decodes (gguf-py) close to the source values;
  - when ASSAY_LLAMACPP_BIN names a directory with llama-quantize, it quantizes the source under the same mix
    (with the same imatrix file for .im) and every tensor's type and bytes must equal ours.
Exit code 0 = pass.
"""
import os
import subprocess
import sys

import numpy as np
import gguf
from gguf import quants

FTYPES = {"q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9, "q2_k": 10, "q3_k_s": 11, "q3_k_m": 12, "q3_k_l": 13,
          "q4_k_s": 14, "q4_k_m": 15, "q5_k_s": 16, "q5_k_m": 17, "q6_k": 18}
# llama-quantize stops on stories260K's ffn_down (172 columns) under these: no fallback for 32-element types
LEGACY = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}
# relative RMSE bound by type (loose: stories260K is tiny; these catch broken encodings, not small regressions)
BOUND = {"F32": 0, "F16": 1e-3, "Q8_0": 0.01, "Q6_K": 0.03, "Q5_0": 0.07, "Q5_1": 0.07, "Q5_K": 0.07,
         "Q4_0": 0.14, "Q4_1": 0.14, "Q4_K": 0.14, "Q3_K": 0.3, "Q2_K": 0.6}


def field_value(f):
    return [bytes(f.parts[i]).hex() for i in f.data]


def tensor_f32(t):
    if t.tensor_type == gguf.GGMLQuantizationType.F32:
        return np.array(t.data, dtype=np.float32).reshape(-1)
    return quants.dequantize(np.array(t.data), t.tensor_type).reshape(-1)


def main():
    src_path, build = sys.argv[1], sys.argv[2]
    src = gguf.GGUFReader(src_path)
    src_t = {t.name: t for t in src.tensors}
    bindir = os.environ.get("ASSAY_LLAMACPP_BIN")
    fails = []
    for mix, ftype in FTYPES.items():
        for im in ("", ".im"):
            path = os.path.join(build, f"stories260K.{mix}{im}.gguf")
            r = gguf.GGUFReader(path)
            for k, f in src.fields.items():
                if k.startswith("GGUF.") or k == "general.file_type":
                    continue
                if k not in r.fields or field_value(r.fields[k]) != field_value(f):
                    fails.append(f"{mix}{im}: metadata {k} missing or changed")
            if int(r.fields["general.file_type"].parts[-1][0]) != ftype:
                fails.append(f"{mix}{im}: general.file_type is not {ftype}")
            if int(r.fields["general.quantization_version"].parts[-1][0]) != 2:
                fails.append(f"{mix}{im}: general.quantization_version is not 2")
            if im and "quantize.imatrix.file" not in r.fields:
                fails.append(f"{mix}{im}: quantize.imatrix.file missing")
            if [t.name for t in r.tensors] != [t.name for t in src.tensors]:
                fails.append(f"{mix}{im}: tensor list differs from the source")
                continue
            for t in r.tensors:
                s = tensor_f32(src_t[t.name])
                d = tensor_f32(t)
                if list(t.shape) != list(src_t[t.name].shape):
                    fails.append(f"{mix}{im}: {t.name} shape changed")
                rel = float(np.sqrt(np.mean((d - s) ** 2)) / (np.sqrt(np.mean(s * s)) + 1e-30))
                if rel > BOUND[t.tensor_type.name]:
                    fails.append(f"{mix}{im}: {t.name} ({t.tensor_type.name}) relative RMSE {rel:.3g}")
            if bindir and mix in LEGACY:
                print(f"{mix}{im}: not compared (llama-quantize has no fallback for rows of 172 under {mix}; we use f16)")
            elif bindir:
                ref_path = os.path.join(build, f"stories260K.{mix}{im}.llamacpp.gguf")
                cmd = [os.path.join(bindir, "llama-quantize")]
                if im:
                    cmd += ["--imatrix", os.path.join(build, "stories260K.imatrix.gguf")]
                cmd += [src_path, ref_path, mix.upper()]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode:
                    fails.append(f"{mix}{im}: llama-quantize failed: {p.stderr[-500:]}")
                    continue
                ref = {t.name: t for t in gguf.GGUFReader(ref_path).tensors}
                nsame = 0
                for t in r.tensors:
                    q = ref[t.name]
                    if q.tensor_type != t.tensor_type:
                        fails.append(f"{mix}{im}: {t.name} is {t.tensor_type.name}, llama.cpp chose {q.tensor_type.name}")
                    elif not np.array_equal(np.array(q.data).view(np.uint8), np.array(t.data).view(np.uint8)):
                        fails.append(f"{mix}{im}: {t.name} ({t.tensor_type.name}) bytes differ from llama-quantize's")
                    else:
                        nsame += 1
                print(f"{mix}{im}: {nsame}/{len(r.tensors)} tensors byte-identical to llama-quantize")
    if not bindir:
        print("llama-quantize comparison skipped (ASSAY_LLAMACPP_BIN not set)")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
