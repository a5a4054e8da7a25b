#!/usr/bin/env bash
# test_cli_vocabulary.sh — one flag vocabulary: -q is --quantization wherever it exists (convert's --quiet has no
# short form), -c/--ctx-size is the context flag of run, perplexity, eval and imatrix (--ctx still accepted),
# --kv-cache-dtype auto works wherever it is listed, --device cuda says why when it cannot run, and decide refuses
# to replace a report directory without --force, like eval, quantize and convert.
set -u
. "$(dirname "$0")/expect.sh"
S="$ASSAY_SHARED/data/stories260K/stories260K.gguf"
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

expect 2 "unknown option '-q'" -- "$ASSAY_BIN" convert "$H" -o "$T/h.gguf" -q
expect 0 "--quiet .*no short form: -q is --quantization" -- "$ASSAY_BIN" convert --help
for cmd in run perplexity bench eval serve; do
  expect 0 "-q, --quantization SCHEME" -- "$ASSAY_BIN" $cmd --help
done
for cmd in run perplexity eval imatrix; do
  expect 0 "-c, --ctx-size N" -- "$ASSAY_BIN" $cmd --help
done
# --ctx is still accepted where it was the name
expect 0 "PPL = " -- "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" --ctx 64 --chunks 1
expect 0 "PPL = " -- "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 64 --chunks 1
expect 0 "PPL = " -- "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" --ctx-size 64 --chunks 1
# auto wherever --kv-cache-dtype is listed
expect 0 "KV f16" -- "$ASSAY_BIN" run "$S" -p Once -n 2 --temp 0 --kv-cache-dtype auto
expect 0 "PPL = " -- "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 64 --chunks 1 --kv-cache-dtype auto
expect 0 "| 1 |" -- "$ASSAY_BIN" bench "$S" -b 1 -p 8 -n 2 -r 1 --kv-cache-dtype auto
# --device cuda: runs, or says why it cannot
out=$("$ASSAY_BIN" eval "$S" --tasks heldout --limit 1 --device cuda 2>&1); rc=$?
if [ $rc != 0 ] && ! grep -qi "cuda" <<<"$out"; then echo "FAIL: eval --device cuda: rc $rc: $out"; fail=$((fail+1)); else pass=$((pass+1)); fi
# decide: an existing report directory needs --force
mkdir "$T/report"
expect 1 "assay decide: $T/report already exists (pass --force to replace its reports)" -- \
  "$ASSAY_BIN" decide "$S" --candidate "--kv-cache-dtype fp8" -o "$T/report"
expect 0 "--force .*replace the reports" -- "$ASSAY_BIN" decide --help
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
