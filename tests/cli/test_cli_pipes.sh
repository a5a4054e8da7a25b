#!/usr/bin/env bash
# test_cli_pipes.sh — "-" is standard input where a file is read: tokenize -f -, detokenize -f - (and without ids),
# run -f FILE and run -f -, perplexity -f -; and standard output where results are written (eval -o -); detokenize
# writes the exact bytes into a pipe (a newline is added only on a terminal).
set -u
. "$(dirname "$0")/expect.sh"
S="$ASSAY_SHARED/data/stories260K/stories260K.gguf"
H="$ASSAY_SHARED/models/house"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

printf 'Once upon a time' >"$T/text"
want=$("$ASSAY_BIN" tokenize "$S" --ids -f "$T/text")
got=$("$ASSAY_BIN" tokenize "$S" --ids -f - <"$T/text")
[ -n "$want" ] && [ "$want" = "$got" ] && pass=$((pass+1)) || { echo "FAIL: tokenize -f -: '$got' vs '$want'"; fail=$((fail+1)); }
echo "$want" >"$T/ids"
"$ASSAY_BIN" detokenize "$S" -f - <"$T/ids" >"$T/back1"
"$ASSAY_BIN" detokenize "$S" <"$T/ids" >"$T/back2"
"$ASSAY_BIN" detokenize "$S" -f "$T/ids" >"$T/back3"
for f in back1 back2 back3; do
  cmp -s "$T/text" "$T/$f" && pass=$((pass+1)) || { echo "FAIL: detokenize $f: $(od -c "$T/$f" | head -3)"; fail=$((fail+1)); }
done
# the prompt from a file or from standard input gives the same greedy text as -p
a=$("$ASSAY_BIN" run "$S" -p "Once upon a time" -n 8 --temp 0 2>/dev/null)
b=$("$ASSAY_BIN" run "$S" -f "$T/text" -n 8 --temp 0 2>/dev/null)
c=$("$ASSAY_BIN" run "$S" -f - -n 8 --temp 0 <"$T/text" 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && pass=$((pass+1)) || { echo "FAIL: run -f: '$a' / '$b' / '$c'"; fail=$((fail+1)); }
expect 2 "-p TEXT and -f FILE exclude each other" -- "$ASSAY_BIN" run "$S" -p x -f "$T/text"
expect 1 "assay run: cannot open $T/none" -- "$ASSAY_BIN" run "$S" -f "$T/none"
p1=$("$ASSAY_BIN" perplexity "$S" -f "$H/heldout.txt" -c 64 --chunks 2 2>/dev/null | grep PPL)
p2=$("$ASSAY_BIN" perplexity "$S" -f - -c 64 --chunks 2 <"$H/heldout.txt" 2>/dev/null | grep PPL)
[ -n "$p1" ] && [ "$p1" = "$p2" ] && pass=$((pass+1)) || { echo "FAIL: perplexity -f -: '$p1' vs '$p2'"; fail=$((fail+1)); }
# "-o -" writes the results JSON alone to standard output (the table goes to standard error), the same results as a file
PY=${ASSAY_PYTHON:-python3}
"$ASSAY_BIN" eval "$H" --tasks heldout --limit 2 -o "$T/res.json" >/dev/null 2>&1
(cd "$T" && "$ASSAY_BIN" eval "$H" --tasks heldout --limit 2 -o - 2>"$T/eval.err" >"$T/res.stdout")
if "$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(a["results"] != b["results"])' \
     "$T/res.json" "$T/res.stdout" && grep -q "perplexity" "$T/eval.err" && [ ! -e "$T/-" ]; then pass=$((pass+1))
else echo "FAIL: eval -o -: $(head -c 300 "$T/res.stdout") / $(tail -3 "$T/eval.err")"; fail=$((fail+1)); fi
# on a terminal (when `script` can make one) detokenize ends its line
if command -v script >/dev/null && script -qc true /dev/null >/dev/null 2>&1; then
  out=$(script -qc "'$ASSAY_BIN' detokenize '$S' $want" /dev/null | od -An -c | tr -d ' \n')
  [[ "$out" == *e\\r\\n ]] && pass=$((pass+1)) || { echo "FAIL: detokenize on a terminal: $out"; fail=$((fail+1)); }
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
