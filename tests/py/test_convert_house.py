"""test_convert_house.py — `assay convert` on the house model, checked with references we did not write.

HF -> GGUF: gguf-py's GGUFReader must see 66 tensors whose bytes equal the safetensors tensors read by the
`safetensors` package, with q_proj/k_proj rows permuted as llama.cpp does (the permutation is done here
independently with numpy), hyper-parameters equal to config.json, and tokenizer.ggml.* equal to tokenizer.json.
GGUF -> HF: the `safetensors` package loads our model.safetensors and every tensor is bit-identical to the
original; config.json values equal the original's; the rebuilt tokenizer.json tokenizes like the original
(the `tokenizers` package). --dtype f16/f32 values equal ml_dtypes' conversions.
"""
import json
import os
import subprocess
import sys
import tempfile

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy so safetensors can hand out bf16 arrays)
import numpy as np
from gguf import GGUFReader
from safetensors import safe_open
from tokenizers import Tokenizer
import testlib  # noqa: E402
from testlib import check  # noqa: E402

ASSAY = os.environ["ASSAY_BIN"]
HOUSE = os.path.join(os.environ["ASSAY_SHARED"], "models", "house")




def run(*args):
    r = subprocess.run([ASSAY, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(f"assay {' '.join(args)} exited {r.returncode}")
    return r.stdout


def load_hf(d):
    """All tensors of an HF directory (sharded or not) via the safetensors package."""
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    out = {}
    for f in files:
        with safe_open(os.path.join(d, f), "numpy") as st:
            for k in st.keys():
                out[k] = st.get_tensor(k)
    return out


def permute(w, n_head):
    """llama.cpp's Q/K permutation, written from its description: rows of each head go from
    [first half, second half] to interleaved pairs."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


HF_TO_GGUF = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if hf in top:
        return top[hf]
    parts = hf.split(".")
    return f"blk.{parts[2]}." + HF_TO_GGUF[".".join(parts[3:])]


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


cfg = json.load(open(os.path.join(HOUSE, "config.json")))
orig = load_hf(HOUSE)
check(len(orig) == 66, f"house has {len(orig)} tensors")

with tempfile.TemporaryDirectory() as tmp:
    g_path = os.path.join(tmp, "h.gguf")
    run("convert", HOUSE, "-o", g_path, "--quiet")
    r = GGUFReader(g_path)
    check(len(r.tensors) == 66, f"gguf-py reads {len(r.tensors)} tensors, want 66")
    by_name = {t.name: t for t in r.tensors}
    for hf, arr in orig.items():
        t = by_name.get(gguf_name(hf))
        if t is None:
            check(False, f"{gguf_name(hf)} missing")
            continue
        want = arr
        if hf.endswith("q_proj.weight"):
            want = permute(arr, cfg["num_attention_heads"])
        elif hf.endswith("k_proj.weight"):
            want = permute(arr, cfg["num_key_value_heads"])
        if arr.ndim == 1:  # llama.cpp stores vectors as f32: the exact widening of the bf16 values
            want = want.astype(np.float32)
        check(t.tensor_type.name == ("F32" if arr.ndim == 1 else "BF16"), f"{t.name} type {t.tensor_type.name}")
        check(list(t.shape) == list(reversed(arr.shape)), f"{t.name} shape {list(t.shape)} vs HF {arr.shape}")
        check(bytes(t.data.tobytes()) == want.tobytes(), f"{t.name} bytes differ from the (permuted) safetensors tensor")
    # The permutation must actually change q (a test that passes with an identity permutation proves nothing).
    q = orig["model.layers.0.self_attn.q_proj.weight"]
    check(permute(q, 8).tobytes() != q.tobytes(), "permutation is the identity?")

    check(field(r, "general.architecture") == "llama", "architecture")
    for key, want in [("llama.block_count", cfg["num_hidden_layers"]), ("llama.embedding_length", cfg["hidden_size"]),
                      ("llama.feed_forward_length", cfg["intermediate_size"]),
                      ("llama.attention.head_count", cfg["num_attention_heads"]),
                      ("llama.attention.head_count_kv", cfg["num_key_value_heads"]),
                      ("llama.context_length", cfg["max_position_embeddings"]),
                      ("llama.rope.dimension_count", cfg["head_dim"]), ("llama.vocab_size", cfg["vocab_size"])]:
        check(field(r, key) == want, f"{key} = {field(r, key)}, want {want}")
    check(np.float32(field(r, "llama.rope.freq_base")) == np.float32(cfg["rope_parameters"]["rope_theta"]), "rope theta")
    check(np.float32(field(r, "llama.attention.layer_norm_rms_epsilon")) == np.float32(cfg["rms_norm_eps"]), "rms eps")
    check(field(r, "general.file_type") == 32, "file_type MOSTLY_BF16")

    tok = json.load(open(os.path.join(HOUSE, "tokenizer.json")))
    vocab = {v: k for k, v in tok["model"]["vocab"].items()}
    for a in tok["added_tokens"]:
        vocab[a["id"]] = a["content"]
    tokens = field(r, "tokenizer.ggml.tokens")
    check(field(r, "tokenizer.ggml.model") == "gpt2", "tokenizer model")
    check(field(r, "tokenizer.ggml.pre") == "gpt-2", f"pre {field(r, 'tokenizer.ggml.pre')}")
    check(len(tokens) == 8192 and all(tokens[i] == vocab[i] for i in range(8192)), "token list")
    types = field(r, "tokenizer.ggml.token_type")
    check(types[0] == 3 and all(t == 1 for t in types[1:]), "token types (CONTROL for <|endoftext|>, NORMAL else)")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    check(field(r, "tokenizer.ggml.merges") == merges, "merges")
    check(field(r, "tokenizer.ggml.bos_token_id") == 0 and field(r, "tokenizer.ggml.eos_token_id") == 0, "bos/eos")

    # GGUF -> HF round trip.
    d = os.path.join(tmp, "hf")
    run("convert", g_path, "-o", d, "--quiet")
    back = load_hf(d)
    check(sorted(back) == sorted(orig), "round-trip tensor names")
    for k, arr in orig.items():
        if k in back:
            check(back[k].dtype == arr.dtype and back[k].shape == arr.shape and back[k].tobytes() == arr.tobytes(),
                  f"round trip of {k} is not bit-exact")
    cfg2 = json.load(open(os.path.join(d, "config.json")))
    for k, v in cfg.items():
        if k in ("transformers_version", "initializer_range", "pretraining_tp", "attention_dropout", "mlp_bias",
                 "pad_token_id", "rope_parameters"):
            continue
        check(cfg2.get(k) == v, f"config.json {k}: {cfg2.get(k)!r} != {v!r}")
    check(cfg2["rope_parameters"]["rope_theta"] == cfg["rope_parameters"]["rope_theta"], "rope_parameters.rope_theta")
    t0 = Tokenizer.from_file(os.path.join(HOUSE, "tokenizer.json"))
    t1 = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    text = open(os.path.join(HOUSE, "heldout.txt"), encoding="utf-8").read()[:20000] + " <|endoftext|> 3.14 ünïcödé 🦙"
    check(t0.encode(text).ids == t1.encode(text).ids, "rebuilt tokenizer.json tokenizes differently")
    check(t1.decode(t1.encode(text).ids) == t0.decode(t0.encode(text).ids), "rebuilt tokenizer decodes differently")

    # --dtype: values equal to ml_dtypes' round-to-nearest-even conversions of the bf16 weights.
    for dt, np_dt, gtype in (("f16", np.float16, "F16"), ("f32", np.float32, "F32")):
        p = os.path.join(tmp, f"h-{dt}.gguf")
        run("convert", HOUSE, "-o", p, "--dtype", dt, "--quiet")
        rr = {t.name: t for t in GGUFReader(p).tensors}
        for hf in ("model.embed_tokens.weight", "model.layers.3.mlp.down_proj.weight", "model.norm.weight"):
            t = rr[gguf_name(hf)]
            want = orig[hf].astype(np.float32).astype(np_dt if orig[hf].ndim > 1 else np.float32)
            check(t.tensor_type.name == (gtype if orig[hf].ndim > 1 else "F32") and t.data.tobytes() == want.tobytes(), f"--dtype {dt}: {t.name}")
    # --keep-types: all 66 tensors byte-identical to the safetensors ones (vectors stay bf16).
    p = os.path.join(tmp, "h-keep.gguf")
    run("convert", HOUSE, "-o", p, "--keep-types", "--quiet")
    rr = {t.name: t for t in GGUFReader(p).tensors}
    for hf, arr in orig.items():
        n = cfg["num_attention_heads"] if hf.endswith("q_proj.weight") else cfg["num_key_value_heads"]
        want = permute(arr, n) if hf.endswith(("q_proj.weight", "k_proj.weight")) else arr
        t = rr[gguf_name(hf)]
        check(t.tensor_type.name == "BF16" and t.data.tobytes() == want.tobytes(), f"--keep-types: {t.name}")
    d2 = os.path.join(tmp, "hf-keep")
    run("convert", p, "-o", d2, "--quiet")
    back2 = load_hf(d2)
    check(all(back2[k].tobytes() == a.tobytes() and back2[k].dtype == a.dtype for k, a in orig.items()),
          "--keep-types round trip")
    # An existing output is refused without --force, then replaced with it.
    r1 = subprocess.run([ASSAY, "convert", HOUSE, "-o", g_path, "--quiet"], capture_output=True, text=True)
    check(r1.returncode == 1 and "already exists" in r1.stderr, f"overwrite refused: {r1.returncode} {r1.stderr}")
    run("convert", HOUSE, "-o", g_path, "--quiet", "--force")

testlib.finish("test_convert_house")
