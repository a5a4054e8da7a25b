#!/usr/bin/env bash
# test_cli_decide_heavy.sh — `assay decide` end to end on the house model (a few documents), its usage errors, and
# `assay eval` on the real engine: report.md + report.html written, exit code = the verdict's; the README's smoke run
# is inconclusive and says how many documents would decide it.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
house="$ASSAY_SHARED/models/house"
. "$(dirname "$0")/expect.sh"
expect 2 "give --candidate" -- "$ASSAY_BIN" decide "$house"
expect 2 "unknown option '--bogus'" -- "$ASSAY_BIN" decide "$house" --candidate '--bogus 1'
expect 2 "unknown quantization 'int3'" -- "$ASSAY_BIN" decide "$house" --candidate '--quantization int3' -o "$tmp/q" --quiet
# the same configuration twice: no difference in any row; 6 unchanged documents cannot rule out a 0.5% loss
# (inconclusive, exit 5) unless the baseline scores zero, where no relative loss is possible (ship, exit 0)
out=$("$ASSAY_BIN" decide "$house" --candidate '--kv-cache-dtype f16' --tasks arc_challenge,piqa --limit 6 --kld-windows 1 \
      --bench-prompt 16 --bench-gen 4 -o "$tmp/same" --quiet 2>&1); rc=$?
if [ "$rc" = 5 ] && grep -q "^Verdict: inconclusive" <<<"$out" && grep -Eq "^piqa +acc_norm,none .* \+0\.00% " <<<"$out" &&
   ! grep -E "^(arc_challenge|piqa) " <<<"$out" | grep -vq " +0.00% " &&
   [ -s "$tmp/same/report.html" ] && [ -s "$tmp/same/report.md" ] &&
   [ -s "$tmp/same/baseline.json" ] && [ -s "$tmp/same/candidate.json" ]; then pass=$((pass+1))
else echo "FAIL: identical configurations: exit $rc: $out"; fail=$((fail+1)); fi
# the batched throughput bench: both configurations at each batch size, in bench.json and the report
expect 2 "bench-batches" -- "$ASSAY_BIN" decide "$house" --candidate '--kv-cache-dtype fp8' --bench-batches 1,0
if grep -q "| generation tok/s, batch 4 |" "$tmp/same/report.md" && grep -q "prompt tok/s, batch 1" "$tmp/same/report.html" &&
   "$ASSAY_PYTHON" -c '
import json, sys
b = json.load(open(sys.argv[1]))
for k in ("baseline", "candidate"):
    r = b[k]
    assert (r["n_prompt"], r["n_gen"], r["reps"]) == (16, 4, 3), r
    assert [p["batch"] for p in r["points"]] == [1, 4], r
    assert all(p["prefill_tps"] > 0 and p["decode_tps"] > 0 for p in r["points"]), r
' "$tmp/same/bench.json"; then pass=$((pass+1))
else echo "FAIL: bench rows missing from the report or bench.json"; fail=$((fail+1)); fi
# an fp8 KV cache: some verdict, and the exit code agrees with the one printed
out=$("$ASSAY_BIN" decide "$house" --candidate '--kv-cache-dtype fp8' --tasks arc_challenge,heldout --limit 6 --kld-windows 1 \
      --bench-prompt 16 --bench-gen 4 -o "$tmp/fp8" --quiet 2>&1); rc=$?
want=x
grep -q "^Verdict: ship with monitoring" <<<"$out" && want=3
[ $want = x ] && grep -q "^Verdict: ship" <<<"$out" && want=0
grep -q "^Verdict: investigate" <<<"$out" && want=4
grep -q "^Verdict: inconclusive" <<<"$out" && want=5
if [ "$rc" = "$want" ] && grep -q "kld" "$tmp/fp8/report.md" && grep -q "<svg" "$tmp/fp8/report.html"; then pass=$((pass+1))
else echo "FAIL: fp8 KV: exit $rc, verdict code $want: $out"; fail=$((fail+1)); fi
# the README's quick start (on-the-fly fp8 weights + activations and an fp8 KV cache, vLLM's flags; --limit 20), with a
# smaller throughput bench: 20 documents cannot decide, so the verdict is inconclusive with the documents that would
out=$("$ASSAY_BIN" decide "$house" --candidate '--quantization fp8 --kv-cache-dtype fp8' --limit 20 \
      --bench-prompt 16 --bench-gen 4 -o "$tmp/w8" 2>&1); rc=$?
if [ "$rc" = 5 ] && grep -q "quantized 49 linear layers to fp8 in" <<<"$out" && grep -q "^Verdict: inconclusive" <<<"$out" &&
   grep -Eq "about [0-9]+ documents per task would resolve it" <<<"$out" && grep -q "^Smoke run: --limit 20" <<<"$out" &&
   grep -q "Smoke run" "$tmp/w8/report.md" && grep -q "Exit code 5: inconclusive" "$tmp/w8/report.html" &&
   grep -q -- "--quantization fp8" "$tmp/w8/candidate.json" &&
   grep -q "candidate's throughput here is not its format's speed: the CPU emulates" <<<"$out" &&
   grep -q "not its format's speed" "$tmp/w8/report.md" && grep -q "not its format's speed" "$tmp/w8/report.html" &&
   ! grep -q "not its format's speed" "$tmp/same/report.md"; then pass=$((pass+1))
else echo "FAIL: the quick start's smoke run: exit $rc: $out"; fail=$((fail+1)); fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
