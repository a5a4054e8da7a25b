"""Oracle for tests/unit/test_int_quant.c (run by it): int_quant_oracle.py FIXTURE.safetensors GROUP_SIZE

1. Unpacks the GPTQ tensors (qweight [in/8, out] with input row 8i+k at bits 4k, qzeros [groups, out/8] holding
   zero-1, fp16 scales [groups, out], g_idx) and the AWQ GEMM tensors (qweight [in, out/8] with nibble k holding
   output 8j+[0,2,4,6,1,3,5,7][k], qzeros without offset) with numpy, following the documented layouts, and
   requires exactly the weights the C side computed.
2. Reruns GPTQ with a numpy transcription of the reference algorithm (IST-DASLab gptq.py fasterquant: dead
   columns, act-order permutation, 1% dampening, upper Cholesky factor of H^-1, 128-column lazy batches, group
   parameters from the error-compensated weights) and compares the integer codes with ours. Like the C side,
   scales are rounded to fp16 before rounding the weights (the format stores fp16 scales).
3. Reruns AutoAWQ's scale search (_search_best_scale with duo_scaling: s = x_mean^a / (w_mean^(1-a) + 1e-4),
   w_mean the mean over the rows of both linears of |w| / max|w| of its g128 group, clamp 1e-4, normalised by
   sqrt(max*min), a in {0, 1/20, ..., 19/20}, each linear fake-quantized with AWQ's pseudo_quantize_tensor,
   loss = squared error of the two linears' outputs) and requires the C search to pick the same a and s.
   The same for llm-compressor's grid (AWQModifier with duo_scaling=True: the identity s = 1 first, then duo
   scaling at a = i/18, i = 0..18, 1.0 included), on these inputs and on inputs without outlier channels.
   gptq_mse: the same with the group parameters from gptq quant.py's mse search (ranges shrunk by 1 - i/100,
   i < 80, least sum |Q(x) - x|^2.4).
4. Requires AWQ's final quantizer (awq_range: per-group min/max not widened to contain 0, as AutoAWQ's
   pseudo_quantize_tensor) on groups that lie on one side of 0.
5. Reruns AWQ's clipping search (AutoAWQ _compute_best_clip: per output row and g64 group, clamp to [-m, m] with
   m = max|w| (1 - i/20), i = 0..9, fake-quantize, error = sum over the tokens of the group's partial output change
   squared, first minimum wins) and the two-sided variant (ends max (1 - a/20) and min (1 - b/20) searched
   independently), scoring every candidate token by token, and requires the C search (which scores through the
   group's Gram matrix) to pick the same clamp in at least 98% of the groups and never one whose error is more
   than 1e-4 (relative) above the best.
Exit code 0 = pass.
"""
import sys

import numpy as np
from safetensors.numpy import load_file

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def unpack_gptq(t, v):
    qw, qz, sc, gi = t[v + ".qweight"].view(np.uint32), t[v + ".qzeros"].view(np.uint32), t[v + ".scales"], t[v + ".g_idx"]
    n_in, n_out = qw.shape[0] * 8, qw.shape[1]
    q = np.zeros((n_in, n_out), np.int64)
    for k in range(8):
        q[k::8, :] = (qw >> np.uint32(4 * k)) & 0xF
    z = np.zeros((qz.shape[0], n_out), np.int64)
    for k in range(8):
        z[:, k::8] = ((qz >> np.uint32(4 * k)) & 0xF) + 1
    s = sc.astype(np.float32)
    w = s[gi, :] * (q - z[gi, :]).astype(np.float32)
    return w.T, q.T


def unpack_awq(t, v, gs):
    qw, qz, sc = t[v + ".qweight"].view(np.uint32), t[v + ".qzeros"].view(np.uint32), t[v + ".scales"]
    n_in, n_out = qw.shape[0], qw.shape[1] * 8
    q = np.zeros((n_in, n_out), np.int64)
    z = np.zeros((qz.shape[0], n_out), np.int64)
    for k in range(8):
        q[:, AWQ_ORDER[k]::8] = (qw >> np.uint32(4 * k)) & 0xF
        z[:, AWQ_ORDER[k]::8] = (qz >> np.uint32(4 * k)) & 0xF
    gi = np.arange(n_in) // gs
    w = sc.astype(np.float32)[gi, :] * (q - z[gi, :]).astype(np.float32)
    return w.T


def find_params(x, maxq):
    """asymmetric, range widened to contain 0; x [rows, n] float32"""
    xmin = np.minimum(x.min(axis=1), 0)
    xmax = np.maximum(x.max(axis=1), 0)
    both = (xmin == 0) & (xmax == 0)
    xmin[both], xmax[both] = -1, 1
    scale = ((xmax - xmin) / np.float32(maxq)).astype(np.float32)
    scale = scale.astype(np.float16).astype(np.float32)
    zero = np.clip(np.round(-xmin / scale), 0, maxq)
    return scale, zero


