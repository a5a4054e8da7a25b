#!/usr/bin/env bash
# test_inspect_convert.sh — the contract of `assay inspect` and `assay convert`: usage errors exit 2, errors a
# file or the user causes exit 1 with one "assay <cmd>: ..." line, and nothing half-written is left behind.
set -u
. "$(dirname "$0")/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
house=$ASSAY_SHARED/models/house
stories=$ASSAY_SHARED/data/stories260K/stories260K.gguf
expect 2 "usage: assay inspect" -- "$ASSAY_BIN" inspect
expect 0 "--json" -- "$ASSAY_BIN" inspect --help
expect 1 "assay inspect: $tmp/none: no such file" -- "$ASSAY_BIN" inspect "$tmp/none"
expect 1 "no config.json" -- "$ASSAY_BIN" inspect "$tmp"
expect 0 "28,122,624" -- "$ASSAY_BIN" inspect "$house"
expect 0 '"parameters": 292800' -- "$ASSAY_BIN" inspect "$stories" --json
expect 2 "missing -o" -- "$ASSAY_BIN" convert "$house"
expect 2 "--dtype must be" -- "$ASSAY_BIN" convert "$house" -o "$tmp/x.gguf" --dtype q4_0
expect 2 "GGUF -> GGUF" -- "$ASSAY_BIN" convert "$stories" -o "$tmp/y.gguf"
expect 1 "no config.json" -- "$ASSAY_BIN" convert "$tmp" -o "$tmp/z.gguf"
# A failed conversion leaves no output (no tokenizer.json in a directory made from stories260K's tensors).
"$ASSAY_BIN" convert "$stories" -o "$tmp/s" --quiet >/dev/null 2>&1
expect 1 "no tokenizer.json" -- "$ASSAY_BIN" convert "$tmp/s" -o "$tmp/s.gguf"
if ls "$tmp"/s.gguf* >/dev/null 2>&1; then echo "FAIL: partial output left behind"; fail=$((fail+1)); else pass=$((pass+1)); fi
expect 0 "wrote $tmp/h.gguf (66 tensors)" -- "$ASSAY_BIN" convert "$house" -o "$tmp/h.gguf"
expect 1 "already exists" -- "$ASSAY_BIN" convert "$house" -o "$tmp/h.gguf"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
