#!/usr/bin/env python3
"""w4a8_sim.py — what W4A8 costs in quality: a numpy simulation of a llama HF checkpoint's perplexity with INT4 g128
weights (W4A16, the operation of assay's INT4 GPU GEMMs) and with the linears' inputs also rounded to 8 bits per
token and 128-column group (W4A8, the operation of assay_cuda_gemm_int4g128_xi8: scale = max |x| / 127 per group,
q = round(x / scale) in [-127, 127]).

It uses nothing of assay (own safetensors reader, float32 numpy forward pass) and is scored like
`assay perplexity --score-all --ctx N` (non-overlapping windows from the start of the text, every token after a
window's first scored, the last partial window included, no BOS), so its bf16 row can be checked against the
model's reference perplexity (house: 44.626 at ctx 512 on heldout.txt, reference.json).

    .venv/bin/python bench/w4a8_sim.py --model ../shared/models/house --text ../shared/models/house/heldout.txt \
        [--schemes bf16,bf16+a8,rtn,rtn+a8] [--ctx 512] [--json OUT]

Schemes: bf16 (the checkpoint's weights), rtn (INT4 g128 round-to-nearest, asymmetric, the range widened to contain
0, scales rounded to fp16: GPTQ's quantizer without the error feedback); "+a8" adds the activation rounding. Prints
one JSON line per scheme: perplexity, mean NLL, scored tokens and the mean KL divergence from the bf16 model.
"""
import argparse
import glob
import json
import math
import os
import struct
import sys
import time

import numpy as np

LIN = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
       "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def read_safetensors(path):
    out = {}
    dt = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
        for name, info in hdr.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            f.seek(8 + n + a)
            raw = np.frombuffer(f.read(b - a), dtype=dt[info["dtype"]])
            if info["dtype"] == "BF16":
                raw = (raw.astype(np.uint32) << 16).view(np.float32)
            out[name] = raw.astype(np.float32).reshape(info["shape"])
    return out


