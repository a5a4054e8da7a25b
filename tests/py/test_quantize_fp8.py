"""`assay quantize --scheme fp8-dynamic / fp8-block (+ e5m2)` on the house model, checked independently:

- the directory loads with the `safetensors` package (numpy backend, FP8/bf16 dtypes from ml_dtypes);
- config.json's quantization_config validates against compressed-tensors' documented fields (QuantizationConfig,
  QuantizationScheme, QuantizationArgs: names, types, allowed values, and the per-strategy rules);
- fp8 (static): every Linear has a positive bf16 input_scale [1] from calibration, equal across layers that read
  the same input (q/k/v, gate/up);
- every quantized Linear's codes and bf16 scales equal an independent numpy + ml_dtypes quantization of the
  original bf16 weights (scale = max(amax/FP8_MAX, f32 eps) rounded to bf16, code = RNE(clip(w/scale))), and
  the dequantized weights are close to the originals (relative error within FP8's half-ulp bound);
- every other tensor is byte-identical to the source; an existing output is refused without --force, replaced
  with it, and no temporary directory is left behind.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

# safetensors' numpy backend looks these names up on numpy; ml_dtypes provides them.
np.float8_e4m3fn = ml_dtypes.float8_e4m3fn
np.float8_e5m2 = ml_dtypes.float8_e5m2
np.bfloat16 = ml_dtypes.bfloat16
from safetensors.numpy import load_file  # noqa: E402

ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
HOUSE = os.path.join(os.environ.get("ASSAY_SHARED", "../shared"), "models", "house")
F32_EPS = np.float32(np.finfo(np.float32).eps)
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def load_dir(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        out.update(load_file(f))
    return out


# ---- compressed-tensors schema, written from its documented fields ----
CONFIG_KEYS = {"quant_method", "format", "quantization_status", "config_groups", "ignore", "kv_cache_scheme",
               "global_compression_ratio", "sparsity_config", "transform_config", "version"}
FORMATS = {"dense", "sparse-bitmask", "sparse-24-bitmask", "int-quantized", "float-quantized", "naive-quantized",
           "pack-quantized", "marlin-24", "mixed-precision", "nvfp4-pack-quantized"}
STATUS = {"initialized", "calibration", "frozen", "compressed"}
SCHEME_KEYS = {"targets", "weights", "input_activations", "output_activations", "format"}
ARGS_KEYS = {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic", "actorder",
             "observer", "observer_kwargs", "scale_dtype", "zp_dtype"}
STRATEGIES = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"}


def check_args(where, a, is_weight):
    if not isinstance(a, dict):
        return fail(f"{where}: not an object")
    extra = set(a) - ARGS_KEYS
    if extra:
        fail(f"{where}: unknown QuantizationArgs fields {extra}")
    if a.get("num_bits") != 8 or a.get("type") != "float":
        fail(f"{where}: FP8 needs num_bits 8 and type 'float', got {a.get('num_bits')} {a.get('type')}")
    if a.get("symmetric") is not True:
        fail(f"{where}: FP8 is symmetric")
    st = a.get("strategy")
    if st not in STRATEGIES:
        fail(f"{where}: strategy {st!r}")
    dyn = a.get("dynamic")
    if dyn not in (True, False, "local"):
        fail(f"{where}: dynamic {dyn!r}")
    gs = a.get("group_size")
    if st == "group" and not (isinstance(gs, int) and gs > 0):
        fail(f"{where}: group strategy needs a positive group_size")
    if st != "group" and st != "tensor_group" and gs is not None:
        fail(f"{where}: group_size set for strategy {st}")
    bs = a.get("block_structure")
    if st == "block":
        if not (isinstance(bs, list) and len(bs) == 2 and all(isinstance(v, int) and v > 0 for v in bs)):
            fail(f"{where}: block strategy needs block_structure [rows, cols]")
    elif bs is not None:
        fail(f"{where}: block_structure set for strategy {st}")
    if is_weight and (dyn is not False or st == "token"):
        fail(f"{where}: weights are static and never per-token")
    if not is_weight and dyn is True and st not in ("token", "group", "tensor"):
        fail(f"{where}: dynamic activations need token/group/tensor strategy")


def check_config(qc, scheme):
    extra = set(qc) - CONFIG_KEYS
    if extra:
        fail(f"quantization_config: unknown fields {extra}")
    if qc.get("quant_method") != "compressed-tensors":
        fail("quant_method must be compressed-tensors")
    if qc.get("format") != "float-quantized" or qc["format"] not in FORMATS:
        fail(f"format {qc.get('format')!r}")
    if qc.get("quantization_status", "compressed") not in STATUS:
        fail("quantization_status")
    if not isinstance(qc.get("ignore"), list) or "lm_head" not in qc["ignore"]:
        fail("ignore must list lm_head")
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return fail("config_groups missing")
    for gname, g in groups.items():
        extra = set(g) - SCHEME_KEYS
        if extra:
            fail(f"{gname}: unknown QuantizationScheme fields {extra}")
        if not (isinstance(g.get("targets"), list) and g["targets"]):
            fail(f"{gname}: targets must be a non-empty list")
        check_args(f"{gname}.weights", g.get("weights"), True)
        check_args(f"{gname}.input_activations", g.get("input_activations"), False)
        if g.get("output_activations") is not None:
            fail(f"{gname}: output_activations should be null")
        w, a = g["weights"], g["input_activations"]
        want = {"fp8-dynamic": ("channel", "token", True), "fp8-block": ("block", "group", True),
                "fp8": ("tensor", "tensor", False),
                "fp8-e5m2-dynamic": ("channel", "token", True)}[scheme]
        if (w["strategy"], a["strategy"], a["dynamic"]) != want:
            fail(f"{scheme}: strategies {(w['strategy'], a['strategy'], a['dynamic'])}, want {want}")
        if scheme == "fp8-block" and (w["block_structure"] != [128, 128] or a["group_size"] != 128):
            fail("fp8-block: 128x128 weight blocks and 1x128 activation groups")


# ---- independent FP8 quantization (numpy + ml_dtypes) ----
def np_quantize(w, gran, fp8, fmax):
    rows, cols = w.shape

    def scale_of(amax):
        s = np.maximum(np.float32(amax) / np.float32(fmax), F32_EPS).astype(np.float32)
        return s.astype(ml_dtypes.bfloat16).astype(np.float32)

    if gran == "tensor":
        sc = scale_of(np.abs(w).max()).reshape(1)
        full = np.broadcast_to(sc[0], w.shape)
    elif gran == "channel":
        s = scale_of(np.abs(w).max(axis=1))[:, None]
        full = np.broadcast_to(s, w.shape)
        sc = s
    else:
        br, bc = -(-rows // 128), -(-cols // 128)
        sc = np.zeros((br, bc), np.float32)
        for i in range(br):
            for j in range(bc):
                sc[i, j] = scale_of(np.abs(w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max())
        full = np.repeat(np.repeat(sc, 128, axis=0), 128, axis=1)[:rows, :cols]
    q = np.clip(w / full, -fmax, fmax).astype(fp8)
    return q, sc, full


def run_scheme(scheme, out, src):
    extra = ["--calib-samples", "2", "--calib-seq-len", "128"] if scheme == "fp8" else []
    r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", out, "--scheme", scheme] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{scheme}: exit {r.returncode}: {r.stderr.strip()}")
        return
    cfg = json.load(open(os.path.join(out, "config.json")))
    src_cfg = json.load(open(os.path.join(HOUSE, "config.json")))
    for k, v in src_cfg.items():
        if cfg.get(k) != v:
            fail(f"{scheme}: config.json key {k} changed")
    check_config(cfg.get("quantization_config", {}), scheme)
    e5m2 = "e5m2" in scheme
    fp8, fmax, fp8_name = ((ml_dtypes.float8_e5m2, 57344.0, "float8_e5m2") if e5m2
                           else (ml_dtypes.float8_e4m3fn, 448.0, "float8_e4m3fn"))
    gran = "block" if "block" in scheme else "channel" if "dynamic" in scheme else "tensor"
    got = load_dir(out)
    n_quant = 0
    worst_rel = 0.0
    input_scales = {}
    for name, ref in src.items():
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        is_linear = module is not None and module.split(".")[-1] in LINEARS
        if not is_linear:
            if name not in got or got[name].dtype != ref.dtype or got[name].tobytes() != ref.tobytes():
                fail(f"{scheme}: {name} not copied unchanged")
            continue
        n_quant += 1
        q, s = got.get(name), got.get(module + ".weight_scale")
        if q is None or s is None:
            fail(f"{scheme}: {module}: weight / weight_scale missing")
            continue
        if q.dtype != np.dtype(fp8) or q.shape != ref.shape:
            fail(f"{scheme}: {name}: {q.dtype} {q.shape}, want {fp8_name} {ref.shape}")
            continue
        if s.dtype != np.dtype(ml_dtypes.bfloat16):
            fail(f"{scheme}: {module}.weight_scale is {s.dtype}, compressed-tensors stores the model dtype (bf16)")
        if gran != "tensor" and module + ".input_scale" in got:
            fail(f"{scheme}: dynamic activations must not have input_scale")
        if gran == "tensor":
            a = got.get(module + ".input_scale")
            if a is None or a.shape != (1,) or a.dtype != np.dtype(ml_dtypes.bfloat16) or \
                    not (np.isfinite(a.astype(np.float32)).all() and a.astype(np.float32)[0] > 0):
                fail(f"{scheme}: {module}.input_scale must be a positive bf16 [1]")
            else:
                input_scales[module] = float(a.astype(np.float32)[0])
        w = ref.astype(np.float32)
        wq, wsc, full = np_quantize(w, gran, fp8, fmax)
        if s.shape != wsc.shape:
            fail(f"{scheme}: {module}.weight_scale shape {s.shape}, want {wsc.shape}")
            continue
        if not np.array_equal(s.astype(np.float32), wsc):
            fail(f"{scheme}: {module}: scales differ from numpy")
        diff = np.count_nonzero(q.view(np.uint8) != wq.view(np.uint8))
        if diff:
            fail(f"{scheme}: {module}: {diff} of {q.size} codes differ from numpy/ml_dtypes")
        deq = q.astype(np.float32) * full
        # FP8 relative rounding error <= 2^-(mantissa bits + 1) for normal codes; subnormals: half a step absolute
        half_ulp = 2.0 ** -(3 if e5m2 else 4)
        tiny = full * (2.0 ** (-16 if e5m2 else -9)) / 2
        err = np.abs(deq - w)
        bound = np.abs(w) * half_ulp + tiny + 1e-30
        if (err > bound * 1.0001).any():
            fail(f"{scheme}: {module}: dequantized error above FP8's rounding bound")
        worst_rel = max(worst_rel, float(np.max(err / np.maximum(np.abs(w), 1e-30) * (np.abs(w) > tiny * 64))))
    if gran == "tensor":  # q/k/v read one input, gate/up another: their calibrated scales must agree
        for layer in range(7):
            p = f"model.layers.{layer}."
            for group in (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("mlp.gate_proj", "mlp.up_proj")):
                vals = {input_scales.get(p + m) for m in group}
                if len(vals) != 1:
                    fail(f"{scheme}: layer {layer} {group} input scales differ: {vals}")
    if n_quant != 7 * 7:
        fail(f"{scheme}: {n_quant} Linear weights, want 49")
    extra = set(got) - set(src) - {k for k in got if k.endswith((".weight_scale", ".input_scale"))}
    if extra:
        fail(f"{scheme}: unexpected tensors {sorted(extra)[:4]}")
    print(f"{scheme}: {n_quant} Linear layers match numpy/ml_dtypes; worst relative error {worst_rel:.4f}")


def main():
    src = load_dir(HOUSE)
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in ("fp8-dynamic", "fp8-block", "fp8-e5m2-dynamic", "fp8"):
            run_scheme(scheme, os.path.join(tmp, scheme), src)
        out = os.path.join(tmp, "fp8-dynamic")
        r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", out, "--scheme", "fp8-dynamic"], capture_output=True, text=True)
        if r.returncode == 0 or "--force" not in r.stderr:
            fail("an existing output must be refused with a hint about --force")
        r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", out, "--scheme", "fp8-block", "--force"],
                           capture_output=True, text=True)
        cfg = json.load(open(os.path.join(out, "config.json")))
        if r.returncode != 0 or cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] != "block":
            fail("--force must replace the output")
        left = [p for p in os.listdir(tmp) if ".tmp-" in p or ".old-" in p]
        if left:
            fail(f"temporary directories left behind: {left}")
        r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", os.path.join(tmp, "x"), "--scheme", "nope"],
                           capture_output=True, text=True)
        if r.returncode != 2:
            fail("an unknown scheme is a usage error (exit 2)")
    print("failures:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
