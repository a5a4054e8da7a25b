#!/usr/bin/env bash
# test.sh — the whole test suite: setup + build, the test packages (scripts/setup-tests.sh), ctest, the suite again
# under ASan+UBSan, a short fuzz run.
#   bash scripts/test.sh
# Environment: ASSAY_SKIP_SANITIZE=1 / ASSAY_SKIP_FUZZ=1 skip those stages (for quick local runs); ASSAY_TEST_SLOW=1
# adds the tests labelled slow (CMakeLists.txt's ASSAY_SLOW_TESTS: minutes each) to the Release stage.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
bash scripts/setup-tests.sh || exit 1
jobs=$(nproc)
failed=0

if [ "${ASSAY_TEST_SLOW:-0}" = 1 ]; then
  echo "== ctest (Release, the slow tests included)"
  ctest --test-dir build --output-on-failure -j"$jobs" || failed=1
else
  echo "== ctest (Release; ASSAY_TEST_SLOW=1 adds the tests labelled slow)"
  ctest --test-dir build --output-on-failure -j"$jobs" -LE slow || failed=1
fi

if [ "${ASSAY_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ctest under AddressSanitizer + UndefinedBehaviorSanitizer (heavy tests skipped)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DASSAY_SANITIZE=ON -DASSAY_CUDA=OFF >/dev/null &&
    cmake --build build-asan -j"$jobs" >/dev/null &&
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE heavy || failed=1
fi

if [ "${ASSAY_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzzing (bounded)"
  bash scripts/fuzz.sh 20 || failed=1
fi

if [ $failed = 0 ]; then echo "test.sh: all stages passed"; else echo "test.sh: FAILED"; fi
exit $failed
