#!/usr/bin/env bash
# Fair share by key measured (issue 23): one key with BIG items enqueued
# first, then KEYS keys with EACH items each, in a 16-part queue drained by
# WORKERS `partq worker` processes (`--handler record:effects`, concurrency 2,
# batch 100), with `--fair-by key` and without, alternated ROUNDS times on the
# same data. For each run: when the small keys were done (acks before the last
# small item's, in batches of 100, and seconds from the first ack) and the
# whole drain's throughput (items / (last ack - first ack), acked_at being the
# ack transaction's start).
# Usage: bench/fair.sh [BIG] [KEYS] [EACH] [ROUNDS] [WORKERS]   with $PARTQ_DSN set (or libpq's PG*).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
partq="${PARTQ:-$root/build/cli/partq}"
big="${1:-1000000}"
keys="${2:-100}"
each="${3:-100}"
rounds="${4:-2}"
workers="${5:-2}"
schema=partq_fair
psql_() { PGOPTIONS="-c client_min_messages=warning" psql "${PARTQ_DSN:-}" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }
run() {  # run FAIR_BY
  psql_ "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null
  "$partq" migrate --schema $schema >/dev/null
  "$partq" queue create f --parts 16 --fair-by "$1" --schema $schema >/dev/null
  # The big key first, then the small ones interleaved (item ids in that order).
  psql_ "SELECT count($schema.enqueue('f', 'b' || g, 'big')) FROM generate_series(1, $big) g" >/dev/null
  psql_ "SELECT count($schema.enqueue('f', 's' || g, 'k' || (g % $keys)))
         FROM generate_series(1, $keys * $each) g" >/dev/null
  psql_ "CREATE TABLE $schema.small AS SELECT id FROM $schema.items WHERE key <> 'big'" >/dev/null
  psql_ "VACUUM ANALYZE $schema.items" >/dev/null
  local pids=()
  for ((i = 0; i < workers; i++)); do
    "$partq" worker f --schema $schema --handler record:effects --quiet --concurrency 2 \
      --batch 100 &
    pids+=($!)
  done
  while [[ "$(psql_ "SELECT EXISTS (SELECT 1 FROM $schema.items)")" == t ]]; do sleep 1; done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql_ "WITH e AS (SELECT e.item_id, e.acked_at, s.id IS NOT NULL AS small,
                           row_number() OVER (ORDER BY e.acked_at, e.item_id) AS n
                    FROM $schema.effects e LEFT JOIN $schema.small s ON s.id = e.item_id),
              b AS (SELECT min(acked_at) AS t0, max(acked_at) AS t1, count(*) AS total FROM e),
              d AS (SELECT max(n) FILTER (WHERE small) AS n, max(acked_at) FILTER (WHERE small) AS t
                    FROM e)
         SELECT format('fair_by=%s items=%s: small keys done after %s acks (%s batches of 100), %s s; '
                       'big key items acked by then %s of %s; drain %s s, %s items/s',
                       '$1', b.total, d.n, round(d.n / 100.0, 1),
                       round(extract(epoch FROM d.t - b.t0)::numeric, 2),
                       d.n - $keys * $each, $big,
                       round(extract(epoch FROM b.t1 - b.t0)::numeric, 1),
                       round(b.total / extract(epoch FROM b.t1 - b.t0)::numeric))
         FROM b, d"
}
for ((r = 0; r < rounds; r++)); do
  run key
  run none
done
psql_ "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null
