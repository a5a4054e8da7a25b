"""`assay quantize --scheme nvfp4 / mxfp4` on the house model, checked independently:

- the directory loads with the `safetensors` package (numpy backend; FP8 scales through ml_dtypes);
- config.json's quantization_config has compressed-tensors' fields and the values of its NVFP4A16 / MXFP4A16
  presets (num_bits 4, type float, tensor_group/16 with FP8 scales, group/32 with uint8 scales, weight-only);
- every quantized Linear has weight_packed U8 [out, in/2], weight_scale [out, in/G] (F8_E4M3 / U8) and, for
  NVFP4, weight_global_scale F32 [1]; no dense `weight` is left for it;
- codes and scales equal an independent numpy quantization of the bf16 weights written from compressed-tensors'
  formulas (generate_gparam: gs = 448*6/amax; block scale = fp8(gs * amax_block / 6), 0 -> 0.125; MX scale
  exponent from its round_to_power_2 bit trick on the bf16 block max, minus 2), with ml_dtypes doing every
  rounding (float8_e4m3fn, float4_e2m1fn: round to nearest even);
- unpacking as compressed-tensors documents it (low nibble first; E2M1 magnitudes 0,.5,1,1.5,2,3,4,6, bit 3 the
  sign) and dequantizing (code * scale / gs; code * 2^(e-127) via ml_dtypes' float8_e8m0fnu) stays within E2M1's
  rounding bound of the original weights;
- every other tensor is byte-identical to the source;
- the engine loads the directory natively (model_probe, loader picked from the quantization_config): the weights
  it multiplies by equal the numpy dequantization above (q/k rows in llama.cpp's order), and its logits stay
  close to the bf16 model's (weight-only FP4 on this model moves them by well under one logit).
"""
import glob
import json
import os
import subprocess
import tempfile

import ml_dtypes
import numpy as np
from testlib import check, finish

np.float8_e4m3fn = ml_dtypes.float8_e4m3fn
np.bfloat16 = ml_dtypes.bfloat16
from safetensors.numpy import load_file  # noqa: E402

ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
PROBE = os.path.join(os.environ.get("ASSAY_BUILD_DIR", "build"), "support", "model_probe")
HOUSE = os.path.join(os.environ.get("ASSAY_SHARED", "../shared"), "models", "house")
HF_OF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}
IDS = [501, 672, 440, 776, 357, 263, 1519, 281, 399]
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
E2M1_MAG = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


def fail(msg):
    check(False, msg)


