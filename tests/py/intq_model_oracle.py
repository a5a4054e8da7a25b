"""Oracle for tests/unit/test_quantize_int_house*.c: intq_model_oracle.py SOURCE_DIR KIND:DIR ...  (KIND: rtn gptq awq w8a8;
same:DIR_A,DIR_B compares two GPTQ checkpoints' weights)

Reads the checkpoints with its own safetensors parser and numpy, following the documented layouts:
  GPTQ ("gptq" checkpoint format): qweight int32 [in/8, out] (input row 8i+k at bits 4k), qzeros int32 [groups, out/8]
    holding zero-1, scales fp16 [groups, out], g_idx int32 [in];
  AWQ GEMM: qweight int32 [in, out/8], nibble k = output 8j+[0,2,4,6,1,3,5,7][k], qzeros same order (no offset);
  compressed-tensors int-quantized: weight int8 [out, in], weight_scale [out, 1].
and checks config.json's quantization_config, that unquantized tensors are the source's, and the error each method
must stay within against the source weights (with AWQ / SmoothQuant scales recovered from the folded norms).
Exit code 0 = pass.
"""
import json
import os
import struct
import sys

import numpy as np

LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
DT = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I8": np.int8, "BF16": np.uint16}


def read_st(path):
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
        base = 8 + n
        for name, info in hdr.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            f.seek(base + a)
            raw = np.frombuffer(f.read(b - a), dtype=DT[info["dtype"]])
            if info["dtype"] == "BF16":
                raw = (raw.astype(np.uint32) << 16).view(np.float32)
            out[name] = (info["dtype"], raw.reshape(info["shape"]))
    return out


def read_dir(d):
    t = {}
    files = [f for f in os.listdir(d) if f.endswith(".safetensors")]
    for f in files:
        t.update(read_st(os.path.join(d, f)))
    return t


def unpack_gptq(t, p):
    qw, qz, sc, gi = (t[p + s][1] for s in (".qweight", ".qzeros", ".scales", ".g_idx"))
    qw, qz = qw.view(np.uint32), qz.view(np.uint32)
    n_in, n_out = qw.shape[0] * 8, qw.shape[1]
    q = np.zeros((n_in, n_out), np.int64)
    z = np.zeros((qz.shape[0], n_out), np.int64)
    for k in range(8):
        q[k::8] = (qw >> np.uint32(4 * k)) & 0xF
        z[:, k::8] = ((qz >> np.uint32(4 * k)) & 0xF) + 1
    s = sc.astype(np.float32)
    return (s[gi] * (q - z[gi])).T, s[gi].T, gi


def unpack_awq(t, p, gs):
    qw, qz, sc = (t[p + s][1] for s in (".qweight", ".qzeros", ".scales"))
    qw, qz = qw.view(np.uint32), qz.view(np.uint32)
    n_in, n_out = qw.shape[0], qw.shape[1] * 8
    q = np.zeros((n_in, n_out), np.int64)
    z = np.zeros((qz.shape[0], n_out), np.int64)
    for k in range(8):
        q[:, AWQ_ORDER[k]::8] = (qw >> np.uint32(4 * k)) & 0xF
        z[:, AWQ_ORDER[k]::8] = (qz >> np.uint32(4 * k)) & 0xF
    gi = np.arange(n_in) // gs
    return (sc.astype(np.float32)[gi] * (q - z[gi])).T


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def check_same(dirs, fails):
    """two GPTQ checkpoints of the same model and settings whose calibration activations were computed by two
    different routes (float rounding apart). With a few hundred calibration tokens H is far from full rank and
    GPTQ's solution jumps on rounding-level changes of its inputs, so codes are compared only where the inputs
    agree closely: layer 0's q/k/v read the same normalised embeddings (codes identical), its o_proj the attention
    of those (nearly identical), its gate/up that plus o_proj's output (mostly identical). Everywhere else the
    two must have the same error against the source weights within 15 %."""
    a, b = (read_dir(d) for d in dirs.split(","))
    want0 = {"self_attn.q_proj": 1.0, "self_attn.k_proj": 1.0, "self_attn.v_proj": 1.0, "self_attn.o_proj": 0.99,
             "mlp.gate_proj": 0.85, "mlp.up_proj": 0.85}
    for name in sorted(a):
        if not name.endswith(".qweight"):
            continue
        p = name[:-len(".qweight")]
        wa, sa, _ = unpack_gptq(a, p)
        wb, _, _ = unpack_gptq(b, p)
        lin = p.split(".", 3)[3]
        if p.startswith("model.layers.0.") and lin in want0:
            frac = float(np.mean(np.abs(wa - wb) <= 1e-3 * sa))
            print(f"same: {p}: {100 * frac:.3f}% of the weights equal between the two calibration routes")
            if frac < want0[lin]:
                fails.append(f"same: {p}: only {100 * frac:.3f}% of the weights agree (want {100 * want0[lin]:.0f}%)")
    src = None
    for name in sorted(a):
        if name.endswith(".qweight") and not name.startswith("model.layers.0."):
            p = name[:-len(".qweight")]
            wa, _, _ = unpack_gptq(a, p)
            wb, _, _ = unpack_gptq(b, p)
            if src is None:
                src = read_dir(os.environ.get("ASSAY_HOUSE_DIR", dirs.split(",")[0]))
            ref = src.get(p + ".weight")
            if ref is None:
                continue
            ea, eb = rel(wa, ref[1]), rel(wb, ref[1])
            if abs(ea - eb) > 0.15 * max(ea, eb):
                fails.append(f"same: {p}: weight error {ea:.4f} vs {eb:.4f} between the two calibration routes")


