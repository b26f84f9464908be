#!/usr/bin/env bash
# How close can *any* queue on PostgreSQL get to `partq bench`'s floor?
#
# The floor deletes a pre-assigned id range and inserts the results in one
# statement, and never reads an item. A queue must at least hand each item's
# payload to a handler, and (for exactly-once with the handler's writes) ack in
# the handler's transaction. This runs pgbench on the same tables as the
# bench's baselines with the smallest SQL for each of those shapes, no
# coordination at all (each transaction takes the next id block from a
# sequence), rounds interleaved, and prints each shape's rate as a ratio to the
# floor of the same round:
#
#   floor        one statement: DELETE the block + INSERT its results (1 round trip)
#   deliver      the same statement also returns the payloads (1 round trip;
#                not a valid queue: it acks before any handler ran)
#   handler_tx   read the block's payloads (1), then BEGIN; INSERT results;
#                DELETE; COMMIT as one compound request (1): 2 round trips,
#                the least for "handler writes commit with the ack"
#   handler_3rt  the same statements in 3 round trips (read; BEGIN + INSERT;
#                DELETE + COMMIT), as many as a partq worker makes per batch
#
# floor and deliver use prepared statements; handler_tx needs the simple
# protocol for its compound request, so the floor is run that way too and
# handler_tx and handler_3rt are compared with that one.
#
# Usage: bench/ceiling.sh [--dsn DSN] [--clients 4] [--batch 100]
#                         [--transactions 1500] [--rounds 3]
# Without --dsn it starts a throwaway PostgreSQL 15 (default settings, fsync
# on, as `partq bench` does) and removes it afterwards.
set -euo pipefail

dsn="" clients=4 batch=100 tx=1500 rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dsn) dsn="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --transactions) tx="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "usage: $0 [--dsn DSN] [--clients N] [--batch B] [--transactions T] [--rounds R]" >&2
       exit 2 ;;
  esac
done
for v in "$clients" "$batch" "$tx" "$rounds"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "$0: counts must be positive integers, got '$v'" >&2; exit 2; }
done

# shellcheck source=bench/throwaway_pg.sh
source "$(dirname "$0")/throwaway_pg.sh"
work="$(mktemp -d /tmp/partq-ceiling.XXXXXX)"
cleanup() {
  throwaway_pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "$dsn" ]]; then
  throwaway_pg_start "$work"
fi

psql_q() { psql "$dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }
items=$((clients * tx * batch))

# The bench's baseline tables (bench/baselines.cc), in a schema of our own.
psql_q <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS partq_ceiling CASCADE;
CREATE SCHEMA partq_ceiling;
CREATE TABLE partq_ceiling.jobs (
  id          bigint PRIMARY KEY,
  payload     bytea NOT NULL,
  status      smallint NOT NULL DEFAULT 0,
  enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE partq_ceiling.results (
  item_id     bigint NOT NULL,
  session_id  uuid NOT NULL,
  acked_at    timestamptz NOT NULL DEFAULT now());
CREATE SEQUENCE partq_ceiling.blocks MINVALUE 0 START 0;
SQL

s=partq_ceiling
cat >"$work/floor.sql" <<SQL
WITH b AS (SELECT nextval('$s.blocks') * $batch AS lo),
d AS (DELETE FROM $s.jobs j USING b WHERE j.id >= b.lo AND j.id < b.lo + $batch RETURNING j.id)
INSERT INTO $s.results (item_id, session_id) SELECT id, md5(:client_id::text)::uuid FROM d;
SQL
cat >"$work/deliver.sql" <<SQL
WITH b AS (SELECT nextval('$s.blocks') * $batch AS lo),
d AS (DELETE FROM $s.jobs j USING b WHERE j.id >= b.lo AND j.id < b.lo + $batch
      RETURNING j.id, j.payload),
r AS (INSERT INTO $s.results (item_id, session_id) SELECT id, md5(:client_id::text)::uuid FROM d)
SELECT id, payload FROM d;
SQL
cat >"$work/handler_tx.sql" <<SQL
WITH b AS (SELECT nextval('$s.blocks') * $batch AS lo) SELECT b.lo AS lo, j.id, j.payload FROM b LEFT JOIN $s.jobs j ON j.id >= b.lo AND j.id < b.lo + $batch \\aset
BEGIN \\; INSERT INTO $s.results (item_id, session_id) SELECT g, md5(:client_id::text)::uuid FROM generate_series(:lo, :lo + $batch - 1) g \\; DELETE FROM $s.jobs WHERE id >= :lo AND id < :lo + $batch \\; COMMIT;
SQL
cat >"$work/handler_3rt.sql" <<SQL
WITH b AS (SELECT nextval('$s.blocks') * $batch AS lo) SELECT b.lo AS lo, j.id, j.payload FROM b LEFT JOIN $s.jobs j ON j.id >= b.lo AND j.id < b.lo + $batch \\aset
BEGIN \\; INSERT INTO $s.results (item_id, session_id) SELECT g, md5(:client_id::text)::uuid FROM generate_series(:lo, :lo + $batch - 1) g;
DELETE FROM $s.jobs WHERE id >= :lo AND id < :lo + $batch \\; COMMIT;
SQL

# Runs one shape from fresh tables, right after a checkpoint (as the bench's
# drains do); prints its items/s.
run() {
  local script="$1" mode="$2"
  psql_q -o /dev/null <<SQL
TRUNCATE $s.jobs, $s.results;
SELECT setval('$s.blocks', 0, false);
INSERT INTO $s.jobs (id, payload) SELECT g, convert_to(g::text, 'UTF8') FROM generate_series(0, $items - 1) g;
VACUUM ANALYZE $s.jobs;
CHECKPOINT;
SQL
  local out tps
  out="$(pgbench "$dsn" -n -M "$mode" -c "$clients" -j "$clients" -t "$tx" -f "$work/$script.sql" 2>&1)" || {
    echo "$0: pgbench $script failed:" >&2; echo "$out" >&2; exit 1; }
  tps="$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")"
  [[ -n "$tps" ]] || { echo "$0: no tps in pgbench output:" >&2; echo "$out" >&2; exit 1; }
  local left
  left="$(psql_q -At -c "SELECT count(*) FROM $s.jobs")"
  [[ "$left" == 0 ]] || { echo "$0: $script left $left items" >&2; exit 1; }
  awk -v t="$tps" -v b="$batch" 'BEGIN { printf "%.0f", t * b }'
}

shapes=(floor:prepared deliver:prepared floor:simple handler_tx:simple handler_3rt:simple)
echo "clients=$clients batch=$batch items/round=$items rounds=$rounds"
printf '%-6s' round; for sh in "${shapes[@]}"; do printf ' %20s' "$sh"; done; echo
for ((r = 1; r <= rounds; r++)); do
  declare -A rate=()
  # Rotate the order per round so no shape always runs first.
  for ((k = 0; k < ${#shapes[@]}; k++)); do
    sh="${shapes[$(((k + r - 1) % ${#shapes[@]}))]}"
    rate[$sh]="$(run "${sh%%:*}" "${sh##*:}")"
  done
  printf '%-6s' "$r"
  for sh in "${shapes[@]}"; do
    base="${rate[floor:${sh##*:}]}"
    printf ' %12s (%4.2fx)' "${rate[$sh]}" "$(awk -v a="${rate[$sh]}" -v b="$base" 'BEGIN { print a / b }')"
  done
  echo
  unset rate
done
echo "items/s; ratios to the floor of the same round and protocol"
psql_q -c "SET client_min_messages = warning; DROP SCHEMA partq_ceiling CASCADE" >/dev/null