def find_params_mse(x, maxq, grid=100, maxshrink=0.8, norm=2.4):
    """gptq quant.py's Quantizer with mse=True: per row, the range [p*xmin, p*xmax] (0 in the range) for
    p = 1, 1 - 1/grid, ... (maxshrink*grid of them) with the least sum |Q(x) - x|^norm; scales held in fp16"""
    xmin = np.minimum(x.min(axis=1), 0).astype(np.float32)
    xmax = np.maximum(x.max(axis=1), 0).astype(np.float32)
    best = np.full(x.shape[0], np.inf)
    scale = np.ones(x.shape[0], np.float32)
    zero = np.zeros(x.shape[0], np.float32)
    for i in range(int(maxshrink * grid)):
        p = np.float32(1 - i / grid)
        lo, hi = p * xmin, p * xmax
        s1 = ((hi - lo) / np.float32(maxq)).astype(np.float16).astype(np.float32)
        ok = s1 > 0
        s1 = np.where(ok, s1, 1).astype(np.float32)
        z1 = np.clip(np.round(-lo / s1), 0, maxq)
        q = np.clip(np.round(x / s1[:, None]) + z1[:, None], 0, maxq)
        err = (np.abs(s1[:, None].astype(np.float64) * (q - z1[:, None]) - x) ** norm).sum(axis=1)
        b = ok & (err < best)
        best, scale, zero = np.where(b, err, best), np.where(b, s1, scale), np.where(b, z1, zero)
    return scale, zero


def gptq_reference(W, X, gs, actorder, blocksize=128, percdamp=0.01, maxq=15, mse=False):
    W = W.astype(np.float64).copy()
    n_out, n = W.shape
    H = X.astype(np.float64).T @ X.astype(np.float64)
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    perm = np.arange(n)
    if actorder:
        perm = np.argsort(-np.diag(H), kind="stable")
        W = W[:, perm]
        H = H[perm][:, perm]
    H[np.diag_indices(n)] += percdamp * np.mean(np.diag(H))
    U = np.linalg.cholesky(np.linalg.inv(H)).T  # upper, U^T U = H^-1
    Q = np.zeros((n_out, n), np.int64)
    scale = zero = None
    for i1 in range(0, n, blocksize):
        i2 = min(i1 + blocksize, n)
        W1 = W[:, i1:i2].copy()
        Err1 = np.zeros_like(W1)
        for i in range(i2 - i1):
            c = i1 + i
            if c % gs == 0:
                # as gptq.py does: from W, which has the earlier blocks' updates but not this block's
                fp = find_params_mse if mse else find_params
                scale, zero = fp(W[:, c:c + gs].astype(np.float32), maxq)
            w = W1[:, i]
            q = np.clip(np.round(w.astype(np.float32) / scale) + zero, 0, maxq)
            Q[:, c] = q
            d = U[c, c]
            err = (w - scale.astype(np.float64) * (q - zero)) / d
            W1[:, i:] -= np.outer(err, U[c, c:i2])
            Err1[:, i] = err
        W[:, i1:i2] = W1
        W[:, i2:] -= Err1 @ U[i1:i2, i2:]
    out = np.zeros_like(Q)
    out[:, perm] = Q
    return out


def awq_pseudo_quant(w, gs, maxq=15):
    """AutoAWQ pseudo_quantize_tensor, zero_point=True (range not widened to 0)"""
    shp = w.shape
    g = w.reshape(-1, gs).astype(np.float64)
    mx, mn = g.max(axis=1, keepdims=True), g.min(axis=1, keepdims=True)
    scales = np.maximum(mx - mn, 1e-5) / maxq
    zeros = np.clip(-np.round(mn / scales), 0, maxq)
    q = (np.clip(np.round(g / scales) + zeros, 0, maxq) - zeros) * scales
    return q.reshape(shp)


def awq_fake_quant_f32(g, maxq=15):
    """AWQ's pseudo-quantization of the rows of g in f32 with the scale rounded to fp16 (as the C search does)"""
    mx, mn = g.max(axis=1, keepdims=True), g.min(axis=1, keepdims=True)
    sc = (np.maximum(mx - mn, np.float32(1e-5)) / np.float32(maxq)).astype(np.float16).astype(np.float32)
    z = np.clip(np.round(-mn / sc), 0, maxq)
    return ((np.clip(np.round(g / sc) + z, 0, maxq) - z) * sc).astype(np.float32)


