#!/usr/bin/env bash
# The fleet-wide rate limit measured (issue 23): a 16-part queue limited to
# RATE items/s, drained by 1, 4 and 16 `partq worker` processes with churn
# (every CHURN seconds the oldest worker stops with SIGTERM and a new one
# starts), each run SECONDS long; prints the items acked in each 10 s window
# (from the record handler's acked_at) and its deviation from RATE.
# Usage: bench/rate.sh [RATE] [SECONDS] [CHURN]   with $PARTQ_DSN set (or libpq's PG*).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
partq="${PARTQ:-$root/build/cli/partq}"
rate="${1:-500}"
secs="${2:-40}"
churn="${3:-5}"
schema=partq_rate
psql_() { PGOPTIONS="-c client_min_messages=warning" psql "${PARTQ_DSN:-}" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }
for n in 1 4 16; do
  psql_ "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null
  "$partq" migrate --schema $schema >/dev/null
  "$partq" queue create r --parts 16 --session-ttl 4s --rate "${rate}/s" --schema $schema >/dev/null
  seq 1 $((rate * (secs + 10))) | "$partq" enqueue r --stdin --schema $schema >/dev/null 2>&1
  pids=()
  start_worker() {
    "$partq" worker r --schema $schema --handler record:effects --quiet --concurrency 2 &
    pids+=($!)
  }
  for ((i = 0; i < n; i++)); do start_worker; done
  t0=$(date +%s)
  while (($(date +%s) - t0 < secs)); do
    sleep "$churn"
    kill -TERM "${pids[0]}" 2>/dev/null || true
    wait "${pids[0]}" 2>/dev/null || true
    pids=("${pids[@]:1}")
    start_worker
  done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "workers=$n rate=${rate}/s churn every ${churn}s: items per 10 s window (the first window starts at the first ack)"
  psql_ "WITH b AS (SELECT min(acked_at) AS t0, max(acked_at) AS t1 FROM $schema.effects),
         w AS (SELECT floor(extract(epoch FROM e.acked_at - b.t0) / 10)::int AS k, count(*) AS n
               FROM $schema.effects e, b GROUP BY 1)
         SELECT format('  window %s: %s items (%s/s, %s%%)', k, n, round(n / 10.0), round(100.0 * (n / 10.0 - $rate) / $rate, 1))
         FROM w, b WHERE (k + 1) * 10 <= extract(epoch FROM b.t1 - b.t0) ORDER BY k"
done
psql_ "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null
