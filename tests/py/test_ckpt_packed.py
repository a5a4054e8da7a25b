"""GPTQ / AWQ int4 checkpoints stay packed in the engine (q4g rows, 4 bits + an fp16 scale and a zero per group)
and compute the same thing as the previous path that dequantized every linear to f32 at load.

For each checkpoint, written by `assay quantize` from $ASSAY_SHARED/models/house:
  int4-rtn (GPTQ layout, g_idx = i // 128), int4-rtn --group-size 32 (q4g32 rows), int4-rtn with its g_idx
  shuffled into act-order groups (not monotone: the packed rows hold the columns sorted by group and the engine
  gathers each input in that order), one shuffled into uneven groups (not packable: f32 with a stated reason), and
  int4-rtn rewritten in numpy as compressed-tensors "pack-quantized" (bf16 scales; its weights must also equal
  numpy's own unpacking of what it wrote);
  test_ckpt_packed_heavy.py: int4-awq (AWQ GEMM layout) and int4-gptq (real act-order), both calibrated:
  1. tests/support/model_probe loads it twice: as it loads by default (packed) and with ASSAY_INT4_F32=1 (the
     f32 dequantization path every earlier version used); the load notes must say which happened;
  2. all 49 linear weights the engine reads back (packed ones dequantized on read, act-order columns put back in
     the checkpoint's order) must be EQUAL bit for bit to the f32 path's;
  3. the logits of a 50-token prompt: bit-identical where the packed kernels load the same weights into the same
     accumulators (no permutation), within 1e-5 relative where act-order changes the summation order;
  4. the matmul weights held in memory shrink by exactly the 49 linears' 32 - (5.0 | 4.25) bits per weight.
The engine-vs-numpy weight check of the same checkpoints is test_ckpt_house.py's (int4-rtn there by default,
int4-gptq/awq in the _heavy variant); this test shows the packed path is the f32 path, bit for bit.
Exit code 0 = pass.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

np.bfloat16 = ml_dtypes.bfloat16  # safetensors' numpy loader looks the dtype up here

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, finish  # noqa: E402

# f32 activations throughout (the AVX512_BF16 kernels would round the bf16 lm_head's input to bf16, a step function
# that turns the act-order path's summation-order differences upstream into jumps of one bf16 step)
os.environ["ASSAY_CPU_NO_BF16"] = "1"
ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
BUILD = os.environ.get("ASSAY_BUILD_DIR", "build")
SHARED = os.environ.get("ASSAY_SHARED", "../shared")
HOUSE = os.path.join(SHARED, "models", "house")
PROBE = os.path.join(BUILD, "support", "model_probe")
CALIB = ["--calib", os.path.join(SHARED, "data", "calibration", "shakespeare-macbeth.txt"), "--calib-samples", "2",
         "--calib-seq-len", "64"]
cfg = json.load(open(os.path.join(HOUSE, "config.json")))
ref = json.load(open(os.path.join(HOUSE, "reference.json")))
IDS = (ref["prompt_ids"] + ref["greedy_ids"])[:50]
V, L = cfg["vocab_size"], cfg["num_hidden_layers"]
KINDS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
NAMES = [f"blk.{l}.{k}.weight" for l in range(L) for k in KINDS]
E, F, NH, NKV, HD = (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"],
                    cfg["num_key_value_heads"], cfg["head_dim"])
N_LINEAR = L * (E * NH * HD + 2 * E * NKV * HD + NH * HD * E + 3 * E * F)  # weights in the 49 quantized linears
BITS = {"q4g32": 5.0, "q4g64": 4.5, "q4g128": 4.25}
# name, quantize arguments, packed type, act-order ("shuffle": int4-rtn with g_idx rewritten, see shuffle_g_idx)
CASES = [("int4-rtn", ["--scheme", "int4-rtn"], "q4g128", False),
         ("int4-rtn-g32", ["--scheme", "int4-rtn", "--group-size", "32"], "q4g32", False),
         ("int4-rtn-shuffled", ["--scheme", "int4-rtn"], "q4g128", "shuffle"),
         ("int4-rtn-uneven", ["--scheme", "int4-rtn"], None, "uneven"),
         ("pack-quantized", ["--scheme", "int4-rtn"], "q4g128", "ct")]
HEAVY = [("int4-awq", ["--scheme", "int4-awq"] + CALIB, "q4g128", False),
         ("int4-gptq", ["--scheme", "int4-gptq"] + CALIB, "q4g128", True)]


def shuffle_g_idx(d, uneven):
    """Act-order without a calibration run: every g_idx of the int4-rtn checkpoint replaced by a random assignment of
    the columns to groups of exactly 128 (what GPTQ's act-order writes: a different model, but both engine paths must
    still agree on it), or (uneven) one with a group of 129 and one of 127, which cannot be packed by groups: the
    engine must fall back to f32 and say why."""
    from safetensors.numpy import load_file, save_file
    import glob
    rng = np.random.default_rng(7)
    f = glob.glob(os.path.join(d, "*.safetensors"))[0]
    t = load_file(f)
    for k in [k for k in t if k.endswith(".g_idx")]:
        n = t[k].size
        g = rng.permutation(np.arange(n) // 128).astype(np.int32)
        if uneven:
            g[np.flatnonzero(g == 1)[0]] = 0
        t[k] = g
    save_file(t, f, metadata={"format": "pt"})
    c = json.load(open(os.path.join(d, "config.json")))
    c["quantization_config"]["desc_act"] = True
    json.dump(c, open(os.path.join(d, "config.json"), "w"))


def to_pack_quantized(d):
    """The int4-rtn checkpoint rewritten as compressed-tensors "pack-quantized" (vLLM's W4A16 layout), from the
    packing compressed-tensors documents (pack_to_int32): weight_packed [out, in/8] int32 with input 8k+j at bits
    4j, holding the signed code + 8; weight_zero_point [out/8, ng] int32 with output 8k+j at bits 4j, signed zero
    + 8; weight_scale [out, ng] in bf16 (the model dtype; rounded from the GPTQ file's fp16); weight_shape.
    Returns the f32 weights numpy expects the engine to hold: scale * (q_signed - zp_signed)."""
    from safetensors.numpy import load_file, save_file
    import glob
    f = glob.glob(os.path.join(d, "*.safetensors"))[0]
    t = load_file(f)
    want = {}
    for p in sorted(k[: -len(".qweight")] for k in t if k.endswith(".qweight")):
        qw, qz = t.pop(p + ".qweight").view(np.uint32), t.pop(p + ".qzeros").view(np.uint32)
        sc, gi = t.pop(p + ".scales"), t.pop(p + ".g_idx")
        n_in, n_out = qw.shape[0] * 8, qw.shape[1]
        q = np.zeros((n_in, n_out), np.uint32)
        z = np.zeros((qz.shape[0], n_out), np.uint32)
        for k in range(8):
            q[k::8] = (qw >> np.uint32(4 * k)) & 0xF
            z[:, k::8] = np.minimum(((qz >> np.uint32(4 * k)) & 0xF) + 1, 15)  # GPTQ v1 zero; 16 has no signed int4
        q, z = q.T.copy(), z.T.copy()  # [out, in], [out, ng]
        wp = np.zeros((n_out, n_in // 8), np.uint32)
        for k in range(8):
            wp |= q[:, k::8] << np.uint32(4 * k)
        zp = np.zeros((n_out // 8, z.shape[1]), np.uint32)
        for k in range(8):
            zp |= z[k::8] << np.uint32(4 * k)
        s16 = np.ascontiguousarray(sc.T.astype(np.float32).astype(ml_dtypes.bfloat16))  # [out, ng], C order
        t[p + ".weight_packed"] = wp.view(np.int32)
        t[p + ".weight_zero_point"] = zp.view(np.int32)
        t[p + ".weight_scale"] = s16
        t[p + ".weight_shape"] = np.array([n_out, n_in], np.int64)
        g = np.arange(n_in) // 128
        want[p] = s16.astype(np.float32)[:, g] * ((q.astype(np.float32) - 8) - (z[:, g].astype(np.float32) - 8))
    save_file(t, f, metadata={"format": "pt"})
    c = json.load(open(os.path.join(d, "config.json")))
    c["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                      "weights": {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group",
                                                  "group_size": 128, "dynamic": False, "actorder": None}}},
        "ignore": ["lm_head"]}
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    return want


def permute(w, n_head):  # llama.cpp's Q/K row order, which the engine holds
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


HF_OF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}


def probe(d, out, f32):
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, ASSAY_PROBE_KV_F32="1")
    env.pop("ASSAY_INT4_F32", None)
    if f32:
        env["ASSAY_INT4_F32"] = "1"
    return subprocess.run([PROBE, d, "none", out, ",".join(map(str, IDS))] + NAMES, capture_output=True, text=True,
                          env=env)


def mib(note):
    m = re.search(r"matmul weights ([0-9.]+) MiB", note)
    return float(m.group(1)) if m else None


def main(cases):
    tmp = tempfile.mkdtemp(prefix="ckpt-packed-")
    try:
        for name, args, ptype, act_order in cases:
            d = os.path.join(tmp, name)
            r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", d, "-t", "2"] + args, capture_output=True, text=True)
            if not check(r.returncode == 0, f"{name}: quantize failed: {r.stderr[-2000:]}"):
                continue
            want = None
            if act_order in ("shuffle", "uneven"):
                shuffle_g_idx(d, act_order == "uneven")
            if act_order == "ct":
                want, act_order = to_pack_quantized(d), False
            qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
            check(bool(qc.get("desc_act")) == bool(act_order), f"{name}: desc_act is {qc.get('desc_act')}")
            pk, pf = probe(d, os.path.join(tmp, name + "-packed"), False), probe(d, os.path.join(tmp, name + "-f32"), True)
            if not check(pk.returncode == 0 and pf.returncode == 0, f"{name}: probe failed: {pk.stderr[-1500:]} {pf.stderr[-1500:]}"):
                continue
            check("dequantized to f32" in pf.stderr and "packed as" not in pf.stderr,
                  f"{name}: ASSAY_INT4_F32=1 did not dequantize: {pf.stderr!r}")
            if ptype is None:  # cannot be packed: f32, with the reason
                check("packed as" not in pk.stderr and "g_idx groups are not runs of 128 columns" in pk.stderr,
                      f"{name}: no f32 fallback note: {pk.stderr!r}")
            else:
                check(f"49 packed as {ptype}" in pk.stderr, f"{name}: load note does not say 49 packed as {ptype}: {pk.stderr!r}")
                check(("act-order inputs gathered" in pk.stderr) == bool(act_order), f"{name}: act-order note: {pk.stderr!r}")
            bad = []
            for n in NAMES:
                a = np.fromfile(os.path.join(tmp, name + "-packed", n + ".f32"), dtype=np.uint32)
                b = np.fromfile(os.path.join(tmp, name + "-f32", n + ".f32"), dtype=np.uint32)
                if a.size == 0 or not np.array_equal(a, b):
                    bad.append(n)
            check(not bad, f"{name}: {len(bad)} of 49 weights differ from the f32 path's: {bad[:3]}")
            if want is not None:  # pack-quantized: numpy's own unpacking of the written tensors
                bad = []
                for n in NAMES:
                    l, k = int(n.split(".")[1]), n.split(".")[2]
                    w = want[f"model.layers.{l}.{HF_OF[k]}"]
                    w = permute(w, NH) if k == "attn_q" else permute(w, NKV) if k == "attn_k" else w
                    a = np.fromfile(os.path.join(tmp, name + "-packed", n + ".f32"), dtype=np.float32)
                    if a.size != w.size or not np.array_equal(a.reshape(w.shape), w.astype(np.float32)):
                        bad.append(n)
                check(not bad, f"{name}: {len(bad)} of 49 weights differ from numpy's pack-quantized unpacking: {bad[:3]}")
            la = np.fromfile(os.path.join(tmp, name + "-packed", "logits.f32"), dtype=np.float32).reshape(-1, V)
            lb = np.fromfile(os.path.join(tmp, name + "-f32", "logits.f32"), dtype=np.float32).reshape(-1, V)
            rel = float(np.abs(la - lb).max() / np.abs(lb).max())
            if act_order:
                check(rel < 1e-5, f"{name}: logits differ from the f32 path by {rel:.3g} (relative)")
            else:
                check(np.array_equal(la, lb), f"{name}: logits not bit-identical to the f32 path (max rel {rel:.3g})")
            mp, mf = mib(pk.stderr), mib(pf.stderr)
            if ptype is not None:  # the 49 linears shrink from 32 bits per weight to the packed type's
                want = N_LINEAR * (32 - BITS[ptype]) / 8 / 2**20
                check(mp is not None and mf is not None and abs((mf - mp) - want) < 0.02,
                      f"{name}: matmul weights {mp} MiB packed vs {mf} MiB f32, expected {want:.2f} MiB less")
            print(f"{name:18s} {ptype}: 49/49 weights equal to the f32 path; logits max rel diff {rel:.2e}; "
                  f"matmul weights {mp} MiB vs {mf} MiB with ASSAY_INT4_F32=1")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("packed int4 checkpoints")


if __name__ == "__main__":
    main(HEAVY if sys.argv[1:] == ["heavy"] else CASES)