def clip_check(w, x, out, gs, two_sided):
    """number of groups where out matches the reference's choice, and the worst relative excess error of out's"""
    n_out, n_in = w.shape
    n_g = n_in // gs
    W = w.reshape(n_out, n_g, gs).astype(np.float32)
    X = x.reshape(-1, n_g, gs).astype(np.float64)
    O = out.reshape(n_out, n_g, gs)
    org = np.einsum("tgi,ogi->ogt", X, W.astype(np.float64))
    mx, mn = W.max(axis=2), W.min(axis=2)
    amax = np.maximum(mx, -mn)
    cands = []
    for a in range(10):
        fa = np.float32(1) - np.float32(a) / np.float32(20)
        for b in range(10 if two_sided else 1):
            fb = np.float32(1) - np.float32(b) / np.float32(20)
            if two_sided:
                hi = np.where(mx > 0, mx * fa, mx).astype(np.float32)
                lo = np.where(mn < 0, mn * fb, mn).astype(np.float32)
                valid = ~(((a > 0) & (mx <= 0)) | ((b > 0) & (mn >= 0)))
            else:
                hi = (amax * fa).astype(np.float32)
                lo = -hi
                valid = np.ones_like(hi, bool)
            cw = np.clip(W, lo[..., None], hi[..., None])
            q = awq_fake_quant_f32(cw.reshape(-1, gs)).reshape(W.shape)
            err = ((np.einsum("tgi,ogi->ogt", X, q.astype(np.float64)) - org) ** 2).sum(axis=2)
            cands.append((np.where(valid, err, np.inf), cw))
    errs = np.stack([e for e, _ in cands])           # [cand, out, group]
    best = errs.min(axis=0)
    first = errs.argmin(axis=0)                     # first minimum, like the C loop
    ref_w = np.stack([c for _, c in cands])[first, np.arange(n_out)[:, None], np.arange(n_g)[None, :]]
    same = np.all(ref_w == O, axis=2)
    # the error of the clamp C chose: the candidate whose clamped group equals C's
    worst = 0.0
    for o, g in zip(*np.nonzero(~same)):
        match = [errs[k, o, g] for k, (_, cw) in enumerate(cands) if np.array_equal(cw[o, g], O[o, g])]
        excess = (min(match) - best[o, g]) / max(best[o, g], 1e-30) if match else np.inf
        worst = max(worst, excess)
    return int(same.sum()), same.size, worst


def awq_search_inputs(x, ws, gs):
    """what both scale grids score with: x in f64, mean |x| per channel, the duo term w_mean (mean over every row
    of the linears of |w| / max |w| of its group) and each linear's full-precision output"""
    x = x.astype(np.float64)
    x_mean = np.abs(x).mean(axis=0)
    wcat = np.concatenate(ws, axis=0).astype(np.float64)
    g = np.abs(wcat).reshape(-1, gs)
    w_mean = (g / (g.max(axis=1, keepdims=True) + 1e-6)).reshape(wcat.shape).mean(axis=0)
    return x, x_mean, w_mean, [x @ w.T.astype(np.float64) for w in ws]


def awq_duo_search(x, ws, gs, n_grid=20):
    x, x_mean, w_mean, ref = awq_search_inputs(x, ws, gs)
    best, best_a, best_s = np.inf, None, None
    for i in range(n_grid):
        a = i / n_grid
        s = np.maximum(x_mean ** a / (w_mean ** (1 - a) + 1e-4), 1e-4)
        s = s / np.sqrt(s.max() * s.min())
        loss = sum(((x @ (awq_pseudo_quant(w * s, gs) / s).T - r) ** 2).sum() for w, r in zip(ws, ref))
        if loss < best:
            best, best_a, best_s = loss, a, s
    return best_a, best_s


def awq_lc_search(x, ws, gs, n_grid=20):
    """llm-compressor AWQModifier._compute_best_scale's grid with duo_scaling=True: (0.0, no duo) first, then
    ratio = i / (n_grid - 2) with duo for i in 0 .. n_grid - 2; returns (-1 for the identity, else the ratio), s"""
    x, x_mean, w_mean, ref = awq_search_inputs(x, ws, gs)
    grid = [(0.0, False)] + [(i / (n_grid - 2), True) for i in range(n_grid - 1)]
    best, best_a, best_s = np.inf, None, None
    for a, duo in grid:
        s = np.maximum(x_mean ** a / (w_mean ** (1 - a) + 1e-4), 1e-4) if duo else np.maximum(x_mean ** a, 1e-4)
        s = s / np.sqrt(s.max() * s.min())
        loss = sum(((x @ (awq_pseudo_quant(w * s, gs) / s).T - r) ** 2).sum() for w, r in zip(ws, ref))
        if loss < best:
            best, best_a, best_s = loss, (a if duo else -1.0), s
    return best_a, best_s


