#!/usr/bin/env bash
# bench/ceiling.sh end to end with tiny sizes (on PARTQ_TEST_DSN when set, else
# its own server): every shape drains its items (the script fails otherwise)
# and each round prints five rates with the floors at 1.00x.
set -euo pipefail
script="$(dirname "$0")/../../bench/ceiling.sh"
args=(--clients 2 --transactions 20 --rounds 2)
[[ -n "${PARTQ_TEST_DSN:-}" ]] && args+=(--dsn "$PARTQ_TEST_DSN")
out="$(bash "$script" "${args[@]}")"
echo "$out"
rows="$(grep -cE '^[12] +([0-9]+ \([0-9.]+x\) *){5}$' <<<"$out")" || true
[[ "$rows" == 2 ]] || { echo "FAIL: expected 2 round rows with 5 rates, got $rows" >&2; exit 1; }
while read -r _ f1 r1 _ _ f2 r2 _; do
  [[ "$r1" == "(1.00x)" && "$r2" == "(1.00x)" ]] || { echo "FAIL: floors not 1.00x: $r1 $r2" >&2; exit 1; }
done < <(grep -E '^[12] ' <<<"$out" | awk '{print $1, $2, $3, $4, $5, $6, $7, $8}')
echo "ok"
