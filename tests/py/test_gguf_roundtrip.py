"""GGUF round trips between assay and gguf-py (the reference reader and writer from PyPI).

1. assay's writer (tests/support/gguf_write) writes every value type, arrays of every element type (empty ones,
   strings, unicode, nested to three levels), a replaced and a removed key, a custom alignment, and tensors of
   plain and quantized types; gguf.GGUFReader must read back exactly the described metadata and tensor bytes,
   and assay's reader must agree with gguf-py on the file.
2. gguf.GGUFWriter writes metadata of every type and tensors; assay's reader must see what gguf-py sees.
3. Copying files through assay's reader and writer (set_kv for every key, nested arrays included) gives files
   that gguf-py reads identically to the originals (stories260K and the gguf-py-written file).
"""
import json
import math
import os
import struct
import sys
import zlib
import subprocess

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import gguf  # noqa: E402
import gguf_common as gc  # noqa: E402
from testlib import scratch_dir  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402

errors = []
tmp = scratch_dir(prefix="gguf_rt_")
rng = np.random.default_rng(1234)


def check(cond, msg):
    if not cond:
        errors.append(msg)


def f32bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


# ---- 1. assay writes, gguf-py reads ---------------------------------------------------------------------------
# (type, value) with value in the description's spelling; expected view computed from the same values
INTS = {"u8": [0, 1, 255], "i8": [-128, -1, 127], "u16": [0, 65535], "i16": [-32768, 32767],
        "u32": [0, 4294967295], "i32": [-2147483648, 2147483647], "u64": [0, 2**64 - 1, 2**63],
        "i64": [-2**63, 2**63 - 1, -5]}
F32 = [1.5, -0.0, math.inf, -math.inf, 3.4028234663852886e38, 1e-45, 0.1]
F64 = [math.pi, -0.0, math.inf, 5e-324, 1e308]
NAN32, NAN64 = 0x7fc00000, 0x7ff8000000000000
STRINGS = ["", "hello", "ünïcödé ✓ 日本語 🦙", "tabs\tand\nnewlines \"quoted\" \\ back", "x" * 1000]

desc_kv = []   # the description for gguf_write
want_kv = []   # the expected view (gguf_common shape), in final file order


def scalar_desc(t, v):
    if t == "bool":
        return v
    if t == "f32":
        return hex(v)
    if t == "f64":
        return hex(v)
    return str(v)


def add(key, t, v, view_value):
    desc_kv.append({"key": key, "type": t, "value": v})
    want_kv.append({"key": key.encode().hex(), "type": t, "value": view_value})


add("general.architecture", "string", "llama", b"llama".hex())
for t, vals in INTS.items():
    for i, v in enumerate(vals):
        add(f"test.scalar.{t}.{i}", t, str(v), v)
for i, v in enumerate(F32):
    add(f"test.scalar.f32.{i}", "f32", hex(f32bits(v)), f32bits(v))
add("test.scalar.f32.nan", "f32", hex(NAN32), NAN32)
for i, v in enumerate(F64):
    add(f"test.scalar.f64.{i}", "f64", hex(f64bits(v)), f64bits(v))
add("test.scalar.f64.nan", "f64", hex(NAN64), NAN64)
add("test.scalar.bool.t", "bool", True, True)
add("test.scalar.bool.f", "bool", False, False)
for i, s in enumerate(STRINGS):
    add(f"test.scalar.string.{i}", "string", s, s.encode().hex())
add("tést.ключ.鍵🔑", "string", "unicode key", b"unicode key".hex())


def arr(elem, values):
    """(description, expected view) of an array of `elem` holding python `values`."""
    if elem == "array":
        ds, vs = zip(*values) if values else ((), ())
        return {"elem": "array", "value": list(ds)}, {"elem": "array", "len": len(values), "value": list(vs)}
    if elem == "string":
        return {"elem": elem, "value": values}, {"elem": elem, "len": len(values), "value": [s.encode().hex() for s in values]}
    if elem == "f32":
        bits = [f32bits(v) if not (isinstance(v, float) and math.isnan(v)) else NAN32 for v in values]
        return {"elem": elem, "value": [hex(b) for b in bits]}, {"elem": elem, "len": len(values), "value": bits}
    if elem == "f64":
        bits = [f64bits(v) if not (isinstance(v, float) and math.isnan(v)) else NAN64 for v in values]
        return {"elem": elem, "value": [hex(b) for b in bits]}, {"elem": elem, "len": len(values), "value": bits}
    if elem == "bool":
        return {"elem": elem, "value": values}, {"elem": elem, "len": len(values), "value": values}
    return {"elem": elem, "value": [str(v) for v in values]}, {"elem": elem, "len": len(values), "value": values}


def add_arr(key, elem, values):
    d, v = arr(elem, values)
    add(key, "array", d, v)


for t, vals in INTS.items():
    add_arr(f"test.array.{t}", t, vals * 3)
