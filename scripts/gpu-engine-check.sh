#!/usr/bin/env bash
# The GPU engine on a GPU machine, in one call: the GPU tests (tests/gpu/test_backend_ops_cuda.c, test_engine_cuda.c,
# test_dummy_cuda.c) and the house model against transformers on the same GPU (bench/gpu_house_peers.py: perplexity,
# greedy tokens, tokens/s).
#
#   scripts/gpu-engine-check.sh BUNDLE_DIR [OUTDIR]      (default OUTDIR: bench/results/gpu-engine)
#
# BUNDLE_DIR holds bin.tar.xz and model.tar.xz made by scripts/gpu-bundle.sh from a CUDA build (the GPU machine needs
# no build dependencies then). Exit status 1 when a check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${1:?bundle dir}; OUTDIR=${2:-bench/results/gpu-engine}
W=${TMPDIR:-/tmp}/assay-gpu
rm -rf "$W"; mkdir -p "$W" "$OUTDIR"
tar -C "$W" -xJf "$BUNDLE/bin.tar.xz" || exit 1
tar -C "$W" -xJf "$BUNDLE/model.tar.xz" || exit 1
MODEL=$(find "$W" -maxdepth 2 -name config.json -printf '%h\n' | head -1)
export LD_LIBRARY_PATH="$W/lib:${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUTDIR/gpu.txt"
rc=0
# first the op-parity test: every op of the CUDA backend against the CPU's scalar kernels (exit 77, no usable GPU, fails too)
echo "== op parity (CUDA backend against the CPU scalar kernels)"
timeout 600 "$W/bin/test_backend_ops_cuda" > "$OUTDIR/backend_ops_cuda.log" 2>&1 || rc=1
grep -E "FAIL|SKIPPED" "$OUTDIR/backend_ops_cuda.log" | cut -c1-240 | head -40; tail -3 "$OUTDIR/backend_ops_cuda.log"
echo "== engine test"
timeout 300 "$W/bin/test_engine_cuda" "$MODEL" > "$OUTDIR/engine_cuda.json" 2> "$OUTDIR/engine_cuda.log" || rc=1
tail -5 "$OUTDIR/engine_cuda.log"; cat "$OUTDIR/engine_cuda.json"
echo "== dummy weights filled on the GPU"
timeout 300 "$W/bin/test_dummy_cuda" > "$OUTDIR/dummy_cuda.log" 2>&1 || rc=1
tail -3 "$OUTDIR/dummy_cuda.log"
echo "== house model against transformers"
PYTHONUNBUFFERED=1 timeout 400 python3 bench/gpu_house_peers.py --model "$MODEL" --assay "$W/bin/assay" \
  --engine-json "$OUTDIR/engine_cuda.json" --out "$OUTDIR" ${NO_SPEED:+--no-speed} || rc=1
[ -f "$OUTDIR/house_gpu.md" ] && cat "$OUTDIR/house_gpu.md"
exit $rc
