#!/usr/bin/env bash
# test_cli_bench_dummy.sh — `--load-format dummy`: `assay bench` on a folder holding a tiny config.json and nothing
# else (no weights, no tokenizer) measures the model the config describes; the JSON names the flag; the same flag
# on a folder without config.json is a clear error (exit 1), an unknown load format a usage error (exit 2), and a
# command that needs text says that the folder has no tokenizer. (bench/configs/llama3-8b and -70b are the real
# shapes; they are far too large for CI.)
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"
mkdir -p "$tmp/tiny" "$tmp/empty"
cat > "$tmp/tiny/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
 "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}
JSON
expect 2 "unknown load format 'pt'" -- "$ASSAY_BIN" bench "$tmp/tiny" --load-format pt
expect 1 "no config.json" -- "$ASSAY_BIN" bench "$tmp/empty" --load-format dummy
expect 1 "no tokenizer.json" -- "$ASSAY_BIN" run "$tmp/tiny" --load-format dummy -p hello -n 2
# without --load-format dummy the folder is not a model
expect 1 "safetensors" -- "$ASSAY_BIN" bench "$tmp/tiny" -b 1 -p 8 -n 2 -r 1
if "$ASSAY_BIN" bench "$tmp/tiny" --load-format dummy --seed 3 --max-model-len 64 -b 1,2 -p 8 -n 2 -r 1 --threads 1 \
    --json > "$tmp/b.json" 2>"$tmp/err"; then
  pass=$((pass+1))
else echo "FAIL: dummy bench run: $(cat "$tmp/err")"; fail=$((fail+1)); fi
grep -q "llama, 2 layers, bf16, seed 3" "$tmp/err" && pass=$((pass+1)) || { echo "FAIL: load note: $(cat "$tmp/err")"; fail=$((fail+1)); }
"$ASSAY_PYTHON" - "$tmp/b.json" <<'PY' && pass=$((pass+1)) || { echo "FAIL: dummy bench JSON"; fail=$((fail+1)); }
import json, sys
r = json.load(open(sys.argv[1]))
b = r["bench"]
assert r["engine"] == "--load-format dummy --threads 1 --max-model-len 64 --seed 3", r["engine"]
assert (b["n_prompt"], b["n_gen"], b["reps"]) == (8, 2, 1), b
assert [p["batch"] for p in b["points"]] == [1, 2], b
for p in b["points"]:
    assert p["prefill_tps"] > 0 and p["decode_tps"] > 0, p
print("dummy bench", b["points"])
PY
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
