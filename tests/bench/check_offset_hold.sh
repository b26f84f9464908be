#!/usr/bin/env bash
# bench/offset_hold.sh end to end, short (on PARTQ_TEST_DSN when set, else its
# own server): all three shapes run and print a rate for each 5 s. It never checks
# speed.
set -euo pipefail
script="$(dirname "$0")/../../bench/offset_hold.sh"
args=(--clients 2 --seconds 6)
[[ -n "${PARTQ_TEST_DSN:-}" ]] && args+=(--dsn "$PARTQ_TEST_DSN")
out="$(bash "$script" "${args[@]}")"
echo "$out"
for shape in offset offset_ids record; do
  grep -q "^$shape: batches/s every 5 s, a snapshot held from 2 s$" <<<"$out" ||
    { echo "FAIL: no $shape run" >&2; exit 1; }
done
rows="$(grep -cE '^  [0-9.]+ s  [0-9.]+$' <<<"$out")" || true
[[ "$rows" -ge 3 ]] || { echo "FAIL: expected a rate line for each shape, got $rows" >&2; exit 1; }
echo "ok"