def check_same_awq(dirs, fails):
    """two AWQ checkpoints of the same model and settings whose activations came by two routes: the engine's
    forward pass over the full-precision model (hooks on the linears' inputs) and assay's own layer-by-layer
    computation on the cached residual stream (from the scaled full-precision weights, which equal
    the model's). Every scale search scores the same tokens, so the scales folded into the norms and the
    dequantized weights must agree (float rounding apart: a grid point can flip on a near tie, so a few linears
    may differ; layer 0, whose inputs are the embeddings in both routes, must agree everywhere)."""
    a, b = (read_dir(d) for d in dirs.split(","))
    n_lin, n_same = 0, 0
    for name in sorted(a):
        if name.endswith("layernorm.weight"):
            ra = rel(a[name][1], b[name][1])
            if name.startswith("model.layers.0.") and ra > 1e-2:
                fails.append(f"sameawq: {name} (folded AWQ scales) differs by {ra:.3g} between the two routes")
        if not name.endswith(".qweight"):
            continue
        p = name[:-len(".qweight")]
        wa, wb = unpack_awq(a, p, 128), unpack_awq(b, p, 128)
        sa = np.abs(wa).max()
        frac = float(np.mean(np.abs(wa - wb) <= 1e-3 * sa))
        n_lin += 1
        n_same += frac >= 0.99
        if p.startswith("model.layers.0.") and frac < 0.99:
            fails.append(f"sameawq: {p}: only {100 * frac:.2f}% of the weights agree between the two routes")
    print(f"sameawq: {n_same} of {n_lin} linears agree on >= 99% of their weights between the two routes")
    if n_lin == 0 or n_same < 0.85 * n_lin:
        fails.append(f"sameawq: only {n_same} of {n_lin} linears agree between the two routes")


