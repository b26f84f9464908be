#!/usr/bin/env bash
# Which storage shape can pass `partq bench`'s strict floor? (issue 47)
#
# The floor deletes a pre-assigned id range and inserts the results in one
# statement. A queue whose ack deletes nothing appends items to a log and moves
# each part's position instead. This runs pgbench with the smallest SQL of
# each shape, one client per part, rounds interleaved, and prints each shape's
# rate as a ratio to the floor of the same round:
#
#   floor       one statement: DELETE the block + INSERT its results
#               (bench/ceiling.sh's floor; 1 round trip, reads no payload)
#   log_floor   one statement: read the part's next rows by a dense per-part
#               sequence, INSERT their results, UPDATE the part's offset row
#               (the shape issue 47 measured; 1 round trip; a dense per-part
#               sequence needs enqueues serialized per part, which partq's
#               producers are not)
#   log_partq   partq's hot path on a log, the round trips a worker makes
#               (and a BEGIN): the handler's INSERT of its results; then one
#               statement that fences the part (session_parts FOR SHARE at the
#               claimed epoch), replaces the part's record (the newest row
#               deleted, a new one inserted: never an update, so no chain of
#               versions builds behind a held snapshot) with the batch
#               finished and the next batch read from the log in (xid, id)
#               order within the part's window (pg_visible_in_snapshot against
#               the window's snapshot and the part's position, so a late
#               commit is never skipped), payloads returned, + COMMIT
#   log_horizon the same round trips and record as log_partq, but the next batch is a
#               plain range of the part's log in (xid, id) order below the horizon
#               pg_snapshot_xmin(pg_current_snapshot()), the oldest transaction
#               still writing: every row below it has committed or never will, so
#               one cursor is exact and no row needs a visibility test or a window
#               (the price: rows above a long-running writer wait for it to end)
#   log_mem     the log's next shape (docs/architecture.md): the part's window
#               and cursor live in the owner's memory (pgbench variables here,
#               set by \gset), so the ack statement writes no record: it fences
#               the part, appends one row listing the batch's ids to the part's
#               acks, and reads the next batch from the window after the cursor;
#               the handler's INSERT takes the ids from memory. pgbench allows no
#               \gset in a pipeline, so its COMMIT is a round trip of its own (one
#               more than log_partq's: against this shape)
#   log_dense   log_partq's round trips and record, but the log's rows carry a
#               dense per-part sequence (as log_floor's) and the next batch is
#               the plain range after the record's cursor: no window, no
#               visibility test, no xid list. What it costs producers (the
#               sequence is dense only if enqueues of a part commit in its
#               order, so each holds the part's head row until it commits) is
#               the second table, below
#   delete_partq  the same round trips with today's ack: the handler's
#               INSERT; then fence, DELETE the batch's rows by id, replace the
#               record, read the next batch by (part, id) from a cursor
#   log_flight, delete_flight  log_partq and delete_partq with the whole
#               transaction in one flight (BEGIN, the handler's INSERT, the
#               ack and the claim, COMMIT: one round trip a batch), as a
#               worker could send the writes of a handler whose answer it does
#               not need (record:TABLE) with the ack
#   log_segs    log_partq on a log partitioned into 4 segments (LIST by seg,
#               each a quarter of the round's ids), read through its parent
#               as the design's `log` is: what the segments cost a read that
#               does not name its segment (a generic plan starts every
#               segment's index scan). Only with --shapes.
#   log_probe   log_partq whose claim also probes `items` twice (its ready rows
#               and its next due time), as the design's claim must for what is
#               not a plain item, against an empty `items`: what the second
#               build's two probes per claimed part cost. Only with --shapes.
#   log_books   log_partq whose record's list of items in flight is rebuilt
#               by set operations (what was in flight, less what is acked
#               now, and what was read), as the second build's books were.
#               Only with --shapes.
#   log_cas     log_flight without the lock on the part's owner row
#               (session_parts FOR SHARE, which writes the row's lock into its
#               heap page every batch): the record's replacement is the fence,
#               a compare-and-set on the part's newest record at the claimed
#               epoch (a takeover that replaced it first leaves the DELETE
#               nothing, so nothing is inserted), as Kafka fences an offset
#               commit by the group's generation. What the lock costs. Only
#               with --shapes.
#   log_batches log_flight whose record keeps only the window and cursor: each
#               claim that reads items also inserts a row of its own listing
#               them (a batch in flight), and the batch's ack deletes that one
#               row (fenced as log_flight's), so several batches of a part may
#               be in flight and finish in any order without a list rebuilt
#               per batch: one insert and one delete a batch, none an item.
#               Only with --shapes.
#   log_one, delete_one  log_batches and delete_partq as one statement a
#               batch with no transaction block, the handler's rows written by
#               the ack statement from the ids it acks (as partq's ack takes a
#               handler's results): what one statement a batch, the floor's
#               count, buys each storage. Only with --shapes.
#   log_upd     log_one's one statement, but the part's record is one row
#               updated in place (as log_floor's offset row) that holds the
#               window, the cursor and the batch in flight, and there is no
#               batch row: the ack's rows are the record's ids before the
#               update. The one-row ack bench/offset_hold.sh measured beside a
#               held snapshot, with partq's window and fence. Only with --shapes.
#   log_upd_ends  log_upd whose record also keeps the ends of batches that
#               finished out of order (one pushed and one taken a batch), as
#               several batches of a part in flight would. Only with --shapes.
#   log_upd_cas log_upd without the owner row's lock: the record's update at
#               the claimed epoch is the fence (a takeover sets the record's
#               epoch first), as log_cas's. Only with --shapes.
#   log_upd_batches  log_upd whose record keeps only the window and cursor
#               (a row of a few dozen bytes, so a held snapshot's chain of its
#               versions stays short in pages: bench/offset_hold.sh), the batch
#               in flight a row of its own, as log_batches's. Only with --shapes.
#
# After the rounds, a second table: what a dense per-part sequence costs
# producers. --enqueue-clients clients (default 8) enqueue into --parts parts
# (default 16), each transaction one item, or 100 items; "free" inserts with
# an id from a sequence (the enqueue before migration 42 put keyless items
# so: a random part, or the 100 spread over every part; since, runs of 32 ids
# share a part), "dense" first locks the head row of each part it writes
# (in part order) and numbers its items from it, holding the row until it
# commits; "sticky" does the same but puts all of a transaction's keyless
# items into one part whose head no one holds (FOR UPDATE SKIP LOCKED from a
# random part on; it waits only when every head is held), as Kafka's sticky
# partitioner fills one partition per batch.
#
# Usage: bench/ceiling_log.sh [--dsn DSN] [--clients 4] [--batch 100]
#                             [--transactions 1500] [--rounds 3]
#                             [--enqueue-clients 8] [--parts 16]
#                             [--shapes floor,log_partq,...] [--no-enqueue]
#                             [--generic]
# (--shapes: which of the drain's shapes, floor always among them; --no-enqueue:
# not the producers' table; --generic: every shape's statements planned
# generic from their first run, as partq's plan guard has its own planned)
# Without --dsn it starts a throwaway PostgreSQL 15 (default settings, fsync
# on, as `partq bench` does) and removes it afterwards.
set -euo pipefail

