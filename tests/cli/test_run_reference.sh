#!/usr/bin/env bash
# test_run_reference.sh — `assay run` greedy output against references nobody here produced:
#  - house model (fp32 compute, f32 KV): the 32-token greedy text of transformers (reference.json greedy_text);
#  - stories260K: llama2.c's documented greedy output (expected_greedy_t0.txt), from BOS alone, 256 tokens;
#  - sampling with a seed is reproducible, and a different seed changes the text.
set -u
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
H="$ASSAY_SHARED/models/house"
want=$("$ASSAY_PYTHON" -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["greedy_text"])' "$H/reference.json")
got=$("$ASSAY_BIN" run "$H" -p "The old man looked at the sea and said" -n 32 --temp 0 --kv-cache-dtype f32 -t 2 2>/dev/null)
if [ "$got" == "$want" ]; then ok; else bad "house greedy: got [$got] want [$want]"; fi

S="$ASSAY_SHARED/data/stories260K"
if "$ASSAY_BIN" run "$S/stories260K.gguf" -p "" -n 256 --temp 0 -t 1 2>/dev/null | cmp -s - "$S/expected_greedy_t0.txt"; then ok
else bad "stories260K greedy output differs from expected_greedy_t0.txt"; fi

a=$("$ASSAY_BIN" run "$S/stories260K.gguf" -p "Once upon a time" -n 40 --temp 1 --seed 7 2>/dev/null)
b=$("$ASSAY_BIN" run "$S/stories260K.gguf" -p "Once upon a time" -n 40 --temp 1 --seed 7 2>/dev/null)
c=$("$ASSAY_BIN" run "$S/stories260K.gguf" -p "Once upon a time" -n 40 --temp 1 --seed 8 2>/dev/null)
if [ "$a" == "$b" ] && [ -n "$a" ]; then ok; else bad "same seed gave different text"; fi
if [ "$a" != "$c" ]; then ok; else bad "seeds 7 and 8 gave the same text"; fi

stats=$("$ASSAY_BIN" run "$S/stories260K.gguf" -p "Once" -n 8 --temp 0 2>&1 >/dev/null)
if grep -q "generation 8 tokens" <<<"$stats" && grep -q "tok/s" <<<"$stats"; then ok; else bad "stats line: $stats"; fi
"$ASSAY_BIN" run "$S/stories260K.gguf" -p x --kv-cache-dtype fp9 >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bad --kv-cache-dtype is not a usage error"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
