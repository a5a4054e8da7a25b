#!/usr/bin/env bash
# seeds_fuzz_json.sh CORPUS — real JSON for fuzz_json: the config.json files of fuzz_config's corpus and the house
# model's config.json, tokenizer_config.json and reference.json.
set -u
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${ASSAY_SHARED:-$root/../shared}
mkdir -p "$out"
for f in "$root"/fuzz/corpus/fuzz_config/*; do [ -f "$f" ] && cp "$f" "$out/config-$(basename "$f")"; done
for f in config.json tokenizer_config.json reference.json; do
  [ -f "$shared/models/house/$f" ] && cp "$shared/models/house/$f" "$out/house-$f"
done
exit 0