def check(kind, d, src, fails):
    if kind == "same":
        os.environ["ASSAY_HOUSE_DIR"] = SOURCE_DIR
        return check_same(d, fails)
    if kind == "sameawq":
        return check_same_awq(d, fails)
    cfg = json.load(open(os.path.join(d, "config.json")))
    qc = cfg.get("quantization_config", {})
    t = read_dir(d)
    n_layer = cfg["num_hidden_layers"]
    if kind in ("rtn", "gptq"):
        want = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": kind == "gptq", "sym": False}
        qc2 = json.load(open(os.path.join(d, "quantize_config.json")))
        if qc2.get("bits") != 4 or qc2.get("group_size") != 128:
            fails.append(f"{kind}: quantize_config.json incomplete")
    elif kind == "awq":
        want = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    else:
        want = {"quant_method": "compressed-tensors", "format": "int-quantized"}
        g = qc.get("config_groups", {}).get("group_0", {})
        w, a = g.get("weights", {}), g.get("input_activations", {})
        if not (w.get("num_bits") == 8 and w.get("type") == "int" and w.get("strategy") == "channel" and w.get("symmetric")
                and a.get("num_bits") == 8 and a.get("strategy") == "token" and a.get("dynamic") is True
                and "Linear" in g.get("targets", [])):
            fails.append(f"{kind}: compressed-tensors config_groups wrong: {g}")
    for k, v in want.items():
        if qc.get(k) != v:
            fails.append(f"{kind}: quantization_config[{k!r}] = {qc.get(k)!r}, want {v!r}")
    # tensors that are not linears: present, and unchanged unless a folded scale lives there
    for name, (dt, v) in src.items():
        if any(l in name for l in LINEARS):
            continue
        if name not in t:
            fails.append(f"{kind}: {name} missing")
            continue
        folded = kind in ("awq", "w8a8") and ("input_layernorm" in name or "post_attention_layernorm" in name)
        if not folded and not np.array_equal(t[name][1], v):
            fails.append(f"{kind}: {name} changed")
    worst = {}
    for l in range(n_layer):
        for lin in LINEARS:
            p = f"model.layers.{l}.{lin}"
            w = src[p + ".weight"][1]
            if kind in ("rtn", "gptq"):
                if p + ".weight" in t:
                    fails.append(f"{kind}: {p}.weight still stored")
                wh, sc, gi = unpack_gptq(t, p)
                if kind == "rtn":
                    err = np.abs(wh - w) / sc
                    if err.max() > 0.51:
                        fails.append(f"{kind}: {p} error {err.max():.3f} steps exceeds half a step")
                    if not np.array_equal(gi, np.arange(w.shape[1]) // 128):
                        fails.append(f"{kind}: {p} g_idx is not i // 128")
                elif np.all(np.diff(gi) >= 0):
                    fails.append(f"{kind}: {p} g_idx is monotone: act-order not applied")
                e = rel(wh, w)
            elif kind == "awq":
                wh = unpack_awq(t, p, 128)
                if "q_proj" in lin or "k_proj" in lin or "v_proj" in lin or "gate" in lin:
                    norm = "input_layernorm" if "self_attn" in lin else "post_attention_layernorm"
                    s = src[f"model.layers.{l}.{norm}.weight"][1] / t[f"model.layers.{l}.{norm}.weight"][1]
                    e = rel(wh / s[None, :], w)
                elif "o_proj" in lin:
                    e = rel(wh, w)
                else:
                    continue  # up_proj carries down_proj's scale in its rows, down_proj that scale: not separable
            else:
                q, sc = t[p + ".weight"][1], t[p + ".weight_scale"][1]
                if t[p + ".weight"][0] != "I8" or sc.shape != (w.shape[0], 1):
                    fails.append(f"{kind}: {p} dtype/shape wrong")
                    continue
                wh = q.astype(np.float32) * sc
                if np.abs(q).max() > 127:
                    fails.append(f"{kind}: {p} uses -128")
                if "q_proj" in lin or "k_proj" in lin or "v_proj" in lin or "gate" in lin or "up_proj" in lin:
                    norm = "input_layernorm" if "self_attn" in lin else "post_attention_layernorm"
                    s = src[f"model.layers.{l}.{norm}.weight"][1] / t[f"model.layers.{l}.{norm}.weight"][1]
                    wh = wh / s[None, :]
                e = rel(wh, w)
            worst[lin] = max(worst.get(lin, 0), e)
    limit = {"rtn": 0.15, "gptq": 0.3, "awq": 0.2, "w8a8": 0.02}[kind]
    for lin, e in worst.items():
        if e > limit:
            fails.append(f"{kind}: {lin} relative weight error {e:.3f} > {limit}")
    print(f"{kind}: worst relative weight error by linear: " + " ".join(f"{k.split('.')[-1]}={v:.4f}" for k, v in worst.items()))


SOURCE_DIR = None


def main():
    global SOURCE_DIR
    SOURCE_DIR = sys.argv[1]
    src = read_dir(sys.argv[1])
    fails = []
    for arg in sys.argv[2:]:
        kind, d = arg.split(":", 1)
        check(kind, d, src, fails)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
