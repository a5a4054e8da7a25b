"""Exhaustive check of src/core/dtype.c against ml_dtypes (and numpy for f16).

Decoding: every code of bf16, f16, e4m3, e5m2, e2m1, e8m0 must give the f32 ml_dtypes gives.
Encoding: a dense sweep of f32 bit patterns (a fixed stride over all 2^32 patterns, every exact midpoint between
adjacent representable values of each format and its neighbours one f32 ulp either side, every representable
value and its neighbours, zeros, subnormals, infinities, NaNs with several payloads, overflow boundaries) must
give ml_dtypes' code, except where dtype.h documents a deliberate difference (saturation instead of NaN/inf,
NaN sign for e2m1, e8m0 zero/subnormal/overflow). Those rules are restated here from the header, independently.
Both the scalar functions and the row converters (AVX2 when available) are checked.
"""
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

BUILD = os.environ.get("ASSAY_BUILD_DIR", "build")
TOOL = os.path.join(BUILD, "support", "dtype_convert")

FORMATS = {  # name: (numpy dtype, code dtype)
    "bf16": (ml_dtypes.bfloat16, np.uint16),
    "f16": (np.float16, np.uint16),
    "e4m3": (ml_dtypes.float8_e4m3fn, np.uint8),
    "e5m2": (ml_dtypes.float8_e5m2, np.uint8),
    "e2m1": (ml_dtypes.float4_e2m1fn, np.uint8),
    "e8m0": (ml_dtypes.float8_e8m0fnu, np.uint8),
}
NCODES = {"bf16": 65536, "f16": 65536, "e4m3": 256, "e5m2": 256, "e2m1": 16, "e8m0": 256}

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def run(op, fmt, arr, out_dtype):
    with tempfile.TemporaryDirectory() as d:
        fi, fo = os.path.join(d, "in"), os.path.join(d, "out")
        arr.tofile(fi)
        subprocess.run([TOOL, op, fmt, fi, fo], check=True)
        return np.fromfile(fo, dtype=out_dtype)


def f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def check_decode(fmt):
    dt, ct = FORMATS[fmt]
    codes = np.arange(NCODES[fmt], dtype=ct)
    ref = codes.view(dt) if fmt != "e2m1" else codes.astype(np.uint8).view(dt)
    want = ref.astype(np.float32)
    ops = ["decode", "decode-row"] if fmt in ("bf16", "f16", "e4m3", "e5m2") else ["decode"]
    for op in ops:
        got = run(op, fmt, codes, np.float32)
        gnan, wnan = np.isnan(got), np.isnan(want)
        if not np.array_equal(gnan, wnan):
            fail(f"{op} {fmt}: NaN codes differ: {codes[gnan != wnan][:8]}")
        # NaNs: same sign; payload may differ only in the quiet bit (f16 sNaN is quieted, see dtype.h).
        both = gnan & wnan
        gb, wb = bits(got), bits(want)
        if not np.array_equal(gb[both] | 0x400000, wb[both] | 0x400000):
            fail(f"{op} {fmt}: NaN bits differ")
        ok = ~wnan
        bad = np.nonzero(gb[ok] != wb[ok])[0]
        if len(bad):
            c = codes[ok][bad[:5]]
            fail(f"{op} {fmt}: {len(bad)} codes decode wrong, e.g. {[hex(int(v)) for v in c]}: "
                 f"got {got[ok][bad[:5]]} want {want[ok][bad[:5]]}")
    print(f"decode {fmt}: {len(codes)} codes checked")


def representable(fmt):
    dt, ct = FORMATS[fmt]
    with np.errstate(all="ignore"):
        v = np.arange(NCODES[fmt], dtype=ct).view(dt).astype(np.float64)
    v = v[np.isfinite(v)]
    return np.unique(v)


def sweep_inputs(stride):
    parts = [np.arange(0, 1 << 32, stride, dtype=np.uint64).astype(np.uint32)]
    specials = [0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x00400000, 0x00600000, 0x00500000, 0x00600001,
                0x005fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7f800001, 0xff800001,
                0x7fc00000, 0xffc00000, 0x7fffffff, 0xffffffff, 0x7fa00000, 0x7f812345]
    parts.append(np.array(specials, dtype=np.uint32))
    # every representable value of every format, every midpoint, each +-1 f32 ulp (both signs)
    for fmt in FORMATS:
        v = representable(fmt)
        mids = (v[:-1] + v[1:]) / 2  # exact in f64 and in f32 for these narrow formats
        pts = np.concatenate([v, mids]).astype(np.float32)
        b = bits(pts).astype(np.int64)
        for d in (-1, 0, 1):
            parts.append(np.clip(b + d, 0, 0xFFFFFFFF).astype(np.uint32))
    # the full f32 subnormal range every 1021 patterns, and the region around each format's overflow point
    parts.append(np.arange(0, 0x00800000, 1021, dtype=np.uint32))
    for top in (448.0, 464.0, 480.0, 57344.0, 61440.0, 65504.0, 65520.0, 65536.0, 6.0, 7.0, 8.0,
                2.0 ** 127, 1.5 * 2.0 ** 127, 3.3895314e38):
        b = int(bits(np.float32(top)))
        parts.append(np.arange(b - 300, b + 300, dtype=np.uint32))
    x = np.concatenate(parts)
    x = np.concatenate([x, x ^ np.uint32(0x80000000)])  # both signs
    return np.unique(x)


