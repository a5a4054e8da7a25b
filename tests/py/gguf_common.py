"""Shared helpers for the GGUF tests: gguf-py's view of a file, and assay's view through tests/support/gguf_dump.

Both views use one JSON shape (see tests/support/gguf_dump.c): strings as hex of their bytes, floats as the integer
bit pattern of their encoding, arrays as {"elem", "len", "value"} (nested to any depth), tensors with ggml type id,
ne (4 dims, unused = 1), offsets, byte count and CRC-32 of the bytes. gguf-py is the reference: the expected view
is rebuilt from the parts gguf-py parsed (its own offsets and values), never from assay's output.
"""
import json
import os
import subprocess
import sys
import zlib

import numpy as np

import gguf
from gguf import GGUFValueType as VT

TYPE_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
              VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string", VT.ARRAY: "array",
              VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}


def build_dir():
    d = os.environ.get("ASSAY_BUILD_DIR")
    if not d:
        sys.exit("ASSAY_BUILD_DIR is not set (run the tests through ctest)")
    return d


def tool(name):
    return os.path.join(build_dir(), "support", name)


def shared(rel):
    root = os.environ.get("ASSAY_SHARED")
    if not root:
        sys.exit("ASSAY_SHARED is not set (run the tests through ctest)")
    return os.path.join(root, rel)


def _scalar(part, vtype):
    if vtype == VT.FLOAT32:
        return int(part.view(np.uint32)[0])
    if vtype == VT.FLOAT64:
        return int(part.view(np.uint64)[0])
    if vtype == VT.BOOL:
        return bool(part.view(np.uint8)[0] != 0)
    return int(part[0])


def _decode(parts, i, vtype):
    """Decodes one value of `vtype` starting at parts[i]; returns (value, next index)."""
    if vtype == VT.STRING:
        return bytes(parts[i + 1]).hex(), i + 2
    if vtype == VT.ARRAY:
        return _decode_array_body(parts, i)
    return _scalar(parts[i], vtype), i + 1


def _decode_array_body(parts, i):
    itype = VT(int(parts[i][0]))
    n = int(parts[i + 1][0])
    i += 2
    items = []
    for _ in range(n):
        v, i = _decode(parts, i, itype)
        items.append(v)
    return {"elem": TYPE_NAMES[itype], "len": n, "value": items}, i


def py_view(path, with_data=True):
    r = gguf.GGUFReader(path)
    kvs = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue  # gguf-py's pseudo-fields for the header
        vtype = VT(int(f.parts[2][0]))
        value, end = _decode(f.parts, 3, vtype)
        assert end == len(f.parts), f"{name}: decoded {end} of {len(f.parts)} parts"
        kvs.append({"key": bytes(f.parts[1]).hex(), "type": TYPE_NAMES[vtype], "value": value})
    tensors = []
    for t in r.tensors:
        name_len, name_data, n_dims, dims, raw_dtype, offset_tensor = t.field.parts
        ne = [int(d) for d in dims] + [1] * (4 - len(dims))
        e = {"name": bytes(name_data).hex(), "type": int(raw_dtype[0]), "n_dims": int(n_dims[0]), "ne": ne,
             "offset": int(offset_tensor[0]), "abs_offset": int(t.data_offset), "bytes": int(t.n_bytes)}
        if with_data:
            e["crc32"] = zlib.crc32(np.ascontiguousarray(t.data).view(np.uint8).reshape(-1))
        tensors.append(e)
    version = int(r.fields["GGUF.version"].parts[0][0])
    return {"version": version, "alignment": int(r.alignment), "data_offset": int(r.data_offset),
            "kv": kvs, "tensors": tensors}


def assay_view(path, with_data=True):
    cmd = [tool("gguf_dump"), path] + ([] if with_data else ["--no-data"])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        v = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"gguf_dump {path}: exit {p.returncode}, no JSON; stderr: {p.stderr.decode()[-2000:]}")
    if p.returncode != 0 or "error" in v:
        raise AssertionError(f"gguf_dump {path}: exit {p.returncode}: {v.get('error')} {p.stderr.decode()[-2000:]}")
    return v


def _short(x):
    s = json.dumps(x)
    return s if len(s) < 300 else s[:300] + "..."


def compare_views(want, got, label):
    """Returns a list of differences (empty when the views agree). `want` is gguf-py's view."""
    errs = []
    for k in ("version", "alignment", "data_offset"):
        if want[k] != got[k]:
            errs.append(f"{label}: {k}: gguf-py {want[k]}, assay {got[k]}")
    if len(want["kv"]) != len(got["kv"]):
        errs.append(f"{label}: {len(want['kv'])} metadata entries in gguf-py, {len(got['kv'])} in assay")
    for a, b in zip(want["kv"], got["kv"]):
        if a != b:
            key = bytes.fromhex(a["key"]).decode("utf-8", "replace")
            errs.append(f"{label}: key {key!r}: gguf-py {_short(a)} vs assay {_short(b)}")
    if len(want["tensors"]) != len(got["tensors"]):
        errs.append(f"{label}: {len(want['tensors'])} tensors in gguf-py, {len(got['tensors'])} in assay")
    for a, b in zip(want["tensors"], got["tensors"]):
        b = {k: v for k, v in b.items() if k != "type_name"}
        if a != b:
            name = bytes.fromhex(a["name"]).decode("utf-8", "replace")
            errs.append(f"{label}: tensor {name!r}: gguf-py {_short(a)} vs assay {_short(b)}")
    return errs
