#!/usr/bin/env bash
# test_cli_messages.sh — quiet by default, informative on request, every line says which command wrote it: no KV
# notes without -v, counts with the right noun, the top-level help lists only commands this build runs, long work
# prints periodic one-line progress when stderr is a file, and the default calibration text is named.
set -u
. "$(dirname "$0")/expect.sh"
S="$ASSAY_SHARED/data/stories260K/stories260K.gguf"
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset ASSAY_PROGRESS

# every line on stderr starts with "assay CMD:"
prefixed() { # prefixed CMD FILE
  local bad; bad=$(grep -v "^assay $1: " "$2" | grep -v '^$')
  [ -z "$bad" ] && pass=$((pass+1)) || { echo "FAIL: $1: lines without the prefix: $bad"; fail=$((fail+1)); }
}

# run: no KV note unless -v; "1 token"
"$ASSAY_BIN" run "$S" -p "" -n 1 --temp 0 >/dev/null 2>"$T/run.err"
grep -q "KV cache\|no scales" "$T/run.err" && { echo "FAIL: KV note without -v: $(cat "$T/run.err")"; fail=$((fail+1)); } || pass=$((pass+1))
grep -q "prompt 1 token in .* generation 1 token in" "$T/run.err" && pass=$((pass+1)) || { echo "FAIL: run counts: $(cat "$T/run.err")"; fail=$((fail+1)); }
prefixed run "$T/run.err"
expect 0 "assay run: .*KV cache f16: no scales" -- "$ASSAY_BIN" run "$S" -p Once -n 1 --temp 0 -v
expect 0 "1 chunk of 64" -- "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 64 --chunks 1
expect 0 "^1 token$" -- "$ASSAY_BIN" tokenize "$S" "Once"

# the notes of the library carry the command too (a GPTQ-layout checkpoint's load note)
"$ASSAY_BIN" quantize "$H" -o "$T/rtn" --scheme int4-rtn 2>"$T/q.err" >/dev/null
prefixed quantize "$T/q.err"
"$ASSAY_BIN" run "$T/rtn" -p Once -n 2 --temp 0 >/dev/null 2>"$T/run2.err"
grep -q "^assay run: loaded 49 linear layers from the GPTQ" "$T/run2.err" && pass=$((pass+1)) || { echo "FAIL: load note: $(cat "$T/run2.err")"; fail=$((fail+1)); }
prefixed run "$T/run2.err"

# top-level help: only built commands, none "not built yet"
out=$("$ASSAY_BIN" --help)
grep -q "not built" <<<"$out" && { echo "FAIL: help lists unbuilt commands: $out"; fail=$((fail+1)); } || pass=$((pass+1))
grep -q "^  serve " <<<"$out" && pass=$((pass+1)) || { echo "FAIL: serve missing from the help"; fail=$((fail+1)); }

# periodic progress lines when stderr is a file (interval shortened for the test); none for short work
ASSAY_PROGRESS_INTERVAL=0.05 "$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 64 --chunks 300 >/dev/null 2>"$T/p.err"
n=$(grep -c "^assay perplexity: *[0-9]*% [0-9]*/300 chunks, .* elapsed, ETA" "$T/p.err")
[ "$n" -ge 2 ] && pass=$((pass+1)) || { echo "FAIL: $n progress lines: $(cat "$T/p.err")"; fail=$((fail+1)); }
[ "$(grep -c "300/300" "$T/p.err")" = 1 ] && pass=$((pass+1)) || { echo "FAIL: not one final line: $(cat "$T/p.err")"; fail=$((fail+1)); }
prefixed perplexity "$T/p.err"
"$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 64 --chunks 2 >/dev/null 2>"$T/p2.err"
[ ! -s "$T/p2.err" ] && pass=$((pass+1)) || { echo "FAIL: short work printed: $(cat "$T/p2.err")"; fail=$((fail+1)); }

# calibrating schemes name the default calibration text; their progress lines carry the command
ASSAY_PROGRESS_INTERVAL=0.05 "$ASSAY_BIN" quantize "$H" -o "$T/fp8" --scheme fp8 --calib-samples 2 --calib-seq-len 64 \
  >/dev/null 2>"$T/c.err"
grep -q "^assay quantize: calibration text: .*/data/calibration (the default; --calib" "$T/c.err" && pass=$((pass+1)) ||
  { echo "FAIL: calibration text not named: $(cat "$T/c.err")"; fail=$((fail+1)); }
prefixed quantize "$T/c.err"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
