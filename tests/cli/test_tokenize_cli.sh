#!/usr/bin/env bash
# test_tokenize_cli.sh — the tokenize/detokenize command contract: --ids prints ids on one line separated by
# single spaces and nothing else; BOS only with --add-special; special-token text becomes the special token
# unless --no-parse-special; detokenize writes the exact bytes (stdin, -f and argument forms); usage errors
# exit 2, bad models and out-of-range ids exit 1 with a message.
set -u
H="$ASSAY_SHARED/models/house"
SPM="$ASSAY_SHARED/data/llamacpp_vocab/ggml-vocab-llama-spm.gguf"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
tmp=$(mktemp -d)

out=$("$ASSAY_BIN" tokenize "$H" "The old man looked at the sea and said" --ids)
[ "$out" = "501 672 440 776 357 263 1519 281 399" ] && ok || bad "--ids output '$out'"
"$ASSAY_BIN" tokenize "$H" "x" --ids | od -c | head -1 | grep -q '^0000000   8   8  \\n' && ok || bad "--ids prints more than the ids and a newline"
[ "$("$ASSAY_BIN" tokenize "$H" "a<|endoftext|>b" --ids)" = "65 0 66" ] && ok || bad "special token text not parsed"
"$ASSAY_BIN" tokenize "$H" "a<|endoftext|>b" --ids --no-parse-special | grep -qw 0 && bad "--no-parse-special still gave id 0" || ok
[ "$("$ASSAY_BIN" tokenize "$SPM" "Hello" --ids)" = "15043" ] && ok || bad "SPM without --add-special"
[ "$("$ASSAY_BIN" tokenize "$SPM" "Hello" --ids --add-special)" = "1 15043" ] && ok || bad "SPM --add-special adds BOS"
[ "$(printf 'Hello world' | "$ASSAY_BIN" tokenize "$H" --ids)" = "$("$ASSAY_BIN" tokenize "$H" 'Hello world' --ids)" ] && ok || bad "stdin input"
"$ASSAY_BIN" tokenize "$H" "Hi" --pieces | grep -q '^\["H", "i"\]$' && ok || bad "--pieces"

# detokenize: exact bytes, several input forms
printf 'tab\there \xff\xfe\n  end' > "$tmp/in.txt"
"$ASSAY_BIN" tokenize "$H" -f "$tmp/in.txt" --ids > "$tmp/ids.txt"
"$ASSAY_BIN" detokenize "$H" -f "$tmp/ids.txt" > "$tmp/out.txt" && cmp -s "$tmp/in.txt" "$tmp/out.txt" && ok || bad "detokenize -f round trip"
"$ASSAY_BIN" detokenize "$H" $(cat "$tmp/ids.txt") > "$tmp/out2.txt" && cmp -s "$tmp/in.txt" "$tmp/out2.txt" && ok || bad "detokenize IDS... round trip"
[ "$("$ASSAY_BIN" detokenize "$H" "[501, 672]")" = "The old" ] && ok || bad "detokenize bracketed list"
[ "$("$ASSAY_BIN" detokenize "$SPM" 1 15043 2)" = "<s> Hello</s>" ] && ok || bad "SPM detokenize keeps specials, one space as HF"
[ "$("$ASSAY_BIN" detokenize "$SPM" 1 15043 2 --skip-special)" = "Hello" ] && ok || bad "SPM detokenize --skip-special"

# errors
"$ASSAY_BIN" tokenize "$H" x --ids --pieces >/dev/null 2>&1; [ $? = 2 ] && ok || bad "--ids --pieces not a usage error"
"$ASSAY_BIN" tokenize "$H" x -f "$tmp/in.txt" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "TEXT and -f not a usage error"
"$ASSAY_BIN" detokenize "$H" 12x >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bad id not a usage error"
msg=$("$ASSAY_BIN" detokenize "$H" 99999 2>&1); [ $? = 1 ] && grep -q "outside the vocabulary" <<<"$msg" && ok || bad "out-of-range id: $msg"
msg=$("$ASSAY_BIN" tokenize "$tmp/nonexistent.gguf" x 2>&1); [ $? = 1 ] && grep -q "nonexistent" <<<"$msg" && ok || bad "missing model: $msg"
msg=$("$ASSAY_BIN" tokenize "$tmp" x 2>&1); [ $? = 1 ] && grep -q "tokenizer.json" <<<"$msg" && ok || bad "directory without tokenizer.json: $msg"

rm -rf "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
