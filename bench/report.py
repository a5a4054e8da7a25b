#!/usr/bin/env python3
"""Joins kernel_check's records with the peers' from the same run: a table (rate, fraction of the measured
ceiling, ratio to the peer) and the issue's speed targets. Standard library only.

  report.py kernels.json peers.json --out bench/results/NAME   (writes NAME.json and NAME.md)
"""
import argparse
import json


def load(path):
    """The records of path and whether the file was cut short. kernel_check writes one record per line and closes
    the array at its end, so a run stopped by its time budget leaves an unterminated file: its complete records
    are used, and the report says the run is incomplete."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        print(f"report.py: cannot read {path}: {e}")
        return [], False
    try:
        return json.loads(text), False
    except ValueError as e:
        recs = []
        for line in text.splitlines():
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            try:
                recs.append(json.loads(line))
            except ValueError:
                break  # the record being written when the run stopped
        print(f"report.py: {path} is not complete JSON ({e}); using its {len(recs)} complete records")
        return recs, bool(recs)


def find(recs, kernel, shape_prefix):
    for r in recs:
        if r.get("type") == "bench" and r["kernel"] == kernel and r["shape"].startswith(shape_prefix):
            return r
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels")
    ap.add_argument("peers")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    (ours, ours_cut), (peers, peers_cut) = load(args.kernels), load(args.peers)
    info = next((r for r in peers if r.get("type") == "info"), {})
    copy = find(peers, "peer:torch_copy", "1 GiB") or find(ours, "device_copy", "1 GiB")
    gemm = find(peers, "peer:cublas_bf16_gemm", "m8192")
    fp8 = find(peers, "peer:cublaslt_fp8_tensor", "m8192")  # the FP8 ceiling: cuBLASLt per-tensor at 8192^3
    fp8_tflops = fp8["tflops"] if fp8 else float("nan")
    copy_tbps = copy["tbps"] if copy else float("nan")
    mma_tflops = gemm["tflops"] if gemm else float("nan")

    # (our kernel, shape prefix, peer kernel, peer shape prefix, bound: "bytes" or "flops")
    pairs = []
    for v in (1, 2, 3, 4, 5, 6, 7, 8, 9):
        for d in (128, 64):
            for mode in ("full", "causal"):
                s = f"b4 h32 n4096 d{d} {mode}"
                pairs.append((f"attn_prefill_v{v}", s, "peer:cudnn_sdpa", s, "flops"))
                pairs.append((f"attn_prefill_v{v}", s, "peer:flash2_sdpa", s, "flops"))
    for mode in ("full", "causal"):
        s = f"b4 h32 n4096 d128 {mode}"
        pairs.append(("attn_prefill_fp8", s, "peer:cudnn_sdpa", s, "flops"))
        pairs.append(("attn_prefill_fp8_sm90", s, "peer:cudnn_sdpa", s, "flops"))
        for s in (f"b2 h32 n8192 d128 {mode}", f"b1 h32 n16384 d128 {mode}"):  # the FP8 sequence-length sweep
            pairs.append(("attn_prefill_fp8_sm90", s, "peer:cudnn_sdpa", s, "flops"))
    for dt in ("bf16", "e4m3", "e5m2", "int8"):
        pairs.append((f"attn_decode_{dt}", "b32 ctx8192", "peer:torch_sdpa_decode", "b32 ctx8192", "bytes"))
    # every decode attention lab version and second timing pass (_rep) against the same peer
    dec_names = sorted({r["kernel"] for r in ours if r.get("type") == "bench" and r["kernel"].startswith("attn_decode_")
                        and r["kernel"].count("_") > 2}, key=lambda k: (k.split("_")[2], len(k), k))
    for kern in dec_names:
        pairs.append((kern, "b32 ctx8192", "peer:torch_sdpa_decode", "b32 ctx8192", "bytes"))
    # the default GEMM kernels first, then every lab variant (_vN) against the same peers
    gemm_names = sorted({r["kernel"] for r in ours if r.get("type") == "bench" and r["kernel"].startswith("gemm_")},
                        key=lambda k: (k.split("_v")[0], len(k), k))
    for s in ("m1 n8192 k8192", "m2 n8192 k8192", "m4 n8192 k8192", "m8 n8192 k8192", "m16 n8192 k8192",
              "m16 n28672 k8192"):
        for kern in gemm_names:
            if kern.startswith("gemm_fp8w_e4m3"):
                pairs.append((kern, s, "peer:cublaslt_fp8_tensor", s, "bytes"))
                pairs.append((kern, s, "peer:cublaslt_fp8_rowwise", s, "bytes"))
            elif kern.startswith("gemm_fp8_w8a8"):  # FP8 activations too: the same operation as the peers
                pairs.append((kern, s, "peer:cublaslt_fp8_tensor", s, "bytes"))
                pairs.append((kern, s, "peer:cublaslt_fp8_rowwise", s, "bytes"))
            elif kern.startswith("gemm_int4_g128"):
                pairs.append((kern, s, "peer:cublas_bf16", s, "bytes"))
                if kern.endswith("_xf16"):  # X in f16: also against cuBLAS on f16 operands
                    pairs.append((kern, s, "peer:cublas_f16", s, "bytes"))
    big = "m8192 n8192 k8192"
    pairs.append(("gemm_lt_bf16", big, "peer:cublas_bf16_gemm", big, "flops"))
    for ours_s, peer_s in (("tensor", "tensor"), ("token_channel", "rowwise"), ("block128", "block128")):
        pairs.append((f"gemm_lt_fp8_{ours_s}", big, f"peer:cublaslt_fp8_{peer_s}", big, "flops8"))
    pairs.append(("quant_fp8_groups128", "m8192", None, None, "bytes"))
    pairs.append(("quant_fp8_per_token", "m4096", None, None, "bytes"))
    pairs.append(("quant_fp8_per_token", "m16 ", None, None, "bytes"))
    for mm in (1, 8):  # timed beside the W8A8 GEMM (its input quantization)
        pairs.append(("quant_fp8_per_token", f"m{mm} k8192 (gemm input)", None, None, "bytes"))

    rows = []
    for kern, shp, pk, ps, bound in pairs:
        o = find(ours, kern, shp)
        if not o:
            continue
        p = find(peers, pk, ps) if pk else None
        rate = o["tflops"] if bound.startswith("flops") else o["tbps"]
        ceil = {"flops": mma_tflops, "flops8": fp8_tflops}.get(bound, copy_tbps)
        row = dict(kernel=kern, shape=o["shape"], us=o["us"], tflops=o["tflops"], tbps=o["tbps"], bound=bound,
                   frac_ceiling=rate / ceil if ceil == ceil and ceil > 0 else None,
                   peer=pk, peer_us=p["us"] if p else None, peer_tflops=p["tflops"] if p else None,
                   peer_tbps=p["tbps"] if p else None,
                   speedup_vs_peer=p["us"] / o["us"] if p else None)
        if p and kern.startswith("attn_decode"):  # the target compares byte rates (fp8 KV moves half the bytes)
            row["byte_rate_vs_peer"] = o["tbps"] / p["tbps"]
        rows.append(row)

    def first(kern, shp, pk):
        return next((r for r in rows if r["kernel"] == kern and r["shape"].startswith(shp) and r["peer"] == pk), None)

    targets = []

    def target(name, value, goal, ok):
        targets.append(dict(target=name, value=value, goal=goal, met=bool(ok) if value is not None else None))

    for dt in ("bf16", "e4m3"):
        r = first(f"attn_decode_{dt}", "b32", "peer:torch_sdpa_decode")
        v = r.get("byte_rate_vs_peer") if r else None
        target(f"decode attention {dt} KV byte rate / torch SDPA", v, ">= 0.9", v is not None and v >= 0.9)
    # the FP8 target lines use the W8A8 kernel (FP8 activations, as the cuBLASLt peer) when it ran; the W8A16
    # kernel (bf16 activations) keeps its own labelled lines
    for kern, label in (("gemm_fp8_w8a8", " (W8A8)"), ("gemm_fp8w_e4m3", " (W8A16)")):
        r = first(kern, "m16 n8192", "peer:cublaslt_fp8_tensor")
        if kern == "gemm_fp8_w8a8" and not r:
            continue
        v = r["speedup_vs_peer"] if r else None
        target(f"fp8 decode GEMM m16 speed / cuBLASLt fp8{label}", v, ">= 2", v is not None and v >= 2)
        rr = first(kern, "m16 n8192", "peer:cublaslt_fp8_rowwise")
        v = rr["speedup_vs_peer"] if rr else None
        target(f"fp8 decode GEMM m16 speed / cuBLASLt fp8 rowwise{label}", v, ">= 2", v is not None and v >= 2)
        v = r["frac_ceiling"] if r else None
        target(f"fp8 decode GEMM m16 bytes / copy bandwidth{label}", v, ">= 0.8", v is not None and v >= 0.8)
    r = first("gemm_int4_g128", "m16 n8192", "peer:cublas_bf16")
    v = r["speedup_vs_peer"] if r else None
    target("int4 g128 decode GEMM m16 speed / cuBLAS bf16", v, ">= 3", v is not None and v >= 3)
    for pk, label in (("peer:cublas_bf16", "cuBLAS bf16"), ("peer:cublas_f16", "cuBLAS f16")):
        r = first("gemm_int4_g128_xf16", "m16 n8192", pk)  # the f16-X entry (activations in f16)
        if r:
            v = r["speedup_vs_peer"]
            target(f"int4 g128 decode GEMM m16 on f16 X speed / {label}", v, ">= 3", v >= 3)
    # W4A16 on X as 16-bit integers (assay_cuda_gemm_int4g128_wi8, lab version 160, recorded as _xi16; round 23): the
    # integer wgmma GEMM on X converted beforehand by assay_cuda_quant_x_i16 (per token and 128-column group, two
    # signed byte limbs, timed on its own as quant_x_i16), as the W8A8 rows take X quantized beforehand; _i16 (lab
    # 163) launches that conversion in front of every call
    for kern, label in (("gemm_int4_g128_xi16", "X as 16-bit integers, converted beforehand"),
                        ("gemm_int4_g128_i16", "X as 16-bit integers, conversion included")):
        r = first(kern, "m16 n8192", "peer:cublas_bf16")
        if r:
            v = r["speedup_vs_peer"]
            target(f"int4 g128 decode GEMM m16 ({label}) speed / cuBLAS bf16", v, ">= 3", v >= 3)
    # W4A8 (assay_cuda_gemm_int4g128_xi8 / _w4a8, lab version 123; recorded as gemm_int4_g128_v123 / _v124 in run
    # h200-gpu14-w4a8-2): X quantized to 8 bits per token and 128-column group, a different operation from the rows
    # above (kernel_check prints its error against the unquantized X); _xi8 is the GEMM on X converted beforehand,
    # _w4a8 the entry that converts X in each call
    for kern, label in (("gemm_int4_g128_xi8", "X converted beforehand"), ("gemm_int4_g128_w4a8", "conversion included")):
        r = first(kern, "m16 n8192", "peer:cublas_bf16")
        if r:
            v = r["speedup_vs_peer"]
            target(f"int4 g128 W4A8 decode GEMM m16 ({label}) speed / cuBLAS bf16", v, ">= 3", v >= 3)
    best = None
    for vv in (1, 2, 3, 4, 5, 6, 7, 8, 9):
        r = first(f"attn_prefill_v{vv}", "b4 h32 n4096 d128 full", "peer:cudnn_sdpa")
        if r and (best is None or r["speedup_vs_peer"] > best):
            best = r["speedup_vs_peer"]
    target("prefill bf16 d128 N4096 (non-causal) / cuDNN", best, ">= 0.7", best is not None and best >= 0.7)

    v = None
    for name in ("attn_prefill_fp8", "attn_prefill_fp8_sm90"):
        r = first(name, "b4 h32 n4096 d128 full", "peer:cudnn_sdpa")
        if r and (v is None or r["tflops"] > v):
            v = r["tflops"]
    target("FP8 prefill attention d128 N4096 TFLOP/s", v, ">= 1000", v is not None and v >= 1000)
    validations = [r for r in ours if r.get("type") == "validate"]
    for kern, label in (("attn_prefill_fp8", "FP8 attention"), ("attn_prefill_fp8_sm90", "FP8 attention (sm90)")):
        for shp in sorted({v["shape"] for v in validations if v["kernel"] == kern + "_hadamard"}):
            plain = next((v for v in validations if v["kernel"] == kern + "_plain" and v["shape"] == shp), None)
            had = next((v for v in validations if v["kernel"] == kern + "_hadamard" and v["shape"] == shp), None)
            if plain and had:
                target(f"{label} rel error with Hadamard / without ({shp})", had["rel_err"] / plain["rel_err"],
                       "< 1", had["rel_err"] < plain["rel_err"])
    out = dict(info=info, ceilings=dict(copy_tbps=copy_tbps, bf16_gemm_tflops=mma_tflops), comparisons=rows,
               targets=targets, validations=validations, kernels_raw=ours, peers_raw=peers)
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)

    def fmt(x, spec):
        return format(x, spec) if isinstance(x, (int, float)) and x == x else "-"

    lines = [f"# CUDA kernels vs peers ({info.get('device', '?')}, torch {info.get('torch', '?')}, "
             f"cuDNN {info.get('cudnn', '?')})", "",
             f"Ceilings measured in this run: device copy {fmt(copy_tbps, '.2f')} TB/s (read + write), "
             f"bf16 GEMM 8192^3 {fmt(mma_tflops, '.0f')} TFLOP/s, fp8 GEMM 8192^3 (cuBLASLt per-tensor) "
             f"{fmt(fp8_tflops, '.0f')} TFLOP/s.", "",
             "| kernel | shape | us | TFLOP/s | TB/s | of ceiling | peer | peer us | peer TFLOP/s | peer TB/s | speedup |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['shape']} | {fmt(r['us'], '.1f')} | {fmt(r['tflops'], '.1f')} | "
                     f"{fmt(r['tbps'], '.2f')} | {fmt(r['frac_ceiling'], '.2f')} | {r['peer'] or '-'} | "
                     f"{fmt(r['peer_us'], '.1f')} | {fmt(r['peer_tflops'], '.1f')} | {fmt(r['peer_tbps'], '.2f')} | "
                     f"{fmt(r['speedup_vs_peer'], '.2f')} |")
    for path, recs, cut in ((args.kernels, ours, ours_cut), (args.peers, peers, peers_cut)):
        if cut:
            lines += ["", f"**Incomplete run:** {path} was cut short after {len(recs)} complete records (the run "
                      "stopped before its end, e.g. at the time budget): rows and targets after that point are missing."]
    lines += ["", "| target | value | goal | met |", "|---|---:|---|---|"]
    for t in targets:
        lines.append(f"| {t['target']} | {fmt(t['value'], '.2f')} | {t['goal']} | "
                     f"{'yes' if t['met'] else ('no' if t['met'] is False else '-')} |")
    nfail = sum(1 for v in validations if not v["pass"])
    lines += ["", f"Validations: {len(validations)} run, {nfail} failed (float64 reference, fresh random inputs, "
              "poisoned outputs).", ""]
    lines += ["| validation | shape | rel err | max abs | NaN/unwritten | pass |", "|---|---|---:|---:|---:|---|"]
    for v in validations:
        lines.append(f"| {v['kernel']} | {v['shape']} | {v['rel_err']:.2e} | {v['max_abs']:.2e} | "
                     f"{v['nan_or_unwritten']} | {'yes' if v['pass'] else 'NO'} |")
    text = "\n".join(lines) + "\n"
    with open(args.out + ".md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
