#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer harnesses in fuzz/ with clang and run each for SECONDS (default 20).
#   bash scripts/fuzz.sh 600                       # a longer run; crashes are written to build-fuzz/crashes/
#   bash scripts/fuzz.sh 60 fuzz_json fuzz_tokenizer   # only these harnesses
# Each run first replays the committed corpus, fuzz/corpus/<harness>/ (any crash there fails the run), then
# fuzzes from it and from seeds made of real files (fuzz/seeds_<harness>.sh, from the shared data); new inputs go
# to build-fuzz/corpus/<harness>/. fuzz/<harness>.dict, when there is one, is the harness's dictionary.
# bench/results/fuzz.md records the long campaign and how the committed corpus was made.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift $(($# > 0 ? 1 : 0))
shopt -s nullglob
harnesses=(fuzz/fuzz_*.c)
if [ $# -gt 0 ]; then
  harnesses=()
  for h in "$@"; do
    [ -f "fuzz/$h.c" ] || { echo "fuzz.sh: no harness fuzz/$h.c"; exit 1; }
    harnesses+=("fuzz/$h.c")
  done
fi
if [ ${#harnesses[@]} = 0 ]; then echo "fuzz.sh: no harnesses yet"; exit 0; fi
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DASSAY_FUZZ=ON -DASSAY_CUDA=OFF >/dev/null || exit 1
cmake --build build-fuzz -j"$(nproc)" >/dev/null || { echo "fuzz.sh: build failed"; exit 1; }
mkdir -p build-fuzz/crashes
failed=0
for src in "${harnesses[@]}"; do
  name=$(basename "$src" .c)
  corpus=build-fuzz/corpus/$name
  mkdir -p "$corpus"
  seeds=()
  [ -d "fuzz/corpus/$name" ] && seeds+=("fuzz/corpus/$name")
  [ -x "fuzz/seeds_$name.sh" ] && bash "fuzz/seeds_$name.sh" "$corpus"
  opts=()
  [ -f "fuzz/$name.dict" ] && opts+=(-dict="fuzz/$name.dict")
  log=build-fuzz/$name.log
  if build-fuzz/$name -max_total_time="$seconds" -artifact_prefix=build-fuzz/crashes/"$name"- \
      -print_final_stats=1 "${opts[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    replayed=$(find "fuzz/corpus/$name" -type f 2>/dev/null | wc -l)
    echo "fuzz: $name ok, ${execs:-?} executions in ${seconds}s (the $replayed committed inputs replayed first)"
  else
    echo "fuzz: $name FOUND A CRASH (log: $log)"; tail -30 "$log"; failed=1
  fi
done
exit $failed
