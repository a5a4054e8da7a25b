#!/usr/bin/env python3
"""Per-instruction warp stall reasons from an Nsight Compute report (SourceCounters / WarpStateStats sections).

    ncu --section WarpStateStats --section SourceCounters --warp-sampling-interval 0 -o rep <program>
    python3 dev/cuda/ncu_stalls.py rep.ncu-rep [--top 60] > stalls.txt

`ncu --page source` prints only the total samples per instruction; the reasons behind them are instanced metrics
(smsp__pcsamp_warps_issue_stalled_<reason>, one instance per program counter) that the ncu_report module of the
Nsight Compute installation reads. For each profiled kernel this prints the sample totals per reason, the samples
per reason in each basic-block-like region (split at branch targets is not attempted: regions are runs of
instructions with the same execution count), and the top instructions with their SASS and their main reasons.
"""
import glob
import sys
from collections import defaultdict

for d in sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python")
                + glob.glob("/opt/nvidia/nsight-compute/*/extras/python")):
    sys.path.append(d)
import ncu_report  # noqa: E402

PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def per_pc(metric):
    """{pc: value} of an instanced metric (empty when it has no instances)."""
    out = {}
    n = metric.num_instances()
    if not n:
        return out
    ids = metric.correlation_ids()
    for i in range(n):
        out[ids.as_uint64(i)] = metric.as_uint64(i)
    return out


def report(action, top):
    print("=" * 100)
    print(action.name())
    reasons = {}
    for name in action.metric_names():
        if name.startswith(PREFIX) and not name.endswith("_not_issued"):
            pcs = per_pc(action.metric_by_name(name))
            if pcs:
                reasons[name[len(PREFIX):]] = pcs
    execd = per_pc(action.metric_by_name("inst_executed")) if "inst_executed" in action.metric_names() else {}
    if not reasons:
        print("  no per-instruction stall samples in this report (collect the SourceCounters section)")
        return
    total = defaultdict(int)
    per_inst = defaultdict(lambda: defaultdict(int))
    for r, pcs in reasons.items():
        for pc, v in pcs.items():
            total[r] += v
            per_inst[pc][r] += v
    grand = sum(total.values())
    print(f"  samples {grand}")
    for r, v in sorted(total.items(), key=lambda kv: -kv[1]):
        if v:
            print(f"    {r:28s} {v:8d}  {100.0 * v / grand:5.1f}%")
    pcs = sorted(set(per_inst) | set(execd))
    # regions: maximal runs of consecutive instructions with the same execution count
    print("  regions (consecutive instructions with one execution count):")
    runs = []
    for pc in pcs:
        ex = execd.get(pc, -1)
        if runs and runs[-1][1] == ex:
            runs[-1][2].append(pc)
        else:
            runs.append([pc, ex, [pc]])
    for start, ex, members in runs:
        s = sum(sum(per_inst[pc].values()) for pc in members)
        if s * 200 < grand:
            continue
        rs = defaultdict(int)
        for pc in members:
            for r, v in per_inst[pc].items():
                rs[r] += v
        main = ", ".join(f"{r} {100.0 * v / s:.0f}%" for r, v in sorted(rs.items(), key=lambda kv: -kv[1])[:4])
        print(f"    {start:#x} +{len(members):4d} inst, executed {ex:9d}: {s:7d} samples ({100.0 * s / grand:5.1f}%)  {main}")
    print(f"  top {top} instructions:")
    ranked = sorted(per_inst.items(), key=lambda kv: -sum(kv[1].values()))[:top]
    for pc, rs in sorted(ranked):
        s = sum(rs.values())
        main = ", ".join(f"{r} {v}" for r, v in sorted(rs.items(), key=lambda kv: -kv[1])[:3])
        try:
            sass = action.sass_by_pc(pc)
        except Exception:  # older report modules
            sass = "?"
        print(f"    {pc:#08x} {s:6d} ({100.0 * s / grand:4.1f}%) ex {execd.get(pc, 0):8d}  {sass[:60]:60s} {main}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 60
    ctx = ncu_report.load_report(sys.argv[1])
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            report(rng.action_by_idx(a), top)


if __name__ == "__main__":
    main()