add_arr("test.array.f32", "f32", F32 + [math.nan])
add_arr("test.array.f64", "f64", F64 + [math.nan])
add_arr("test.array.bool", "bool", [True, False, False, True])
add_arr("test.array.string", "string", STRINGS + ["ü"] * 3)
add_arr("test.array.empty_u8", "u8", [])
add_arr("test.array.empty_string", "string", [])
add_arr("test.array.big_i32", "i32", list(range(-5000, 5000, 3)))
add_arr("test.array.nested_i32", "array", [arr("i32", [1, 2]), arr("i32", [3]), arr("i32", [])])
add_arr("test.array.nested_string", "array", [arr("string", ["a", "bé"]), arr("string", ["🦙"])])
add_arr("test.array.nested3", "array", [arr("array", [arr("f32", [1.0]), arr("f32", [2.0, -0.0])]),
                                          arr("array", [arr("bool", [True])]), arr("array", [])])
add_arr("test.array.nested_empty", "array", [])

# replacing a key keeps its position and takes the new value; removing drops it
desc_kv.append({"key": "test.scalar.u8.0", "type": "i16", "value": "-7"})
for w in want_kv:
    if w["key"] == "test.scalar.u8.0".encode().hex():
        w["type"], w["value"] = "i16", -7
desc_kv.append({"key": "test.removed", "type": "u32", "value": "1"})
remove = ["test.removed", "test.scalar.u8.1"]
want_kv = [w for w in want_kv if w["key"] != "test.scalar.u8.1".encode().hex()]

# tensors: (name, type, ne); data random bytes of the exact size
TENSORS = [("token_embd.weight", "f32", [7, 3]), ("blk.0.attn_norm.weight", "f16", [5]),
           ("blk.0.bf16", "bf16", [4, 2, 3]), ("blk.0.f64", "f64", [3]), ("blk.0.i8", "i8", [9]),
           ("blk.0.i16", "i16", [2, 2]), ("blk.0.i32", "i32", [3, 2]), ("blk.0.i64", "i64", [2]),
           ("blk.0.q4_0", "q4_0", [64, 2]), ("blk.0.q5_1", "q5_1", [32]), ("blk.0.q8_0", "q8_0", [64, 2]),
           ("blk.0.q2_K", "q2_K", [256]), ("blk.0.q4_K", "q4_K", [256, 3]), ("blk.0.q6_K", "q6_K", [512]),
           ("blk.0.iq2_xxs", "iq2_xxs", [256]), ("blk.0.iq3_s", "iq3_s", [256, 1, 2]),
           ("blk.0.iq4_nl", "iq4_nl", [32, 3]), ("blk.0.iq4_xs", "iq4_xs", [256]), ("blk.0.iq1_m", "iq1_m", [256]),
           ("blk.0.tq1_0", "tq1_0", [256]), ("blk.0.tq2_0", "tq2_0", [256]),
           ("blk.0.mxfp4", "mxfp4", [32, 2, 2, 2]), ("blk.0.empty", "f32", [0, 4]), ("ü.tensor", "f32", [1])]


def tensor_descs(alignment):
    descs, want = [], []
    for name, tname, ne in TENSORS:
        gtype = gguf.GGMLQuantizationType[tname.upper()]
        blk, size = gguf.GGML_QUANT_SIZES[gtype]
        n = int(np.prod(ne))
        nbytes = n // blk * size
        data = rng.integers(0, 256, size=nbytes, dtype=np.uint8).tobytes()
        path = os.path.join(tmp, f"data_{len(descs)}.bin")
        with open(path, "wb") as f:
            f.write(data)
        descs.append({"name": name, "type": tname, "ne": ne, "data": path, "bytes": nbytes})
        want.append({"name": name.encode().hex(), "type": int(gtype), "n_dims": len(ne),
                     "ne": ne + [1] * (4 - len(ne)), "bytes": nbytes, "crc32": zlib.crc32(data)})
    return descs, want


