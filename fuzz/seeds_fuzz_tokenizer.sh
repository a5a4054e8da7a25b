#!/usr/bin/env bash
# seeds_fuzz_tokenizer.sh CORPUS — seeds for fuzz_tokenizer: the test strings of llama.cpp's vocabulary fixtures
# (ggml-vocab-*.gguf.inp: cases separated by __ggml_vocab_test__ lines), each behind a first byte that sends it to
# one of the eight tokenizers with one of the four flag combinations (byte 0 = tokenizer | flags << 3).
set -u
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${ASSAY_SHARED:-$root/../shared}
inp=$shared/data/llamacpp_vocab/ggml-vocab-llama-spm.gguf.inp
[ -f "$inp" ] || exit 0
mkdir -p "$out"
awk -v out="$out" '
  function flush() {
    if (n == 0 && !started) return
    sel = (k % 8) + 8 * (int(k / 8) % 4)
    f = sprintf("%s/vocab-case-%03d", out, k)
    printf "%c%s", (sel == 0 ? 0 : sel), text > f
    close(f)
    k++; text = ""; n = 0
  }
  BEGIN { k = 0; n = 0; text = ""; started = 0 }
  /^__ggml_vocab_test__$/ { flush(); started = 1; next }
  { text = (n ? text "\n" : "") $0; n++ }
  END { flush() }
' "$inp"
