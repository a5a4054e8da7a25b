#!/usr/bin/env bash
# test_cli_bench.sh — `assay bench` on the house model: the JSON carries one point per batch size asked for, each
# rate is the tokens the method says it runs (B x prompt, B x gen) over the median seconds it reports, the
# median lies within the spread of the repeats; bad batch lists and sizes are usage errors (exit 2).
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"
H="$ASSAY_SHARED/models/house"
expect 2 "batch sizes" -- "$ASSAY_BIN" bench "$H" --batch 0
expect 2 "batch sizes" -- "$ASSAY_BIN" bench "$H" --batch 1,x
expect 2 "must be >= 1" -- "$ASSAY_BIN" bench "$H" --gen 0
expect 2 "unknown quantization" -- "$ASSAY_BIN" bench "$H" --quantization int3
expect 1 "no-such-model" -- "$ASSAY_BIN" bench "$tmp/no-such-model"
if "$ASSAY_BIN" bench "$H" --batch 1,3 --prompt 12 --gen 3 --reps 3 --kv-cache-dtype fp8 --threads 1 --json > "$tmp/b.json" 2>"$tmp/err"; then
  pass=$((pass+1))
else echo "FAIL: bench run: $(cat "$tmp/err")"; fail=$((fail+1)); fi
"$ASSAY_PYTHON" - "$tmp/b.json" <<'PY' && pass=$((pass+1)) || { echo "FAIL: bench JSON"; fail=$((fail+1)); }
import json, sys
r = json.load(open(sys.argv[1]))
b = r["bench"]
assert r["engine"] == "--kv-cache-dtype fp8 --threads 1", r["engine"]
assert (b["n_prompt"], b["n_gen"], b["reps"]) == (12, 3, 3), b
assert [p["batch"] for p in b["points"]] == [1, 3], b
for p in b["points"]:
    B = p["batch"]
    assert abs(p["prefill_tps"] * p["prefill_s"] - B * 12) < 1e-6 * B * 12, p
    assert abs(p["decode_tps"] * p["decode_s"] - B * 3) < 1e-6 * B * 3, p
    assert 0 < p["prefill_tps_min"] <= p["prefill_tps"] <= p["prefill_tps_max"], p
    assert 0 < p["decode_tps_min"] <= p["decode_tps"] <= p["decode_tps_max"], p
print("bench", b["points"])
PY
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
