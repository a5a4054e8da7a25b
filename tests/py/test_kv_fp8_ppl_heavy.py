"""Issue bar: fp8 KV cache with calibrated scales within 0.2% of the bf16-KV perplexity on the house model.

A subset of the maintainers' measurement (`assay perplexity ../shared/models/house -f heldout.txt --ctx 512
--score-all`, here the first 16 windows of 512): `assay quantize --scheme none --kv-cache-scheme fp8` (16
calibration chunks of 512 tokens from the shared calibration corpus, not the held-out text), then
--kv-cache-dtype fp8 on that checkpoint (static per-layer scales) against --kv-cache-dtype bf16 on the source.
The run must say it used the checkpoint's scales; the PPL ratio must be within 0.2% and the mean KLD small.
The full-text numbers are in bench/results/kv_fp8_house.md.
"""
import json
import os
import subprocess
import sys
import tempfile

from testlib import check, finish

ASSAY = os.environ.get("ASSAY_BIN", "build/assay")
SHARED = os.environ.get("ASSAY_SHARED", "../shared")
HOUSE = os.path.join(SHARED, "models", "house")
HELDOUT = os.path.join(HOUSE, "heldout.txt")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(cmd), "failed:", r.stderr[-1000:])
        sys.exit(1)
    return r


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "house-kv")
        run([ASSAY, "quantize", HOUSE, "-o", ck, "--scheme", "none", "--kv-cache-scheme", "fp8", "--calib-samples", "16",
             "--threads", "2"])
        base = os.path.join(tmp, "base.kl")
        ppl = ["perplexity", "-f", HELDOUT, "--ctx", "512", "--score-all", "--chunks", "16", "-t", "2", "--json"]
        b = json.loads(run([ASSAY, ppl[0], HOUSE] + ppl[1:] + ["--kv-cache-dtype", "bf16", "--save-logits", base]).stdout)
        r = run([ASSAY, ppl[0], ck] + ppl[1:] + ["--kv-cache-dtype", "fp8", "--kl-divergence-base", base])
        q = json.loads(r.stdout)
        check("static per-layer k_scale/v_scale from the checkpoint" in r.stderr,
              f"the fp8 run did not use the checkpoint's scales: {r.stderr[-400:]}")
        ratio = q["ppl"] / b["ppl"]
        print(f"bf16 KV PPL {b['ppl']:.4f}, fp8 KV (calibrated) PPL {q['ppl']:.4f}, ratio {ratio:.5f}, "
              f"mean KLD {q.get('kld_mean')}")
        check(abs(ratio - 1) <= 0.002, f"PPL ratio {ratio:.5f} outside the 0.2% bar")
        check(q.get("kld_mean", 1) < 0.002, f"mean KLD {q.get('kld_mean')}")
    finish("kv_fp8_ppl")


if __name__ == "__main__":
    main()