def main():
    t = load_file(sys.argv[1])
    gs = int(sys.argv[2])
    fails = []
    for v in ("rtn", "gptq", "gptq_act"):
        w, q = unpack_gptq(t, v)
        if not np.array_equal(w, t[v + ".deq"]):
            fails.append(f"{v}: GPTQ-layout unpack differs from our dequantization "
                         f"(max {np.abs(w - t[v + '.deq']).max():.3g})")
        t[v + ".codes"] = q
    w = unpack_awq(t, "awq", gs)
    if not np.array_equal(w, t["awq.deq"]):
        fails.append(f"awq: AWQ-layout unpack differs (max {np.abs(w - t['awq.deq']).max():.3g})")
    w, q = unpack_gptq(t, "gptq_mse")
    if not np.array_equal(w, t["gptq_mse.deq"]):
        fails.append("gptq_mse: GPTQ-layout unpack differs from our dequantization")
    t["gptq_mse.codes"] = q
    for v, act, mse in (("gptq", False, False), ("gptq_act", True, False), ("gptq_mse", True, True)):
        ref = gptq_reference(t["w"], t["x"], gs, act, mse=mse)
        ours = t[v + ".codes"]
        same = float(np.mean(ref == ours))
        far = int(np.sum(np.abs(ref - ours) > 1))
        print(f"{v}: {100 * same:.2f}% of codes equal the numpy reference GPTQ, {far} differ by more than 1")
        if same < 0.99 or far:
            fails.append(f"{v}: codes disagree with the reference GPTQ ({100 * same:.2f}% equal, {far} far)")
    a_ref, s_ref = awq_duo_search(t["x"], [t["w"], t["w2"]], gs)
    a_c = float(t["duo.alpha"][0])
    rel = float(np.max(np.abs(t["duo.s"] - s_ref) / s_ref))
    print(f"awq duo search: alpha {a_c:.2f} (numpy AutoAWQ {a_ref:.2f}), s max rel diff {rel:.2g}")
    if abs(a_c - a_ref) > 1e-6 or rel > 1e-4:
        fails.append(f"awq duo search: alpha {a_c} / s differ from the numpy AutoAWQ search ({a_ref}, rel {rel:.3g})")
    for key, x, k in (("lc", t["x"], 0), ("lcf", t["lcf.x"], 1)):
        a_ref, s_ref = awq_lc_search(x, [t["w"], t["w2"]], gs)
        a_c = float(t["lc.alpha"][k])
        rel = float(np.max(np.abs(t[key + ".s"] - s_ref) / s_ref))
        print(f"awq llm-compressor grid ({key}): alpha {a_c:.3f} (numpy {a_ref:.3f}; -1 = identity), s max rel diff {rel:.2g}")
        if abs(a_c - a_ref) > 1e-6 or rel > 1e-4:
            fails.append(f"awq llm-compressor grid ({key}): alpha {a_c} / s differ from numpy ({a_ref}, rel {rel:.3g})")
    # AWQ's final quantizer on one-sided groups (group 64): AutoAWQ pseudo_quantize_tensor with the scale held
    # in fp16 like the checkpoint, f32 arithmetic
    g = t["awqr.w"].reshape(-1, 64).astype(np.float32)
    mx, mn = g.max(axis=1, keepdims=True), g.min(axis=1, keepdims=True)
    sc = (np.maximum(mx - mn, np.float32(1e-5)) / np.float32(15)).astype(np.float16).astype(np.float32)
    z = np.clip(-np.round(mn / sc), 0, 15)
    ref = ((np.clip(np.round(g / sc) + z, 0, 15) - z) * sc).reshape(t["awqr.w"].shape)
    bad = int(np.sum(np.abs(ref - t["awqr.deq"]) > 1e-6 * np.abs(ref).max()))
    print(f"awq quantizer: {bad} of {ref.size} values differ from AutoAWQ's pseudo_quantize_tensor")
    if bad:
        fails.append(f"awq quantizer: {bad} values differ from AutoAWQ's pseudo_quantize_tensor")
    for key, two in (("clip.sym", False), ("clip.two", True)):
        same, n, worst = clip_check(t["clip.w"], t["clip.x"], t[key], gs, two)
        print(f"awq clipping ({'two-sided' if two else 'AutoAWQ'}): {same} of {n} groups pick the numpy search's clamp; "
              f"worst excess error of the others {worst:.2g}")
        if same < 0.98 * n or worst > 1e-4:
            fails.append(f"awq clipping ({key}): {same} of {n} groups agree, worst excess error {worst:.3g}")
    if np.array_equal(t["clip.sym"], t["clip.two"]):
        fails.append("awq clipping: the two-sided search changed nothing against the symmetric one")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
