"""On-the-fly FP8 (`--quantization fp8`, model.h) on the house model, checked independently:

- the weights the engine multiplies by equal an independent numpy + ml_dtypes simulation of vLLM's online fp8
  (per-tensor E4M3, scale = max(amax/448, f32 eps) in f32, code = RNE(w/scale), value = code*scale) of the bf16
  safetensors, for every linear weight of block 0 and the last block's attn_output (llama.cpp's Q/K row
  permutation applied in numpy); the lm_head is left exactly as stored;
- logits of the reference prompt: bf16 matches transformers' reference logits, fp8 differs from bf16 by a
  nonzero but small amount with the same top token;
- perplexity on the first heldout windows moves by less than 0.3% against bf16, with a small nonzero KLD, and
  the load prints the note "quantized 49 linear layers to fp8 in X s";
- unknown quantization names are usage errors (exit 2) on run, perplexity and eval.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

np.bfloat16 = ml_dtypes.bfloat16
np.float8_e4m3fn = ml_dtypes.float8_e4m3fn
from safetensors.numpy import load_file  # noqa: E402

# f32 activations for the bf16 baseline, as transformers' reference computes (the AVX512_BF16 kernels would round
# them to bf16: test_model_house.c bounds that path)
os.environ["ASSAY_CPU_NO_BF16"] = "1"
ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
BUILD = os.environ.get("ASSAY_BUILD_DIR", "build")
HOUSE = os.path.join(os.environ.get("ASSAY_SHARED", "../shared"), "models", "house")
PROBE = os.path.join(BUILD, "support", "model_probe")

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def permute(w, n_head):
    # llama.cpp convert_hf_to_gguf: rows of each head reordered from rotate-half to interleaved pairs
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def fp8_online(w):
    w = w.astype(np.float32)
    scale = np.float32(np.abs(w).max()) / np.float32(448.0)
    scale = max(scale, np.float32(np.finfo(np.float32).eps))
    codes = np.clip(w / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return codes.astype(np.float32) * scale


cfg = json.load(open(os.path.join(HOUSE, "config.json")))
ref = json.load(open(os.path.join(HOUSE, "reference.json")))
ids = ref["prompt_ids"]
V = cfg["vocab_size"]
L = cfg["num_hidden_layers"]
hf = {}
for f in sorted(glob.glob(os.path.join(HOUSE, "*.safetensors"))):
    hf.update(load_file(f))

hf_of = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj"}
names = [f"blk.0.{k}.weight" for k in hf_of] + [f"blk.{L - 1}.attn_output.weight", "output.weight"]

with tempfile.TemporaryDirectory() as tmp:
    out = {}
    for q in ("none", "fp8"):
        d = os.path.join(tmp, q)
        os.mkdir(d)
        r = subprocess.run([PROBE, HOUSE, q, d, ",".join(map(str, ids))] + names, capture_output=True, text=True)
        check(r.returncode == 0, f"model_probe {q}: {r.stderr}")
        if q == "fp8":
            check("quantized 49 linear layers to fp8 in" in r.stderr, f"no load note: {r.stderr!r}")
        out[q] = d

    for n in names:
        ours = np.fromfile(os.path.join(out["fp8"], n + ".f32"), dtype=np.float32)
        plain = np.fromfile(os.path.join(out["none"], n + ".f32"), dtype=np.float32)
        if n == "output.weight":
            w = hf["lm_head.weight"].astype(np.float32)
            check(np.array_equal(ours, w.ravel()), "lm_head must stay as stored")
            continue
        blk, kind = n.split(".")[1], n.split(".")[2]
        w = hf[f"model.layers.{blk}.{hf_of[kind]}.weight"].astype(np.float32)
        if kind == "attn_q":
            w = permute(w, cfg["num_attention_heads"])
        if kind == "attn_k":
            w = permute(w, cfg["num_key_value_heads"])
        check(np.array_equal(plain, w.ravel()), f"{n}: bf16 weights differ from safetensors")
        want = fp8_online(w).ravel()
        bad = np.count_nonzero(ours != want)
        check(bad == 0, f"{n}: {bad} of {want.size} fp8 weights differ from numpy/ml_dtypes "
                        f"(max |diff| {np.abs(ours - want).max():.3g})")
        check(len(np.unique(np.abs(ours))) <= 127 and not np.array_equal(ours, plain), f"{n}: not fp8 values")

    T = len(ids)
    ref_logits = np.fromfile(os.path.join(HOUSE, "ref_logits.f32"), dtype=np.float32).reshape(T, V)
    lb = np.fromfile(os.path.join(out["none"], "logits.f32"), dtype=np.float32).reshape(T, V)
    lq = np.fromfile(os.path.join(out["fp8"], "logits.f32"), dtype=np.float32).reshape(T, V)
    check(np.abs(lb - ref_logits).max() < 2e-2, f"bf16 vs reference logits {np.abs(lb - ref_logits).max()}")
    dq = np.abs(lq - lb).max()
    print(f"logits max |fp8 - bf16| = {dq:.4f}, bf16 vs transformers {np.abs(lb - ref_logits).max():.5f}")
    check(1e-3 < dq < 1.0, f"fp8 logits should differ from bf16 a little, max |diff| {dq}")
    check((lq.argmax(1) == ref_logits.argmax(1)).all(), "fp8 top tokens differ from the reference")

    # perplexity on the first two 512-token windows of the heldout text
    text = os.path.join(tmp, "text.txt")
    with open(os.path.join(HOUSE, "heldout.txt"), "rb") as f, open(text, "wb") as g:
        g.write(f.read(30000))
    common = [ASSAY, "perplexity", HOUSE, "-f", text, "--ctx", "512", "--score-all", "--chunks", "2", "--json"]
    base = os.path.join(tmp, "base.bin")
    r = subprocess.run(common + ["--save-logits", base], capture_output=True, text=True)
    check(r.returncode == 0, f"bf16 perplexity: {r.stderr}")
    r = subprocess.run(common + ["--kl-divergence-base", base, "--quantization", "fp8"], capture_output=True, text=True)
    check(r.returncode == 0, f"fp8 perplexity: {r.stderr}")
    if r.returncode == 0:
        j = json.loads(r.stdout)
        print(f"ppl bf16 {j['ppl_base']:.4f} fp8 {j['ppl']:.4f} ratio {j['ppl_ratio']:.5f} "
              f"kld_mean {j['kld_mean']:.6f} same_top {j['same_top']:.4f}")
        check(abs(j["ppl_ratio"] - 1) < 0.003, f"fp8 moved perplexity by {100 * (j['ppl_ratio'] - 1):.3f}%")
        check(0 < j["kld_mean"] < 0.01, f"kld_mean {j['kld_mean']}")

    # unknown names
    for cmd in ([ASSAY, "run", HOUSE, "-p", "hi", "-n", "1", "--quantization", "int3"],
                [ASSAY, "perplexity", HOUSE, "-f", text, "-q", "int3"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode == 2 and "unknown quantization 'int3'" in r.stderr, f"{cmd[1]}: {r.returncode} {r.stderr!r}")
    r = subprocess.run([ASSAY, "eval", HOUSE, "--tasks", "heldout", "--limit", "1", "--quantization", "int3"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "unknown quantization 'int3'" in r.stderr, f"eval: {r.returncode} {r.stderr!r}")

print("FAILED" if failures else "OK", len(failures))
sys.exit(1 if failures else 0)
