#!/usr/bin/env python3
"""Peer measurements for the CUDA kernel benchmark (run on the GPU machine by scripts/device-check.sh).

Times the libraries our kernels are compared against, at the same shapes and with the same method as
dev/cuda/kernel_check.c (CUDA events around back-to-back launches, median of repeats, weights rotated over
copies that together exceed the L2 cache):
  - device copy (the bandwidth ceiling) and a bf16 GEMM 8192^3 (the compute ceiling), both via PyTorch
  - prefill attention: torch SDPA with the cuDNN backend and with the FlashAttention-2 backend
  - decode attention: torch SDPA on contiguous KV with GQA (enable_gqa=True)
  - decode GEMMs: cuBLAS bf16 (x @ w.T; also f16 at n8192) and cuBLASLt FP8 (torch._scaled_mm, per-tensor and row/col scales)

Writes a JSON array of records with the same fields as kernel_check: type, kernel, shape, us, flops, bytes,
tflops, tbps.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

RECORDS = []


def time_us(fn, inner=10, reps=9, warmup=3):
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(reps):
        a.record()
        for i in range(inner):
            fn(r * inner + i)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / inner)
    times.sort()
    return times[len(times) // 2]


def record(kernel, shape, us, flops=0.0, nbytes=0.0):
    tflops = flops / (us * 1e-6) / 1e12
    tbps = nbytes / (us * 1e-6) / 1e12
    print(f"PEER   {kernel:28s} {shape:44s} {us:9.2f} us  {tflops:7.1f} TFLOP/s  {tbps:5.2f} TB/s", flush=True)
    RECORDS.append(dict(type="bench", kernel=kernel, shape=shape, us=us, flops=flops, bytes=nbytes,
                        tflops=tflops, tbps=tbps))


def ceilings():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    b = torch.empty_like(a)
    us = time_us(lambda i: b.copy_(a), inner=5, reps=7)
    record("peer:torch_copy", "1 GiB d2d", us, 0, 2.0 * n)
    del a, b
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    us = time_us(lambda i: x @ y, inner=5, reps=7)
    record("peer:cublas_bf16_gemm", "m8192 n8192 k8192", us, 2.0 * 8192 ** 3, 0)
    del x, y


def big_gemms():
    """Prefill-shape FP8 GEMMs through torch._scaled_mm (cuBLASLt): the peers of assay_cuda_blas_gemm_fp8."""
    m = n = k = 8192
    shape = f"m{m} n{n} k{k}"
    x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    scalings = (
        ("peer:cublaslt_fp8_tensor", torch.ones((), device="cuda"), torch.ones((), device="cuda")),
        ("peer:cublaslt_fp8_rowwise", torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda")),
        # 1x128 activation groups (outer-dim-major) x 128x128 weight blocks, the layouts torch checks for
        ("peer:cublaslt_fp8_block128", torch.ones(k // 128, m, device="cuda").t(),
         torch.ones(n // 128, k // 128, device="cuda").t()),
    )
    for name, sa, sb in scalings:
        try:
            us = time_us(lambda i: torch._scaled_mm(x, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                         inner=5, reps=7)
            record(name, shape, us, 2.0 * m * n * k, 0)
        except Exception as e:
            print(f"PEER   {name} {shape}: unavailable ({str(e)[:160]})", flush=True)
    del x, w


def prefill(quick):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    cudnn = ("peer:cudnn_sdpa", SDPBackend.CUDNN_ATTENTION)
    flash2 = ("peer:flash2_sdpa", SDPBackend.FLASH_ATTENTION)

    def sdpa(B, N, d, backends, inner, reps):  # bf16 SDPA on random Q, K, V, h32, full and causal
        H = 32
        q = torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn_like(q)
        v = torch.randn_like(q)
        for causal in (False, True):
            shape = f"b{B} h32 n{N} d{d} {'causal' if causal else 'full'}"
            flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
            for name, backend in backends:
                try:
                    with sdpa_kernel([backend]):
                        us = time_us(lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                     inner=inner, reps=reps)
                    record(name, shape, us, flops, 0)
                except Exception as e:  # a backend missing on this build is reported, not fatal
                    print(f"PEER   {name} {shape}: unavailable ({str(e)[:120]})", flush=True)
        del q, k, v

    for d in ([128] if quick else [128, 64]):
        sdpa(4, 4096, d, (cudnn, flash2), 3, 7)
    # the FP8 prefill's sequence-length sweep (kernel_check, fp8attn section): cuDNN at 16k tokens per batch
    if not quick:
        for B, N in ((2, 8192), (1, 16384)):
            sdpa(B, N, 128, (cudnn,), 2, 5)


def decode():
    B, HQ, HKV, L, D = 32, 32, 8, 8192, 128
    q = torch.randn(B, HQ, 1, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, HKV, L, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    nbytes = 2.0 * B * HKV * L * D * 2
    us = time_us(lambda i: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), inner=10, reps=9)
    record("peer:torch_sdpa_decode", "b32 ctx8192 hq32 hkv8 d128", us, 4.0 * B * HQ * L * D, nbytes)
    # second timing pass: the peer's run-to-run spread next to the ratios against it
    us = time_us(lambda i: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), inner=10, reps=9)
    record("peer:torch_sdpa_decode_rep", "b32 ctx8192 hq32 hkv8 d128", us, 4.0 * B * HQ * L * D, nbytes)
    del q, k, v


def gemms(quick):
    # m1, m8 and m16 are kernel_check's bench shapes; ASSAY_LAB_GEMM_EXTRA_M="2,4,8" (its extra int4 shapes) adds more
    ms = {1, 8, 16} | {int(v) for v in os.environ.get("ASSAY_LAB_GEMM_EXTRA_M", "").split(",") if v.strip().isdigit()}
    shapes = [(m, 8192, 8192) for m in sorted(ms) if 1 <= m <= 16] + ([] if quick else [(16, 28672, 8192)])
    for m, n, k in shapes:
        shape = f"m{m} n{n} k{k}"
        # bf16 weights (cuBLAS): rotate >= 512 MB
        copies = max(1, min(8, int(512e6 // (2 * n * k))))
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        us = time_us(lambda i: x @ ws[i % copies].t(), inner=20, reps=9)
        record("peer:cublas_bf16", shape, us, 2.0 * m * n * k, 2.0 * n * k + 2.0 * m * k + 2.0 * m * n)
        del ws
        # the same on f16 operands: the peer of the int4 GEMM on f16 activations (gemm_int4_g128_xf16)
        if m <= 16 and n == 8192:
            xh = x.to(torch.float16)
            ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) for _ in range(copies)]
            us = time_us(lambda i: xh @ ws[i % copies].t(), inner=20, reps=9)
            record("peer:cublas_f16", shape, us, 2.0 * m * n * k, 2.0 * n * k + 2.0 * m * k + 2.0 * m * n)
            del ws
        # fp8 e4m3 (cuBLASLt via torch._scaled_mm); M is padded to 16 as cuBLASLt requires
        mp = max(16, m)
        copies = max(1, min(8, int(512e6 // (n * k))))
        x8 = torch.randn(mp, k, device="cuda").to(torch.float8_e4m3fn)
        w8 = [torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn) for _ in range(copies)]
        one = torch.ones((), device="cuda")
        nbytes = 1.0 * n * k + mp * k + 2.0 * mp * n
        try:
            us = time_us(lambda i: torch._scaled_mm(x8, w8[i % copies].t(), scale_a=one, scale_b=one,
                                                    out_dtype=torch.bfloat16), inner=20, reps=9)
            record("peer:cublaslt_fp8_tensor", shape, us, 2.0 * m * n * k, nbytes)
        except Exception as e:
            print(f"PEER   cublaslt_fp8_tensor {shape}: unavailable ({str(e)[:160]})", flush=True)
        sa = torch.ones(mp, 1, device="cuda")
        sb = torch.ones(1, n, device="cuda")
        try:
            us = time_us(lambda i: torch._scaled_mm(x8, w8[i % copies].t(), scale_a=sa, scale_b=sb,
                                                    out_dtype=torch.bfloat16), inner=20, reps=9)
            record("peer:cublaslt_fp8_rowwise", shape, us, 2.0 * m * n * k, nbytes + 4.0 * n)
        except Exception as e:
            print(f"PEER   cublaslt_fp8_rowwise {shape}: unavailable ({str(e)[:160]})", flush=True)
        del w8, x8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="gemm / gemm_lt / decode / prefill / fp8attn / quant: the ceilings and the peers of "
                    "that kernel_check section only (fp8attn: the bf16 prefill peers it is compared with; quant: none)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("peers.py: no CUDA device", file=sys.stderr)
        return 1
    print(f"peers.py: torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    RECORDS.append(dict(type="info", torch=torch.__version__, device=torch.cuda.get_device_name(),
                        cudnn=torch.backends.cudnn.version()))
    steps = [ceilings, big_gemms, decode, lambda: gemms(args.quick), lambda: prefill(args.quick)]
    groups = dict(gemm=[lambda: gemms(args.quick)], gemm_lt=[big_gemms], decode=[decode],
                  prefill=[lambda: prefill(args.quick)], fp8attn=[lambda: prefill(args.quick)], quant=[])
    if args.only in groups:
        steps = [ceilings] + groups[args.only]
    for step in steps:
        try:
            step()
        except Exception as e:
            print(f"peers.py: step failed: {e}", flush=True)
        torch.cuda.empty_cache()
        with open(args.json, "w") as f:
            json.dump(RECORDS, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