def expected_codes(fmt, xbits):
    """ml_dtypes' (numpy's for f16) code, with the documented deliberate differences applied."""
    dt, ct = FORMATS[fmt]
    x = f32(xbits)
    with np.errstate(all="ignore"):
        want = x.astype(dt).view(np.uint8 if ct == np.uint8 else np.uint16).astype(np.uint32)
    neg = (xbits >> 31).astype(bool)
    a = xbits & 0x7FFFFFFF
    isnan = a > 0x7F800000
    sign8 = np.where(neg, 0x80, 0).astype(np.uint32)
    if fmt == "e4m3":  # saturate overflow and inf to +-448 instead of NaN
        sat = ~isnan & (np.abs(x) >= 448.0)
        want = np.where(sat, sign8 | 0x7E, want)
    elif fmt == "e5m2":  # saturate finite overflow to +-57344 instead of inf
        sat = ~isnan & np.isfinite(x) & (np.abs(x) > 57344.0)
        want = np.where(sat, sign8 | 0x7B, want)
    elif fmt == "e2m1":  # NaN -> zero with the NaN's own sign
        want = np.where(isnan, np.where(neg, 0x8, 0x0), want)
    elif fmt == "e8m0":
        want = np.where(a == 0, 0x00, want)  # +-0 -> smallest scale
        big = ~neg & ~isnan & (x >= np.float32(1.5 * 2.0 ** 127))
        want = np.where(big, 0xFE, want)  # overflow and +inf saturate
        sub = ~neg & (a != 0) & (a < 0x00800000)  # f32 subnormals: nearest of 2^-127 / 2^-126, ties up
        want = np.where(sub, np.where(a >= 0x00600000, 0x01, 0x00), want)
    return want.astype(np.uint32)


def check_encode(fmt, xbits):
    dt, ct = FORMATS[fmt]
    want = expected_codes(fmt, xbits)
    isnan = (xbits & 0x7FFFFFFF) > 0x7F800000
    ops = ["encode", "encode-row"] if fmt in ("bf16", "f16", "e4m3", "e5m2") else ["encode"]
    for op in ops:
        got = run(op, fmt, f32(xbits), ct).astype(np.uint32)
        cmp = np.ones_like(isnan)
        if fmt == "f16":
            # numpy keeps a signalling NaN signalling; dtype.h quiets it (as F16C does). Quiet NaNs must match.
            quiet = (xbits & 0x00400000) != 0
            cmp = ~isnan | quiet
            nan_ok = ((got[isnan] & 0x7C00) == 0x7C00) & ((got[isnan] & 0x3FF) != 0) & \
                     ((got[isnan] >> 15) == (xbits[isnan] >> 31))
            if not nan_ok.all():
                fail(f"{op} f16: NaN inputs not encoded as NaN of the same sign")
        bad = np.nonzero((got != want) & cmp)[0]
        if len(bad):
            ex = [(hex(int(xbits[i])), float(f32(xbits[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]
            fail(f"{op} {fmt}: {len(bad)} of {len(xbits)} inputs encode wrong, e.g. (bits, value, got, want) {ex}")
    print(f"encode {fmt}: {len(xbits)} f32 patterns checked")


def main():
    if not os.path.exists(TOOL):
        print(f"missing {TOOL}: build the project first")
        return 1
    for fmt in FORMATS:
        check_decode(fmt)
    xbits = sweep_inputs(stride=4099)
    for fmt in FORMATS:
        check_encode(fmt, xbits)
    # A few values fixed by the OCP FP8 / MX specifications themselves (not by any implementation).
    spec = [("e4m3", 448.0, 0x7E), ("e4m3", 2.0 ** -9, 0x01), ("e4m3", 2.0 ** -6, 0x08), ("e5m2", 57344.0, 0x7B),
            ("e5m2", 2.0 ** -16, 0x01), ("e2m1", 6.0, 0x7), ("e2m1", 0.5, 0x1), ("e8m0", 1.0, 0x7F)]
    for fmt, v, code in spec:
        got = run("encode", fmt, np.array([v], np.float32), FORMATS[fmt][1])[0]
        if got != code:
            fail(f"spec value {v} in {fmt}: got {hex(int(got))} want {hex(code)}")
    print("failures:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
