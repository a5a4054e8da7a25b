#!/usr/bin/env bash
# test_cli_usage.sh — the CLI's contract for usage errors: exit 2 with a message, --help exits 0.
set -u
. "$(dirname "$0")/expect.sh"
expect 2 "usage: assay" -- "$ASSAY_BIN"
expect 0 "commands:" -- "$ASSAY_BIN" --help
expect 2 "unknown command 'frobnicate'" -- "$ASSAY_BIN" frobnicate
expect 0 "assay 0" -- "$ASSAY_BIN" --version
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
