#!/usr/bin/env bash
# test_perplexity_kld.sh — `assay perplexity` mechanics on a short run of the house model:
#  - --json carries every statistic; ppl = exp(nll_mean); scored-token counts follow each convention
#    (llama.cpp: 255 per 512-token chunk; --score-all: 512 per full window);
#  - a model compared with its own saved logits has KLD ~ 0 (only the 16-bit storage), 100% same top token and a
#    PPL ratio of 1; an fp8 KV cache has a larger KLD than that;
#  - a baseline made with another convention is refused.
set -u
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
head -c 30000 "$H/heldout.txt" > "$T/text.txt"
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 512 --chunks 2 --json > "$T/a.json" 2>/dev/null || bad "llama.cpp convention run failed"
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 512 --score-all --chunks 2 --save-logits "$T/base.bin" --json > "$T/b.json" 2>/dev/null || bad "save run failed"
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 512 --score-all --chunks 2 --kl-divergence-base "$T/base.bin" --json > "$T/c.json" 2>/dev/null || bad "kld run failed"
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 512 --score-all --chunks 2 --kv-cache-dtype fp8_e4m3 --kl-divergence-base "$T/base.bin" --json > "$T/d.json" 2>/dev/null || bad "fp8 kld run failed"
"$ASSAY_PYTHON" - "$T" <<'PY' && ok || bad "statistics"
import json, math, sys
d = sys.argv[1]
a, b, c, e = (json.load(open(f"{d}/{n}.json")) for n in "abcd")
assert a["convention"] == "llama.cpp" and a["tokens"] == 2 * 255, a
assert b["convention"] == "score-all" and b["tokens"] == 2 * 512, b
for r in (a, b, c, e):
    assert abs(r["ppl"] - math.exp(r["nll_mean"])) < 1e-6 * r["ppl"], r
    assert r["ppl_stderr"] > 0
assert abs(c["ppl"] - b["ppl"]) < 1e-9 * b["ppl"], (b, c)
assert c["kld_mean"] < 1e-5 and c["kld_max"] < 1e-3, c
assert c["same_top"] == 1.0 and abs(c["ppl_ratio"] - 1) < 1e-4 and c["rms_dp"] < 1e-3, c
assert abs(c["ppl_base"] - b["ppl"]) < 1e-3 * b["ppl"], c
assert e["kld_mean"] > 10 * c["kld_mean"] and e["kld_median"] <= e["kld_p99"] <= e["kld_max"], e
assert 0.5 < e["same_top"] <= 1.0 and abs(e["ppl_ratio"] - e["ppl"] / e["ppl_base"]) < 1e-6 * e["ppl_ratio"], e
print("ppl", a["ppl"], b["ppl"], "kld self", c["kld_mean"], "kld fp8 kv", e["kld_mean"], "same top", e["same_top"])
PY
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 512 --chunks 2 --kl-divergence-base "$T/base.bin" >/dev/null 2>"$T/err"
if [ $? = 1 ] && grep -q "baseline was made with" "$T/err"; then ok; else bad "mismatched baseline accepted: $(cat "$T/err")"; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
