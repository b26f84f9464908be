#!/usr/bin/env bash
# The monitoring files of dashboards/ are valid:
#   1. every dashboards/*.json passes ../shared/tools/check-dashboards (Grafana's Dashboard
#      type, uid/datasource-variable/panel-id conventions, every PromQL expression parses);
#   2. the alert rules pass `promtool check rules`, and their unit tests `promtool test rules`;
#   3. the provisioning file points at a path and the dashboards use the datasource variable.
# Usage: tests/observability/check_monitoring.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
TOOLS=$ROOT/../shared/tools
DASH=$ROOT/dashboards

if [[ ! -x $TOOLS/check-dashboards || ! -x $TOOLS/setup ]]; then
  echo "check_monitoring: FAIL: $TOOLS/check-dashboards (and setup) not found. The dashboard" >&2
  echo "  checks need the shared tools in ../shared/tools beside the repository; failing" >&2
  echo "  instead of skipping so a missing checker is never mistaken for a pass." >&2
  exit 1
fi
# The first use installs Grafana's types, jq and promtool (minutes); serialized with the same
# lock as tests/helm/check_chart.sh so parallel ctest jobs never run two installs.
cache=${PARTQ_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/partq-tools}
mkdir -p "$cache"
if ! flock "$cache/.setup.lock" "$TOOLS/setup" >/dev/null; then
  echo "check_monitoring: FAIL: $TOOLS/setup could not install the checkers" >&2
  exit 1
fi
command -v promtool >/dev/null || { echo "check_monitoring: FAIL: promtool missing (Debian package prometheus; scripts/lib.sh installs it)" >&2; exit 1; }

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
shopt -s nullglob
dashboards=("$DASH"/*.json)
((${#dashboards[@]})) || fail "no dashboards/*.json"
if ((${#dashboards[@]})); then
  # npm chatter on stderr is noise; the verdict lines go to stdout.
  "$TOOLS/check-dashboards" "${dashboards[@]}" 2> >(grep -v '^npm warn' >&2) || fail "check-dashboards"
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
