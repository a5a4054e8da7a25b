"""test_gpu_report.py — bench/report.py, which joins the GPU lab's records with the peers' of the same run.

The records are made here, in kernel_check's JSON form (one record per line, the array closed at the end), with
values chosen so that the speed targets' outcomes are known in advance: an INT4 GEMM 12.5 us against a 36 us cuBLAS
peer (2.88x, below the 3x bar) and an FP8 prefill at 1016 TFLOP/s (above 1000). Checked: the complete file gives
those rows; the same file cut short mid-record (kernel_check stopped by the time budget) still gives the rows written
before the cut and says the run is incomplete; a file with no complete record gives no rows, no crash.
Exit code 0 = all checks passed.
"""
import json
import os
import subprocess
import sys

import testlib  # noqa: E402
from testlib import check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "bench", "report.py")


def bench(kernel, shape, us, tflops=0.0, tbps=0.0):
    return {"type": "bench", "kernel": kernel, "shape": shape, "us": us, "flops": 0.0, "bytes": 0.0,
            "tflops": tflops, "tbps": tbps}


def close(value, want):
    return value is not None and abs(value - want) < 1e-9


def kernel_check_json(records):
    """kernel_check's layout: '[', one record per line with a trailing comma but the last, ']'."""
    return "[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n"


def run_report(d, name, kernels_text, peers):
    kp, pp, out = os.path.join(d, name + "_k.json"), os.path.join(d, name + "_p.json"), os.path.join(d, name)
    with open(kp, "w") as f:
        f.write(kernels_text)
    with open(pp, "w") as f:
        json.dump(peers, f)
    r = subprocess.run([sys.executable, REPORT, kp, pp, "--out", out], capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: report.py exit {r.returncode}: {r.stderr[-500:]}")
    with open(out + ".md") as f:
        md = f.read()
    with open(out + ".json") as f:
        js = json.load(f)
    return md, {t["target"]: t for t in js["targets"]}


def main():
    d = testlib.scratch_dir("gpu_report_")
    peers = [{"type": "info", "device": "test", "torch": "0", "cudnn": "0"},
             bench("peer:torch_copy", "1 GiB d2d", 500.0, tbps=4.0),
             bench("peer:cublas_bf16", "m16 n8192 k8192", 36.0, tbps=3.7),
             bench("peer:cudnn_sdpa", "b4 h32 n4096 d128 full", 1680.0, tflops=654.0)]
    ours = [bench("device_copy", "1 GiB d2d", 504.0, tbps=4.2),
            {"type": "validate", "kernel": "gemm_int4_g128", "shape": "m16 n8192 k8192", "rel_err": 1.7e-3,
             "max_abs": 0.05, "nan_or_unwritten": 0, "checked": 1000, "tol": 1e-2, "pass": True},
            bench("gemm_int4_g128", "m16 n8192 k8192", 12.5, tbps=2.8),
            bench("attn_prefill_fp8_sm90", "b4 h32 n4096 d128 full", 1082.0, tflops=1016.0)]
    int4 = "int4 g128 decode GEMM m16 speed / cuBLAS bf16"
    fp8 = "FP8 prefill attention d128 N4096 TFLOP/s"

    full = kernel_check_json(ours)
    md, t = run_report(d, "complete", full, peers)
    check(close(t[int4]["value"], 36.0 / 12.5) and t[int4]["met"] is False, f"complete: int4 target {t[int4]}")
    check(t[fp8]["value"] == 1016.0 and t[fp8]["met"] is True, f"complete: fp8 target {t[fp8]}")
    check("Incomplete run" not in md, "complete: no incomplete-run note")
    check("Validations: 1 run, 0 failed" in md, "complete: the validation counted")

    # cut inside the last record, as when the time budget kills kernel_check mid-write: no closing bracket
    cut = full[:full.index('"attn_prefill_fp8_sm90"') + 10]
    md, t = run_report(d, "cut", cut, peers)
    check(close(t[int4]["value"], 36.0 / 12.5), f"cut: the int4 row written before the cut is used ({t[int4]})")
    check(t[fp8]["value"] is None and t[fp8]["met"] is None, f"cut: the fp8 record after the cut is missing ({t[fp8]})")
    check("Incomplete run" in md and "3 complete records" in md, "cut: the report says the run is incomplete")

    md, t = run_report(d, "garbage", "not json at all\n", peers)
    check(all(v["value"] is None for v in t.values()), "garbage: no target has a value")

    testlib.finish("gpu report")


if __name__ == "__main__":
    main()
