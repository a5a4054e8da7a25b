"""MXFP4 (OCP layout and ggml's block_mxfp4) and NVFP4 encode/decode from src/quant/fp4.c against an independent
numpy implementation built on ml_dtypes' float4_e2m1fn / float8_e4m3fn / float8_e8m0fnu conversions, and ggml's
block layout against gguf-py's MXFP4 dequantizer (and its quantizer, away from exact element ties, where ggml
rounds toward the smaller magnitude while the OCP rule is ties-to-even).

Inputs: random normal blocks with outliers, blocks of exact ties (odd multiples of half an E2M1 step), all-zero
blocks, tiny (subnormal-scale) and huge blocks, and values just below powers of two.
"""
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np
from gguf.quants import MXFP4 as GgufMXFP4

TOOL = os.path.join(os.environ.get("ASSAY_BUILD_DIR", "build"), "support", "fp4_convert")
E2M1, E4M3 = ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def inputs():
    rng = np.random.default_rng(7)
    parts = [rng.standard_normal(32 * 200).astype(np.float32) * 0.02]
    o = rng.standard_normal(32 * 50).astype(np.float32)
    o[::17] *= 40  # outliers
    parts.append(o)
    # ties: a block whose max is 6 (scale 2^0 under both rules) with elements at every midpoint of the E2M1 grid
    ties = np.array([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 4, np.float32)
    parts += [ties, -ties, ties * 2.0 ** -20, ties * 2.0 ** 20]
    parts.append(np.zeros(32, np.float32))
    parts.append(np.full(32, 2.0 ** -140, np.float32))          # amax far below 2^-125: clamped scale
    parts.append(np.array([np.nextafter(np.float32(2.0 ** k), np.float32(0)) for k in range(-10, 22)], np.float32))
    parts.append(np.linspace(-7.9, 7.9, 32).astype(np.float32))  # values above 6 x scale saturate under FLOOR
    return np.concatenate(parts).astype(np.float32)


def run(fmt, mode, x):
    with tempfile.TemporaryDirectory() as d:
        fi, fo = os.path.join(d, "in"), os.path.join(d, "out")
        x.tofile(fi)
        subprocess.run([TOOL, fmt, mode, fi, fo], check=True)
        return np.fromfile(fo, dtype=np.uint8)


def e2m1_codes(v):
    return np.clip(v, -6, 6).astype(E2M1).view(np.uint8) & 0xF


def np_mx(x, mode):
    """OCP MX: e = floor(log2(amax)) - 2 (FLOOR) or ceil(log2(amax / 6)) (RCEIL), clamped to [-127, 127]."""
    b = x.reshape(-1, 32).astype(np.float64)
    amax = np.abs(b).max(axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2, -127)
        if mode == "rceil":
            e = np.where((amax > 0) & (6.0 * 2.0 ** e < amax), e + 1, e)
        if mode == "ct":  # compressed-tensors round_to_power_2 on the f32 bits: add 1 << (23 - 1 - 1), keep the exponent
            bits = amax.astype(np.float32).view(np.uint32).astype(np.uint64)
            p2 = ((bits + (1 << 21)) & 0xFF800000).astype(np.uint32).view(np.float32).astype(np.float64)
            e = np.where(p2 > 0, np.floor(np.log2(np.where(p2 > 0, p2, 1))) - 2, -127)
    e = np.clip(e, -127, 127).astype(np.int64)
    c = e2m1_codes((b / 2.0 ** e[:, None]).astype(np.float32))
    deq = c.view(E2M1).astype(np.float64) * 2.0 ** e[:, None]
    return (e + 127).astype(np.uint8), c, deq.astype(np.float32).reshape(-1)


def check_mx(x, mode):
    n = x.size
    out = run("mxfp4", mode, x)
    sc, packed, deq = out[:n // 32], out[n // 32:n // 32 + n // 2], out[n // 32 + n // 2:].view(np.float32)
    esc, ec, edeq = np_mx(x, mode)
    c = np.stack([packed & 0xF, packed >> 4], axis=1).reshape(-1, 32)  # first element in the low nibble
    if not np.array_equal(sc, esc):
        fail(f"mxfp4 {mode}: {np.count_nonzero(sc != esc)} scales differ, e.g. block {np.nonzero(sc != esc)[0][:3]}")
    bad = np.count_nonzero(c != ec)
    if bad:
        fail(f"mxfp4 {mode}: {bad} element codes differ")
    if not np.array_equal(deq, edeq):
        fail(f"mxfp4 {mode}: dequantized values differ")
    # the scale must decode to exactly ml_dtypes' E8M0 value
    if not np.array_equal(sc.view(ml_dtypes.float8_e8m0fnu).astype(np.float64), 2.0 ** (sc.astype(np.int64) - 127)):
        fail("E8M0 scale codes do not decode to 2^(e-127)")
    if mode == "rceil":  # RCEIL never saturates: every block maximum is within 6 x scale
        scale = 2.0 ** (sc.astype(np.float64) - 127)
        if (np.abs(x.reshape(-1, 32)).max(axis=1) > 6 * scale).any():
            fail("mxfp4 rceil: a block maximum exceeds 6 x its scale")
    print(f"mxfp4 {mode}: {n // 32} blocks match numpy")
    return out


def check_ggml(x):
    n = x.size
    out = run("mxfp4-ggml", "floor", x)
    blocks, deq = out[:n // 32 * 17].reshape(-1, 17), out[n // 32 * 17:].view(np.float32)
    ref = GgufMXFP4.dequantize_blocks(blocks.copy()).reshape(-1).astype(np.float32)
    if not np.array_equal(ref, deq):
        fail(f"mxfp4-ggml: gguf-py dequantizes {np.count_nonzero(ref != deq)} values differently")
    esc, ec, edeq = np_mx(x, "floor")
    if not np.array_equal(deq, edeq):
        fail("mxfp4-ggml: values differ from the OCP layout's")
    # gguf-py's quantizer: same bytes except on exact element ties (ggml picks the smaller magnitude)
    q = GgufMXFP4.quantize_blocks(x.reshape(-1, 32).copy())
    finite_small = np.abs(x.reshape(-1, 32)).max(axis=1) >= 2.0 ** -125  # ggml's e wraps below that
    # ggml takes floor(log2(amax)) in float32, which rounds up for an amax just below a power of two; we take it
    # exactly. Those blocks are excluded from the byte comparison (and their count printed).
    amax = np.abs(x.reshape(-1, 32)).max(axis=1)
    with np.errstate(divide="ignore"):
        f32_log_rounds = np.floor(np.log2(amax.astype(np.float32))) != np.floor(np.log2(amax.astype(np.float64)))
    comparable = finite_small & ~f32_log_rounds
    if not np.array_equal(q[comparable, 0], blocks[comparable, 0]):
        bad = np.nonzero(q[comparable, 0] != blocks[comparable, 0])[0]
        fail(f"mxfp4-ggml: {len(bad)} scale bytes differ from gguf-py's quantizer, e.g. blocks {bad[:4]}")
    finite_small = comparable
    scaled = x.reshape(-1, 32) / (2.0 ** (blocks[:, :1].astype(np.float64) - 127))
    mag = np.abs(scaled)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    mids = (grid[:-1] + grid[1:]) / 2
    is_tie = np.isin(mag, mids)
    codes_ours = np.concatenate([blocks[:, 1:] & 0xF, blocks[:, 1:] >> 4], axis=1)
    codes_ref = np.concatenate([q[:, 1:] & 0xF, q[:, 1:] >> 4], axis=1)
    diff = (codes_ours != codes_ref) & ~is_tie & finite_small[:, None]
    # gguf-py maps -0 to code 0, we keep the sign: compare values, not just codes
    vo = codes_ours.astype(np.uint8).view(E2M1).astype(np.float32)
    vr = codes_ref.astype(np.uint8).view(E2M1).astype(np.float32)
    diff &= vo != vr
    if diff.any():
        fail(f"mxfp4-ggml: {np.count_nonzero(diff)} non-tie elements differ from gguf-py's quantizer")
    print(f"mxfp4-ggml: {n // 32} blocks, gguf-py dequantizes them identically; {np.count_nonzero(f32_log_rounds)} "
          f"blocks where ggml's float32 log2 rounds up were not byte-compared; "
          f"{np.count_nonzero(is_tie & (vo != vr))} tie elements round to even where ggml rounds down")


def check_nv(x):
    n = x.size
    out = run("nvfp4", "-", x)
    g = out[:4].view(np.float32)[0]
    sb = out[4:4 + n // 16]
    packed = out[4 + n // 16:4 + n // 16 + n // 2]
    deq = out[4 + n // 16 + n // 2:].view(np.float32)
    eg = np.float32(np.abs(x).max()) / np.float32(6 * 448)
    if g != eg:
        fail(f"nvfp4: global scale {g} want {eg}")
    b = x.reshape(-1, 16)
    amax = np.abs(b).max(axis=1).astype(np.float32)
    esb = (amax / np.float32(6.0 * eg)).astype(np.float32)
    esb = np.clip(esb, 0, 448).astype(E4M3)
    s = (esb.astype(np.float32) * eg).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        ec = np.where(s[:, None] != 0, e2m1_codes((b / s[:, None]).astype(np.float32)), 0).astype(np.uint8)
    c = np.stack([packed & 0xF, packed >> 4], axis=1).reshape(-1, 16)
    if not np.array_equal(sb, esb.view(np.uint8)):
        fail(f"nvfp4: {np.count_nonzero(sb != esb.view(np.uint8))} block scales differ")
    if not np.array_equal(c, ec):
        fail(f"nvfp4: {np.count_nonzero(c != ec)} codes differ")
    edeq = (ec.view(E2M1).astype(np.float32) * s[:, None]).reshape(-1)
    if not np.array_equal(deq, edeq):
        fail("nvfp4: dequantized values differ")
    # every block maximum is represented within E2M1's half step (1/6 relative at worst) times the E4M3 scale error
    bm = np.abs(b).max(axis=1)
    dm = np.abs(edeq.reshape(-1, 16)).max(axis=1)
    ok = bm >= np.abs(x).max() / 448  # below that the E4M3 block scale leaves its normal range (or underflows)
    worst = float(np.max(np.abs(dm[ok] - bm[ok]) / bm[ok]))
    if worst > 0.25:
        fail(f"nvfp4: block maxima off by {worst:.3f} relative")
    print(f"nvfp4: {n // 16} blocks match numpy; block maxima within {worst:.3f} relative")


def check_nv_ct(x):
    """compressed-tensors' NVFP4 arithmetic: gs = 2688 / amax, block scale fp8(gs * amax_b / 6) (0 -> 0.125),
    element e2m1(x / (scale / gs)), value code * scale / gs."""
    n = x.size
    out = run("nvfp4-ct", "-", x)
    gs = out[:4].view(np.float32)[0]
    sb, packed = out[4:4 + n // 16], out[4 + n // 16:4 + n // 16 + n // 2]
    deq = out[4 + n // 16 + n // 2:].view(np.float32)
    egs = np.float32(448.0 * 6.0) / np.float32(np.abs(x).max())
    if gs != egs:
        fail(f"nvfp4-ct: global scale {gs} want {egs}")
    b = x.reshape(-1, 16)
    esb = (egs * (np.abs(b).max(axis=1).astype(np.float32) / np.float32(6.0))).astype(np.float32)
    esb = np.clip(esb, 0, 448).astype(E4M3).astype(np.float32)
    n_floor = int(np.count_nonzero(esb == 0))
    esb = np.where(esb == 0, np.float32(0.125), esb).astype(E4M3)
    s = (esb.astype(np.float32) / egs).astype(np.float32)
    ec = e2m1_codes((b / s[:, None]).astype(np.float32))
    c = np.stack([packed & 0xF, packed >> 4], axis=1).reshape(-1, 16)
    if not np.array_equal(sb, esb.view(np.uint8)):
        fail(f"nvfp4-ct: {np.count_nonzero(sb != esb.view(np.uint8))} block scales differ")
    if not np.array_equal(c, ec):
        fail(f"nvfp4-ct: {np.count_nonzero(c != ec)} codes differ")
    edeq = (ec.view(E2M1).astype(np.float32) * s[:, None]).reshape(-1)
    if not np.array_equal(deq, edeq):
        fail("nvfp4-ct: dequantized values differ")
    print(f"nvfp4-ct: {n // 16} blocks match numpy ({n_floor} blocks whose scale rounds to 0 take 0.125)")


def main():
    if not os.path.exists(TOOL):
        print(f"missing {TOOL}")
        return 1
    x = inputs()
    for mode in ("floor", "rceil", "ct"):
        check_mx(x, mode)
    check_ggml(x)
    check_nv(x)
    check_nv_ct(x)
    print("failures:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
