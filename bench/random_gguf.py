#!/usr/bin/env python3
"""A Llama-architecture GGUF with random bf16 weights of the shape an HF config.json gives, for benchmarking engines
(assay, llama.cpp) on model sizes no weight file here holds. Both engines load the same file.

  python3 bench/random_gguf.py bench/configs/llama3-8b/config.json VOCAB.gguf OUT.gguf [--seed 0]

VOCAB.gguf gives the tokenizer (a BPE vocabulary such as llama.cpp's ggml-vocab-gpt-2.gguf); its token list is padded
with unused tokens up to the config's vocab_size. Weights are bf16 of magnitude 2^-7..2^-6 with random signs (small
enough that activations stay finite through 80 layers), norms 1.0 in f32. Streams tensor by tensor (memory: one
tensor). Needs numpy and gguf-py (PyPI `gguf`, or llama.cpp's gguf-py folder on PYTHONPATH).
"""
import argparse
import json
import sys

import numpy as np
import gguf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    c = json.load(open(a.config))
    E, L, H, KV = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
    F, V = c["intermediate_size"], c["vocab_size"]
    hd = c.get("head_dim") or E // H
    theta = c.get("rope_theta") or (c.get("rope_parameters") or {}).get("rope_theta", 10000.0)

    r = gguf.GGUFReader(a.vocab)
    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("random-" + c.get("model_type", "llama"))
    w.add_context_length(c.get("max_position_embeddings", 8192))
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(float(theta))
    w.add_layer_norm_rms_eps(float(c.get("rms_norm_eps", 1e-5)))
    w.add_vocab_size(V)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    # the tokenizer: copied, the token list padded to V
    def field(name):
        f = r.fields.get(name)
        return f
    w.add_tokenizer_model(bytes(field("tokenizer.ggml.model").parts[-1]).decode())
    pre = field("tokenizer.ggml.pre")
    if pre is not None:
        w.add_tokenizer_pre(bytes(pre.parts[-1]).decode())
    tf = field("tokenizer.ggml.tokens")
    toks = [bytes(tf.parts[i]).decode("utf-8", errors="replace") for i in tf.data]
    types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
    if len(toks) > V:
        sys.exit(f"the vocabulary has {len(toks)} tokens, more than vocab_size {V}")
    n0 = len(toks)
    toks += [f"<|unused_{i}|>" for i in range(V - n0)]
    types += [gguf.TokenType.UNUSED] * (V - n0)
    w.add_token_list(toks)
    w.add_token_types(types)
    mf = field("tokenizer.ggml.merges")
    if mf is not None:
        w.add_token_merges([bytes(mf.parts[i]).decode("utf-8", errors="replace") for i in mf.data])
    for key, add in (("tokenizer.ggml.bos_token_id", w.add_bos_token_id), ("tokenizer.ggml.eos_token_id", w.add_eos_token_id)):
        f = field(key)
        if f is not None:
            add(int(f.parts[-1][0]))

    shapes = [("token_embd.weight", (V, E), "bf16"), ("output_norm.weight", (E,), "norm"), ("output.weight", (V, E), "bf16")]
    for l in range(L):
        p = f"blk.{l}."
        shapes += [(p + "attn_norm.weight", (E,), "norm"), (p + "attn_q.weight", (H * hd, E), "bf16"),
                   (p + "attn_k.weight", (KV * hd, E), "bf16"), (p + "attn_v.weight", (KV * hd, E), "bf16"),
                   (p + "attn_output.weight", (E, H * hd), "bf16"), (p + "ffn_norm.weight", (E,), "norm"),
                   (p + "ffn_gate.weight", (F, E), "bf16"), (p + "ffn_up.weight", (F, E), "bf16"),
                   (p + "ffn_down.weight", (E, F), "bf16")]
    for name, shape, kind in shapes:
        if kind == "norm":
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.uint16), int(np.prod(shape)) * 2,
                              raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    total = 0
    for name, shape, kind in shapes:
        if kind == "norm":
            t = np.ones(shape, dtype=np.float32)
        else:
            # sign bit, exponent 120 (2^-7), 7 random mantissa bits: |w| in [2^-7, 2^-6)
            t = (rng.integers(0, 1 << 16, size=shape, dtype=np.uint16) & np.uint16(0x807F)) | np.uint16(0x3C00)
        w.write_tensor_data(t)
        total += t.nbytes
    w.close()
    print(f"{a.out}: {len(shapes)} tensors, {total / 2**30:.2f} GiB", file=sys.stderr)


if __name__ == "__main__":
    main()
