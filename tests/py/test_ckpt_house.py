"""Quantized checkpoints written by `assay quantize` run natively in the engine, checked against an independent
numpy implementation that reads the same files with the `safetensors` package.

For each scheme given on the command line (default: the fast ones, see DEFAULT below):
  1. `assay quantize $ASSAY_SHARED/models/house -o DIR --scheme S` (tiny calibration for the calibrated schemes);
  2. tests/support/model_probe loads DIR with the engine (no --quantization: the loader is picked from config.json)
     and writes the f32 weights the engine multiplies by and the logits of a 50-token prompt (f32 KV cache);
  3. numpy, independently:
     - dequantizes every linear from the files: compressed-tensors FP8 codes (ml_dtypes) x bf16 weight_scale
       broadcast per tensor / channel / 128x128 block, INT8 x weight_scale, GPTQ and AWQ unpacked by
       tests/py/intq_model_oracle.py's unpackers (GPTQ v1: zero = stored + 1; AWQ order 0,2,4,6,1,3,5,7);
       the engine's weights must be EQUAL (q/k rows compared after llama.cpp's permutation, done in numpy);
     - recomputes the HF llama forward pass (rotate-half RoPE on the un-permuted weights, GQA, SwiGLU) in float64,
       "teacher-forced": every linear's input is taken from the engine (model_probe's ASSAY_PROBE_INPUTS dump) and
       quantized by numpy as the scheme says, written from the vLLM kernel definitions:
       fp8 static: code = fp8(clip(x * (1/input_scale))); fp8-dynamic: per-token scale max(amax/FMAX, 1/(FMAX*512)),
       code = fp8(x * (1/scale)); fp8-block: per 1x128 group, scale max(amax, 1e-10)/FMAX, code = fp8(x / scale);
       w8a8: per-token scale amax/127, q = rint(x / scale) clipped to +-127; int4 schemes: inputs not quantized.
       Everything between two quantizers is continuous, so the engine's next observable (attention output, the
       next RMSNorm output, SwiGLU output, final logits) must match to f32 accumulation error (1e-4 relative),
       while the same recomputation WITHOUT the activation quantization must miss by far more (the check has
       teeth). An end-to-end comparison would not work: one rounding-boundary flip changes every later code.
  4. The oracle's own unquantized forward must match transformers' reference logits (ref_logits.f32).
Also: --quantization fp8 on a quantized checkpoint is refused; a corrupt g_idx is a format error, not a crash.
Exit code 0 = pass.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

np.float8_e4m3fn = ml_dtypes.float8_e4m3fn
np.float8_e5m2 = ml_dtypes.float8_e5m2
np.bfloat16 = ml_dtypes.bfloat16
from safetensors.numpy import load_file, save_file  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from intq_model_oracle import unpack_awq, unpack_gptq  # noqa: E402
from testlib import check, finish  # noqa: E402

# f32 activations for the unquantized (bf16) weights, as the float64 oracle computes them (the AVX512_BF16 kernels
# would round them to bf16: test_model_house.c bounds that path)
os.environ["ASSAY_CPU_NO_BF16"] = "1"
ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
BUILD = os.environ.get("ASSAY_BUILD_DIR", "build")
SHARED = os.environ.get("ASSAY_SHARED", "../shared")
HOUSE = os.path.join(SHARED, "models", "house")
PROBE = os.path.join(BUILD, "support", "model_probe")
CALIB = os.path.join(SHARED, "data", "calibration", "shakespeare-macbeth.txt")
CALIB_ARGS = ["--calib", CALIB, "--calib-samples", "2", "--calib-seq-len", "64"]
# scheme -> (calibrated, activation treatment)
SCHEMES = {
    "fp8": (True, "fp8-static"), "fp8-dynamic": (False, "fp8-token"), "fp8-block": (False, "fp8-group"),
    "fp8-e5m2": (True, "fp8-static"), "fp8-e5m2-dynamic": (False, "fp8-token"), "fp8-e5m2-block": (False, "fp8-group"),
    "w8a8-int8": (True, "int8-token"), "int4-rtn": (False, None), "int4-gptq": (True, None), "int4-awq": (True, None),
}
# the default run stays fast (no GPTQ/AWQ calibration); test_ckpt_house_heavy.py runs the others
DEFAULT = ["fp8", "fp8-dynamic", "fp8-block", "w8a8-int8", "int4-rtn"]
HEAVY = ["int4-gptq", "int4-awq", "fp8-e5m2", "fp8-e5m2-dynamic", "fp8-e5m2-block"]
HF_OF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}

cfg = json.load(open(os.path.join(HOUSE, "config.json")))
ref = json.load(open(os.path.join(HOUSE, "reference.json")))
IDS = (ref["prompt_ids"] + ref["greedy_ids"])[:50]
V, L, E = cfg["vocab_size"], cfg["num_hidden_layers"], cfg["hidden_size"]
NH, NKV, HD = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
THETA, EPS = cfg["rope_parameters"]["rope_theta"], cfg["rms_norm_eps"]


def load_dir(d):
    t = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        t.update(load_file(f))
    return t


def permute(w, n_head):  # llama.cpp's Q/K row order, which the engine uses
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


# ---- independent dequantization ---------------------------------------------------------------------------
def dequant(t, qc, p):
    """f32 [out, in] of linear module p, and whether it is stored quantized."""
    if p + ".qweight" in t:
        tt = {k: (None, v) for k, v in t.items() if k.startswith(p + ".")}
        if qc["quant_method"] == "awq":
            return unpack_awq(tt, p, qc["group_size"]).astype(np.float32), True
        return unpack_gptq(tt, p)[0].astype(np.float32), True
    w = t[p + ".weight"]
    if p + ".weight_scale" not in t:
        return w.astype(np.float32), False
    s = t[p + ".weight_scale"].astype(np.float32)
    q = w.astype(np.float32)  # fp8 codes via ml_dtypes, or int8
    if s.size == 1:
        return q * s.reshape(()), True
    if s.shape == (w.shape[0], 1):
        return q * s, True
    bm, bn = qc["config_groups"]["group_0"]["weights"]["block_structure"]
    full = np.repeat(np.repeat(s, bm, 0), bn, 1)[: w.shape[0], : w.shape[1]]
    return q * full, True


# ---- activation quantization, from the kernel definitions --------------------------------------------------
def act_quant(x, kind, fp8, input_scale):
    x = x.astype(np.float32)
    if kind is None:
        return x.astype(np.float64)
    if kind == "int8-token":
        s = np.abs(x).max(1, keepdims=True) / np.float32(127)
        q = np.where(s > 0, np.rint(x / np.where(s > 0, s, 1)), 0)
        return (np.clip(q, -127, 127).astype(np.float32) * s).astype(np.float64)
    fmax = np.float32(float(ml_dtypes.finfo(fp8).max))
    enc = lambda v: np.clip(v, -fmax, fmax).astype(fp8).astype(np.float32)  # noqa: E731  (RNE, saturated)
    if kind == "fp8-static":
        s = np.float32(input_scale)
        return (enc(x * (np.float32(1) / s)) * s).astype(np.float64)
    if kind == "fp8-token":
        s = np.maximum(np.abs(x).max(1, keepdims=True) / fmax, np.float32(1) / (fmax * np.float32(512)))
        return (enc(x * (np.float32(1) / s)) * s).astype(np.float64)
    assert kind == "fp8-group"
    g = x.reshape(x.shape[0], -1, 128)
    s = np.maximum(np.abs(g).max(2, keepdims=True), np.float32(1e-10)) / fmax
    return (enc(g / s) * s).reshape(x.shape).astype(np.float64)


# ---- HF llama forward in float64 -------------------------------------------------------------------------
def forward(W, norms, kind, fp8, in_scale):
    T = len(IDS)
    x = norms["embed"][IDS].astype(np.float64)
    inv = 1.0 / THETA ** (np.arange(0, HD, 2) / HD)
    ang = np.outer(np.arange(T), inv)
    cos, sin = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))

    def rope(v):  # [T, heads, HD], rotate-half
        h = HD // 2
        rot = np.concatenate([-v[..., h:], v[..., :h]], -1)
        return v * cos[:, None] + rot * sin[:, None]

    def rms(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + EPS) * w

    def lin(v, name):
        return act_quant(v, kind, fp8, in_scale.get(name)) @ W[name].T.astype(np.float64)

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms(x, norms[p + "input_layernorm.weight"])
        q = rope(lin(h, p + "self_attn.q_proj").reshape(T, NH, HD))
        k = rope(lin(h, p + "self_attn.k_proj").reshape(T, NKV, HD))
        v = lin(h, p + "self_attn.v_proj").reshape(T, NKV, HD)
        o = np.zeros((T, NH, HD))
        for hh in range(NH):
            kv = hh // (NH // NKV)
            a = q[:, hh] @ k[:, kv].T / np.sqrt(HD) + mask
            a = np.exp(a - a.max(1, keepdims=True))
            o[:, hh] = (a / a.sum(1, keepdims=True)) @ v[:, kv]
        x = x + lin(o.reshape(T, NH * HD), p + "self_attn.o_proj")
        h = rms(x, norms[p + "post_attention_layernorm.weight"])
        g, u = lin(h, p + "mlp.gate_proj"), lin(h, p + "mlp.up_proj")
        x = x + lin(g / (1 + np.exp(-g)) * u, p + "mlp.down_proj")
    x = rms(x, norms["model.norm.weight"])
    return x @ norms["lm_head"].T


def forced(W, norms, kind, fp8, in_scale, pdir):
    """Worst relative error of the engine's observables against numpy recomputed from the engine's inputs."""
    T = len(IDS)
    inv = 1.0 / THETA ** (np.arange(0, HD, 2) / HD)
    ang = np.outer(np.arange(T), inv)
    cos, sin = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))
    mask = np.triu(np.full((T, T), -np.inf), 1)

    def rope(v):
        h = HD // 2
        return v * cos[:, None] + np.concatenate([-v[..., h:], v[..., :h]], -1) * sin[:, None]

    def rms(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + EPS) * w

    def engine_in(l, k):
        return np.fromfile(os.path.join(pdir, f"in.blk.{l}.{k}.weight.f32"), dtype=np.float32).reshape(T, -1)

    def lin(x, name):
        return act_quant(x, kind, fp8, in_scale.get(name)) @ W[name].T.astype(np.float64)

    worst = 0.0

    def cmp(ours, want):
        nonlocal worst
        worst = max(worst, float(np.abs(ours - want).max() / np.abs(want).max()))

    x = norms["embed"][IDS]
    for l in range(L):
        p = f"model.layers.{l}."
        cmp(engine_in(l, "attn_q"), rms(x, norms[p + "input_layernorm.weight"]))
        h = engine_in(l, "attn_q")
        q = rope(lin(h, p + "self_attn.q_proj").reshape(T, NH, HD))
        k = rope(lin(h, p + "self_attn.k_proj").reshape(T, NKV, HD))
        v = lin(h, p + "self_attn.v_proj").reshape(T, NKV, HD)
        o = np.zeros((T, NH, HD))
        for hh in range(NH):
            kv = hh // (NH // NKV)
            a = q[:, hh] @ k[:, kv].T / np.sqrt(HD) + mask
            a = np.exp(a - a.max(1, keepdims=True))
            o[:, hh] = (a / a.sum(1, keepdims=True)) @ v[:, kv]
        att = engine_in(l, "attn_output")
        cmp(att, o.reshape(T, -1))
        x = x + lin(att, p + "self_attn.o_proj")
        cmp(engine_in(l, "ffn_gate"), rms(x, norms[p + "post_attention_layernorm.weight"]))
        h = engine_in(l, "ffn_gate")
        g, u = lin(h, p + "mlp.gate_proj"), lin(h, p + "mlp.up_proj")
        a = engine_in(l, "ffn_down")
        cmp(a, g / (1 + np.exp(-g)) * u)
        x = x + lin(a, p + "mlp.down_proj")
    logits = np.fromfile(os.path.join(pdir, "logits.f32"), dtype=np.float32).reshape(T, V)
    cmp(logits, rms(x, norms["model.norm.weight"]) @ norms["lm_head"].T)
    return worst


def model_parts(d, qc):
    t = load_dir(d)
    W, quantized, in_scale = {}, {}, {}
    for l in range(L):
        for hf in HF_OF.values():
            p = f"model.layers.{l}.{hf}"
            W[p], quantized[p] = dequant(t, qc, p)
            if p + ".input_scale" in t:
                in_scale[p] = t[p + ".input_scale"].astype(np.float32).reshape(())
    norms = {k: v.astype(np.float64) for k, v in t.items() if "norm" in k}
    norms["embed"] = t["model.embed_tokens.weight"].astype(np.float64)
    norms["lm_head"] = t["lm_head.weight"].astype(np.float64)
    return t, W, quantized, in_scale, norms


def probe(d, out, names, quant="none"):
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, ASSAY_PROBE_KV_F32="1", ASSAY_PROBE_INPUTS="1")
    return subprocess.run([PROBE, d, quant, out, ",".join(map(str, IDS))] + names, capture_output=True, text=True, env=env)


def main(schemes=None):
    schemes = schemes or sys.argv[1:] or DEFAULT
    tmp = tempfile.mkdtemp(prefix="ckpt-house-")
    try:
        # the oracle itself: unquantized forward vs transformers' reference logits
        _, W0, _, _, norms0 = model_parts(HOUSE, {})
        base = forward(W0, norms0, None, None, {})
        reflog = np.fromfile(os.path.join(HOUSE, "ref_logits.f32"), dtype=np.float32).reshape(-1, V)
        n_ref = reflog.shape[0]
        e = np.abs(base[:n_ref] - reflog).max()
        check(e < 2e-2, f"numpy oracle vs transformers reference logits: max |diff| {e}")
        print(f"oracle bf16 vs transformers: max |diff| {e:.2e}")
        names = [f"blk.{l}.{k}.weight" for l in (0, L - 1) for k in HF_OF]
        for s in schemes:
            calibrated, kind = SCHEMES[s]
            d = os.path.join(tmp, s)
            r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", d, "--scheme", s, "-t", "2"] +
                               (CALIB_ARGS if calibrated else []), capture_output=True, text=True)
            if not check(r.returncode == 0, f"{s}: quantize failed: {r.stderr[-2000:]}"):
                continue
            qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
            pr = probe(d, os.path.join(tmp, s + "-probe"), names)
            if not check(pr.returncode == 0, f"{s}: engine load/run failed: {pr.stderr[-2000:]}"):
                continue
            check("loaded 49 linear layers" in pr.stderr, f"{s}: no load note naming 49 linears: {pr.stderr!r}")
            t, W, quantized, in_scale, norms = model_parts(d, qc)
            # 1) the weights the engine multiplies by equal the independent dequantization
            for n in names:
                blk, k = n.split(".")[1], n.split(".")[2]
                p = f"model.layers.{blk}.{HF_OF[k]}"
                check(quantized[p], f"{s}: {p} is not stored quantized")
                want = W[p]
                if k == "attn_q":
                    want = permute(want, NH)
                if k == "attn_k":
                    want = permute(want, NKV)
                ours = np.fromfile(os.path.join(tmp, s + "-probe", n + ".f32"), dtype=np.float32).reshape(want.shape)
                bad = np.count_nonzero(ours != want)
                check(bad == 0, f"{s}: {n}: {bad} of {want.size} weights differ from numpy "
                                f"(max |diff| {np.abs(ours - want).max():.3g})")
            # 2) every layer recomputed from the engine's own inputs, with the scheme's activation quantization
            fp8 = ml_dtypes.float8_e5m2 if "e5m2" in s else ml_dtypes.float8_e4m3fn
            pdir = os.path.join(tmp, s + "-probe")
            err = forced(W, norms, kind, fp8, in_scale, pdir)
            print(f"{s:18s} engine vs teacher-forced oracle: worst relative error {err:.2e}")
            check(err < 1e-4, f"{s}: engine differs from the oracle by {err:.3g} (relative)")
            if kind is not None:  # without the activation quantization the same check must fail clearly
                err0 = forced(W, norms, None, None, {}, pdir)
                print(f"{s:18s}   same without activation quantization: {err0:.2e}")
                check(err0 > 100 * max(err, 1e-7), f"{s}: the activation quantization is not visible ({err0} vs {err})")
        # the maintainers' command path: `assay perplexity DIR --score-all --kl-divergence-base` on a checkpoint
        d = os.path.join(tmp, "fp8-dynamic")
        if os.path.isdir(d):
            text, base = os.path.join(tmp, "text.txt"), os.path.join(tmp, "base.bin")
            with open(os.path.join(HOUSE, "heldout.txt"), "rb") as f, open(text, "wb") as g:
                g.write(f.read(12000))
            common = ["perplexity", "-f", text, "--ctx", "512", "--score-all", "--chunks", "2", "--json", "-t", "2"]
            r0 = subprocess.run([ASSAY, common[0], HOUSE] + common[1:] + ["--save-logits", base], capture_output=True, text=True)
            r1 = subprocess.run([ASSAY, common[0], d] + common[1:] + ["--kl-divergence-base", base], capture_output=True, text=True)
            if check(r0.returncode == 0 and r1.returncode == 0, f"perplexity on the checkpoint: {r0.stderr[-500:]} {r1.stderr[-500:]}"):
                j = json.loads(r1.stdout)
                print(f"fp8-dynamic via the CLI: ppl {j['ppl']:.4f} vs bf16 {j['ppl_base']:.4f}, kld {j['kld_mean']:.5f}")
                check(abs(j["ppl_ratio"] - 1) < 0.01 and 0 < j["kld_mean"] < 0.02 and j["same_top"] > 0.9,
                      f"fp8-dynamic through the CLI: {j}")
        # refusals
        d = os.path.join(tmp, schemes[0])
        if os.path.isdir(d):
            pr = probe(d, os.path.join(tmp, "refuse"), [], "fp8")
            check(pr.returncode == 1 and "already quantized" in pr.stderr, f"--quantization fp8 on a checkpoint: {pr.stderr!r}")
        # the legacy "fp8" quant_method (AutoFP8 / DeepSeek-style: vLLM's Fp8Config) holding the same tensors must run
        # exactly like its compressed-tensors twin: per-tensor + static input_scale, and 128x128 blocks whose scale is
        # named weight_scale_inv with dynamic 1x128 activation groups
        for src, qc in (("fp8", {"quant_method": "fp8", "activation_scheme": "static"}),
                        ("fp8-block", {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})):
            d = os.path.join(tmp, src)
            if not os.path.isdir(d):
                continue
            leg = os.path.join(tmp, src + "-legacy")
            shutil.copytree(d, leg)
            c = json.load(open(os.path.join(leg, "config.json")))
            c["quantization_config"] = qc
            json.dump(c, open(os.path.join(leg, "config.json"), "w"))
            if "weight_block_size" in qc:
                f = glob.glob(os.path.join(leg, "*.safetensors"))[0]
                t = load_file(f)
                save_file({(k[: -len("weight_scale")] + "weight_scale_inv" if k.endswith(".weight_scale") else k): v
                           for k, v in t.items()}, f)
            pr = probe(leg, os.path.join(tmp, src + "-legacy-probe"), [])
            if check(pr.returncode == 0, f"legacy {src}: {pr.stderr[-1000:]}"):
                a = np.fromfile(os.path.join(tmp, src + "-legacy-probe", "logits.f32"), dtype=np.float32)
                b = np.fromfile(os.path.join(tmp, src + "-probe", "logits.f32"), dtype=np.float32)
                check(np.array_equal(a, b), f"legacy {src}: logits differ from the compressed-tensors checkpoint's")
        # formats without a loader are named in a clear error, not run wrongly
        d = os.path.join(tmp, "fp8-dynamic")
        if os.path.isdir(d):
            for method, fmt, want in (("bitsandbytes", None, "cannot run quant_method 'bitsandbytes'"),
                                      ("compressed-tensors", "marlin-24", "format 'marlin-24'")):
                bad = os.path.join(tmp, "bad-" + method)
                shutil.copytree(d, bad)
                c = json.load(open(os.path.join(bad, "config.json")))
                c["quantization_config"]["quant_method"] = method
                if fmt:
                    c["quantization_config"]["format"] = fmt
                json.dump(c, open(os.path.join(bad, "config.json"), "w"))
                pr = probe(bad, os.path.join(tmp, "bad-probe-" + method), [])
                check(pr.returncode == 1 and want in pr.stderr, f"{method}/{fmt}: {pr.returncode} {pr.stderr!r}")
        g = os.path.join(tmp, "int4-rtn")  # GPTQ layout, g_idx = i // 128
        if os.path.isdir(g):
            bad = os.path.join(tmp, "bad-gptq")
            shutil.copytree(g, bad)
            f = glob.glob(os.path.join(bad, "*.safetensors"))[0]
            t = load_file(f)
            t["model.layers.3.mlp.down_proj.g_idx"] = t["model.layers.3.mlp.down_proj.g_idx"] + 1000
            save_file(t, f)
            pr = probe(bad, os.path.join(tmp, "bad-probe"), [])
            check(pr.returncode == 1 and "g_idx" in pr.stderr and "outside" in pr.stderr, f"corrupt g_idx: {pr.stderr!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("quantized checkpoints in the engine")


if __name__ == "__main__":
    main()
