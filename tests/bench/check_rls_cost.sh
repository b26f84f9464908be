#!/usr/bin/env bash
# bench/rls_cost.sh with tiny sizes: both modes drain (the script fails when a drain does not
# finish or an item goes dead), every round prints both modes' server CPU per item and rate
# and a ratio, and the median line comes last. It never checks speed.
# Usage: tests/bench/check_rls_cost.sh PARTQ_BINARY
set -euo pipefail
script="$(dirname "$0")/../../bench/rls_cost.sh"
out="$(bash "$script" --partq "${1:?usage: check_rls_cost.sh PARTQ_BINARY}" --items 3000 --rounds 1)"
echo "$out"
rows="$(grep -cE '^1 +([0-9.]+ \([0-9]+\) +){3}[0-9.]+x +[0-9.]+x$' <<<"$out")" || true
[[ "$rows" == 1 ]] || { echo "FAIL: expected 1 round row, got $rows" >&2; exit 1; }
tail -1 <<<"$out" | grep -qE '^median ratio of the server CPU per item, confined / owner: [0-9.]+x .*the policies alone / owner: [0-9.]+x$' ||
  { echo "FAIL: no median line" >&2; exit 1; }
echo "ok"