def load_dir(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        out.update(load_file(f))
    return out


def e2m1(v):
    """RNE to E2M1 (saturating at 6) by ml_dtypes; returns 4-bit codes."""
    return np.clip(v, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF


def unpack(packed):
    lo, hi = packed & 0xF, packed >> 4
    codes = np.stack([lo, hi], axis=-1).reshape(packed.shape[0], -1)
    return np.where(codes & 8, -1.0, 1.0).astype(np.float32) * E2M1_MAG[codes & 7]


def ref_nvfp4(w):
    amax = np.float32(np.abs(w).max())
    gs = np.float32(np.float32(448.0 * 6.0) / amax)
    blocks = w.reshape(w.shape[0], -1, 16)
    bmax = np.abs(blocks).max(axis=-1)
    sb = (gs * (bmax / np.float32(6.0))).astype(np.float32)
    sb = np.clip(sb, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    sb = np.where(sb.astype(np.float32) == 0, np.float32(0.125), sb.astype(np.float32)).astype(ml_dtypes.float8_e4m3fn)
    s = (sb.astype(np.float32) / gs).astype(np.float32)
    codes = e2m1((blocks / s[..., None]).astype(np.float32)).reshape(w.shape)
    return codes, sb, gs, np.repeat(s, 16, axis=1)


def ref_mxfp4(w):
    blocks = w.reshape(w.shape[0], -1, 32)
    bmax = np.abs(blocks).max(axis=-1).astype(ml_dtypes.bfloat16)  # exact: the weights are bf16
    # compressed-tensors round_to_power_2: add 1 << (7 - 1 - 1) to the bf16 bits, keep sign + exponent
    p2 = ((bmax.view(np.uint16).astype(np.int32) + 32) & 0xFF80).astype(np.uint16).view(ml_dtypes.bfloat16)
    p2 = p2.astype(np.float32)
    with np.errstate(divide="ignore"):
        e = np.where(p2 > 0, np.floor(np.log2(np.where(p2 > 0, p2, 1))) - 2, -127)
    e = np.clip(e, -127, 127).astype(np.int32)
    scale = np.ldexp(np.float32(1), e).astype(np.float32)
    codes = e2m1((blocks / scale[..., None]).astype(np.float32)).reshape(w.shape)
    return codes, (e + 127).astype(np.uint8), np.repeat(scale, 32, axis=1)


def check_config(qc, scheme):
    mx = scheme == "mxfp4"
    fmt = "mxfp4-pack-quantized" if mx else "nvfp4-pack-quantized"
    want_top = {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed"}
    for k, v in want_top.items():
        check(qc.get(k) == v, f"{scheme}: quantization_config.{k} = {qc.get(k)!r}, want {v!r}")
    check("lm_head" in qc.get("ignore", []), f"{scheme}: ignore must list lm_head")
    groups = qc.get("config_groups", {})
    if len(groups) != 1:
        return fail(f"{scheme}: one config group expected")
    g = next(iter(groups.values()))
    extra = set(g) - {"targets", "weights", "input_activations", "output_activations", "format"}
    check(not extra, f"{scheme}: unknown QuantizationScheme fields {extra}")
    check(g.get("targets") == ["Linear"] and g.get("format") == fmt,
          f"{scheme}: targets/format {g.get('targets')} {g.get('format')}")
    check(g.get("input_activations") is None and g.get("output_activations") is None,
          f"{scheme}: weight-only: activations must be null")
    w = g.get("weights", {})
    args_keys = {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic", "actorder",
                 "observer", "observer_kwargs", "scale_dtype", "zp_dtype"}
    check(not set(w) - args_keys, f"{scheme}: unknown QuantizationArgs fields {set(w) - args_keys}")
    # the NVFP4A16 / MXFP4A16 presets of compressed-tensors' quant_scheme.py
    want = dict(num_bits=4, type="float", symmetric=True, dynamic=False, block_structure=None, actorder=None,
                group_size=32 if mx else 16, strategy="group" if mx else "tensor_group",
                scale_dtype="torch.uint8" if mx else "torch.float8_e4m3fn")
    for k, v in want.items():
        check(w.get(k) == v, f"{scheme}: weights.{k} = {w.get(k)!r}, want {v!r}")


def run_scheme(scheme, out, src):
    mx = scheme == "mxfp4"
    r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", out, "--scheme", scheme], capture_output=True, text=True)
    if r.returncode != 0:
        return fail(f"{scheme}: exit {r.returncode}: {r.stderr.strip()}")
    cfg = json.load(open(os.path.join(out, "config.json")))
    for k, v in json.load(open(os.path.join(HOUSE, "config.json"))).items():
        check(cfg.get(k) == v, f"{scheme}: config.json key {k} changed")
    check_config(cfg.get("quantization_config", {}), scheme)
    got = load_dir(out)
    G = 32 if mx else 16
    n_quant, worst = 0, 0.0
    dequantized = {}
    expected_names = set()
    for name, ref in src.items():
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is None or module.split(".")[-1] not in LINEARS:
            expected_names.add(name)
            check(name in got and got[name].dtype == ref.dtype and got[name].tobytes() == ref.tobytes(),
                  f"{scheme}: {name} not copied unchanged")
            continue
        n_quant += 1
        names = [module + ".weight_packed", module + ".weight_scale"]
        names += [] if mx else [module + ".weight_global_scale"]
        expected_names.update(names)
        check(name not in got, f"{scheme}: {name} still dense")
        if any(k not in got for k in names):
            fail(f"{scheme}: {module}: missing {[k for k in names if k not in got]}")
            continue
        packed, sc = got[names[0]], got[names[1]]
        rows, cols = ref.shape
        if packed.dtype != np.uint8 or packed.shape != (rows, cols // 2):
            fail(f"{scheme}: {names[0]} {packed.dtype} {packed.shape}, want uint8 {(rows, cols // 2)}")
            continue
        want_sdt = np.dtype(np.uint8) if mx else np.dtype(ml_dtypes.float8_e4m3fn)
        if sc.dtype != want_sdt or sc.shape != (rows, cols // G):
            fail(f"{scheme}: {names[1]} {sc.dtype} {sc.shape}, want {want_sdt} {(rows, cols // G)}")
            continue
        w = ref.astype(np.float32)
        codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(rows, cols)
        if mx:
            rc, rs, full = ref_mxfp4(w)
            check(np.array_equal(sc, rs),
                  f"{scheme}: {module}: {np.count_nonzero(sc != rs)} of {sc.size} E8M0 scales differ from numpy")
            scale_full = np.repeat(sc.view(ml_dtypes.float8_e8m0fnu).astype(np.float32), 32, axis=1)
        else:
            gsa = got[names[2]]
            if gsa.dtype != np.float32 or gsa.shape != (1,):
                fail(f"{scheme}: {names[2]} {gsa.dtype} {gsa.shape}, want float32 (1,)")
                continue
            rc, rs, gs, full = ref_nvfp4(w)
            check(gsa[0] == gs, f"{scheme}: {module}: global scale {gsa[0]!r}, numpy {gs!r}")
            check(np.array_equal(sc.view(np.uint8), rs.view(np.uint8)),
                  f"{scheme}: {module}: {np.count_nonzero(sc.view(np.uint8) != rs.view(np.uint8))} of {sc.size} "
                     "FP8 block scales differ from numpy")
            scale_full = np.repeat(sc.astype(np.float32), 16, axis=1) / gsa[0]
        bad = np.count_nonzero(codes != rc)
        check(bad == 0, f"{scheme}: {module}: {bad} of {codes.size} E2M1 codes differ from numpy/ml_dtypes")
        deq = unpack(packed) * scale_full
        dequantized[module] = deq
        # E2M1 rounding bound: half the code spacing at |w/scale| (0.5 below 2, 1 below 4, 2 up to 6), plus what
        # saturation at 6 x scale clips
        r = np.abs(w) / scale_full
        half_step = np.where(r < 2, 0.25, np.where(r < 4, 0.5, 1.0)) * scale_full
        bound = half_step + np.maximum(np.abs(w) - 6 * scale_full, 0) + 1e-30
        check((np.abs(deq - w) <= bound * 1.0001).all(),
              f"{scheme}: {module}: dequantized weights beyond E2M1's rounding bound")
        rel = float(np.linalg.norm(deq - w) / np.linalg.norm(w))
        worst = max(worst, rel)
        check(rel <= 0.15, f"{scheme}: {module}: relative error {rel:.3f}, FP4 should stay near 0.1")
    check(n_quant == 49, f"{scheme}: {n_quant} Linear weights quantized, want 49")
    check(set(got) == expected_names, f"{scheme}: unexpected tensors {sorted(set(got) ^ expected_names)[:4]}")
    print(f"{scheme}: {n_quant} Linear layers match numpy/ml_dtypes; worst relative Frobenius error {worst:.4f}")
    return dequantized


def permute(w, n_head):  # llama.cpp's Q/K row order, which the engine multiplies by
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def probe(model, out, names):
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([PROBE, model, "none", out, ",".join(map(str, IDS))] + names, capture_output=True, text=True)
    return r, (np.fromfile(os.path.join(out, "logits.f32"), np.float32) if r.returncode == 0 else None)


def check_engine(scheme, out, dequantized, base_logits, tmp):
    cfg = json.load(open(os.path.join(HOUSE, "config.json")))
    names = [f"blk.{layer}.{k}.weight" for layer in (0, cfg["num_hidden_layers"] - 1) for k in HF_OF]
    pdir = os.path.join(tmp, scheme + "-probe")
    r, logits = probe(out, pdir, names)
    if not check(r.returncode == 0, f"{scheme}: the engine cannot load it: {r.stderr.strip()[-500:]}"):
        return
    check(f"loaded 49 linear layers from the compressed-tensors {scheme}-pack-quantized" in r.stderr,
          f"{scheme}: no load note naming the format: {r.stderr.strip()!r}")
    for n in names:
        layer, k = n.split(".")[1], n.split(".")[2]
        want = dequantized.get(f"model.layers.{layer}.{HF_OF[k]}")
        if not check(want is not None, f"{scheme}: {n} was not dequantized by the test"):
            continue
        if k in ("attn_q", "attn_k"):
            want = permute(want, cfg["num_attention_heads"] if k == "attn_q" else cfg["num_key_value_heads"])
        ours = np.fromfile(os.path.join(pdir, n + ".f32"), np.float32).reshape(want.shape)
        check(np.array_equal(ours, want.astype(np.float32)),
              f"{scheme}: {n}: {np.count_nonzero(ours != want)} engine weights differ from numpy's dequantization")
    lg, bl = logits.reshape(len(IDS), -1), base_logits.reshape(len(IDS), -1)
    d = float(np.abs(lg - bl).mean())
    same = int(np.count_nonzero(lg.argmax(axis=1) == bl.argmax(axis=1)))
    print(f"{scheme}: engine weights equal numpy's; mean |logit - bf16 logit| {d:.3f}, same top token {same}/{len(IDS)}")
    # a sanity bound: a mis-scaled or mis-packed model moves logits by whole units and loses the top tokens
    check(np.isfinite(lg).all() and 0 < d < 0.5 and same >= len(IDS) - 3,
          f"{scheme}: logits moved by {d:.3f} on average from the bf16 model's, top token kept {same}/{len(IDS)}")


def main():
    src = load_dir(HOUSE)
    with tempfile.TemporaryDirectory() as tmp:
        r, base_logits = probe(HOUSE, os.path.join(tmp, "bf16-probe"), [])
        check(r.returncode == 0, f"model_probe on the bf16 model: {r.stderr.strip()}")
        for scheme in ("nvfp4", "mxfp4"):
            deq = run_scheme(scheme, os.path.join(tmp, scheme), src)
            if deq and base_logits is not None:
                check_engine(scheme, os.path.join(tmp, scheme), deq, base_logits, tmp)
        r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", os.path.join(tmp, "g"), "--scheme", "nvfp4",
                            "--group-size", "32"], capture_output=True, text=True)
        check(r.returncode != 0 and not os.path.exists(os.path.join(tmp, "g")),
              "nvfp4 with --group-size 32 must be refused (NVFP4's group is 16)")
        left = [p for p in os.listdir(tmp) if ".tmp-" in p]
        check(not left, f"temporary directories left behind: {left}")
    finish("quantize nvfp4/mxfp4")


if __name__ == "__main__":
    main()
