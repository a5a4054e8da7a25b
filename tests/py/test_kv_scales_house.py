"""`assay quantize --kv-cache-scheme fp8` on the house model, checked against an independent numpy forward pass.

- `--scheme none --kv-cache-scheme fp8` with a small calibration text: model.layers.N.self_attn.k_scale / v_scale
  read with the `safetensors` package are F32 [1] and equal amax(post-RoPE K) / 448 and amax(V) / 448 over the same
  calibration chunks, computed here by a numpy float64 forward of the source bf16 weights in Hugging Face's
  convention (unpermuted q/k, rotate_half RoPE), with the tokens from the `tokenizers` package; every other tensor
  is byte-identical to the source; config.json gains a compressed-tensors quantization_config whose
  kv_cache_scheme is {num_bits 8, type float, strategy tensor, dynamic false, symmetric true}.
  The oracle's pre-RoPE amax is shown to differ from the post-RoPE one by more than the tolerance, so the check
  can tell them apart.
- `--scheme fp8-dynamic --kv-cache-scheme fp8` keeps the weight config group and the weight tensors and adds the
  same scales; `int4-rtn` (GPTQ layout) gets the scales and kv_cache_scheme in its quantization_config too.
- The engine says on stderr which KV scales it uses: the checkpoint's static ones when present with
  --kv-cache-dtype fp8, per-slot dynamic ones without, calculated ones with --calculate-kv-scales.
- A GGUF scheme with --kv-cache-scheme is refused, as is `none` alone.
"""
import json
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

np.bfloat16 = ml_dtypes.bfloat16  # safetensors' numpy backend looks the name up on numpy
np.float8_e4m3fn = ml_dtypes.float8_e4m3fn
from safetensors import safe_open  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from testlib import check, finish  # noqa: E402

ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
SHARED = os.environ.get("ASSAY_SHARED", "../shared")
HOUSE = os.path.join(SHARED, "models", "house")
SEQ, CHUNKS = 64, 3


def load_dir(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "numpy") as st:
                for k in st.keys():
                    out[k] = st.get_tensor(k)
    return out


def rope(x, pos, theta, hd):
    # Hugging Face llama: rotate_half on the two halves of each head
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = pos[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, axis=1)[:, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, axis=1)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + np.concatenate([-x2, x1], axis=-1) * sin


def oracle_amax(w, cfg, chunks):
    """per layer: max |K| after RoPE, max |K| before, max |V|, over all chunks (float64 forward)"""
    L, H, HKV, D = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_parameters"]["rope_theta"]
    f = {k: v.astype(np.float64) for k, v in w.items()}
    kmax, kpre, vmax = np.zeros(L), np.zeros(L), np.zeros(L)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    for ids in chunks:
        T = len(ids)
        pos = np.arange(T, dtype=np.float64)
        x = f["model.embed_tokens.weight"][ids]
        for l in range(L):
            p = f"model.layers.{l}."
            h = norm(x, f[p + "input_layernorm.weight"])
            q = (h @ f[p + "self_attn.q_proj.weight"].T).reshape(T, H, D)
            k = (h @ f[p + "self_attn.k_proj.weight"].T).reshape(T, HKV, D)
            v = (h @ f[p + "self_attn.v_proj.weight"].T).reshape(T, HKV, D)
            kpre[l] = max(kpre[l], np.abs(k).max())
            q, k = rope(q, pos, theta, D), rope(k, pos, theta, D)
            kmax[l] = max(kmax[l], np.abs(k).max())
            vmax[l] = max(vmax[l], np.abs(v).max())
            kk, vv = np.repeat(k, H // HKV, axis=1), np.repeat(v, H // HKV, axis=1)
            s = np.einsum("thd,shd->hts", q, kk) / np.sqrt(D)
            s = s + np.triu(np.full((T, T), -np.inf), 1)[None]
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", s, vv).reshape(T, H * D)
            x = x + o @ f[p + "self_attn.o_proj.weight"].T
            h = norm(x, f[p + "post_attention_layernorm.weight"])
            g, u = h @ f[p + "mlp.gate_proj.weight"].T, h @ f[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ f[p + "mlp.down_proj.weight"].T
    return kmax, kpre, vmax


def quantize(out, scheme, calib, extra=()):
    cmd = [ASSAY, "quantize", HOUSE, "-o", out, "--scheme", scheme, "--kv-cache-scheme", "fp8", "--calib", calib,
           "--calib-samples", str(CHUNKS), "--calib-seq-len", str(SEQ), "--threads", "2"] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-800:]}")
    return r.returncode == 0


def kv_scheme_ok(qc, where):
    kv = qc.get("kv_cache_scheme")
    check(isinstance(kv, dict), f"{where}: kv_cache_scheme is {kv!r}")
    if isinstance(kv, dict):
        want = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
        for k, v in want.items():
            check(kv.get(k) == v and type(kv.get(k)) is type(v), f"{where}: kv_cache_scheme.{k} = {kv.get(k)!r}, want {v!r}")


def stderr_of(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-600:]}")
    return r.stderr


