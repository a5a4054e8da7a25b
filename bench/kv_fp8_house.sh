#!/bin/bash
# FP8 KV cache on the house model: perplexity and KLD against a bf16 KV cache, for the three ways the engine gets
# its fp8 KV scales (static per-layer scales calibrated by `assay quantize --kv-cache-scheme fp8`, dynamic per
# (token, KV head) slot, --calculate-kv-scales over the first N real tokens) and f16 for reference.
#   bench/kv_fp8_house.sh [OUT_DIR] [CHUNKS]     (CHUNKS: windows of 512 of heldout.txt; 0 = all 219)
# Prints one JSON object per configuration (assay perplexity --json) and writes them under OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${ASSAY_BIN:-build/assay}
S=${ASSAY_SHARED:-../shared}
H=$S/models/house
F=$H/heldout.txt
OUT=${1:-/tmp/kv_fp8_house}
CHUNKS=${2:-40}
mkdir -p "$OUT"
P=(--ctx 512 --score-all -t 2 --json)
[ "$CHUNKS" != 0 ] && P+=(--chunks "$CHUNKS")
set -x
time $A quantize "$H" -o "$OUT/house-kvfp8" --scheme none --kv-cache-scheme fp8 --threads 2 --force
time $A perplexity "$H" -f "$F" "${P[@]}" --kv-cache-dtype bf16 --save-logits "$OUT/base_bf16.kl" > "$OUT/bf16.json"
time $A perplexity "$OUT/house-kvfp8" -f "$F" "${P[@]}" --kv-cache-dtype fp8 --kl-divergence-base "$OUT/base_bf16.kl" > "$OUT/fp8_static.json"
time $A perplexity "$H" -f "$F" "${P[@]}" --kv-cache-dtype fp8 --kl-divergence-base "$OUT/base_bf16.kl" > "$OUT/fp8_dynamic.json"
time $A perplexity "$H" -f "$F" "${P[@]}" --kv-cache-dtype fp8 --calculate-kv-scales --kl-divergence-base "$OUT/base_bf16.kl" > "$OUT/fp8_calc.json"
time $A perplexity "$H" -f "$F" "${P[@]}" --kv-cache-dtype f16 --kl-divergence-base "$OUT/base_bf16.kl" > "$OUT/f16.json"
cat "$OUT"/*.json
