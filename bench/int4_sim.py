"""int4_sim.py — an independent torch simulation of INT4 g128 weight quantization (RTN, GPTQ, AWQ) on a llama
HF checkpoint, scored like `assay perplexity --score-all --ctx N` (non-overlapping windows from the start of the
text, every token after a window's first scored, the last partial window included, no BOS).

It is a second opinion on assay's C quantizers (src/quant/int_quant.c, quantize_int.c), written from the papers'
descriptions (../shared/research/quant.md §0-§2), not from assay's code, and it uses nothing of assay:

    python3 bench/int4_sim.py --model $ASSAY_SHARED/models/house --text $ASSAY_SHARED/models/house/heldout.txt \
        --calib $ASSAY_SHARED/data/calibration --schemes bf16,rtn,gptq,awq [--calib-chunks 32] [--seq-len 512] \
        [--gptq-sequential 2] [--no-act-order] [--mse] [--json OUT.json]

Schemes (group 128, asymmetric, 4 bits; scales rounded to fp16 as the checkpoints store them):
  rtn   per group min/max with 0 in the range (GPTQ's quantizer), zero = round(-min/scale)
  gptq  GPTQ (Frantar et al.): H = sum x x^T of each linear's calibration inputs, dead columns zeroed, act-order,
        dampening 0.01 * mean diag, upper Cholesky factor of H^-1, 128-column lazy blocks, group parameters taken from
        the error-updated weights when a group starts (in the permuted order with act-order); the layer-sequential
        driver (inputs from the model quantized so far); --gptq-sequential 2 = true-sequential (q/k/v -> o ->
        gate/up -> down), 1 = per layer, 0 = every H from the full-precision model in one pass. --mse: the
        quantizer's optional grid search over shrunk ranges (grid 100, max shrink 0.8, |err|^2.4).
  awq   AutoAWQ: per layer on full-precision inputs, scale grid alpha = 0, 1/20 .. 19/20, s = mean|x|^a /
        (w_mean^(1-a) + 1e-4) (duo scaling; --no-duo: mean|x|^a), normalised by sqrt(max * min), scored by the
        MSE of the block AutoAWQ inspects (attention incl. o_proj for q/k/v, the MLP for gate/up, down_proj
        itself for down; v->o skipped under GQA), folded into the RMSNorm weights / up_proj rows; then the
        clipping search (not q/k) per output row and group over shrink 1 .. 0.55 on 512 sampled tokens; final
        quantization with AWQ's quantizer (range not widened to 0).
Prints one JSON line per scheme (ppl, nll, tokens, per-linear relative output error on the calibration inputs).
"""
import argparse
import glob
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------------------------
# model

def load_model(path):
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(path, "config.json")))
    w = {}
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        for k, v in load_file(f).items():
            w[k] = v.to(torch.float32)
    return cfg, w


