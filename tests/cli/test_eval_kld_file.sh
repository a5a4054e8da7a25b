#!/usr/bin/env bash
# test_eval_kld_file.sh — `assay eval --tasks kld --kld-base FILE` against log-probabilities saved by
# `assay perplexity --score-all --save-logits` on the house model:
#  - the model against its own saved logits: KLD ~ 0 (the 16-bit storage only), 100% same top token, PPL ratio 1;
#  - an fp8 candidate (weights + KV) against the file gives the numbers of the model-vs-model path
#    (--kld-base MODEL) and of `assay perplexity --kl-divergence-base FILE` (a second implementation of the KLD);
#  - a file that does not describe the same windows is refused with a message that says why.
set -u
. "$(dirname "$0")/expect.sh"
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
head -c 12000 "$H/heldout.txt" > "$T/text.txt"
head -c 12000 "$ASSAY_SHARED/data/wikitext2_raw/wiki.test.raw" > "$T/other.txt"
FP8=(--quantization fp8 --kv-cache-dtype fp8)
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 256 --score-all --chunks 2 --save-logits "$T/base.bin" --json \
  > "$T/save.json" 2>/dev/null || bad "save run failed"
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 256 --score-all --chunks 2 --kl-divergence-base "$T/base.bin" \
  --kv-cache-dtype fp8_e4m3 --quantization fp8 --json > "$T/ppl_fp8.json" 2>/dev/null || bad "perplexity fp8 kld run failed"
"$ASSAY_BIN" perplexity "$H" -f "$T/text.txt" --ctx 256 --chunks 2 --save-logits "$T/llamacpp.bin" >/dev/null 2>&1 ||
  bad "llama.cpp-convention save failed"
ev() { "$ASSAY_BIN" eval "$H" --tasks kld --text "$T/text.txt" --ctx 256 --limit 2 --quiet "$@"; }
ev --kld-base "$T/base.bin" -o "$T/self.json" >/dev/null 2>&1 || bad "eval kld against own logits failed"
ev --kld-base "$T/base.bin" "${FP8[@]}" -o "$T/fp8_file.json" >/dev/null 2>&1 || bad "eval fp8 kld against file failed"
ev --kld-base "$H" "${FP8[@]}" -o "$T/fp8_model.json" >/dev/null 2>&1 || bad "eval fp8 kld against model failed"
"$ASSAY_PYTHON" - "$T" <<'PY' && ok || bad "statistics"
import json, sys
d = sys.argv[1]
res = lambda n: json.load(open(f"{d}/{n}.json"))["results"]["kld"]
s, f, m = res("self"), res("fp8_file"), res("fp8_model")
p = json.load(open(f"{d}/ppl_fp8.json"))
assert abs(s["kld,none"]) < 1e-5 and s["kld_max,none"] < 1e-3, s
assert s["same_top_pct,none"] == 100.0 and abs(s["ppl_ratio,none"] - 1) < 1e-4, s
# fp8 against the file == fp8 against the model (up to the file's 4.6e-4-nat steps) == perplexity's KLD of the file
assert f["kld,none"] > 20 * max(abs(s["kld,none"]), 1e-6), (f, s)
assert abs(f["kld,none"] - m["kld,none"]) <= 0.02 * m["kld,none"] + 2e-5, (f, m)
assert abs(f["kld,none"] - p["kld_mean"]) <= 1e-4 * p["kld_mean"] + 1e-7, (f, p)
assert abs(f["same_top_pct,none"] - m["same_top_pct,none"]) <= 100 / 512 + 1e-9, (f, m)
assert abs(f["same_top_pct,none"] - 100 * p["same_top"]) < 1e-9, (f, p)
assert abs(f["ppl_ratio,none"] - m["ppl_ratio,none"]) <= 2e-4 * m["ppl_ratio,none"], (f, m)
assert abs(f["ppl_ratio,none"] - p["ppl_ratio"]) <= 1e-6 * p["ppl_ratio"], (f, p)
print("self kld", s["kld,none"], "fp8 kld file", f["kld,none"], "model", m["kld,none"], "perplexity", p["kld_mean"])
PY
E=("$ASSAY_BIN" eval "$H" --tasks kld --text "$T/text.txt" --ctx 256 --limit 2 --quiet)
expect 1 "llama.cpp's chunk convention" -- "${E[@]}" --kld-base "$T/llamacpp.bin"
expect 1 "was saved with --ctx 256" -- "${E[@]}" --kld-base "$T/base.bin" --ctx 128
expect 1 "differ from token" -- "${E[@]}" --kld-base "$T/base.bin" --text "$T/other.txt"
expect 1 "lower --limit to 2" -- "${E[@]}" --kld-base "$T/base.bin" --limit 5
head -c 5000 "$T/base.bin" > "$T/short.bin"
expect 1 "truncated" -- "${E[@]}" --kld-base "$T/short.bin"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
