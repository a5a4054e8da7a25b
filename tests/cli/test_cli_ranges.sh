#!/usr/bin/env bash
# test_cli_ranges.sh — every value is checked when it is parsed, and the message names the flag and its valid range
# (from the option table, the same that --help prints); lengths are checked against the model's context with both
# numbers; thread counts above the cores warn; --seed -1 (and run without --seed) draws a seed and prints it.
set -u
. "$(dirname "$0")/expect.sh"
S="$ASSAY_SHARED/data/stories260K/stories260K.gguf"
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

expect 2 "assay run: --top-p must be in (0, 1\], got 2" -- "$ASSAY_BIN" run "$S" -p Once --top-p 2
expect 2 "assay run: --min-p must be in \[0, 1\], got 1.5" -- "$ASSAY_BIN" run "$S" -p Once --min-p 1.5
expect 2 "assay run: --temp must be >= 0, got -1" -- "$ASSAY_BIN" run "$S" -p Once --temp -1
expect 2 "assay run: --top-k must be >= 0, got -3" -- "$ASSAY_BIN" run "$S" -p Once --top-k -3
# -n -5 names -n/--n-predict and nothing else
out=$("$ASSAY_BIN" run "$S" -p Once -n -5 2>&1 | head -1)
[ "$out" = "assay run: -n/--n-predict must be >= 1, got -5" ] && pass=$((pass+1)) || { echo "FAIL: -n -5: $out"; fail=$((fail+1)); }
expect 2 "n-predict: 99999999999999999999 is too large" -- "$ASSAY_BIN" run "$S" -p Once -n 99999999999999999999
expect 2 "-n/--n-predict expects a whole number, got 'ten'" -- "$ASSAY_BIN" run "$S" -p Once -n ten
# lengths against the model's context (stories260K: 2048 tokens), both numbers in the message
expect 1 "-n/--n-predict 99999999999 = 100000000001 tokens exceed the model's context of 2048 tokens" -- \
  "$ASSAY_BIN" run "$S" -p Once -n 99999999999
expect 1 "-n/--n-predict 3000 = 3002 tokens exceed the model's context of 2048 tokens" -- "$ASSAY_BIN" run "$S" -p Once -n 3000
expect 1 "-c/--ctx-size 99999999999 is longer than the model's context of 2048 tokens" -- \
  "$ASSAY_BIN" run "$S" -p Once -n 99999999999 -c 99999999999
expect 1 "202 tokens exceed -c/--ctx-size 100" -- "$ASSAY_BIN" run "$S" -p Once -n 200 -c 100
expect 1 "assay perplexity: -c/--ctx-size 4096 is longer than the model's context of 2048 tokens" -- \
  "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 4096
expect 2 "assay perplexity: -c/--ctx-size must be >= 4, got 2" -- "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" --ctx 2
# vLLM's --num-gpu-blocks-override sizes the KV pool in blocks, no planning
expect 2 "assay run: --num-gpu-blocks-override must be >= 0, got -2" -- "$ASSAY_BIN" run "$S" -p Once -n 2 --num-gpu-blocks-override -2
expect 0 "KV pool 7 blocks of 16 tokens (0.1 MiB, --num-gpu-blocks-override" -- "$ASSAY_BIN" run "$S" -p Once -n 2 --temp 0 -v --num-gpu-blocks-override 7
# more threads than cores: a warning, and the run goes on
cores=$(nproc)
expect 0 "warning: -t/--threads $((cores + 1)) is more threads than this machine's $cores cores" -- \
  "$ASSAY_BIN" run "$S" -p Once -n 2 --temp 0 -t $((cores + 1))
# seeds: none or -1 -> random and printed; the printed seed gives the same text again
"$ASSAY_BIN" run "$S" -p Once -n 24 --temp 1 >"$T/a" 2>"$T/a.err"
seed=$(sed -n 's/^assay run: seed \([0-9]*\)$/\1/p' "$T/a.err")
if [ -z "$seed" ]; then echo "FAIL: no seed printed: $(cat "$T/a.err")"; fail=$((fail+1)); else
  "$ASSAY_BIN" run "$S" -p Once -n 24 --temp 1 --seed "$seed" >"$T/b" 2>/dev/null
  cmp -s "$T/a" "$T/b" && pass=$((pass+1)) || { echo "FAIL: seed $seed did not repeat the text"; fail=$((fail+1)); }
fi
expect 0 "assay run: seed [0-9]" -- "$ASSAY_BIN" run "$S" -p Once -n 2 --seed -1
out=$("$ASSAY_BIN" run "$S" -p Once -n 2 --seed 3 2>&1)
grep -q "seed" <<<"$out" && { echo "FAIL: a given seed is printed: $out"; fail=$((fail+1)); } || pass=$((pass+1))
expect 2 "assay run: --seed must be >= -1, got -2" -- "$ASSAY_BIN" run "$S" -p Once --seed -2
# the engine flags everywhere, and other commands' ranges
expect 2 "assay bench: --gpu-memory-utilization must be in (0, 1\], got 0" -- "$ASSAY_BIN" bench "$S" --gpu-memory-utilization 0
expect 2 "assay bench: --top-p must be in (0, 1\], got 0" -- "$ASSAY_BIN" bench "$S" --top-p 0
expect 2 "assay eval: --max-num-seqs must be >= 1, got 0" -- "$ASSAY_BIN" eval "$S" --tasks heldout --max-num-seqs 0
expect 2 "assay serve: --port must be in \[0, 65535\], got 70000" -- "$ASSAY_BIN" serve "$S" --port 70000
expect 2 "assay compare: --confidence must be in (0, 1), got 1" -- "$ASSAY_BIN" compare a.json b.json --confidence 1
expect 2 "assay quantize: --alpha must be in \[0, 1\], got 2" -- "$ASSAY_BIN" quantize "$H" -o "$T/x" --scheme w8a8-int8 --alpha 2
expect 2 "assay quantize: --calib-samples must be >= 1, got 0" -- "$ASSAY_BIN" quantize "$H" -o "$T/x" --scheme fp8 --calib-samples 0
expect 2 "assay imatrix: -c/--ctx-size must be >= 2, got 1" -- "$ASSAY_BIN" imatrix "$S" -f "$H/heldout.txt" -c 1
expect 2 "assay plan: --gpu-memory-utilization must be in (0, 1\], got 1.5" -- "$ASSAY_BIN" plan "$H" --gpu h100 --gpu-memory-utilization 1.5
# --help prints the range the parser checks
expect 0 "--top-p P .*(valid: P in (0, 1\])" -- "$ASSAY_BIN" run --help
expect 0 "-n, --n-predict N .*(valid: N >= 1)" -- "$ASSAY_BIN" run --help
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
