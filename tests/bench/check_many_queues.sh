#!/usr/bin/env bash
# bench/many_queues.sh with tiny sizes, against PARTQ_TEST_DSN (else its own server): both
# drain modes record every item exactly once (the script fails otherwise) and print a rate
# and a ratio per round; the quiet queue's samples all ran, beside a backlog that was still
# there; the idle part counts the connections of a worker of 3 queues. It never checks speed.
# Usage: tests/bench/check_many_queues.sh PARTQ_BINARY
set -euo pipefail
script="$(dirname "$0")/../../bench/many_queues.sh"
args=(--partq "${1:?usage: check_many_queues.sh PARTQ_BINARY}" --queues 3 --items 2000
      --rounds 2 --backlog 300000 --samples 10 --idle-queues 3 --idle-settle 3 --idle-window 5)
[[ -n "${PARTQ_TEST_DSN:-}" ]] && args+=(--dsn "$PARTQ_TEST_DSN")
out="$(bash "$script" "${args[@]}")"
echo "$out"
rows="$(grep -cE '^[12] +[0-9]+ +[0-9]+ +[0-9.]+x$' <<<"$out")" || true
[[ "$rows" == 2 ]] || { echo "FAIL: expected 2 round rows with two rates and a ratio, got $rows" >&2; exit 1; }
line="$(grep -E '^quiet queue beside 300000 busy items \(one process\): 10 samples, ' <<<"$out")" ||
  { echo "FAIL: no quiet-queue line with 10 samples" >&2; exit 1; }
left="${line##*after the last sample: }"
[[ "$left" =~ ^[0-9]+$ && "$left" -gt 0 ]] ||
  { echo "FAIL: the quiet samples were not taken beside a backlog (left: '$left')" >&2; exit 1; }
grep -qE '^idle: one worker of 3 empty queues: [1-9][0-9]* connections, [0-9.]+ transactions/s' <<<"$out" ||
  { echo "FAIL: no idle line for a worker of 3 queues" >&2; exit 1; }
echo "ok"