def run_writer(desc, out):
    dpath = out + ".json"
    with open(dpath, "w", encoding="utf-8") as f:
        json.dump(desc, f, ensure_ascii=False)
    p = subprocess.run([gc.tool("gguf_write"), dpath, out], stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise SystemExit(f"gguf_write failed: {p.stderr.decode()}")


def strip_offsets(view):
    return [{k: v for k, v in t.items() if k not in ("offset", "abs_offset")} for t in view["tensors"]]


for alignment in (None, 64, 8):
    label = f"assay-written (alignment {alignment or 'default'})"
    tdesc, twant = tensor_descs(alignment)
    desc = {"kv": desc_kv, "remove": remove, "tensors": tdesc}
    want = list(want_kv)
    if alignment:
        desc["alignment"] = alignment
        want = [{"key": b"general.alignment".hex(), "type": "u32", "value": alignment}] + want
    out = os.path.join(tmp, f"assay_{alignment}.gguf")
    run_writer(desc, out)
    py = gc.py_view(out)
    check(py["version"] == 3, f"{label}: version {py['version']}")
    check(py["alignment"] == (alignment or 32), f"{label}: gguf-py alignment {py['alignment']}")
    for i, (a, b) in enumerate(zip(want, py["kv"])):
        check(a == b, f"{label}: kv {i}: described {gc._short(a)}, gguf-py read {gc._short(b)}")
    check(len(want) == len(py["kv"]), f"{label}: {len(want)} kvs described, gguf-py read {len(py['kv'])}")
    check(strip_offsets(py) == twant, f"{label}: tensors differ: described {gc._short(twant)}, gguf-py {gc._short(strip_offsets(py))}")
    for t in py["tensors"]:
        check(t["offset"] % (alignment or 32) == 0, f"{label}: tensor offset {t['offset']} not aligned")
    errors += gc.compare_views(py, gc.assay_view(out), label)

# ---- 2. gguf-py writes, assay reads ---------------------------------------------------------------------------
pyfile = os.path.join(tmp, "gguf_py.gguf")
w = gguf.GGUFWriter(pyfile, arch="llama")
w.add_custom_alignment(64)
for t, vt in (("u8", VT.UINT8), ("i8", VT.INT8), ("u16", VT.UINT16), ("i16", VT.INT16), ("u32", VT.UINT32),
              ("i32", VT.INT32), ("u64", VT.UINT64), ("i64", VT.INT64)):
    for i, v in enumerate(INTS[t]):
        w.add_key_value(f"py.{t}.{i}", v, vt)
    w.add_key_value(f"py.array.{t}", INTS[t] * 2, VT.ARRAY, sub_type=vt)
for i, v in enumerate(F32 + [math.nan]):
    w.add_key_value(f"py.f32.{i}", v, VT.FLOAT32)
for i, v in enumerate(F64 + [math.nan]):
    w.add_key_value(f"py.f64.{i}", v, VT.FLOAT64)
w.add_key_value("py.array.f32", F32, VT.ARRAY, sub_type=VT.FLOAT32)
w.add_key_value("py.array.f64", F64, VT.ARRAY, sub_type=VT.FLOAT64)
w.add_key_value("py.bool.t", True, VT.BOOL)
w.add_key_value("py.bool.f", False, VT.BOOL)
w.add_key_value("py.array.bool", [True, False, True], VT.ARRAY)
for i, s in enumerate(STRINGS):
    w.add_key_value(f"py.string.{i}", s, VT.STRING)
w.add_key_value("py.array.string", STRINGS, VT.ARRAY)
w.add_key_value("py.ключ.鍵", "ünï", VT.STRING)
w.add_key_value("py.nested", [[1, 2, 3], [4], ["x", "ÿ"], [[1.5], [2.5, 3.5]]], VT.ARRAY)
w.add_token_list(["<s>", "</s>", "▁hello", "日本"])
w.add_token_scores([0.0, -1.5, -2.25, -3.0])
py_tensors = []
for name, tname, ne in TENSORS:
    if 0 in ne:
        continue  # gguf-py's writer cannot express an empty tensor's byte shape
    gtype = gguf.GGMLQuantizationType[tname.upper()]
    blk, size = gguf.GGML_QUANT_SIZES[gtype]
    shape = list(reversed(ne))
    nbytes = int(np.prod(ne)) // blk * size
    data = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
    if tname in ("f32", "f16", "f64", "i8", "i16", "i32", "i64"):
        arrv = data.view({"f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8, "i16": np.int16,
                          "i32": np.int32, "i64": np.int64}[tname]).reshape(shape)
        w.add_tensor(name, arrv)
    else:
        byte_shape = shape[:-1] + [shape[-1] // blk * size]
        w.add_tensor(name, data.reshape(byte_shape), raw_dtype=gtype)
    py_tensors.append((name, zlib.crc32(data.tobytes())))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

py = gc.py_view(pyfile)
check(py["alignment"] == 64, f"gguf-py-written: alignment {py['alignment']}")
check([(bytes.fromhex(t["name"]).decode(), t["crc32"]) for t in py["tensors"]] == py_tensors,
      "gguf-py-written: gguf-py does not read back its own tensors (test bug)")
errors += gc.compare_views(py, gc.assay_view(pyfile), "gguf-py-written")

# ---- 3. copies through assay's reader + writer ----------------------------------------------------------------
for src in (pyfile, gc.shared("data/stories260K/stories260K.gguf")):
    out = os.path.join(tmp, "copy_" + os.path.basename(src))
    p = subprocess.run([gc.tool("gguf_write"), "--copy", src, out], stderr=subprocess.PIPE)
    if p.returncode != 0:
        errors.append(f"copy {src}: {p.stderr.decode()}")
        continue
    a, b = gc.py_view(src), gc.py_view(out)
    errors += gc.compare_views(a, b, f"copy of {os.path.basename(src)} (gguf-py on both)")
    with open(src, "rb") as f1, open(out, "rb") as f2:
        same = f1.read() == f2.read()
    print(f"copy of {os.path.basename(src)}: gguf-py views agree; byte-identical file: {same}")

for e in errors[:60]:
    print("FAIL", e)
print(f"gguf round trip: {len(errors)} failures")
sys.exit(1 if errors else 0)
