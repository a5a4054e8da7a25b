# expect.sh — sourced by the CLI tests: one assertion helper and the pass/fail counters it updates.
# expect CODE PATTERN -- command...: the command must exit with CODE and print PATTERN (stdout or stderr).
fail=0; pass=0
expect() {
  local code=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$code" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: '$*' exited $rc (want $code), output: $out"; fail=$((fail+1))
  else pass=$((pass+1)); fi
}
