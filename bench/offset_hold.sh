#!/usr/bin/env bash
# Issue 47's question for an ack that writes one row per batch, as `log_floor`'s
# does (bench/ceiling_log.sh): what does a held snapshot do to it? Each client
# is one part's owner; its ack is one statement a batch of 100. Three shapes,
# each run alone for --seconds with a snapshot held from a third of the way in
# to the end (a REPEATABLE READ transaction that read a row, then sleeps):
#   offset  `log_floor`'s ack: the part's offset row UPDATEd in place (the new
#           version is HOT, but while the snapshot holds none can be pruned,
#           so the chain grows by one version a batch)
#   offset_ids  the same row also carrying the batch in flight, 100 ids (as
#           bench/ceiling_log.sh's log_upd record does): each version is about
#           900 bytes, not 40, so a page holds a few and the chain spills over
#           pages, each with an index entry of its own
#   record  partq's claim record since migration 9: the part's newest row
#           deleted and a new one inserted (the dead rows stay behind the
#           snapshot too, but a read finds the newest by the index's end)
# pgbench's progress every 5 s is printed as batches/s, so the rate before and
# during the hold can be read side by side.
#
# Usage: bench/offset_hold.sh [--dsn DSN] [--clients 4] [--seconds 90]
# Without --dsn it starts a throwaway PostgreSQL 15 (default settings, fsync on).
set -euo pipefail

dsn="" clients=4 seconds=90
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dsn) dsn="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "usage: $0 [--dsn DSN] [--clients N] [--seconds S]" >&2; exit 2 ;;
  esac
done
for v in "$clients" "$seconds"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "$0: counts must be positive integers, got '$v'" >&2; exit 2; }
done

# shellcheck source=bench/throwaway_pg.sh
source "$(dirname "$0")/throwaway_pg.sh"
work="$(mktemp -d /tmp/partq-offset-hold.XXXXXX)"
holder=""
cleanup() {
  [[ -z "$holder" ]] || kill "$holder" 2>/dev/null || true
  throwaway_pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
[[ -n "$dsn" ]] || throwaway_pg_start "$work"
s=partq_offset_hold
holder_name="partq_offset_hold_$$"
psql_q() { psql "$dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }

cat >"$work/offset.sql" <<SQL
UPDATE $s.offsets SET off = off + 100 WHERE part = :client_id;
SQL
cat >"$work/offset_ids.sql" <<SQL
UPDATE $s.offsets SET off = off + 100, ids = ARRAY(SELECT off + g FROM generate_series(1, 100) g)
WHERE part = :client_id;
SQL
cat >"$work/record.sql" <<SQL
WITH gone AS (DELETE FROM $s.records r WHERE r.part = :client_id
              AND r.seq = (SELECT max(seq) FROM $s.records WHERE part = :client_id)
              RETURNING r.off)
INSERT INTO $s.records (part, seq, off) SELECT :client_id, nextval('$s.seqs'), off + 100 FROM gone;
SQL

for shape in offset offset_ids record; do
  psql_q <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS $s CASCADE;
CREATE SCHEMA $s;
CREATE SEQUENCE $s.seqs;
CREATE TABLE $s.offsets (part int PRIMARY KEY, off bigint NOT NULL, ids bigint[] NOT NULL DEFAULT '{}');
CREATE TABLE $s.records (part int, seq bigint, off bigint NOT NULL, PRIMARY KEY (part, seq));
INSERT INTO $s.offsets SELECT p, 0 FROM generate_series(0, $clients - 1) p;
INSERT INTO $s.records SELECT p, nextval('$s.seqs'), 0 FROM generate_series(0, $clients - 1) p;
VACUUM ANALYZE $s.offsets, $s.records;
CHECKPOINT;
SQL
  hold_from=$((seconds / 3))
  (sleep "$hold_from"
   PGAPPNAME="$holder_name" psql "$dsn" -X -q -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
     -c "SELECT count(*) FROM $s.offsets" \
     -c "SELECT pg_sleep($seconds)" -c "COMMIT" >/dev/null 2>&1) &
  holder=$!
  echo "$shape: batches/s every 5 s, a snapshot held from ${hold_from} s"
  pgbench "$dsn" -n -M prepared -c "$clients" -j "$clients" -T "$seconds" -P 5 \
    -f "$work/$shape.sql" 2>&1 | sed -n 's/^progress: \([0-9.]*\) s, \([0-9.]*\) tps.*/  \1 s  \2/p'
  kill "$holder" 2>/dev/null || true
  wait "$holder" 2>/dev/null || true
  holder=""
  # End the held transaction's backend (its client is gone, its sleep is not)
  # before the next shape; by its name, so that no one else's session on a
  # shared server is touched.
  psql_q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = '$holder_name'" >/dev/null
done
psql_q -c "SET client_min_messages = warning; DROP SCHEMA $s CASCADE" >/dev/null
