#!/usr/bin/env bash
# An ordered queue beside a held snapshot (issue 47's "ordered queues stop"): keyed items
# enqueued at RATE items/s (KEYS keys, `enqueue_many` of BATCH payloads, pgbench -R) into an
# ordered queue of PARTS parts drained by WORKERS `partq worker --handler record:effects`; a
# REPEATABLE READ snapshot held by another session from HOLD_AT for HOLD_FOR seconds; every
# 5 s the items done (rows in effects), the rate since the last sample and the backlog.
# Run by hand (minutes) against a server of your own; it creates and drops database $DB there.
#   DSN='host=127.0.0.1 port=5499 user=postgres' bench/held_snapshot_ordered.sh
# Environment: DSN (required: a superuser connection, without dbname), PARTQ (build/cli/partq),
# DB (partq_held_ordered), RATE (5000), KEYS (997), PARTS (16), WORKERS (2), BATCH (100),
# SECS (200), HOLD_AT (40), HOLD_FOR (60), OUT (/tmp/partq-held-ordered), DB_SQL (statements
# run on the new database first, e.g. ALTER DATABASE settings for auto_explain), QUEUE_FLAGS
# (--ordered; e.g. '--fair-by key' or '--key-concurrency 2' for the other keyed queues, or
# '' for a plain one), WORKER_FLAGS (none; e.g. --poll-only), SAMPLE (stats; or count, below).
set -euo pipefail
: "${DSN:?set DSN to a superuser connection of the server to measure (no dbname)}"
PARTQ=${PARTQ:-build/cli/partq} DB=${DB:-partq_held_ordered}
RATE=${RATE:-5000} KEYS=${KEYS:-997} PARTS=${PARTS:-16} WORKERS=${WORKERS:-2} BATCH=${BATCH:-100}
SECS=${SECS:-200} HOLD_AT=${HOLD_AT:-40} HOLD_FOR=${HOLD_FOR:-60}
QUEUE_FLAGS=${QUEUE_FLAGS---ordered} WORKER_FLAGS=${WORKER_FLAGS:-}
OUT=${OUT:-/tmp/partq-held-ordered}
mkdir -p "$OUT"
psql "$DSN dbname=postgres" -q -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
dsn="$DSN dbname=$DB"
if [[ -n "${DB_SQL:-}" ]]; then psql "$dsn" -q -c "$DB_SQL"; fi
"$PARTQ" migrate --dsn "$dsn" >/dev/null
# shellcheck disable=SC2086 # the flags are words
"$PARTQ" queue create oq --parts "$PARTS" $QUEUE_FLAGS --dsn "$dsn" >/dev/null
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
for ((w = 0; w < WORKERS; w++)); do
  # shellcheck disable=SC2086 # the flags are words
  "$PARTQ" worker oq --handler record:effects $WORKER_FLAGS --dsn "$dsn" >"$OUT/worker$w.log" 2>&1 &
  pids+=($!)
done
cat >"$OUT/enqueue.sql" <<EOF
SELECT count(*) FROM partq.enqueue_many('oq',
  array_fill('x'::text, ARRAY[$BATCH]),
  (SELECT array_agg('k' || floor(random() * $KEYS)::int) FROM generate_series(1, $BATCH)));
EOF
sleep 2
pgbench "$dsn" -n -f "$OUT/enqueue.sql" -R $((RATE / BATCH)) -T "$SECS" -c 2 -j 1 \
  >"$OUT/pgbench.txt" 2>&1 &
pids+=($!)
(sleep "$HOLD_AT"
 psql "$dsn" -q -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;
   SELECT pg_sleep($HOLD_FOR); COMMIT;" >/dev/null 2>&1) &
pids+=($!)
# SAMPLE=stats (the default): done and backlog from the server's cumulative counts of the
# effects inserted and the items inserted and deleted (each backend reports them about once a
# second while busy, so the backlog read so is off by up to a second of work either way), which
# cost nothing; SAMPLE=count (the runs before 2026-12-06): counted,
# a scan of `effects` and one of `items` every 5 s, which beside a hold read every dead row it
# keeps and took a growing share of the 2 cores (most of a second a sample at the end).
if [[ "${SAMPLE:-stats}" == count ]]; then
  SAMPLE_SQL="SELECT (SELECT count(*) FROM partq.effects),
      (SELECT count(*) FROM partq.items WHERE queue = 'oq')"
else
  SAMPLE_SQL="SELECT (SELECT n_tup_ins FROM pg_stat_user_tables
                      WHERE schemaname = 'partq' AND relname = 'effects'),
      (SELECT n_tup_ins - n_tup_del FROM pg_stat_user_tables
       WHERE schemaname = 'partq' AND relname = 'items')"
fi
echo "t done per_s backlog" | tee "$OUT/samples.txt"
# per_s: items done since the last sample over the time since it (a sample's own queries make
# the interval longer than 5 s under load).
t0=$(date +%s.%N) last=0 last_t=$t0
while awk -v n="$(date +%s.%N)" -v t="$t0" -v s="$SECS" 'BEGIN { exit !(n - t < s + 5) }'; do
  sleep 5
  row=$(psql "$dsn" -qAt -c "$SAMPLE_SQL" 2>/dev/null || echo "0|0")
  now=$(date +%s.%N)
  done_=${row%%|*} backlog=${row##*|}
  awk -v n="$now" -v t="$t0" -v l="$last_t" -v d="$done_" -v p="$last" -v b="$backlog" \
    'BEGIN { printf "%d %d %.0f %d\n", n - t, d, (d - p) / (n - l), b }' | tee -a "$OUT/samples.txt"
  last=$done_ last_t=$now
done
# Exactly once, counted at the end: every item recorded once, none twice.
psql "$dsn" -qAt -c "SELECT 'effects: ' || count(*) || ' rows, ' || count(DISTINCT item_id)
  || ' items; items left: ' || (SELECT count(*) FROM partq.items) FROM partq.effects" |
  tee -a "$OUT/samples.txt"