class Llama:
    LIN = ["q", "k", "v", "o", "gate", "up", "down"]
    HF = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
          "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}

    def __init__(self, cfg, w):
        self.cfg = cfg
        self.E = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads", self.nh)
        self.hd = cfg.get("head_dim", self.E // self.nh)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        rp = cfg.get("rope_parameters") or {}
        self.theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
        self.L = cfg["num_hidden_layers"]
        self.emb = w["model.embed_tokens.weight"]
        self.norm = w["model.norm.weight"]
        self.head = w.get("lm_head.weight", self.emb)
        self.layers = []
        for l in range(self.L):
            p = f"model.layers.{l}."
            d = {n: w[p + self.HF[n] + ".weight"].clone() for n in self.LIN}
            d["ln1"] = w[p + "input_layernorm.weight"].clone()
            d["ln2"] = w[p + "post_attention_layernorm.weight"].clone()
            self.layers.append(d)
        self._rope = {}

    def copy(self):
        c = Llama.__new__(Llama)
        c.__dict__.update(self.__dict__)
        c.layers = [{k: v.clone() for k, v in d.items()} for d in self.layers]
        return c

    def rope(self, T):
        if T not in self._rope:
            inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
            ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
            ang = torch.cat([ang, ang], dim=-1)
            self._rope[T] = (ang.cos().float(), ang.sin().float())
        return self._rope[T]

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def attention(self, x, d):
        """self-attention block on normalised input x [B, T, E] (o_proj included)"""
        B, T, _ = x.shape
        q = (x @ d["q"].T).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = (x @ d["k"].T).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = (x @ d["v"].T).view(B, T, self.nkv, self.hd).transpose(1, 2)
        cos, sin = self.rope(T)

        def rot(t):
            h = self.hd // 2
            return t * cos + torch.cat([-t[..., h:], t[..., :h]], dim=-1) * sin

        q, k = rot(q), rot(k)
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return a, a @ d["o"].T

    def mlp(self, x, d):
        act = F.silu(x @ d["gate"].T) * (x @ d["up"].T)
        return act, act @ d["down"].T

    def layer(self, h, l, rec=None, d=None):
        """one decoder layer; rec(name, x) sees the four distinct linear inputs: qkv, o, gateup, down"""
        d = d or self.layers[l]
        x = self.rms(h, d["ln1"])
        if rec: rec("qkv", x)
        a, y = self.attention(x, d)
        if rec: rec("o", a)
        h = h + y
        x = self.rms(h, d["ln2"])
        if rec: rec("gateup", x)
        act, y = self.mlp(x, d)
        if rec: rec("down", act)
        return h + y

    def logits(self, ids):
        h = self.emb[ids]
        for l in range(self.L):
            h = self.layer(h, l)
        return self.rms(h, self.norm) @ self.head.T


INPUT_OF = {"q": "qkv", "k": "qkv", "v": "qkv", "o": "o", "gate": "gateup", "up": "gateup", "down": "down"}


# ---------------------------------------------------------------------------------------------------------------
# text

def tokenize_file_or_dir(tok, path):
    if os.path.isdir(path):
        names = sorted(f for f in os.listdir(path) if f.endswith(".txt"))
        text = "\n\n".join(open(os.path.join(path, n), encoding="utf-8", errors="replace", newline="").read() for n in names)
    else:
        text = open(path, encoding="utf-8", errors="replace", newline="").read()
    return tok.encode(text, add_special_tokens=False).ids


def calib_chunks(ids, n, T):
    avail = len(ids) // T
    if n >= avail:
        n = avail
    return torch.tensor([ids[(c * avail // n) * T:(c * avail // n) * T + T] for c in range(n)], dtype=torch.long)


_BASE_CACHE = {}  # the unquantized model's log-probabilities per window group (--kld; keep --max-windows small)


def perplexity(model, ids, ctx, batch=8, base=None):
    """`assay perplexity --score-all`: window c is ids[c*ctx : c*ctx+len] (len = ctx, the last one shorter) and every
    position is scored on the token after it, so every token but the first is scored once.
    Returns (ppl, nll_sum, n_scored, mean KLD vs base or None)."""
    T = len(ids)
    starts = list(range(0, T - 1, ctx))
    nll, n, kl = 0.0, 0, 0.0
    with torch.no_grad():
        i = 0
        while i < len(starts):
            ln = min(ctx, T - 1 - starts[i])
            grp = [s0 for s0 in starts[i:i + batch] if min(ctx, T - 1 - s0) == ln]
            i += len(grp)
            x = torch.tensor([ids[s0:s0 + ln] for s0 in grp], dtype=torch.long)
            tgt = torch.tensor([ids[s0 + 1:s0 + ln + 1] for s0 in grp], dtype=torch.long)
            lp = torch.log_softmax(model.logits(x), -1)
            nll -= lp.gather(-1, tgt[..., None]).double().sum().item()
            n += tgt.numel()
            if base is not None:
                key = (grp[0], len(grp))
                if key not in _BASE_CACHE:
                    _BASE_CACHE[key] = torch.log_softmax(base.logits(x), -1)
                bp = _BASE_CACHE[key]
                kl += (bp.exp() * (bp - lp)).sum(-1).double().sum().item()
    return math.exp(nll / n), nll, n, (kl / n if base is not None else None)


# ---------------------------------------------------------------------------------------------------------------
# quantizers (4 bits, groups along the input dimension)

MAXQ = 15


def fp16r(s):
    return s.to(torch.float16).to(s.dtype)


def params_gptq(x, maxq=MAXQ, mse=False):
    """x [rows, n]: GPTQ's asymmetric per-row params (range widened to contain 0), scale rounded to fp16"""
    xmin = torch.clamp(x.min(1).values, max=0)
    xmax = torch.clamp(x.max(1).values, min=0)
    both0 = (xmin == 0) & (xmax == 0)
    xmin = torch.where(both0, -torch.ones_like(xmin), xmin)
    xmax = torch.where(both0, torch.ones_like(xmax), xmax)
    scale = fp16r((xmax - xmin) / maxq)
    zero = torch.clamp(torch.round(-xmin / scale), 0, maxq)
    if mse:
        best = torch.full_like(xmin, float("inf"))
        for i in range(int(0.8 * 100)):
            p = 1 - i / 100
            s1 = fp16r((p * xmax - p * xmin) / maxq)
            z1 = torch.clamp(torch.round(-p * xmin / s1), 0, maxq)
            q = s1[:, None] * (torch.clamp(torch.round(x / s1[:, None]) + z1[:, None], 0, maxq) - z1[:, None])
            err = (q - x).abs().pow(2.4).sum(1)
            b = err < best
            best = torch.where(b, err, best)
            scale = torch.where(b, s1, scale)
            zero = torch.where(b, z1, zero)
    return scale, zero


def qdq(x, scale, zero, maxq=MAXQ):
    return scale * (torch.clamp(torch.round(x / scale) + zero, 0, maxq) - zero)


def rtn(W, gs=128, mse=False):
    out = torch.empty_like(W)
    for g in range(0, W.shape[1], gs):
        s, z = params_gptq(W[:, g:g + gs], mse=mse)
        out[:, g:g + gs] = qdq(W[:, g:g + gs], s[:, None], z[:, None])
    return out


def awq_pseudo(w, gs=128):
    """AWQ's quantizer: per group min/max (0 not forced in), scale >= 1e-5, fp16 scale"""
    shape = w.shape
    w = w.reshape(-1, gs)
    mx, mn = w.amax(1, keepdim=True), w.amin(1, keepdim=True)
    s = fp16r((mx - mn).clamp(min=1e-5) / MAXQ)
    z = torch.clamp(-torch.round(mn / s), 0, MAXQ)
    return (s * (torch.clamp(torch.round(w / s) + z, 0, MAXQ) - z)).reshape(shape)


def gptq(W, H, gs=128, act_order=True, damp=0.01, block=128, mse=False, static_groups=False):
    """returns the dequantized weights (same column order as W)"""
    W = W.double().clone()
    H = H.double().clone()
    n = W.shape[1]
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    if static_groups:
        groups = [params_gptq(W[:, g:g + gs].float(), mse=mse) for g in range(0, n, gs)]
    perm = torch.argsort(torch.diag(H), descending=True, stable=True) if act_order else torch.arange(n)
    W = W[:, perm]
    H = H[perm][:, perm]
    H += damp * torch.mean(torch.diag(H)) * torch.eye(n, dtype=H.dtype)
    U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    Q = torch.zeros_like(W)
    scale = zero = None
    for i1 in range(0, n, block):
        i2 = min(i1 + block, n)
        W1 = W[:, i1:i2].clone()
        Err = torch.zeros_like(W1)
        for i in range(i2 - i1):
            c = i1 + i
            if static_groups:
                scale, zero = groups[int(perm[c]) // gs]
                scale, zero = scale.double(), zero.double()
            elif c % gs == 0:
                s, z = params_gptq(W[:, c:c + gs].float(), mse=mse)
                scale, zero = s.double(), z.double()
            w = W1[:, i]
            q = qdq(w, scale, zero)
            Q[:, c] = q
            e = (w - q) / U[c, c]
            W1[:, i:] -= e[:, None] * U[c, c:i2][None, :]
            Err[:, i] = e
        W[:, i2:] -= Err @ U[i1:i2, i2:]
    inv = torch.argsort(perm)
    return Q[:, inv].float()


# ---------------------------------------------------------------------------------------------------------------
# drivers

def out_err(W, Wq, X):
    """relative output error ||X W^T - X Wq^T|| / ||X W^T|| on the rows X"""
    Y = X @ W.T
    return ((X @ (W - Wq).T).norm() / Y.norm()).item()


def quant_rtn(model, args, calib=None):
    q = model.copy()
    for d in q.layers:
        for n in Llama.LIN:
            d[n] = rtn(d[n], mse=args.mse)
    return q, {}


def quant_gptq(model, args, calib):
    q = model.copy()
    orig = model
    with torch.no_grad():
        inps = q.emb[calib]
        fp_inps = orig.emb[calib]
        groups = {2: [["q", "k", "v"], ["o"], ["gate", "up"], ["down"]], 1: [Llama.LIN], 0: [Llama.LIN]}[args.gptq_sequential]
        info = {}
        for l in range(q.L):
            d = q.layers[l]
            for grp in groups:
                need = {INPUT_OF[n] for n in grp}
                Hs, Xs = {}, {}

                def rec(name, x):
                    if name in need:
                        x2 = x.reshape(-1, x.shape[-1])
                        Hs[name] = Hs.get(name, 0) + (x2.T @ x2).double()  # f32 products as the reference
                        Xs.setdefault(name, x.reshape(-1, x.shape[-1])[::64].clone())

                src = fp_inps if args.gptq_sequential == 0 else inps
                for b in range(0, src.shape[0], 8):
                    (orig if args.gptq_sequential == 0 else q).layer(src[b:b + 8], l, rec,
                                                                      orig.layers[l] if args.gptq_sequential == 0 else d)
                for nname in grp:
                    W = orig.layers[l][nname]
                    Wq = gptq(W, Hs[INPUT_OF[nname]], act_order=not args.no_act_order, damp=args.damp, mse=args.mse,
                              static_groups=args.static_groups)
                    Wr = rtn(W)
                    X = Xs[INPUT_OF[nname]]
                    info[f"{l}.{nname}"] = {"gptq": out_err(W, Wq, X), "rtn": out_err(W, Wr, X)}
                    d[nname] = Wq
            inps = torch.cat([q.layer(inps[b:b + 8], l) for b in range(0, inps.shape[0], 8)])
            if args.gptq_sequential == 0:
                fp_inps = torch.cat([orig.layer(fp_inps[b:b + 8], l) for b in range(0, fp_inps.shape[0], 8)])
            print(f"gptq layer {l}: " + " ".join(f"{n}:{info[f'{l}.{n}']['gptq']:.4f}/{info[f'{l}.{n}']['rtn']:.4f}"
                                                 for n in Llama.LIN), file=sys.stderr, flush=True)
    return q, info


def quant_awq(model, args, calib):
    q = model.copy()
    info = {}
    gs = 128
    with torch.no_grad():
        inps = model.emb[calib]
        for l in range(q.L):
            d = q.layers[l]
            feats = {}

            def rec(name, x):
                feats.setdefault(name, []).append(x.clone())

            outs = torch.cat([model.layer(inps[b:b + 8], l, rec) for b in range(0, inps.shape[0], 8)])
            feats = {k: torch.cat(v) for k, v in feats.items()}  # [N, T, n_in]
            # the groups AutoAWQ scales in a llama layer (v->o only when v and o have the same shape: not under GQA)
            groups = [("qkv", ["q", "k", "v"], "ln1"), ("gateup", ["gate", "up"], "ln2"), ("down", ["down"], "up")]
            if d["v"].shape == d["o"].shape:
                groups.insert(1, ("o", ["o"], "v"))
            scales = []
            for inp, lins, prev in groups:
                x = feats[inp]
                xf = x.reshape(-1, x.shape[-1])
                x_mean = xf.abs().double().mean(0).float()
                Wcat = torch.cat([d[n] for n in lins], 0)
                ws = Wcat.abs().reshape(-1, gs)
                ws = (ws / (ws.amax(1, keepdim=True) + 1e-6)).reshape(Wcat.shape)
                w_mean = ws.mean(0)

                def block(dd):
                    outs_ = []
                    for b in range(0, x.shape[0], 8):
                        xb = x[b:b + 8]
                        if inp == "qkv":
                            outs_.append(q.attention(xb, dd)[1])
                        elif inp == "gateup":
                            outs_.append(q.mlp(xb, dd)[1])
                        else:
                            outs_.append(xb @ dd[lins[0]].T)
                    return torch.cat(outs_)

                ref = block(d)
                best, best_s, best_a = float("inf"), None, None
                for gi in range(args.awq_grid):
                    a = gi / args.awq_grid
                    if args.no_duo:
                        s = x_mean.pow(a).clamp(min=1e-4)
                    else:
                        s = (x_mean.pow(a) / (w_mean.pow(1 - a) + 1e-4)).clamp(min=1e-4)
                    s = s / (s.max() * s.min()).sqrt()
                    s[torch.isinf(s) | torch.isnan(s)] = 1
                    dd = dict(d)
                    for n in lins:
                        dd[n] = awq_pseudo(d[n] * s[None, :]) / s[None, :]
                    loss = (block(dd) - ref).pow(2).mean().item()
                    if loss < best:
                        best, best_s, best_a = loss, s.clone(), a
                scales.append((inp, lins, prev, best_s))
                info[f"{l}.{inp}.alpha"] = best_a
            for inp, lins, prev, s in scales:
                if prev in ("ln1", "ln2"):
                    d[prev] = d[prev] / s
                else:
                    d[prev] = d[prev] / s[:, None]  # output rows of v or up
                for n in lins:
                    d[n] = d[n] * s[None, :]
                feats[inp] = feats[inp] / s
            if args.awq_norm_bf16:
                d["ln1"] = d["ln1"].to(torch.bfloat16).float()
                d["ln2"] = d["ln2"].to(torch.bfloat16).float()
            if not args.no_clip:
                for n in Llama.LIN:
                    if n in ("q", "k"):
                        continue
                    x = feats[INPUT_OF[n]].reshape(-1, d[n].shape[1])
                    step = max(1, x.shape[0] // 512)
                    x = x[::step].reshape(1, -1, d[n].shape[1] // gs, gs)
                    W = d[n]
                    Wg = W.reshape(W.shape[0], 1, -1, gs)
                    best_max = torch.empty(W.shape[0], 1, W.shape[1] // gs, 1)
                    for o0 in range(0, W.shape[0], 64):
                        w = Wg[o0:o0 + 64]
                        org_max = w.abs().amax(-1, keepdim=True)
                        bm = org_max.clone()
                        min_err = torch.full_like(org_max, 1e9)
                        org_out = (x * w).sum(-1)
                        for i in range(10):
                            mv = org_max * (1 - i / 20)
                            cw = torch.clamp(w, -mv, mv)
                            qw = awq_pseudo(cw.reshape(-1, W.shape[1])).reshape(cw.shape)
                            err = ((x * qw).sum(-1) - org_out).pow(2).mean(1).view(min_err.shape)
                            b = err < min_err
                            min_err[b] = err[b]
                            bm[b] = mv[b]
                        best_max[o0:o0 + 64] = bm
                    d[n] = torch.clamp(Wg, -best_max, best_max).reshape(W.shape)
            for n in Llama.LIN:
                Wfp = d[n]
                d[n] = awq_pseudo(Wfp) if not args.awq_final_gptq_quantizer else rtn(Wfp)
            inps = outs
            print(f"awq layer {l}: alphas " + " ".join(f"{k.split('.')[1]}={v:.2f}" for k, v in info.items()
                                                        if k.startswith(f"{l}.")), file=sys.stderr, flush=True)
    return q, info


def block_errors(model, qm, ids):
    """per layer, the relative error of the attention block and the MLP block outputs (each with its norm) of qm
    against model, both fed the full-precision residual stream of the token windows ids [N, T]"""
    res = []
    with torch.no_grad():
        h = model.emb[ids]
        for l in range(model.L):
            d, dq = model.layers[l], qm.layers[l]
            ya = model.attention(model.rms(h, d["ln1"]), d)[1]
            yaq = qm.attention(qm.rms(h, dq["ln1"]), dq)[1]
            h2 = h + ya
            ym = model.mlp(model.rms(h2, d["ln2"]), d)[1]
            ymq = qm.mlp(qm.rms(h2, dq["ln2"]), dq)[1]
            res.append(((ya - yaq).norm() / ya.norm()).item())
            res.append(((ym - ymq).norm() / ym.norm()).item())
            h = h2 + ym
    return res


def save_hf(model, src, out):
    """the (fake-quantized) model as an f32 HF checkpoint next to the source's config and tokenizer, so that
    `assay perplexity OUT` and this script's ckpt= scheme can evaluate it"""
    import shutil
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    t = {"model.embed_tokens.weight": model.emb, "model.norm.weight": model.norm, "lm_head.weight": model.head}
    for l, d in enumerate(model.layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = d["ln1"]
        t[p + "post_attention_layernorm.weight"] = d["ln2"]
        for n in Llama.LIN:
            t[p + Llama.HF[n] + ".weight"] = d[n]
    save_file({k: v.contiguous().float() for k, v in t.items()}, os.path.join(out, "model.safetensors"))
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(out, f))
    cfg = json.load(open(os.path.join(out, "config.json")))
    cfg["dtype"] = "float32"
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)


def unpack_nibbles(a):
    """int32 tensor [..., m] -> [..., m, 8] nibbles (nibble k = bits 4k..4k+3)"""
    a = a.to(torch.int64) & 0xFFFFFFFF
    return torch.stack([(a >> (4 * k)) & 0xF for k in range(8)], -1)


def load_ckpt(model, path):
    """A GPTQ ("gptq" v1) or AWQ (GEMM) checkpoint written by `assay quantize`, dequantized as transformers / vLLM
    read them (the documented layouts); every other tensor (folded norms) taken from the checkpoint too."""
    from safetensors.torch import load_file
    t = {}
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        t.update(load_file(f))
    qc = json.load(open(os.path.join(path, "config.json"))).get("quantization_config", {})
    q = model.copy()
    for l, d in enumerate(q.layers):
        p = f"model.layers.{l}."
        d["ln1"] = t[p + "input_layernorm.weight"].float()
        d["ln2"] = t[p + "post_attention_layernorm.weight"].float()
        for n in Llama.LIN:
            pre = p + Llama.HF[n]
            if pre + ".weight" in t:
                d[n] = t[pre + ".weight"].float()
                continue
            qw, qz, sc = t[pre + ".qweight"], t[pre + ".qzeros"], t[pre + ".scales"].float()
            if qc.get("quant_method") == "awq":
                order = [0, 2, 4, 6, 1, 3, 5, 7]
                inv = [order.index(i) for i in range(8)]
                qv = unpack_nibbles(qw)[..., inv].reshape(qw.shape[0], -1)  # [n_in, n_out]
                zv = unpack_nibbles(qz)[..., inv].reshape(qz.shape[0], -1)  # [n_groups, n_out]
                gsz = qc.get("group_size", 128)
                g = torch.arange(qv.shape[0]) // gsz
            else:
                qv = unpack_nibbles(qw.T).reshape(qw.shape[1], -1).T  # [n_in, n_out]
                zv = unpack_nibbles(qz).reshape(qz.shape[0], -1) + 1
                g = t[pre + ".g_idx"].long()
            d[n] = (sc[g] * (qv - zv[g]).float()).T.contiguous()
    return q


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--calib", required=True)
    ap.add_argument("--schemes", default="bf16,rtn,gptq,awq")
    ap.add_argument("--calib-chunks", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--max-windows", type=int, default=0, help="score only the first N windows (0: all)")
    ap.add_argument("--gptq-sequential", type=int, default=2, choices=[0, 1, 2])
    ap.add_argument("--no-act-order", action="store_true")
    ap.add_argument("--static-groups", action="store_true")
    ap.add_argument("--damp", type=float, default=0.01)
    ap.add_argument("--mse", action="store_true", help="GPTQ quantizer's MSE range search (also for rtn)")
    ap.add_argument("--awq-grid", type=int, default=20)
    ap.add_argument("--no-duo", action="store_true")
    ap.add_argument("--no-clip", action="store_true")
    ap.add_argument("--awq-norm-bf16", action="store_true", help="round the folded norm weights to bf16 (as stored)")
    ap.add_argument("--awq-final-gptq-quantizer", action="store_true",
                    help="final AWQ quantization with 0 forced into the range (GPTQ's quantizer)")
    ap.add_argument("--kld", action="store_true", help="also mean KL divergence against the unquantized model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--diag", action="store_true", help="print per-layer block output errors (16 calib / heldout windows)")
    ap.add_argument("--save", default=None, help="write each quantized model as an f32 HF checkpoint under SAVE/SCHEME")
    ap.add_argument("--no-eval", action="store_true", help="skip the perplexity")
    ap.add_argument("--json", default=None, help="append one JSON line per scheme")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    cfg, w = load_model(a.model)
    model = Llama(cfg, w)
    ids = tokenize_file_or_dir(tok, a.text)
    if a.max_windows:
        ids = ids[:a.max_windows * a.ctx + 1]
    calib = None
    for scheme in a.schemes.split(","):
        t0 = time.time()
        info = {}
        if scheme == "bf16":
            qm = model
        elif scheme.startswith("ckpt="):
            qm = load_ckpt(model, scheme[5:])
        else:
            if calib is None and scheme != "rtn":
                calib = calib_chunks(tokenize_file_or_dir(tok, a.calib), a.calib_chunks, a.seq_len)
            qm, info = {"rtn": quant_rtn, "gptq": quant_gptq, "awq": quant_awq}[scheme](model, a, calib)
        tq = time.time() - t0
        if a.save and scheme != "bf16":
            save_hf(qm, a.model, os.path.join(a.save, scheme.replace("/", "_").replace("=", "_")))
        if a.diag and scheme != "bf16":
            if calib is None:
                calib = calib_chunks(tokenize_file_or_dir(tok, a.calib), a.calib_chunks, a.seq_len)
            held = torch.tensor([ids[i * a.ctx:(i + 1) * a.ctx] for i in range(0, 16)], dtype=torch.long)
            ec = block_errors(model, qm, calib[:16])
            eh = block_errors(model, qm, held)
            info["block_err_calib"] = ec
            info["block_err_heldout"] = eh
            print(f"{scheme} block errors (attn, mlp per layer) calib: " + " ".join(f"{e:.4f}" for e in ec) +
                  f" | mean {sum(ec) / len(ec):.4f}", file=sys.stderr)
            print(f"{scheme} block errors (attn, mlp per layer) heldout: " + " ".join(f"{e:.4f}" for e in eh) +
                  f" | mean {sum(eh) / len(eh):.4f}", file=sys.stderr, flush=True)
        if a.no_eval:
            print(json.dumps({"scheme": scheme, "quantize_s": tq}), flush=True)
            continue
        ppl, nll, n, kld = perplexity(qm, ids, a.ctx, base=model if (a.kld and scheme != "bf16") else None)
        row = {"scheme": scheme, "ppl": ppl, "nll": nll, "tokens": n, "kld": kld, "quantize_s": tq,
               "eval_s": time.time() - t0 - tq, "args": vars(a), "layers": info}
        print(json.dumps({k: v for k, v in row.items() if k not in ("layers", "args")}), flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