def rtn_int4_g128(w):
    """GPTQ's asymmetric 4-bit quantizer per 128 input columns, no error feedback; scales rounded to fp16"""
    o, i = w.shape
    g = w.reshape(o, i // 128, 128)
    lo = np.minimum(g.min(-1, keepdims=True), 0)
    hi = np.maximum(g.max(-1, keepdims=True), 0)
    both0 = (lo == 0) & (hi == 0)
    lo, hi = np.where(both0, -1, lo), np.where(both0, 1, hi)
    scale = ((hi - lo) / 15).astype(np.float16).astype(np.float32)
    zero = np.clip(np.round(-lo / scale), 0, 15)
    q = np.clip(np.round(g / scale) + zero, 0, 15)
    return (scale * (q - zero)).reshape(o, i).astype(np.float32)


def act_int8_g128(x):
    """W4A8's activation rounding: per token and 128 columns, scale = max |x| / 127"""
    g = x.reshape(*x.shape[:-1], x.shape[-1] // 128, 128)
    s = np.abs(g).max(-1, keepdims=True) / 127.0
    safe = np.where(s > 0, s, 1.0)
    return (np.clip(np.round(g / safe), -127, 127) * s).reshape(x.shape).astype(np.float32)


class Llama:
    def __init__(self, cfg, w, quant_weights=False, quant_acts=False):
        self.E, self.nh = cfg["hidden_size"], cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads", self.nh)
        self.hd = cfg.get("head_dim", self.E // self.nh)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
        self.inv = 1.0 / theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        self.emb, self.norm = w["model.embed_tokens.weight"], w["model.norm.weight"]
        self.head = w.get("lm_head.weight", self.emb)
        self.qa = quant_acts
        self.layers = []
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            d = {k: w[p + n + ".weight"] for k, n in LIN.items()}
            if quant_weights:
                d = {k: rtn_int4_g128(v) for k, v in d.items()}
            d["ln1"], d["ln2"] = w[p + "input_layernorm.weight"], w[p + "post_attention_layernorm.weight"]
            self.layers.append(d)

    def lin(self, x, wt):
        return (act_int8_g128(x) if self.qa else x) @ wt.T

    def rms(self, x, wt):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * wt

    def logits(self, ids):
        B, T = ids.shape
        ang = np.arange(T, dtype=np.float64)[:, None] * self.inv[None, :]
        ang = np.concatenate([ang, ang], -1)
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
        h = self.emb[ids]
        hh = self.hd // 2
        for d in self.layers:
            x = self.rms(h, d["ln1"])
            q = self.lin(x, d["q"]).reshape(B, T, self.nh, self.hd).transpose(0, 2, 1, 3)
            k = self.lin(x, d["k"]).reshape(B, T, self.nkv, self.hd).transpose(0, 2, 1, 3)
            v = self.lin(x, d["v"]).reshape(B, T, self.nkv, self.hd).transpose(0, 2, 1, 3)
            q = q * cos + np.concatenate([-q[..., hh:], q[..., :hh]], -1) * sin
            k = k * cos + np.concatenate([-k[..., hh:], k[..., :hh]], -1) * sin
            rep = self.nh // self.nkv
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            s = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(self.hd)) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ v
            a = a.transpose(0, 2, 1, 3).reshape(B, T, self.nh * self.hd)
            h = h + self.lin(a, d["o"])
            x = self.rms(h, d["ln2"])
            gt = self.lin(x, d["gate"])
            act = gt / (1 + np.exp(-gt)) * self.lin(x, d["up"])
            h = h + self.lin(act, d["down"])
        return self.rms(h, self.norm) @ self.head.T


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def windows(ids, ctx, batch):
    """`assay perplexity --score-all` windows, grouped by length: (inputs [b, len], targets [b, len])"""
    T = len(ids)
    starts = list(range(0, T - 1, ctx))
    i = 0
    while i < len(starts):
        ln = min(ctx, T - 1 - starts[i])
        grp = [s0 for s0 in starts[i:i + batch] if min(ctx, T - 1 - s0) == ln]
        i += len(grp)
        yield (np.array([ids[s0:s0 + ln] for s0 in grp]), np.array([ids[s0 + 1:s0 + ln + 1] for s0 in grp]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--schemes", default="bf16,bf16+a8,rtn,rtn+a8")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--json", default=None, help="append one JSON line per scheme")
    a = ap.parse_args()
    from tokenizers import Tokenizer
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    w = {}
    for f in sorted(glob.glob(os.path.join(a.model, "*.safetensors"))):
        w.update(read_safetensors(f))
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    ids = tok.encode(open(a.text, encoding="utf-8", errors="replace", newline="").read(), add_special_tokens=False).ids
    models = {}
    for scheme in a.schemes.split(","):
        wq, aq = scheme.split("+")[0], scheme.endswith("+a8")
        if wq not in ("bf16", "rtn") or scheme.count("+") > (1 if aq else 0):
            raise SystemExit(f"w4a8_sim: unknown scheme {scheme!r} (bf16, rtn, optionally +a8)")
        models[scheme] = Llama(cfg, w, quant_weights=wq == "rtn", quant_acts=aq)
    base = models.get("bf16") or Llama(cfg, w)
    # every window group runs through every model once, the bf16 one first (the KL divergence's reference)
    acc = {sc: [0.0, 0, 0.0, 0.0] for sc in models}  # nll, tokens, kl, seconds
    total, done, t_start = len(ids) - 1, 0, time.time()
    for x, tgt in windows(ids, a.ctx, a.batch):
        t0 = time.time()
        bp = log_softmax(base.logits(x))
        tb = time.time() - t0
        for sc, model in models.items():
            t0 = time.time()
            lp = bp if model is base else log_softmax(model.logits(x))
            r = acc[sc]
            r[0] -= np.take_along_axis(lp, tgt[..., None], -1).astype(np.float64).sum()
            r[1] += tgt.size
            r[2] += (np.exp(bp) * (bp - lp)).sum(-1).astype(np.float64).sum()
            r[3] += time.time() - t0 + (tb if model is base else 0.0)
        done += tgt.size
        el = time.time() - t_start
        print(f"\rw4a8_sim: {done}/{total} tokens, {el:.0f} s, ~{el * (total - done) / done:.0f} s left", end="",
              file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for sc, (nll, n, kl, sec) in acc.items():
        row = {"scheme": sc, "ppl": math.exp(nll / n), "nll": nll, "tokens": n, "kld": kl / n, "seconds": round(sec, 1)}
        print(json.dumps(row), flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(row) + "\n")

if __name__ == "__main__":
    main()