def main():
    cfg = json.load(open(os.path.join(HOUSE, "config.json")))
    L = cfg["num_hidden_layers"]
    src = load_dir(HOUSE)
    with tempfile.TemporaryDirectory() as tmp:
        # calibration text: a slice of the shared calibration corpus, enough for CHUNKS chunks of SEQ tokens
        text = open(os.path.join(SHARED, "data", "calibration", "austen-emma.txt"), encoding="utf-8").read()[:4000]
        calib = os.path.join(tmp, "calib.txt")
        open(calib, "w", encoding="utf-8").write(text)
        ids = Tokenizer.from_file(os.path.join(HOUSE, "tokenizer.json")).encode(text, add_special_tokens=False).ids
        assert len(ids) >= SEQ * CHUNKS, len(ids)
        chunks = [ids[c * SEQ:(c + 1) * SEQ] for c in range(CHUNKS)]
        kmax, kpre, vmax = oracle_amax(src, cfg, chunks)

        out = os.path.join(tmp, "none")
        if quantize(out, "none", calib):
            t = load_dir(out)
            for l in range(L):
                for kind, amax in (("k", kmax[l]), ("v", vmax[l])):
                    name = f"model.layers.{l}.self_attn.{kind}_scale"
                    s = t.get(name)
                    check(s is not None and s.dtype == np.float32 and s.shape == (1,), f"{name}: {None if s is None else (s.dtype, s.shape)}")
                    if s is not None:
                        want = amax / 448.0
                        # the engine's f32 forward vs float64: 2e-3 relative
                        check(abs(float(s[0]) - want) <= 2e-3 * want, f"{name} = {float(s[0]):.7g}, oracle {want:.7g}")
            # the tolerance separates post-RoPE from pre-RoPE amax in at least one layer
            check(max(abs(kpre - kmax) / kmax) > 2e-2, f"pre/post-RoPE amax too close to tell apart: {kpre} {kmax}")
            for k, v in src.items():
                check(k in t and t[k].dtype == v.dtype and np.array_equal(t[k].view(np.uint8), v.view(np.uint8)),
                      f"{k} not copied unchanged")
            check(len(t) == len(src) + 2 * L, f"{len(t)} tensors, want {len(src) + 2 * L}")
            c2 = json.load(open(os.path.join(out, "config.json")))
            qc = c2.get("quantization_config", {})
            check(qc.get("quant_method") == "compressed-tensors" and qc.get("config_groups") == {}, f"none config: {qc}")
            kv_scheme_ok(qc, "none")
            for k in cfg:
                check(c2.get(k) == cfg[k], f"config key {k} changed")
            # the engine picks them up as static scales with an fp8 KV cache
            heldout = os.path.join(HOUSE, "heldout.txt")
            ppl = [ASSAY, "perplexity", out, "-f", heldout, "--ctx", "64", "--score-all", "--chunks", "1", "-t", "2"]
            e = stderr_of(ppl + ["--kv-cache-dtype", "fp8"])
            check("static per-layer k_scale/v_scale from the checkpoint (7 of 7 layers)" in e, f"stderr: {e[-400:]}")
            e = stderr_of(ppl + ["--kv-cache-dtype", "fp8", "--calculate-kv-scales", "--kv-scale-tokens", "32"])
            check("calculated from the running max of the first 32 tokens" in e, f"stderr: {e[-400:]}")
            e = stderr_of([ASSAY, "perplexity", HOUSE, "-f", heldout, "--ctx", "64", "--score-all", "--chunks", "1",
                           "-t", "2", "--kv-cache-dtype", "fp8"])
            check("dynamic scale per (token, KV head) slot" in e, f"stderr: {e[-400:]}")
            e = stderr_of([ASSAY, "run", out, "-p", "Once upon", "-n", "2", "--temp", "0", "--kv-cache-dtype", "fp8_e4m3"])
            check("from the checkpoint" in e, f"run stderr: {e[-400:]}")

        out = os.path.join(tmp, "fp8d")
        if quantize(out, "fp8-dynamic", calib):
            t = load_dir(out)
            base = load_dir(os.path.join(tmp, "none")) if os.path.isdir(os.path.join(tmp, "none")) else {}
            for l in range(L):
                for kind in "kv":
                    name = f"model.layers.{l}.self_attn.{kind}_scale"
                    check(name in t and name in base and float(t[name][0]) == float(base[name][0]), f"fp8-dynamic: {name}")
            check(t["model.layers.0.self_attn.q_proj.weight"].dtype == ml_dtypes.float8_e4m3fn, "fp8-dynamic weights")
            check("model.layers.0.mlp.down_proj.weight_scale" in t, "fp8-dynamic weight_scale kept")
            qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
            check("group_0" in qc.get("config_groups", {}) and qc.get("format") == "float-quantized", "fp8-dynamic config")
            kv_scheme_ok(qc, "fp8-dynamic")

        out = os.path.join(tmp, "rtn")
        if quantize(out, "int4-rtn", calib):
            qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
            check(qc.get("quant_method") == "gptq" and qc.get("bits") == 4, f"int4-rtn config {qc}")
            kv_scheme_ok(qc, "int4-rtn")
            with safe_open(os.path.join(out, "model.safetensors"), "numpy") as st:
                check("model.layers.6.self_attn.v_scale" in st.keys() and "model.layers.0.self_attn.q_proj.qweight" in st.keys(),
                      "int4-rtn tensors")

        r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", os.path.join(tmp, "g.gguf"), "--scheme", "q8_0",
                            "--kv-cache-scheme", "fp8"], capture_output=True, text=True)
        check(r.returncode != 0 and "GGUF" in r.stderr and not os.path.exists(os.path.join(tmp, "g.gguf")), "gguf + kv refused")
        r = subprocess.run([ASSAY, "quantize", HOUSE, "-o", os.path.join(tmp, "n"), "--scheme", "none"], capture_output=True, text=True)
        check(r.returncode != 0 and "--kv-cache-scheme" in r.stderr, "none alone refused")
        left = [f for f in os.listdir(tmp) if ".tmp-" in f or ".old-" in f]
        check(not left, f"temporary directories left: {left}")
    finish("kv_scales_house")


if __name__ == "__main__":
    main()
