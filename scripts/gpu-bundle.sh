#!/usr/bin/env bash
# Packs a CUDA build of assay (the CLI and the GPU tests) with the shared libraries it needs beyond glibc and the CUDA
# runtime, for a GPU machine that has the NVIDIA driver and CUDA but not assay's build dependencies (PCRE2, utf8proc,
# libmicrohttpd, libcurl and theirs). The model folder is packed beside it when given.
#
#   scripts/gpu-bundle.sh BUILD_DIR OUT_DIR [MODEL_DIR]     -> OUT_DIR/bin.tar.xz [, OUT_DIR/model.tar.xz]
#
# scripts/gpu-engine-check.sh unpacks and runs it.
set -euo pipefail
BUILD=${1:?build dir}; OUT=${2:?out dir}; MODEL=${3:-}
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/lib"
cp "$BUILD/assay" "$BUILD"/gpu/test_* "$T/bin/"
strip "$T"/bin/* 2>/dev/null || true
# every library the binaries load that is neither glibc's nor CUDA's (the GPU machine has its own of those)
ldd "$T"/bin/* | awk '/=>/ {print $3}' | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so|libcuda|libcublas' \
  | while read -r l; do cp -L "$l" "$T/lib/"; done
tar -C "$T" -cJf "$OUT/bin.tar.xz" bin lib
if [ -n "$MODEL" ]; then
  tar -C "$(dirname "$MODEL")" -cJf "$OUT/model.tar.xz" \
    --exclude='*.pt' --exclude='train.py' "$(basename "$MODEL")"
fi
ls -la "$OUT"
