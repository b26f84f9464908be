#!/usr/bin/env bash
# A held snapshot beside a steady load (issues 27 and 47): `partq bench --only steady` against
# the server at $DSN, a REPEATABLE READ snapshot held by a second session from HOLD_AT for
# HOLD_FOR seconds, and the queue's backlog and the size of its item storage (tables, their
# indexes and TOAST; not the bench's handler tables, bl_* and bench_*) sampled every SAMPLE
# seconds into $OUT/samples.txt.
# SYSTEM=pgq runs PgQ instead of partq, as `partq bench --systems pgq` runs it (one consumer, a
# tick every 10 ms), with the maintenance pgqd would do (`pgq.maint_operations()`: table
# rotation, vacuum of its own small tables) at every sample and the queue's rotation period
# set to ROTATION; its storage is its event tables, its backlog the consumer's pending events.
# Run by hand (minutes); results go to BENCHMARKS.md.
#   DSN='host=... dbname=...' bench/held_snapshot.sh
# Environment: DSN (required), PARTQ (default build/cli/partq), SYSTEM (partq or pgq), RATE
# (20000), SECS (240), HOLD_AT (60), HOLD_FOR (120), SAMPLE (10), OUT (/tmp/partq-held),
# VACUUM_INTERVAL (10: partq's table keeper; 0: autovacuum alone), ROTATION (PgQ's
# rotation_period, '10 seconds'; its default is 2 hours).
set -euo pipefail
: "${DSN:?set DSN to the server to measure (psql and partq must reach it)}"
PARTQ=${PARTQ:-build/cli/partq} SYSTEM=${SYSTEM:-partq}
RATE=${RATE:-20000} SECS=${SECS:-240} HOLD_AT=${HOLD_AT:-60} HOLD_FOR=${HOLD_FOR:-120}
SAMPLE=${SAMPLE:-10} OUT=${OUT:-/tmp/partq-held} VACUUM_INTERVAL=${VACUUM_INTERVAL:-10}
ROTATION=${ROTATION:-10 seconds}
case "$SYSTEM" in
  partq | pgq) ;;
  *) echo "held_snapshot.sh: SYSTEM is partq or pgq, not '$SYSTEM'" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
# What one sample reads: the backlog, then the item storage's bytes.
partq_sample="SELECT (SELECT count(*) FROM partq_bench.items),
    (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'partq_bench' AND c.relkind = 'r'
        AND c.relname NOT LIKE 'bl\_%' AND c.relname NOT LIKE 'bench\_%'),
    n_dead_tup, pg_relation_size('partq_bench.items'), pg_indexes_size('partq_bench.items'),
    vacuum_count + autovacuum_count
  FROM pg_stat_user_tables WHERE schemaname = 'partq_bench' AND relname = 'items'"
pgq_sample="SELECT (SELECT pending_events FROM pgq.get_consumer_info('partq_bench_pgq', 'bench')),
    (SELECT sum(pg_total_relation_size(c.oid)) FROM pgq.queue q, pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE q.queue_name = 'partq_bench_pgq' AND c.relkind = 'r'
        AND n.nspname || '.' || c.relname LIKE q.queue_data_pfx || '%'),
    (SELECT queue_cur_table FROM pgq.queue WHERE queue_name = 'partq_bench_pgq')"
# pgqd's round: the rotation period (the bench makes the queue anew at its start), then every
# maintenance call PgQ lists, each on its own (VACUUM cannot run in a transaction).
pgq_maintain="SELECT pgq.set_queue_config('partq_bench_pgq', 'rotation_period', '$ROTATION')
  FROM pgq.queue WHERE queue_name = 'partq_bench_pgq' \\g /dev/null
SELECT CASE WHEN func_name = 'vacuum' THEN format('VACUUM %s', func_arg)
            WHEN func_arg IS NULL THEN format('SELECT %s()', func_name)
            ELSE format('SELECT %s(%L)', func_name, func_arg) END
  FROM pgq.maint_operations() \\gexec"
if [ "$SYSTEM" = pgq ]; then
  header="t pending_events storage_bytes current_table" sample=$pgq_sample
  systems=(--systems pgq)
else
  header="t backlog storage_bytes dead_tup items_bytes index_bytes vacuums" sample=$partq_sample
  systems=()
fi
# One round: its numbers are the run's (later rounds would reset the queue).
"$PARTQ" bench --dsn "$DSN" --only steady "${systems[@]}" --rounds 1 --steady-rate "$RATE" \
  --steady-seconds "$SECS" --steady-sessions 4 --vacuum-interval "$VACUUM_INTERVAL" \
  >"$OUT/bench.txt" 2>&1 &
bench=$!
(sleep "$HOLD_AT"
 psql "$DSN" -q -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; SELECT pg_sleep($HOLD_FOR); COMMIT;" \
   >/dev/null 2>&1) &
t0=$(date +%s)
echo "$header" >"$OUT/samples.txt"
while kill -0 "$bench" 2>/dev/null; do
  if [ "$SYSTEM" = pgq ]; then
    psql "$DSN" -qAt -v ON_ERROR_STOP=0 >/dev/null 2>&1 <<<"$pgq_maintain" || true
  fi
  row=$(psql "$DSN" -qAtF' ' -c "$sample" 2>/dev/null || true)
  echo "$(($(date +%s) - t0)) $row" >>"$OUT/samples.txt"
  sleep "$SAMPLE"
done
wait "$bench"
cat "$OUT/samples.txt"
tail -3 "$OUT/bench.txt"
