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

# Llama 3 70B's config.json (bf16 by its torch_dtype) at --tensor-parallel-size 2, by the sharding rules
# (include/assay/shard.h), worked by hand. A rank holds:
#   a layer: q 4096 x 8192 = 33,554,432 (32 of 64 heads); k, v 512 x 8192 = 4,194,304 each (4 of 8 KV heads x 128);
#            o 8192 x 4096 = 33,554,432 (row-parallel: the rank's heads' inputs); gate, up 14336 x 8192 and down
#            8192 x 14336 = 117,440,512 each; 2 norms of 8192, replicated
#            = 427,835,392 elements x 2 bytes = 855,670,784 x 80 layers = 68,453,662,720
#   embedding and lm_head: vocabulary 128,256 (already a multiple of 64) / 2 = 64,128 rows x 8192 x 2 bytes x 2
#            = 2,101,346,304; final norm 16,384                                  -> 70,555,025,408 bytes per GPU
#   the whole model: 70,553,706,496 parameters x 2                              =  141,107,412,992 bytes
#   KV a token: 80 layers x K,V x 4 KV heads x 128 x 2 bytes = 163,840 per GPU (327,680 for all 8 heads)
# On H200s (141e9 bytes, 0.9 of it used, 2 GiB reserve): 126.9e9 - 70,555,025,408 - 2,147,483,648 = 54,197,490,944
#   bytes of KV pool; blocks of 16 x 163,840 = 2,621,440 bytes: 20,674 (54,195,650,560) = 330,784 tokens;
#   concurrency at the config's 8,192 positions: 20,674 / 512 = 40.38, 40 whole sequences.
# On H100s (72e9 usable) the weights and reserve, 72,702,509,056, are 702,509,056 bytes too many: exit 1.
c70=$ASSAY_SOURCE_DIR/bench/configs/llama3-70b
expect 0 "70.56 GB per GPU" -- P "$c70" --gpu h200 --tensor-parallel-size 2
expect 0 "163,840 per GPU (4 of 8 KV heads on each)" -- P "$c70" --gpu h200 --tensor-parallel-size 2
expect 0 "KV capacity  330,784 tokens (20,674 blocks of 16)" -- P "$c70" --gpu h200 --tensor-parallel-size 2
expect 1 "the weights do not fit: 70.56 GB per GPU" -- P "$c70" --gpu h100 --tensor-parallel-size 2
expect 1 "by 0.70 GB per GPU" -- P "$c70" --gpu h100 --tensor-parallel-size 2
P "$c70" --gpu h200 --tensor-parallel-size 2 --json > "$tmp/tp2.json"
if "$py" - "$tmp/tp2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = {"tensor_parallel_size": 2, "quantization": "bf16", "max_model_len": 8192, "parameters": 70553706496,
        "weight_bytes": 141107412992, "weight_bytes_per_gpu": 70555025408, "kv_heads_per_gpu": 4, "kv_head_copies": 1,
        "kv_bytes_per_token": 327680, "kv_bytes_per_token_per_gpu": 163840, "kv_cache_bytes_per_gpu": 54197490944,
        "kv_blocks_per_gpu": 20674, "kv_tokens": 330784, "max_concurrent_sequences": 40, "fits": True}
bad = {k: (d.get(k), v) for k, v in want.items() if d.get(k) != v}
assert not bad, bad
assert abs(d["max_concurrency_per_replica"] - 20674 / 512) < 1e-12, d
PY
then pass=$((pass+1)); else echo "FAIL: plan --json of the 70B config at TP 2"; fail=$((fail+1)); fi
# the rules' errors, as plan reports them: the heads (with the sizes that work) and an int4 group a split would cut
expect 1 "tensor-parallel size 3 does not divide the model's 64 attention heads" -- P "$c70" --gpu h100 -tp 3
expect 1 "sizes that split this model: 1, 2, 4, 8, 16, 32, 64" -- P "$c70" --gpu h100 -tp 3
expect 1 "int4-g128: ffn_down.weight has 704 inputs per GPU at tensor-parallel size 2" -- P "$house" --gpu h100 -tp 2 -q awq

# the planner's q4_k_m mix for the house model = the tensor bytes of the q4_k_m file assay quantize writes
"$ASSAY_BIN" quantize "$house" -o "$tmp/house-q4km.gguf" --scheme q4_k_m >/dev/null 2>&1
want=$(P "$house" --gpu h100 -q q4_k_m --json | "$py" -c 'import json,sys; print(int(json.load(sys.stdin)["weight_bytes"]))')
got=$(P "$tmp/house-q4km.gguf" --gpu h100 --json | "$py" -c 'import json,sys; print(int(json.load(sys.stdin)["weight_bytes"]))')
if [ -n "$want" ] && [ "$want" = "$got" ]; then pass=$((pass+1)); else echo "FAIL: q4_k_m planned $want bytes, file holds $got"; fail=$((fail+1)); fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
