#!/usr/bin/env bash
# test_perplexity_house_heavy.sh — `assay perplexity --ctx 512 --score-all` on the house model (fp32 compute, f32 KV)
# against transformers' numbers in reference.json: heldout.txt 44.626 and WikiText-2 test 380.69, within 0.05%,
# with the same scored-token counts (111,996 and 392,624). Heavy: about 500k tokens of prefill.
set -u
fail=0; pass=0
H="$ASSAY_SHARED/models/house"
check() { # check FILE KEY
  local out
  out=$("$ASSAY_BIN" perplexity "$H" -f "$1" --ctx 512 --score-all --kv-cache-dtype f32 --json 2>/dev/null)
  if "$ASSAY_PYTHON" - "$H/reference.json" "$2" "$out" <<'PY'; then pass=$((pass+1)); else fail=$((fail+1)); fi
import json, sys
ref = json.load(open(sys.argv[1]))[sys.argv[2]]
got = json.loads(sys.argv[3])
rel = abs(got["ppl"] - ref["ppl"]) / ref["ppl"]
print(f'{sys.argv[2]}: assay {got["ppl"]:.4f} ({got["tokens"]} tokens), transformers {ref["ppl"]:.4f} ({ref["tokens"]}), rel diff {rel:.2e}')
sys.exit(0 if rel <= 5e-4 and got["tokens"] == ref["tokens"] else 1)
PY
}
check "$H/heldout.txt" "ppl_ctx512_heldout.txt"
check "$ASSAY_SHARED/data/wikitext2_raw/wiki.test.raw" "ppl_ctx512_wiki.test.raw"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
