#!/usr/bin/env bash
# test_cli_output_kinds.sh — an output's name says what it is, and nothing is added to it: GGUF schemes (and convert
# from an HF directory) write NAME.gguf and refuse any other name, HF schemes write a directory and refuse a .gguf
# name; quantizing weights that are quantized already needs --allow-requantize, and the refusal says what it costs.
set -u
. "$(dirname "$0")/expect.sh"
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
mkdir adir

expect 1 "fp8-dynamic writes an HF safetensors directory, not a GGUF file: give a directory name without .gguf, e.g. hf" -- \
  "$ASSAY_BIN" quantize "$H" --scheme fp8-dynamic -o hf.gguf
expect 1 "q8_0 writes a GGUF file: name it qdir.gguf" -- "$ASSAY_BIN" quantize "$H" --scheme q8_0 -o qdir
expect 1 "q8_0 writes one GGUF file, and adir is a directory" -- "$ASSAY_BIN" quantize "$H" --scheme q8_0 -o adir
expect 1 "q4_k_m writes one GGUF file, and 'newdir/' names a directory" -- "$ASSAY_BIN" quantize "$H" --scheme q4_k_m -o newdir/
expect 2 "OUT is a GGUF file: name it house.gguf" -- "$ASSAY_BIN" convert "$H" -o house
expect 2 "'adir/' names a directory" -- "$ASSAY_BIN" convert "$H" -o adir/
if ls -d hf.gguf qdir qdir.gguf newdir house house.gguf 2>/dev/null | grep -q .; then
  echo "FAIL: a refused output was written: $(ls)"; fail=$((fail+1)); else pass=$((pass+1)); fi
[ -z "$(ls adir)" ] && pass=$((pass+1)) || { echo "FAIL: adir was written into"; fail=$((fail+1)); }

# requantizing: refused with the cost named, done with --allow-requantize
expect 0 "q4_1 written to q41.gguf" -- "$ASSAY_BIN" quantize "$H" --scheme q4_1 -o q41.gguf
expect 1 "q41.gguf is quantized already (token_embd.weight is q4_1): quantizing it again to q8_0 .*loses more quality.*--allow-requantize" -- \
  "$ASSAY_BIN" quantize q41.gguf --scheme q8_0 -o q8.gguf
[ ! -e q8.gguf ] && pass=$((pass+1)) || { echo "FAIL: q8.gguf written without --allow-requantize"; fail=$((fail+1)); }
expect 0 "q8_0 written to q8.gguf" -- "$ASSAY_BIN" quantize q41.gguf --scheme q8_0 -o q8.gguf --allow-requantize
# an unquantized GGUF needs no flag
expect 0 "wrote house.gguf" -- "$ASSAY_BIN" convert "$H" -o house.gguf
expect 0 "q8_0 written to q8b.gguf" -- "$ASSAY_BIN" quantize house.gguf --scheme q8_0 -o q8b.gguf
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
