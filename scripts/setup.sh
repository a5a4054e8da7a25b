#!/usr/bin/env bash
# setup.sh — install what building and running assay needs on a fresh Debian machine, then configure and build it.
#   bash scripts/setup.sh            # system packages (apt), Release build in build/ (the CUDA product kernels too
#                                    # when nvcc is found)
# The test suite's own packages (Python virtualenv, the GGUF models shipped on PyPI, chromium, clang) are installed
# by scripts/setup-tests.sh, which scripts/test.sh runs.
# Idempotent: packages already present are not reinstalled, an existing build is updated incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake pkg-config git libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" 2>&1 | grep -E "error|warning|Error" || true
test -x build/assay || { echo "setup: build failed (run: cmake --build build)"; exit 1; }
echo "setup: built build/assay"
