#!/usr/bin/env bash
# bench/ceiling_log.sh end to end with tiny sizes (on PARTQ_TEST_DSN when set,
# else its own server): every shape writes each item's result exactly once (the
# script fails otherwise; the dense enqueue's numbers must be 1..n per part) and
# each round prints nine rates with the floor at 1.00x, and the enqueue table
# one row of six rates a round. It never checks speed.
set -euo pipefail
script="$(dirname "$0")/../../bench/ceiling_log.sh"
args=(--clients 2 --transactions 20 --rounds 2 --enqueue-clients 3 --parts 4)
[[ -n "${PARTQ_TEST_DSN:-}" ]] && args+=(--dsn "$PARTQ_TEST_DSN")
out="$(bash "$script" "${args[@]}")"
echo "$out"
rows="$(grep -cE '^[12] +([0-9]+ \([0-9.]+x\) *){9}$' <<<"$out")" || true
[[ "$rows" == 2 ]] || { echo "FAIL: expected 2 round rows with 9 rates, got $rows" >&2; exit 1; }
rows="$(grep -cE '^e[12] +([0-9]+ \([0-9.]+x\) *){6}$' <<<"$out")" || true
[[ "$rows" == 2 ]] || { echo "FAIL: expected 2 enqueue rows with 6 rates, got $rows" >&2; exit 1; }
while read -r _ _ r1; do
  [[ "$r1" == "(1.00x)" ]] || { echo "FAIL: the floor is not 1.00x: $r1" >&2; exit 1; }
done < <(grep -E '^[12] ' <<<"$out" | awk '{print $1, $2, $3}')
# A subset, without the producers' table, planned generic, with the shapes
# only --shapes runs (log_segs, log_probe, log_books, log_cas, log_batches, log_one,
# delete_one, log_upd, log_upd_ends, log_upd_cas, log_upd_batches).
sub="$(bash "$script" "${args[@]}" \
       --shapes log_flight,delete_flight,log_segs,log_probe,log_books,log_cas,log_batches,log_one,delete_one,log_upd,log_upd_ends,log_upd_cas,log_upd_batches \
       --no-enqueue --generic)"
echo "$sub"
rows="$(grep -cE '^[12] +([0-9]+ \([0-9.]+x\) *){14}$' <<<"$sub")" || true
[[ "$rows" == 2 ]] || { echo "FAIL: --shapes: expected 2 round rows with 14 rates, got $rows" >&2; exit 1; }
! grep -q '^e[12] ' <<<"$sub" || { echo "FAIL: --no-enqueue ran the producers" >&2; exit 1; }
# A shape named twice is refused, not run twice.
if err="$(bash "$script" "${args[@]}" --shapes log_partq,log_partq --no-enqueue 2>&1)"; then
  echo "FAIL: --shapes log_partq,log_partq ran" >&2; exit 1
fi
grep -q "shape log_partq named twice" <<<"$err" || { echo "FAIL: no clear error: $err" >&2; exit 1; }
echo "ok"
