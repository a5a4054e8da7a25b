#!/usr/bin/env bash
# test_cli_plan.sh — `assay plan`: a preset, a Hugging Face directory, GGUF files (as stored, and the planner's
# q4_k_m mix against a file assay quantize writes with llama.cpp's rules: the same tensor bytes), JSON output, the
# guides' table, and each bad input with its exit code (1 error or does not fit, 2 usage).
set -u
. "$(dirname "$0")/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
house=$ASSAY_SHARED/models/house
stories=$ASSAY_SHARED/data/stories260K/stories260K.gguf
py=python3; [ -x "${ASSAY_PYTHON:-}" ] && py=$ASSAY_PYTHON
P() { "$ASSAY_BIN" plan "$@"; }

expect 0 "18.18 GB per GPU" -- P llama-3.1-70b --gpu h100 --num-gpus 4 -q fp8
expect 0 "630,800 tokens" -- P llama-3.1-70b --gpu h100 --num-gpus 4 -q fp8
expect 0 "2 data-parallel replicas" -- P "Llama 3.1 70B" --gpu "H100 SXM 80 GB" --num-gpus 8 -tp 4 -q fp8
expect 0 "each head kept on 2 GPUs" -- P llama-3.1-8b --gpu l40s -tp 16
expect 0 "3,584 bytes a token" -- P "$house" --gpu rtx4090
expect 0 "1,904 bytes a token" -- P "$house" --gpu rtx4090 --kv-cache-dtype fp8 --kv-layout assay
expect 0 "stored: 1.2 MB" -- P "$stories" --gpu h100
expect 0 "does not add up" -- P --guides
expect 0 "405B FP8, TP=4" -- P --guides
# does not fit: exit 1, numbers still printed, the shortfall in words
expect 1 "the weights do not fit: 102.55 GB per GPU" -- P llama-3.1-405b --gpu h100 -tp 4 -q fp8
expect 1 "by 32.70 GB per GPU" -- P llama-3.1-405b --gpu h100 -tp 4 -q fp8
expect 1 "less than one sequence" -- P llama-3.1-8b --gpu rtx4090 --max-model-len 131072
expect 0 "KV capacity  172,048 tokens" -- P llama-3.1-405b --gpu h200 -tp 4 -q fp8
# errors
expect 1 "'llama-3.1-7b' is neither a model file" -- P llama-3.1-7b --gpu h100
expect 1 "no such file" -- P "$tmp/none.gguf" --gpu h100
expect 1 "no config.json" -- P "$tmp" --gpu h100
expect 1 "does not divide the model's 64 attention heads" -- P llama-3.1-70b --gpu h100 -tp 3
expect 1 "not a multiple of --tensor-parallel-size" -- P llama-3.1-70b --gpu h100 --num-gpus 6 -tp 4
expect 1 "not a multiple of the group size 128" -- P qwen2.5-72b --gpu h100 -tp 8 -q awq
expect 1 "longer than the model's context of 2048" -- P "$house" --gpu h100 --max-model-len 4096
expect 2 "unknown GPU 'a100'" -- P llama-3.1-8b --gpu a100
expect 2 "unknown weight scheme 'int3'" -- P llama-3.1-8b --gpu h100 -q int3
expect 2 "unknown KV cache dtype" -- P llama-3.1-8b --gpu h100 --kv-cache-dtype fp4
expect 2 "--gpu NAME or --gpu-memory" -- P llama-3.1-8b
expect 2 "not a size" -- P llama-3.1-8b --gpu-memory lots
expect 2 "a MODEL is needed" -- P --gpu h100
expect 2 "--kv-layout is vllm or assay" -- P llama-3.1-8b --gpu h100 --kv-layout sglang

# the scheme a config.json declares: AWQ (4 bits, groups of 64) and compressed-tensors fp8; -q overrides it
mkdir -p "$tmp/awq" "$tmp/ct"
"$py" - "$house/config.json" "$tmp" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True}
json.dump(c, open(sys.argv[2] + "/awq/config.json", "w"))
c["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}, "targets": ["Linear"]}}}
json.dump(c, open(sys.argv[2] + "/ct/config.json", "w"))
PY
expect 0 "int4-g64: 27.4 MB" -- P "$tmp/awq" --gpu h100
expect 0 "fp8: 36.6 MB" -- P "$tmp/ct/config.json" --gpu h100
expect 0 "bf16: 56.2 MB" -- P "$tmp/ct" --gpu h100 -q bf16

# JSON: the fields a script reads, and a custom card without a bandwidth (no decode bound)
P llama-3.1-8b --gpu-memory 24GB -q q4_k_m --num-gpus 2 -tp 1 --json > "$tmp/p.json"
if "$py" - "$tmp/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["data_parallel_replicas"] == 2 and d["fits"] is True, d
assert d["gpu_bandwidth_bytes_per_s"] is None and "decode_bound" not in d, d
assert d["kv_tokens"] == 2 * d["kv_tokens_per_replica"] and d["kv_bytes_per_token"] == 131072, d
assert d["weight_bytes"] == 4912898048 and d["quantization"] == "q4_k_m", d
PY
then pass=$((pass+1)); else echo "FAIL: plan --json"; fail=$((fail+1)); fi
P llama-3.1-405b --gpu h100 -tp 4 -q fp8 --json > "$tmp/n.json" 2>/dev/null
if "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["fits"] is False and d["short_bytes_per_gpu"] > 33e9 and "do not fit" in d["error"]' "$tmp/n.json"
then pass=$((pass+1)); else echo "FAIL: plan --json of a plan that does not fit"; fail=$((fail+1)); fi

# the planner's q4_k_m mix for the house model = the tensor bytes of the q4_k_m file assay quantize writes
"$ASSAY_BIN" quantize "$house" -o "$tmp/house-q4km.gguf" --scheme q4_k_m >/dev/null 2>&1
want=$(P "$house" --gpu h100 -q q4_k_m --json | "$py" -c 'import json,sys; print(int(json.load(sys.stdin)["weight_bytes"]))')
got=$(P "$tmp/house-q4km.gguf" --gpu h100 --json | "$py" -c 'import json,sys; print(int(json.load(sys.stdin)["weight_bytes"]))')
if [ -n "$want" ] && [ "$want" = "$got" ]; then pass=$((pass+1)); else echo "FAIL: q4_k_m planned $want bytes, file holds $got"; fail=$((fail+1)); fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
