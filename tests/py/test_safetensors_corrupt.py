"""test_safetensors_corrupt.py — damaged HF directories give one clear error and exit code 1 from `assay inspect`.

A tiny llama is written by the reference `safetensors` package (so its files also test that we read what the
reference writes); then the file is truncated at every 1/64th of its length, header bytes are flipped
(every byte of the length prefix, every 13th byte of the JSON header), and the shard index is made to lie.
Each case must exit 1 with a message naming the file, never crash (exit >= 128) or succeed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import save_file
import testlib  # noqa: E402
from testlib import check  # noqa: E402

ASSAY = os.environ["ASSAY_BIN"]
cases = 0




def inspect(d):
    return subprocess.run([ASSAY, "inspect", d, "--no-tensors"], capture_output=True, text=True)


def expect_error(d, what, needle="bad"):
    global cases
    cases += 1
    r = inspect(d)
    ok = r.returncode == 1 and r.stderr.startswith("assay inspect: ") and needle in r.stderr
    check(ok, f"{what}: exit {r.returncode}, stderr {r.stderr.strip()[:200]!r}")


L, E, H, KV, HD, FF, V = 2, 64, 4, 2, 16, 96, 128
config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E, "num_hidden_layers": L,
          "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": HD, "intermediate_size": FF,
          "vocab_size": V, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
          "tie_word_embeddings": True}
rng = np.random.default_rng(0)
tensors = {"model.embed_tokens.weight": (V, E), "model.norm.weight": (E,)}
for l in range(L):
    p = f"model.layers.{l}."
    tensors.update({p + "input_layernorm.weight": (E,), p + "post_attention_layernorm.weight": (E,),
                    p + "self_attn.q_proj.weight": (H * HD, E), p + "self_attn.k_proj.weight": (KV * HD, E),
                    p + "self_attn.v_proj.weight": (KV * HD, E), p + "self_attn.o_proj.weight": (E, H * HD),
                    p + "mlp.gate_proj.weight": (FF, E), p + "mlp.up_proj.weight": (FF, E),
                    p + "mlp.down_proj.weight": (E, FF)})
arrays = {k: rng.standard_normal(s).astype(np.float16 if "mlp" in k else np.float32) for k, s in tensors.items()}

with tempfile.TemporaryDirectory() as tmp:
    good = os.path.join(tmp, "good")
    os.mkdir(good)
    json.dump(config, open(os.path.join(good, "config.json"), "w"))
    save_file(arrays, os.path.join(good, "model.safetensors"))
    r = inspect(good)
    check(r.returncode == 0, f"intact tiny model: exit {r.returncode} {r.stderr}")
    n_params = sum(a.size for a in arrays.values())
    check(f"{n_params:,}" in r.stdout, f"tiny model parameter count {n_params:,} not in output")
    data = open(os.path.join(good, "model.safetensors"), "rb").read()
    header_len = int.from_bytes(data[:8], "little")

    bad = os.path.join(tmp, "bad")
    os.mkdir(bad)
    shutil.copy(os.path.join(good, "config.json"), bad)
    target = os.path.join(bad, "model.safetensors")

    for k in range(64):  # truncated at every 1/64th (0 bytes .. 63/64 of the file)
        open(target, "wb").write(data[: len(data) * k // 64])
        expect_error(bad, f"truncated to {k}/64")
    positions = list(range(8)) + list(range(8, 8 + header_len, 13))
    for pos in positions:  # one header byte flipped
        b = bytearray(data)
        b[pos] ^= 0xFF
        open(target, "wb").write(bytes(b))
        expect_error(bad, f"byte {pos} flipped")
    # Structurally valid files describing another model.
    a2 = dict(arrays)
    a2["model.layers.1.mlp.up_proj.weight"] = a2["model.layers.1.mlp.up_proj.weight"][:, :32].copy()
    save_file(a2, target)
    expect_error(bad, "wrong shape", "up_proj")
    a2 = dict(arrays)
    del a2["model.layers.0.self_attn.v_proj.weight"]
    save_file(a2, target)
    expect_error(bad, "missing tensor", "attn_v")
    a2 = dict(arrays)
    a2["model.layers.0.mlp.extra.weight"] = np.zeros(4, np.float32)
    save_file(a2, target)
    expect_error(bad, "unknown tensor", "extra")

    # Sharded: an index that lies about where a tensor lives, or names a missing shard.
    os.remove(target)
    names = sorted(arrays)
    half = len(names) // 2
    save_file({k: arrays[k] for k in names[:half]}, os.path.join(bad, "model-00001-of-00002.safetensors"))
    save_file({k: arrays[k] for k in names[half:]}, os.path.join(bad, "model-00002-of-00002.safetensors"))
    wm = {k: ("model-00001-of-00002.safetensors" if i < half else "model-00002-of-00002.safetensors")
          for i, k in enumerate(names)}
    index = os.path.join(bad, "model.safetensors.index.json")
    json.dump({"metadata": {}, "weight_map": wm}, open(index, "w"))
    r = inspect(bad)
    check(r.returncode == 0, f"sharded tiny model: exit {r.returncode} {r.stderr}")
    wm2 = dict(wm)
    wm2[names[0]] = "model-00002-of-00002.safetensors"
    json.dump({"weight_map": wm2}, open(index, "w"))
    expect_error(bad, "index names the wrong shard", "index says")
    wm2 = dict(wm)
    wm2[names[0]] = "model-00003-of-00002.safetensors"
    json.dump({"weight_map": wm2}, open(index, "w"))
    expect_error(bad, "index names a missing shard", "00003")
    wm2 = dict(wm)
    del wm2[names[-1]]
    json.dump({"weight_map": wm2}, open(index, "w"))
    expect_error(bad, "index omits a tensor", "index")
    open(index, "w").write('{"weight_map": {')
    expect_error(bad, "index is not JSON", "index")

testlib.finish(f"test_safetensors_corrupt: {cases} damaged inputs")
