#!/usr/bin/env bash
# test_alert_rules.sh — the shipped Prometheus rules (deploy/prometheus/assay-alerts.yml) are valid and pass their
# promtool unit tests (assay-alerts.test.yml): a sustained 0.3-point drop of the judge score fires after 15
# minutes, a 0.1-point drop and 10-minute dips of 0.3 and 0.5 points do not, replicas are pooled.
set -u
. "$(dirname "$0")/expect.sh"
dir="$ASSAY_SOURCE_DIR/deploy/prometheus"
if ! command -v promtool >/dev/null; then
  echo "FAIL: promtool not found (Debian's prometheus package; scripts/setup-tests.sh installs it)"
  exit 1
fi
expect 0 "SUCCESS: 1 rules found" -- promtool check rules "$dir/assay-alerts.yml"
# promtool resolves rule_files relative to the test file
expect 0 "SUCCESS" -- promtool test rules "$dir/assay-alerts.test.yml"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
