#!/usr/bin/env bash
# test_quantize_awq_options.sh — int4-awq's driver, grid and clipping options are checked before any work starts: a wrong
# value or an AWQ option on another scheme is an error with a message, and nothing is written.
set -u
. "$(dirname "$0")/expect.sh"
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
expect 0 "--awq-route R" -- "$ASSAY_BIN" quantize --help
expect 0 "--awq-clip C" -- "$ASSAY_BIN" quantize --help
expect 1 "apply to int4-awq, not int4-rtn" -- "$ASSAY_BIN" quantize "$H" -o "$T/a" --scheme int4-rtn --awq-route cached
expect 1 "apply to int4-awq, not int4-gptq" -- "$ASSAY_BIN" quantize "$H" -o "$T/a" --scheme int4-gptq --awq-clip all
expect 1 "unknown --awq-route 'fast'" -- "$ASSAY_BIN" quantize "$H" -o "$T/b" --scheme int4-awq --awq-route fast
expect 1 "unknown --awq-grid 'x'" -- "$ASSAY_BIN" quantize "$H" -o "$T/c" --scheme int4-awq --awq-grid x
expect 1 "unknown --awq-clip 'none'" -- "$ASSAY_BIN" quantize "$H" -o "$T/e" --scheme int4-awq --awq-clip none
expect 2 "--awq-tokens must be >= 1, got 0" -- "$ASSAY_BIN" quantize "$H" -o "$T/f" --scheme int4-awq --awq-tokens 0
expect 2 "--awq-seqs must be >= 0" -- "$ASSAY_BIN" quantize "$H" -o "$T/d" --scheme int4-awq --awq-seqs -3
if [ -n "$(ls -A "$T")" ]; then echo "FAIL: a refused run left files: $(ls -A "$T")"; fail=$((fail+1)); fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
