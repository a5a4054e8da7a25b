#!/usr/bin/env bash
# GPU check in one call: build the CUDA product kernels (src/backend/cuda), the kernel lab (dev/cuda: the measured
# versions of each kernel) and its driver kernel_check, validate every kernel against a float64 reference, benchmark
# it, benchmark the PyTorch peers (cuDNN/FA2 SDPA, cuBLAS, cuBLASLt fp8) in the same run, and write a joined table +
# JSON.
#
#   scripts/device-check.sh [OUTDIR] [--quick]      (default OUTDIR: bench/results/latest)
#
# Wall-clock budget: DEVICE_CHECK_BUDGET seconds (default 570) shared by build, kernels and peers.
# ONLY=<section> (prefill, decode, gemm, gemm_lt, quant, fp8attn) runs one kernel_check section and only the
# ceilings and the matching peers (fp8attn: the bf16 prefill peers; quant: none), for iterations on one kernel
# family. A full run (no ONLY) covers every product kernel (lab variant 0) and, of the numbered lab versions, the ones
# dev/cuda/README.md quotes (the combined runs' selection: ~250 s of kernel_check on an H200); an ASSAY_LAB_*_VARIANTS or
# ASSAY_LAB_GEMM_EXTRA_M given by the caller wins, set empty for every version of that section. LAB_ALL=1 runs every
# lab version of every section (well over 450 s of kernel_check: raise DEVICE_CHECK_BUDGET with it).
# Builds with nvcc directly (sm_90a), so it needs no CMake configure of the CPU library on the GPU machine.
# Exit status: 1 if the build or any validation failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-bench/results/latest}
QUICK=${2:-}
BUDGET=${DEVICE_CHECK_BUDGET:-570}
if [ -z "${ONLY:-}" ] && [ -z "${LAB_ALL:-}" ]; then
  # (set but empty stays empty: that section's every version)
  export ASSAY_LAB_GEMM_VARIANTS="${ASSAY_LAB_GEMM_VARIANTS-0,8,90,95,98,105,106,107,120,121,125,134,156,161}"
  export ASSAY_LAB_W8A8_VARIANTS="${ASSAY_LAB_W8A8_VARIANTS-1,12,17}"
  export ASSAY_LAB_FP8_VARIANTS="${ASSAY_LAB_FP8_VARIANTS-0,52,53,56,63,65,66,67}"
  export ASSAY_LAB_GEMM_EXTRA_M="${ASSAY_LAB_GEMM_EXTRA_M-2,4,8}"
fi
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
mkdir -p "$OUTDIR" build-dev
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true

NVCC=${NVCC:-nvcc}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v $NVCC)")")")}
GEN=${GENCODE:--gencode=arch=compute_90a,code=sm_90a}
echo "device-check: lab versions: gemm ${ASSAY_LAB_GEMM_VARIANTS:-all}, w8a8 ${ASSAY_LAB_W8A8_VARIANTS:-all}, fp8attn ${ASSAY_LAB_FP8_VARIANTS:-all}, extra m ${ASSAY_LAB_GEMM_EXTRA_M:-none}; budget ${BUDGET} s"
echo "device-check: building with $($NVCC --version | tail -1) in $CUDA_HOME"
# PREBUILT=1: use a build-dev/kernel_check built elsewhere with the same nvcc when it starts here (it answers an
# unknown option with its usage and exit status 2); otherwise build.
prebuilt_ok() { [ -n "${PREBUILT:-}" ] && [ -x build-dev/kernel_check ] || return 1; build-dev/kernel_check --probe >/dev/null 2>&1; [ $? -eq 2 ]; }
if prebuilt_ok; then
  echo "device-check: using the prebuilt build-dev/kernel_check (PREBUILT=1)"
else
pids=()
rm -f build-dev/*.o
for f in src/backend/cuda/*.cu dev/cuda/*_lab.cu; do
  $NVCC -std=c++17 -O3 -lineinfo $GEN -Iinclude -Isrc/backend/cuda -Idev/cuda -Xptxas=-warn-spills -c "$f" \
        -o "build-dev/$(basename "$f").o" & pids+=($!)
done
gcc -std=c11 -O2 -Wall -Iinclude -Isrc/backend/cuda -c src/backend/cuda/cuda_pack.c -o build-dev/cuda_pack.o & pids+=($!)
gcc -std=c11 -O2 -Wall -Iinclude -Idev/cuda -c dev/cuda/cuda_pack_lab.c -o build-dev/cuda_pack_lab.o & pids+=($!)
gcc -std=c11 -O2 -Wall -Wno-unused-parameter -Iinclude -Idev/cuda -Isrc/backend/cuda -I"$CUDA_HOME/include" -c dev/cuda/kernel_check.c \
    -o build-dev/kernel_check.o & pids+=($!)
gcc -std=c11 -O2 -Wall -Iinclude -Idev/cuda -I"$CUDA_HOME/include" -c dev/cuda/check_gemm_lt.c -o build-dev/check_gemm_lt.o & pids+=($!)
$NVCC -std=c++17 -O3 $GEN -Iinclude -Idev/cuda -Isrc/backend/cuda -o build-dev/mma_probe dev/cuda/mma_probe.cu & pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if [ $fail -ne 0 ]; then echo "device-check: BUILD FAILED"; exit 1; fi
$NVCC -o build-dev/kernel_check build-dev/*.o -lcublasLt -lm || { echo "device-check: LINK FAILED"; exit 1; }
fi
echo "device-check: built in $(( $(date +%s) - T0 )) s"
[ -n "${BUILD_ONLY:-}" ] && exit 0

# Peers get a fixed share at the end; the kernels get the rest.
PEER_S=${PEER_BUDGET:-120}
KT=$(( $(left) - PEER_S - 10 ))
[ $KT -lt 30 ] && KT=30
timeout $KT build-dev/kernel_check --json "$OUTDIR/kernels.json" $QUICK ${ONLY:+--only $ONLY} 2>&1 | tee "$OUTDIR/kernels.log"
krc=${PIPESTATUS[0]}
echo "device-check: kernel_check exit $krc after $(( $(date +%s) - T0 )) s"
# The mma.sync issue probe (dev/cuda/mma_probe.cu, ~2 s): on full runs, or with PROBE=1
if [ -z "${ONLY:-}" ] || [ -n "${PROBE:-}" ]; then
  [ -x build-dev/mma_probe ] || $NVCC -std=c++17 -O3 $GEN -Iinclude -Idev/cuda -Isrc/backend/cuda -o build-dev/mma_probe dev/cuda/mma_probe.cu
  timeout 60 build-dev/mma_probe 20000 > "$OUTDIR/mma_probe.log" 2>&1 || echo "device-check: mma_probe failed"
fi
PT=$(( $(left) - 10 ))
[ $PT -lt 20 ] && PT=20
PYTHONUNBUFFERED=1 timeout $PT python3 bench/peers.py --json "$OUTDIR/peers.json" $QUICK ${ONLY:+--only $ONLY} 2>&1 | tee "$OUTDIR/peers.log"
python3 bench/report.py "$OUTDIR/kernels.json" "$OUTDIR/peers.json" --out "$OUTDIR/report"
echo "device-check: done in $(( $(date +%s) - T0 )) s, kernel_check exit $krc"
[ $krc -eq 0 ]
