#!/usr/bin/env bash
# The monitoring files of dashboards/ are valid:
#   1. every dashboards/*.json passes tools/check-dashboards (Grafana's Dashboard type,
#      uid/datasource-variable/panel-id conventions, every PromQL expression parses), and
#      fixtures/broken-dashboard.json fails each of these three ways;
#   2. the alert rules pass `promtool check rules`, and their unit tests `promtool test rules`;
#   3. the provisioning file points at a path and the dashboards use the datasource variable.
# Usage: tests/observability/check_monitoring.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
TOOLS=$ROOT/tools
DASH=$ROOT/dashboards

# The first run installs Grafana's types, TypeScript and promtool (tools/setup: minutes);
# later runs take well under a second. Failing to install fails the test, never skips it.
if ! "$TOOLS/setup"; then
  echo "check_monitoring: FAIL: tools/setup could not install the checkers (see above)" >&2
  exit 1
fi
command -v promtool >/dev/null || { echo "check_monitoring: FAIL: promtool missing (Debian package prometheus; scripts/lib.sh installs it)" >&2; exit 1; }

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
shopt -s nullglob
dashboards=("$DASH"/*.json)
((${#dashboards[@]})) || fail "no dashboards/*.json"
if ((${#dashboards[@]})); then
  # One run over the dashboards and a fixture with one mistake of each kind: the dashboards
  # must pass, the fixture must fail all three ways, so a checker that stopped catching
  # mistakes cannot pass unnoticed (one TypeScript program: no extra start-up).
  canary=$here/fixtures/broken-dashboard.json
  out=$("$TOOLS/check-dashboards" "${dashboards[@]}" "$canary" 2>&1) || true
  canary_report=$(awk -v head="FAIL $canary" '$0 == head { on = 1; next } /^[^ ]/ { on = 0 } on' <<<"$out")
  # What it says about the project's dashboards (everything but the fixture's block).
  awk -v fixture="$canary" 'index($0, fixture) { skip = 1; next } /^[^ ]/ { skip = 0 } !skip' <<<"$out"
  for d in "${dashboards[@]}"; do
    grep -qF "ok   $d (" <<<"$out" || fail "check-dashboards ${d#"$ROOT"/}"
  done
  for kind in types conventions promql; do
    grep -q "^  $kind: " <<<"$canary_report" ||
      fail "check-dashboards found no $kind error in ${canary#"$ROOT"/}, which has one: is the checker broken? Its output: $out"
  done
fi

rules=$DASH/alerts.yaml
promtool check rules "$rules" || fail "promtool check rules ${rules#"$ROOT"/}"
(cd "$DASH" && promtool test rules alerts_test.yaml) || fail "promtool test rules dashboards/alerts_test.yaml"
# Every alert of the rule file has a unit test.
for alert in $(sed -n 's/^ *- alert: *//p' "$rules"); do
  grep -q "alertname: $alert\$" "$DASH/alerts_test.yaml" || fail "alert $alert has no test in dashboards/alerts_test.yaml"
done

prov=("$DASH"/provisioning/*.yaml)
((${#prov[@]})) || fail "no provisioning file in dashboards/provisioning/"
for p in "${prov[@]}"; do
  grep -qE '^\s+path: /' "$p" || fail "${p#"$ROOT"/}: no options.path for the dashboard files"
done

if ((failures)); then
  echo "check_monitoring: $failures check(s) failed" >&2
  exit 1
fi
echo "check_monitoring: ${#dashboards[@]} dashboard(s), alert rules and their tests pass"