dsn="" clients=4 batch=100 tx=1500 rounds=3 eclients=8 parts=16 only="" enqueue=1 generic=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shapes) only="$2"; shift 2 ;;
    --generic) generic=1; shift ;;
    --no-enqueue) enqueue=0; shift ;;
    --dsn) dsn="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --transactions) tx="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --enqueue-clients) eclients="$2"; shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    *) echo "usage: $0 [--dsn DSN] [--clients N] [--batch B] [--transactions T] [--rounds R]" \
            "[--enqueue-clients N] [--parts P] [--shapes S,S,...] [--no-enqueue] [--generic]" >&2
       exit 2 ;;
  esac
done
for v in "$clients" "$batch" "$tx" "$rounds" "$eclients" "$parts"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "$0: counts must be positive integers, got '$v'" >&2; exit 2; }
done

# shellcheck source=bench/throwaway_pg.sh
source "$(dirname "$0")/throwaway_pg.sh"
work="$(mktemp -d /tmp/partq-ceiling-log.XXXXXX)"
cleanup() {
  throwaway_pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "$dsn" ]]; then
  throwaway_pg_start "$work"
fi

psql_q() { psql "$dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }
per_part=$((tx * batch))
items=$((clients * per_part))
s=partq_ceiling_log

psql_q <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS $s CASCADE;
CREATE SCHEMA $s;
-- The floor's table and results (bench/baselines.cc).
CREATE TABLE $s.jobs (id bigint PRIMARY KEY, payload bytea NOT NULL,
  status smallint NOT NULL DEFAULT 0, enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE $s.results (item_id bigint NOT NULL, session_id uuid NOT NULL,
  acked_at timestamptz NOT NULL DEFAULT now());
CREATE SEQUENCE $s.blocks MINVALUE 0 START 0;
-- A log of items: appended, never updated or deleted (segments would be
-- truncated whole). seq is dense per part (log_floor only).
CREATE TABLE $s.log (queue text COLLATE "C" NOT NULL, part int NOT NULL, id bigint NOT NULL,
  seq bigint NOT NULL, xid xid8 NOT NULL DEFAULT pg_current_xact_id(), key text COLLATE "C",
  payload bytea NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX log_part ON $s.log (queue, part, xid, id);
CREATE INDEX log_seq ON $s.log (queue, part, seq);
-- log_segs's log: the same rows in 4 segments, read through the parent.
CREATE TABLE $s.seglog (seg int NOT NULL, queue text COLLATE "C" NOT NULL, part int NOT NULL,
  id bigint NOT NULL, seq bigint NOT NULL, xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  key text COLLATE "C", payload bytea NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now())
  PARTITION BY LIST (seg);
CREATE TABLE $s.seglog_0 PARTITION OF $s.seglog FOR VALUES IN (0);
CREATE TABLE $s.seglog_1 PARTITION OF $s.seglog FOR VALUES IN (1);
CREATE TABLE $s.seglog_2 PARTITION OF $s.seglog FOR VALUES IN (2);
CREATE TABLE $s.seglog_3 PARTITION OF $s.seglog FOR VALUES IN (3);
CREATE INDEX seglog_part ON $s.seglog (queue, part, xid, id);
CREATE TABLE $s.offsets (queue text COLLATE "C", part int, off bigint NOT NULL,
  PRIMARY KEY (queue, part));
-- session_parts (the fence) and the per-part record of log_partq.
CREATE TABLE $s.owners (queue text COLLATE "C", part int, epoch bigint NOT NULL,
  PRIMARY KEY (queue, part)) WITH (fillfactor = 50);
CREATE SEQUENCE $s.record_seq;
CREATE TABLE $s.records (queue text COLLATE "C", part int, seq bigint, epoch bigint NOT NULL,
  pos pg_snapshot NOT NULL, win pg_snapshot NOT NULL, read_xid xid8 NOT NULL,
  read_to bigint NOT NULL, ids bigint[] NOT NULL, ends bigint[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (queue, part, seq));
-- delete_partq's items, as partq's items table has them today.
CREATE TABLE $s.items (id bigint PRIMARY KEY, queue text COLLATE "C" NOT NULL, part int NOT NULL,
  key text COLLATE "C", priority smallint NOT NULL DEFAULT 0, payload bytea NOT NULL,
  enqueued_at timestamptz NOT NULL DEFAULT now(), run_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX items_ready ON $s.items (queue, part, priority, id);
-- log_batches's batches in flight: a row per claim that read items, deleted by its ack.
CREATE TABLE $s.batches (queue text COLLATE "C", part int, seq bigint, epoch bigint NOT NULL,
  ids bigint[] NOT NULL, PRIMARY KEY (queue, part, seq));
-- log_mem's acks: one row per acknowledged batch, never updated.
CREATE TABLE $s.acks (queue text COLLATE "C" NOT NULL, part int NOT NULL, epoch bigint NOT NULL,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(), ids bigint[] NOT NULL);
CREATE INDEX acks_part ON $s.acks (queue, part, xid);
-- The enqueue shapes' head rows: a part's next sequence number (dense only).
CREATE TABLE $s.heads (queue text COLLATE "C", part int, next bigint NOT NULL,
  PRIMARY KEY (queue, part)) WITH (fillfactor = 50);
CREATE SEQUENCE $s.ids;
SQL

cat >"$work/floor.sql" <<SQL
WITH b AS (SELECT nextval('$s.blocks') * $batch AS lo),
d AS (DELETE FROM $s.jobs j USING b WHERE j.id >= b.lo AND j.id < b.lo + $batch RETURNING j.id)
INSERT INTO $s.results (item_id, session_id) SELECT id, md5(:client_id::text)::uuid FROM d;
SQL
cat >"$work/log_floor.sql" <<SQL
WITH o AS (SELECT off FROM $s.offsets WHERE queue = 'q' AND part = :client_id),
b AS (SELECT l.id, l.seq FROM $s.log l, o WHERE l.queue = 'q' AND l.part = :client_id
      AND l.seq > o.off AND l.seq <= o.off + $batch),
r AS (INSERT INTO $s.results (item_id, session_id) SELECT id, md5(:client_id::text)::uuid FROM b),
u AS (UPDATE $s.offsets f SET off = (SELECT max(seq) FROM b) WHERE f.queue = 'q' AND f.part = :client_id)
SELECT count(*) FROM b;
SQL
# The window's bounds come from the record as scalar subqueries, so that they
# are the index scan's conditions (a join to the record would filter a scan of
# the part from its head).
# The handler's INSERT finds the batch claimed by the previous transaction in
# the part's newest record (a worker has the ids in memory; one index probe
# more here). The ack statement and the COMMIT go in one pipelined flight;
# the BEGIN is a round trip of its own here (pgbench ends each transaction
# in its script), where partq's COMMIT AND CHAIN begins the next: a little
# against these shapes.
# log_partq, log_horizon and log_dense differ only in how the read takes the part's rows after
# the cursor: $1 the log's column the cursor follows before the id (c1), $2 its condition,
# $3 further conditions, $4 the record's new cursor (read_xid, read_to); log_segs in the
# table read ($5, default log); log_probe and log_books: $6 probe or books; log_cas: $7 cas;
# log_batches: $6 batches.
log_shape() {
  local order="l.$1, l.id" held=records
  [[ "$1" == seq ]] && order="l.seq"  # dense: one row per number of a part
  [[ "${6:-}" == batches ]] && held=batches
  cat <<SQL
BEGIN;
INSERT INTO $s.results (item_id, session_id) SELECT unnest(r.ids), md5(:client_id::text)::uuid
  FROM (SELECT ids FROM $s.$held WHERE queue = 'q' AND part = :client_id ORDER BY seq DESC LIMIT 1) r;
\\startpipeline
WITH $(fence_cte "${7:-}"),$(batch_ack_cte "${6:-}")
cur AS (SELECT * FROM $s.records WHERE queue = 'q' AND part = :client_id ORDER BY seq DESC LIMIT 1),
gone AS (DELETE FROM $s.records r USING cur, f WHERE r.queue = 'q' AND r.part = :client_id
         AND r.seq = cur.seq AND r.epoch = f.epoch RETURNING r.*),
nxt AS (SELECT l.$1 AS c1, l.id, l.payload FROM $s.${5:-log} l
        WHERE l.queue = 'q' AND l.part = :client_id
          AND $2
          $3
        ORDER BY $order LIMIT $batch),
last AS (SELECT c1, id FROM nxt ORDER BY c1 DESC, id DESC LIMIT 1),$(probe_ctes "${6:-}")
rec AS (INSERT INTO $s.records (queue, part, seq, epoch, pos, win, read_xid, read_to, ids)
        SELECT 'q', :client_id, nextval('$s.record_seq'), g.epoch, g.pos, g.win, $4,
               $(record_ids "${6:-}") FROM gone g)$(batch_cte "${6:-}")
SELECT id, payload FROM nxt$(probe_rows "${6:-}");
COMMIT;
\\endpipeline
SQL
}
# The fence: the owner row locked at the claimed epoch, or (cas) only the
# claimed epoch, which the record's DELETE compares.
fence_cte() {
  if [[ "$1" == cas ]]; then
    echo "f AS (SELECT 1::bigint AS epoch)"
  else
    echo "f AS (SELECT epoch FROM $s.owners WHERE queue = 'q' AND part = :client_id AND epoch = 1 FOR SHARE)"
  fi
}
# log_batches: the ack deletes its batch's row (the part's newest here; a
# worker knows its batch's row), at the claimed epoch, and the claim inserts
# one for what it read.
batch_ack_cte() {
  [[ "$1" == batches ]] || return 0
  cat <<SQL

acked AS (DELETE FROM $s.batches b USING f WHERE b.queue = 'q' AND b.part = :client_id
          AND b.seq = (SELECT max(seq) FROM $s.batches WHERE queue = 'q' AND part = :client_id)
          AND b.epoch = f.epoch RETURNING b.ids),
SQL
}
# The claim's batch row, at the epoch of $2, the record's CTE (gone, or
# log_upd's upd).
batch_cte() {
  [[ "$1" == batches ]] || return 0
  cat <<SQL
,
batch AS (INSERT INTO $s.batches (queue, part, seq, epoch, ids)
          SELECT 'q', :client_id, nextval('$s.record_seq'), g.epoch, n.ids
          FROM ${2:-gone} g, (SELECT array_agg(id) AS ids FROM nxt) n WHERE n.ids IS NOT NULL)
SQL
}
# log_probe's two probes of items (its ready rows, its next due time), read
# by the statement's result (a :client_id < 0 that a generic plan cannot fold
# keeps the due time's probe running).
probe_ctes() {
  [[ "$1" == probe ]] || return 0
  cat <<SQL

held AS (SELECT i.id, i.payload FROM $s.items i WHERE i.queue = 'q' AND i.part = :client_id
           AND i.priority = 0 AND i.run_at <= now() ORDER BY i.queue, i.part, i.priority, i.id
           LIMIT $batch),
due AS (SELECT min(i.run_at) AS at FROM $s.items i WHERE i.queue = 'q' AND i.part = :client_id
          AND i.run_at > now()),
SQL
}
probe_rows() {
  [[ "$1" == probe ]] || return 0
  echo " UNION ALL SELECT id, payload FROM held UNION ALL SELECT 0, NULL FROM due WHERE :client_id < 0"
}
# The record's ids: what was read, or (log_books) what was in flight less
# what is acked now (the previous batch), and what was read.
record_ids() {
  if [[ "$1" == batches ]]; then
    echo "'{}'::bigint[]"
  elif [[ "$1" == books ]]; then
    echo "ARRAY(SELECT f FROM unnest(g.ids) f EXCEPT SELECT a FROM unnest(g.ids) a
                     UNION ALL SELECT id FROM nxt)"
  else
    echo "coalesce((SELECT array_agg(id) FROM nxt), '{}')"
  fi
}
windows_cursor="(l.xid, l.id) > ((SELECT read_xid FROM gone), (SELECT read_to FROM gone))"
windows_next="coalesce((SELECT c1 FROM last), g.read_xid), coalesce((SELECT id FROM last), g.read_to)"
log_shape xid "$windows_cursor" "AND l.xid < (SELECT pg_snapshot_xmax(win) FROM gone)
          AND pg_visible_in_snapshot(l.xid, (SELECT win FROM gone))
          AND NOT pg_visible_in_snapshot(l.xid, (SELECT pos FROM gone))" "$windows_next" >"$work/log_partq.sql"
log_shape xid "$windows_cursor" "AND l.xid < (SELECT pg_snapshot_xmax(win) FROM gone)
          AND pg_visible_in_snapshot(l.xid, (SELECT win FROM gone))
          AND NOT pg_visible_in_snapshot(l.xid, (SELECT pos FROM gone))" "$windows_next" seglog \
  >"$work/log_segs.sql"
windows_read="AND l.xid < (SELECT pg_snapshot_xmax(win) FROM gone)
          AND pg_visible_in_snapshot(l.xid, (SELECT win FROM gone))
          AND NOT pg_visible_in_snapshot(l.xid, (SELECT pos FROM gone))"
log_shape xid "$windows_cursor" "$windows_read" "$windows_next" log probe >"$work/log_probe.sql"
log_shape xid "$windows_cursor" "$windows_read" "$windows_next" log books >"$work/log_books.sql"
log_shape xid "$windows_cursor" "$windows_read" "$windows_next" log "" cas >"$work/log_cas_tx.sql"
log_shape xid "$windows_cursor" "$windows_read" "$windows_next" log batches >"$work/log_batches_tx.sql"
log_shape xid "$windows_cursor" "AND l.xid < pg_snapshot_xmin(pg_current_snapshot())" \
  "$windows_next" >"$work/log_horizon.sql"
# log_dense: the cursor (read_to) is the part's sequence, the read a range of log_seq after it.
log_shape seq "l.seq > (SELECT read_to FROM gone)" "" \
  "g.read_xid, coalesce((SELECT c1 FROM last), g.read_to)" >"$work/log_dense.sql"
cat >"$work/log_mem.sql" <<SQL
BEGIN;
INSERT INTO $s.results (item_id, session_id) SELECT unnest(:ids::bigint[]), md5(:client_id::text)::uuid;
WITH f AS (SELECT epoch FROM $s.owners WHERE queue = 'q' AND part = :client_id AND epoch = 1 FOR SHARE),
a AS (INSERT INTO $s.acks (queue, part, epoch, ids) SELECT 'q', :client_id, f.epoch, :ids::bigint[]
      FROM f WHERE cardinality(:ids::bigint[]) > 0),
nxt AS (SELECT l.xid, l.id, l.payload FROM $s.log l
        WHERE l.queue = 'q' AND l.part = :client_id
          AND (l.xid, l.id) > (:read_xid::xid8, :read_to)
          AND l.xid < pg_snapshot_xmax(:win::pg_snapshot)
          AND pg_visible_in_snapshot(l.xid, :win::pg_snapshot)
          AND NOT pg_visible_in_snapshot(l.xid, :pos::pg_snapshot)
        ORDER BY l.xid, l.id LIMIT $batch),
last AS (SELECT xid, id FROM nxt ORDER BY xid DESC, id DESC LIMIT 1)
SELECT coalesce((SELECT array_agg(id ORDER BY xid, id) FROM nxt), '{}') AS ids,
       coalesce((SELECT array_agg(payload) FROM nxt), '{}') AS payloads,
       coalesce((SELECT xid FROM last), :read_xid::xid8) AS read_xid,
       coalesce((SELECT id FROM last), :read_to) AS read_to
\gset
COMMIT;
SQL
cat >"$work/delete_partq.sql" <<SQL
BEGIN;
INSERT INTO $s.results (item_id, session_id) SELECT unnest(r.ids), md5(:client_id::text)::uuid
  FROM (SELECT ids FROM $s.records WHERE queue = 'q' AND part = :client_id ORDER BY seq DESC LIMIT 1) r;
\\startpipeline
WITH f AS (SELECT epoch FROM $s.owners WHERE queue = 'q' AND part = :client_id AND epoch = 1 FOR SHARE),
cur AS (SELECT * FROM $s.records WHERE queue = 'q' AND part = :client_id ORDER BY seq DESC LIMIT 1),
acked AS (DELETE FROM $s.items i USING f, cur WHERE i.id = ANY(cur.ids) RETURNING i.id),
gone AS (DELETE FROM $s.records r USING cur, f WHERE r.queue = 'q' AND r.part = :client_id
         AND r.seq = cur.seq RETURNING r.*),
nxt AS (SELECT i.id, i.payload FROM $s.items i, gone g
        WHERE i.queue = 'q' AND i.part = :client_id AND i.priority = 0 AND i.id > g.read_to
          AND i.id <> ALL(g.ids)
        ORDER BY i.queue, i.part, i.priority, i.id LIMIT $batch),
rec AS (INSERT INTO $s.records (queue, part, seq, epoch, pos, win, read_xid, read_to, ids)
        SELECT 'q', :client_id, nextval('$s.record_seq'), g.epoch, g.pos, g.win, g.read_xid,
               coalesce((SELECT max(id) FROM nxt), g.read_to),
               coalesce((SELECT array_agg(id) FROM nxt), '{}') FROM gone g)
SELECT id, payload FROM nxt;
COMMIT;
\\endpipeline
SQL
# One flight a batch: the pipeline begins before the BEGIN.
for sh in log_partq delete_partq log_cas_tx log_batches_tx; do
  { echo '\startpipeline'; grep -vx '\\startpipeline' "$work/$sh.sql"; } >"$work/${sh%_partq}_flight.sql"
done
mv "$work/log_cas_tx_flight.sql" "$work/log_cas.sql"
mv "$work/log_batches_tx_flight.sql" "$work/log_batches.sql"
# log_one, delete_one: log_batches and delete_partq as one statement a batch
# and no transaction block: the ack statement writes the handler's rows
# itself, from the ids it acks ($2: what each acked row gives), as partq's ack
# takes the results of a handler that answers with them. What one statement
# a batch, as the floor's, buys each storage.
one_statement() {
  awk -v res="$2" -v s="$s" '
    /^BEGIN;$/ || /^COMMIT;$/ || /^\\(start|end)pipeline$/ { next }
    /^INSERT INTO .*results/ { skip = 1 }
    skip { if ($0 ~ /;$/) skip = 0; next }
    /^SELECT id, payload FROM nxt/ {
      print ",\nres AS (INSERT INTO " s ".results (item_id, session_id) SELECT " res \
            ", md5(:client_id::text)::uuid FROM acked a)"
    }
    { print }' "$1"
}
one_statement "$work/log_batches_tx.sql" "unnest(a.ids)" >"$work/log_one.sql"
one_statement "$work/delete_partq.sql" "a.id" >"$work/delete_one.sql"
rm "$work/log_cas_tx.sql" "$work/log_batches_tx.sql"
# log_upd: one statement a batch, as log_one, but the part's record is one
# row updated in place (log_floor's offset row, with the window, the cursor
# and the batch in flight), not a row deleted and another inserted, and no
# batch row: the ack's rows are the record's ids before the update. What the
# one-row ack that bench/offset_hold.sh left open costs on the drain, with
# partq's window and fence. log_upd_ends: the same, the record also keeping
# the ends of batches finished out of order (one pushed and one taken a
# batch), as several batches of a part in flight would need.
log_upd() {
  local ends="" ids="" acked=upd ret="RETURNING cur.ids"
  if [[ "${1:-}" == ends ]]; then
    ends=",
            ends = array_remove(r.ends, cur.read_to) || coalesce((SELECT id FROM last), cur.read_to)"
  fi
  if [[ "${1:-}" == batches ]]; then
    acked=acked ret="RETURNING r.epoch"  # the ids come from the batch row batch_ack_cte deletes
  else
    ids="
            ids = coalesce((SELECT array_agg(id) FROM nxt), '{}'),"
  fi
  cat <<SQL
WITH $(fence_cte "${1:-}"),$(batch_ack_cte "${1:-}")
cur AS (SELECT * FROM $s.records WHERE queue = 'q' AND part = :client_id),
nxt AS (SELECT l.xid, l.id, l.payload FROM $s.log l
        WHERE l.queue = 'q' AND l.part = :client_id
          AND (l.xid, l.id) > ((SELECT read_xid FROM cur), (SELECT read_to FROM cur))
          AND l.xid < (SELECT pg_snapshot_xmax(win) FROM cur)
          AND pg_visible_in_snapshot(l.xid, (SELECT win FROM cur))
          AND NOT pg_visible_in_snapshot(l.xid, (SELECT pos FROM cur))
        ORDER BY l.xid, l.id LIMIT $batch),
last AS (SELECT xid, id FROM nxt ORDER BY xid DESC, id DESC LIMIT 1),
upd AS (UPDATE $s.records r
        SET $ids
            read_xid = coalesce((SELECT xid FROM last), cur.read_xid),
            read_to = coalesce((SELECT id FROM last), cur.read_to)$ends
        FROM cur, f WHERE r.queue = 'q' AND r.part = :client_id AND r.epoch = f.epoch
        $ret)$(batch_cte "${1:-}" upd),
res AS (INSERT INTO $s.results (item_id, session_id)
        SELECT unnest(a.ids), md5(:client_id::text)::uuid FROM $acked a)
SELECT id, payload FROM nxt;
SQL
}
log_upd >"$work/log_upd.sql"
log_upd ends >"$work/log_upd_ends.sql"
log_upd cas >"$work/log_upd_cas.sql"
log_upd batches >"$work/log_upd_batches.sql"

# Fresh tables for one shape, right after a checkpoint; items enqueued in
# transactions of 10,000 (so the log's xids vary as a producer's would).
setup() {
  psql_q -o /dev/null <<SQL
TRUNCATE $s.jobs, $s.results, $s.log, $s.seglog, $s.offsets, $s.owners, $s.records, $s.items,
  $s.acks, $s.batches;
SELECT setval('$s.blocks', 0, false);
INSERT INTO $s.owners SELECT 'q', p, 1 FROM generate_series(0, $clients - 1) p;
SQL
  case "$1" in
    floor) psql_q -o /dev/null -c "INSERT INTO $s.jobs (id, payload) SELECT g, convert_to(g::text, 'UTF8') FROM generate_series(0, $items - 1) g" ;;
    log_*)
      local into="$s.log (queue, part, id, seq, payload) SELECT"
      # log_segs: each quarter of the ids in a segment of its own.
      [[ "$1" == log_segs ]] && into="$s.seglog (seg, queue, part, id, seq, payload) SELECT least(3, g * 4 / $items),"
      for ((lo = 0; lo < items; lo += 10000)); do
        echo "INSERT INTO $into 'q', g % $clients, g, g / $clients + 1, convert_to(g::text, 'UTF8') FROM generate_series($lo, least($lo + 9999, $items - 1)) g;"
      done | psql_q -o /dev/null
      psql_q -o /dev/null <<SQL
INSERT INTO $s.offsets SELECT 'q', p, 0 FROM generate_series(0, $clients - 1) p;
INSERT INTO $s.records SELECT 'q', p, nextval('$s.record_seq'), 1, '1:1:', pg_current_snapshot(),
  '0', -1, '{}', '{}' FROM generate_series(0, $clients - 1) p;
SQL
      ;;
    delete_*)
      psql_q -o /dev/null <<SQL
INSERT INTO $s.items (id, queue, part, payload) SELECT g, 'q', g % $clients, convert_to(g::text, 'UTF8') FROM generate_series(0, $items - 1) g;
INSERT INTO $s.records SELECT 'q', p, nextval('$s.record_seq'), 1, '1:1:', '1:1:', '0', -1, '{}', '{}' FROM generate_series(0, $clients - 1) p;
SQL
      ;;
  esac
  psql_q -o /dev/null -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

# Runs one shape; prints its items/s and checks every item got exactly one result.
run() {
  local shape="$1" out tps
  setup "$shape"
  # The 2-round-trip shapes claim their first batch in their first transaction.
  local t="$tx" vars=()
  if [[ "$shape" == *_partq || "$shape" == *_flight || "$shape" == log_horizon || "$shape" == log_mem ||
        "$shape" == log_dense || "$shape" == log_segs || "$shape" == log_probe ||
        "$shape" == log_books || "$shape" == log_cas || "$shape" == log_batches ||
        "$shape" == *_one || "$shape" == log_upd* ]]; then
    t=$((tx + 1))
  fi
  if [[ "$shape" == log_mem ]]; then
    # The window every part starts with: all of the log (the records' win).
    vars=(-D "win=$(psql_q -At -c "SELECT win FROM $s.records LIMIT 1")" -D "pos=1:1:"
          -D "read_xid=0" -D "read_to=-1" -D "ids={}")
  fi
  local options="${PGOPTIONS:-}"
  ((generic)) && options+=" -c plan_cache_mode=force_generic_plan"
  out="$(PGOPTIONS="$options" pgbench "$dsn" -n -M prepared -c "$clients" -j "$clients" -t "$t" \
         "${vars[@]}" -f "$work/$shape.sql" 2>&1)" || {
    echo "$0: pgbench $shape failed:" >&2; echo "$out" >&2; exit 1; }
  tps="$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")"
  [[ -n "$tps" ]] || { echo "$0: no tps in pgbench output:" >&2; echo "$out" >&2; exit 1; }
  local got
  got="$(psql_q -At -c "SELECT count(*) || ' ' || count(DISTINCT item_id) FROM $s.results")"
  [[ "$got" == "$items $items" ]] || { echo "$0: $shape wrote results '$got', not $items once each" >&2; exit 1; }
  awk -v t="$tps" -v b="$batch" -v n="$tx" -v m="$t" 'BEGIN { printf "%.0f", t * b * n / m }'
}

shapes=(floor log_floor log_partq log_flight log_mem log_horizon log_dense delete_partq delete_flight)
if [[ -n "$only" ]]; then
  IFS=, read -r -a picked <<<"$only"
  shapes=(floor)
  for sh in "${picked[@]}"; do
    [[ -f "$work/$sh.sql" ]] || {
      echo "$0: no shape $sh" >&2; exit 2; }
    [[ " ${shapes[*]} " != *" $sh "* || "$sh" == floor ]] || {
      echo "$0: shape $sh named twice in --shapes" >&2; exit 2; }
    [[ "$sh" == floor ]] || shapes+=("$sh")
  done
fi
echo "clients=$clients batch=$batch items/round=$items rounds=$rounds"
printf '%-6s' round; for sh in "${shapes[@]}"; do printf ' %20s' "$sh"; done; echo
for ((r = 1; r <= rounds; r++)); do
  declare -A rate=()
  for ((k = 0; k < ${#shapes[@]}; k++)); do
    sh="${shapes[$(((k + r - 1) % ${#shapes[@]}))]}"
    rate[$sh]="$(run "$sh")"
  done
  printf '%-6s' "$r"
  for sh in "${shapes[@]}"; do
    printf ' %12s (%4.2fx)' "${rate[$sh]}" "$(awk -v a="${rate[$sh]}" -v b="${rate[floor]}" 'BEGIN { print a / b }')"
  done
  echo
  unset rate
done
echo "items/s; ratios to the floor of the same round"

((enqueue)) || { psql_q -c "SET client_min_messages = warning; DROP SCHEMA $s CASCADE" >/dev/null; exit 0; }

# What a dense sequence costs producers: transactions of one item or of 100
# items over every part, "free" (ids from a sequence, no lock: today's
# enqueue) against "dense" (each part's head row locked in part order, its
# items numbered from it, the rows held until COMMIT).
ebatch=100
etx1="$tx" etx100=$(((tx + 9) / 10))
cat >"$work/enq_free_1.sql" <<SQL
\set p random(0, $((parts - 1)))
BEGIN;
INSERT INTO $s.log (queue, part, id, seq, payload) VALUES ('q', :p, nextval('$s.ids'), 0, 'x');
COMMIT;
SQL
cat >"$work/enq_dense_1.sql" <<SQL
\set p random(0, $((parts - 1)))
BEGIN;
WITH h AS (UPDATE $s.heads SET next = next + 1 WHERE queue = 'q' AND part = :p RETURNING next)
INSERT INTO $s.log (queue, part, id, seq, payload) SELECT 'q', :p, nextval('$s.ids'), h.next, 'x' FROM h;
COMMIT;
SQL
cat >"$work/enq_free_$ebatch.sql" <<SQL
BEGIN;
INSERT INTO $s.log (queue, part, id, seq, payload)
  SELECT 'q', (g + :client_id) % $parts, nextval('$s.ids'), 0, 'x' FROM generate_series(1, $ebatch) g;
COMMIT;
SQL
cat >"$work/enq_dense_$ebatch.sql" <<SQL
BEGIN;
SELECT count(*) FROM (SELECT 1 FROM $s.heads WHERE queue = 'q' AND part IN
  (SELECT (g + :client_id) % $parts FROM generate_series(1, $ebatch) g) ORDER BY part FOR UPDATE) locked;
WITH b AS (SELECT g, (g + :client_id) % $parts AS part FROM generate_series(1, $ebatch) g),
n AS (SELECT part, count(*) AS c FROM b GROUP BY part),
h AS (UPDATE $s.heads f SET next = f.next + n.c FROM n WHERE f.queue = 'q' AND f.part = n.part
      RETURNING f.part, f.next - n.c AS first),
r AS (SELECT part, row_number() OVER (PARTITION BY part ORDER BY g) AS rn FROM b)
INSERT INTO $s.log (queue, part, id, seq, payload)
  SELECT 'q', r.part, nextval('$s.ids'), h.first + r.rn, 'x' FROM r JOIN h USING (part);
COMMIT;
SQL

# sticky: the first free head from a random part on (when every head is held,
# the UPDATE waits for the random part's), all the transaction's items
# numbered from it.
sticky() {
  cat <<SQL
\set r random(0, $((parts - 1)))
BEGIN;
WITH free AS (SELECT part FROM $s.heads WHERE queue = 'q' ORDER BY (part - :r + $parts) % $parts
              FOR UPDATE SKIP LOCKED LIMIT 1),
c AS (SELECT part FROM free UNION ALL SELECT :r WHERE NOT EXISTS (SELECT 1 FROM free)),
h AS (UPDATE $s.heads f SET next = f.next + $1 FROM c WHERE f.queue = 'q' AND f.part = c.part
      RETURNING f.part, f.next - $1 AS first)
INSERT INTO $s.log (queue, part, id, seq, payload)
  SELECT 'q', h.part, nextval('$s.ids'), h.first + g, 'x' FROM h, generate_series(1, $1) g;
COMMIT;
SQL
}
sticky 1 >"$work/enq_sticky_1.sql"
sticky "$ebatch" >"$work/enq_sticky_$ebatch.sql"

# Runs one enqueue shape ($1: free, dense or sticky, $2: items a transaction)
# into empty tables; prints its items/s and checks the rows (dense and sticky:
# 1..n per part).
enq_run() {
  local shape="enq_$1_$2" t="$etx1" out tps got
  [[ "$2" == 1 ]] || t="$etx100"
  psql_q -o /dev/null <<SQL
TRUNCATE $s.log, $s.heads;
INSERT INTO $s.heads SELECT 'q', p, 0 FROM generate_series(0, $parts - 1) p;
VACUUM ANALYZE $s.log, $s.heads;
CHECKPOINT;
SQL
  out="$(pgbench "$dsn" -n -M prepared -c "$eclients" -j "$eclients" -t "$t" -f "$work/$shape.sql" 2>&1)" || {
    echo "$0: pgbench $shape failed:" >&2; echo "$out" >&2; exit 1; }
  tps="$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")"
  [[ -n "$tps" ]] || { echo "$0: no tps in pgbench output:" >&2; echo "$out" >&2; exit 1; }
  got="$(psql_q -At -c "SELECT count(*) FROM $s.log")"
  [[ "$got" == $((eclients * t * $2)) ]] || { echo "$0: $shape wrote $got rows, not $((eclients * t * $2))" >&2; exit 1; }
  if [[ "$1" != free ]]; then
    got="$(psql_q -At -c "SELECT count(*) FROM (SELECT part FROM $s.log GROUP BY part
             HAVING count(*) <> max(seq) OR count(DISTINCT seq) <> count(*) OR min(seq) <> 1) gaps")"
    [[ "$got" == 0 ]] || { echo "$0: $shape left $got parts with a sequence not dense" >&2; exit 1; }
  fi
  awk -v t="$tps" -v n="$2" 'BEGIN { printf "%.0f", t * n }'
}

echo "enqueue: clients=$eclients parts=$parts; items/s, dense and sticky as ratios to free of the same round"
enq=(free_1 dense_1 sticky_1 "free_$ebatch" "dense_$ebatch" "sticky_$ebatch")
printf '%-6s' round; for e in "${enq[@]}"; do printf ' %20s' "$e"; done; echo
for ((r = 1; r <= rounds; r++)); do
  declare -A rate=()
  for ((k = 0; k < ${#enq[@]}; k++)); do
    e="${enq[$(((k + r - 1) % ${#enq[@]}))]}"
    rate[$e]="$(enq_run "${e%_*}" "${e##*_}")"
  done
  printf '%-6s' "e$r"
  for e in "${enq[@]}"; do
    printf ' %12s (%4.2fx)' "${rate[$e]}" "$(awk -v a="${rate[$e]}" -v b="${rate[free_${e##*_}]}" 'BEGIN { print a / b }')"
  done
  echo
  unset rate
done
psql_q -c "SET client_min_messages = warning; DROP SCHEMA $s CASCADE" >/dev/null
