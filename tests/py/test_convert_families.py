"""test_convert_families.py — HF -> GGUF -> HF for tiny llama3-scaled, mistral, qwen2 and qwen3 models.

The models are written by the `safetensors` package with random weights and the house tokenizer. gguf-py must
read llama.cpp's names and metadata: Q/K permuted for llama/mistral only (numpy does the permutation here),
qwen2's q/k/v biases, qwen3's q/k norms, and for llama3 RoPE scaling a rope_freqs.weight equal to llama.cpp's
formula computed here with numpy. Converting back must give the original tensors bit for bit and the config values.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader
from safetensors import safe_open
from safetensors.numpy import save_file
import testlib  # noqa: E402
from testlib import check  # noqa: E402

ASSAY = os.environ["ASSAY_BIN"]
HOUSE = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")




def run(*args):
    r = subprocess.run([ASSAY, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"assay {' '.join(args)} exited {r.returncode}: {r.stderr}")


def permute(w, n_head):
    hd = w.shape[0] // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_freqs(theta, dim, factor, lo, hi, old_ctx):
    """llama.cpp's rope_freqs for llama3 scaling, from its description in convert_hf_to_gguf.py."""
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < old_ctx / hi:
            out.append(1.0)
        elif wl > old_ctx / lo:
            out.append(factor)
        else:
            s = (old_ctx / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


V, E, L, H, KV, HD, FF = 8192, 32, 2, 4, 2, 8, 48
GG = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
      "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
      "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
      "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
      "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
      "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def gname(hf):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if hf in top:
        return top[hf]
    p = hf.split(".")
    return f"blk.{p[2]}." + GG[".".join(p[3:])]


families = {
    "llama3": {"model_type": "llama", "rope_theta": 10000.0, "tie_word_embeddings": False,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64}},
    "mistral": {"model_type": "mistral", "rope_theta": 1000000.0, "tie_word_embeddings": False, "head_dim": None},
    "qwen2": {"model_type": "qwen2", "rope_theta": 1000000.0, "tie_word_embeddings": True},
    "qwen3": {"model_type": "qwen3", "rope_theta": 1000000.0, "tie_word_embeddings": True, "head_dim": HD},
}
rng = np.random.default_rng(1)
with tempfile.TemporaryDirectory() as tmp:
    for fam, extra in families.items():
        hd = HD if extra.get("head_dim", 0) is not None else E // H
        cfg = {"architectures": ["X"], "vocab_size": V, "hidden_size": E, "num_hidden_layers": L,
               "num_attention_heads": H, "num_key_value_heads": KV, "intermediate_size": FF,
               "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "bos_token_id": 0, "eos_token_id": 0, **extra}
        if "head_dim" not in extra:
            cfg["head_dim"] = hd
        shapes = {"model.embed_tokens.weight": (V, E), "model.norm.weight": (E,)}
        if not cfg["tie_word_embeddings"]:
            shapes["lm_head.weight"] = (V, E)
        for l in range(L):
            p = f"model.layers.{l}."
            shapes.update({p + "input_layernorm.weight": (E,), p + "post_attention_layernorm.weight": (E,),
                           p + "self_attn.q_proj.weight": (H * hd, E), p + "self_attn.k_proj.weight": (KV * hd, E),
                           p + "self_attn.v_proj.weight": (KV * hd, E), p + "self_attn.o_proj.weight": (E, H * hd),
                           p + "mlp.gate_proj.weight": (FF, E), p + "mlp.up_proj.weight": (FF, E),
                           p + "mlp.down_proj.weight": (E, FF)})
            if fam == "qwen2":
                shapes.update({p + "self_attn.q_proj.bias": (H * hd,), p + "self_attn.k_proj.bias": (KV * hd,),
                               p + "self_attn.v_proj.bias": (KV * hd,)})
            if fam == "qwen3":
                shapes.update({p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        # f16 weights, f32 vectors: the vectors go to GGUF unchanged and must come back as f32.
        arrays = {k: rng.standard_normal(s).astype(np.float16 if len(s) == 2 else np.float32) for k, s in shapes.items()}
        src = os.path.join(tmp, fam)
        os.mkdir(src)
        json.dump(cfg, open(os.path.join(src, "config.json"), "w"))
        save_file(arrays, os.path.join(src, "model.safetensors"), metadata={"format": "pt"})
        shutil.copy(os.path.join(HOUSE, "tokenizer.json"), src)
        g = os.path.join(tmp, fam + ".gguf")
        run("convert", src, "-o", g, "--quiet")
        r = GGUFReader(g)
        arch = "llama" if fam in ("llama3", "mistral") else fam
        check(r.fields["general.architecture"].contents() == arch, f"{fam}: architecture")
        check(r.fields[f"{arch}.attention.head_count_kv"].contents() == KV, f"{fam}: head_count_kv")
        check(abs(r.fields[f"{arch}.rope.freq_base"].contents() - cfg["rope_theta"]) < 1, f"{fam}: rope theta")
        check(r.fields[f"{arch}.attention.key_length"].contents() == hd, f"{fam}: key_length")
        tensors = {t.name: t for t in r.tensors}
        want_names = {gname(k) for k in arrays} | ({"rope_freqs.weight"} if fam == "llama3" else set())
        check(set(tensors) == want_names, f"{fam}: tensor names {sorted(set(tensors) ^ want_names)}")
        for k, a in arrays.items():
            t = tensors.get(gname(k))
            if t is None:
                continue
            want = a
            if arch == "llama" and k.endswith("q_proj.weight"):
                want = permute(a, H)
            elif arch == "llama" and k.endswith("k_proj.weight"):
                want = permute(a, KV)
            check(t.data.tobytes() == want.tobytes(), f"{fam}: {t.name} bytes")
        if fam == "llama3":
            rs = cfg["rope_scaling"]
            want = llama3_freqs(cfg["rope_theta"], hd, rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                                rs["original_max_position_embeddings"])
            got = np.frombuffer(tensors["rope_freqs.weight"].data.tobytes(), np.float32)
            check(got.shape == want.shape and np.allclose(got, want, rtol=1e-6, atol=0),
                  f"llama3 rope_freqs {got} vs {want}")
            check(len(set(np.round(want, 4))) > 2, "llama3 test exercises all three branches")
        back = os.path.join(tmp, fam + "-back")
        run("convert", g, "-o", back, "--quiet")
        with safe_open(os.path.join(back, "model.safetensors"), "numpy") as st:
            got = {k: st.get_tensor(k) for k in st.keys()}
        check(sorted(got) == sorted(arrays), f"{fam}: round-trip names")
        for k, a in arrays.items():
            if k in got:
                check(got[k].dtype == a.dtype and got[k].tobytes() == a.tobytes(), f"{fam}: round trip of {k}")
        c2 = json.load(open(os.path.join(back, "config.json")))
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "intermediate_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings"):
            check(c2.get(key) == cfg[key], f"{fam}: config {key} {c2.get(key)!r} != {cfg[key]!r}")
        check(c2["head_dim"] == hd and c2["model_type"] == ("llama" if arch == "llama" else fam), f"{fam}: head_dim/model_type")

testlib.finish(f"test_convert_families: {len(families)} families")
