#!/usr/bin/env bash
# test_cli_eval.sh — `assay eval` usage and data errors: clear message and the right exit code, no output file.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"
expect 2 "--tasks is required" -- "$ASSAY_BIN" eval model.gguf
expect 2 "give a MODEL" -- "$ASSAY_BIN" eval --tasks hellaswag
expect 1 "unknown task 'nope'" -- "$ASSAY_BIN" eval --tasks nope --dump-requests "$tmp/r.jsonl"
[ ! -e "$tmp/r.jsonl" ] && pass=$((pass+1)) || { echo "FAIL: output left behind"; fail=$((fail+1)); }
expect 1 "hellaswag data" -- "$ASSAY_BIN" eval --tasks hellaswag --data-dir "$tmp/none" --dump-requests "$tmp/r.jsonl"
expect 1 "needs the train split" -- "$ASSAY_BIN" eval --tasks hellaswag --num-fewshot 3 --dump-requests "$tmp/r.jsonl"
expect 0 "wrote the requests of 57 task" -- "$ASSAY_BIN" eval --tasks mmlu --limit 2 --dump-requests "$tmp/m.jsonl"
n=$(wc -l < "$tmp/m.jsonl"); [ "$n" = 114 ] && pass=$((pass+1)) || { echo "FAIL: mmlu --limit 2 gave $n requests"; fail=$((fail+1)); }
expect 1 "exists" -- "$ASSAY_BIN" eval --tasks piqa --dump-requests "$tmp/m.jsonl"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
