#!/usr/bin/env bash
# A held snapshot beside a steady load (issue 27): `partq bench --only steady` against the
# server at $DSN, a REPEATABLE READ snapshot held by a second session from HOLD_AT for HOLD_FOR
# seconds, and the queue's backlog, dead tuples and sizes sampled every 10 s into $OUT.
# Run by hand (minutes); results go to BENCHMARKS.md.
#   DSN='host=... dbname=...' bench/held_snapshot.sh
# Environment: DSN (required), PARTQ (default build/cli/partq), RATE (20000), SECS (240),
# HOLD_AT (60), HOLD_FOR (120), OUT (/tmp/partq-held), VACUUM_INTERVAL (10: the consumers'
# table keeper; 0: autovacuum alone).
set -euo pipefail
: "${DSN:?set DSN to the server to measure (psql and partq must reach it)}"
PARTQ=${PARTQ:-build/cli/partq}
RATE=${RATE:-20000} SECS=${SECS:-240} HOLD_AT=${HOLD_AT:-60} HOLD_FOR=${HOLD_FOR:-120}
OUT=${OUT:-/tmp/partq-held} VACUUM_INTERVAL=${VACUUM_INTERVAL:-10}
mkdir -p "$OUT"
# One round: its numbers are the run's (later rounds would reset the queue).
"$PARTQ" bench --dsn "$DSN" --only steady --rounds 1 --steady-rate "$RATE" \
  --steady-seconds "$SECS" --steady-sessions 4 --vacuum-interval "$VACUUM_INTERVAL" \
  >"$OUT/bench.txt" 2>&1 &
bench=$!
(sleep "$HOLD_AT"
 psql "$DSN" -q -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; SELECT pg_sleep($HOLD_FOR); COMMIT;" \
   >/dev/null 2>&1) &
t0=$(date +%s)
echo "t backlog dead_tup live_tup items_bytes index_bytes vacuums" >"$OUT/samples.txt"
while kill -0 "$bench" 2>/dev/null; do
  row=$(psql "$DSN" -qAtF' ' -c "SELECT (SELECT count(*) FROM partq_bench.items), n_dead_tup,
          n_live_tup, pg_relation_size('partq_bench.items'), pg_indexes_size('partq_bench.items'),
          vacuum_count + autovacuum_count
        FROM pg_stat_user_tables WHERE schemaname = 'partq_bench' AND relname = 'items'" \
        2>/dev/null || true)
  echo "$(($(date +%s) - t0)) $row" >>"$OUT/samples.txt"
  sleep 10
done
wait "$bench"
cat "$OUT/samples.txt"
tail -3 "$OUT/bench.txt"
