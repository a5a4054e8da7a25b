#!/usr/bin/env bash
# test_cli_usage.sh — the CLI's contract for usage errors: exit 2 with a message, --help exits 0.
set -u
fail=0
expect() { # expect CODE PATTERN -- command...
  local code=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$code" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: '$*' exited $rc (want $code), output: $out"; fail=$((fail+1))
  else pass=$((pass+1)); fi
}
pass=0
expect 2 "usage: assay" -- "$ASSAY_BIN"
expect 0 "commands:" -- "$ASSAY_BIN" --help
expect 2 "unknown command 'frobnicate'" -- "$ASSAY_BIN" frobnicate
expect 0 "assay 0" -- "$ASSAY_BIN" --version
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
