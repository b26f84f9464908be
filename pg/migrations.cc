#include "pg/migrations.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace partq {

// Why the schema looks like this:
// - sessions: a heartbeat updates only heartbeat_at/expires_at, which no index
//   covers, and fillfactor leaves room on the page, so heartbeats are HOT
//   updates (no index writes, tiny WAL).
// - session_parts: PRIMARY KEY (queue, part) is invariant I1 — at most one
//   owner per part — enforced by the database. The FK cascades a session's
//   expiry to its parts. epoch comes from one sequence so it only grows, even
//   across delete/insert of the row.
// - items (migration 1): fillfactor 50 left room for the claim's new row
//   version when claims stamped the row; migration 4 ends both.
// - items: a retry moves run_at and attempts; neither is indexed, so a retry
//   is a HOT update where the page has room. items_ready serves
//   "ready items of this part in (priority, id) order"; items_key serves the
//   per-key head check of ordered queues. No FK to queues: it would cost a
//   lookup per inserted item; DeleteQueue removes items itself.
// - results: written only for items with a dedup key or a handler result, so
//   `partq wait` can answer after the item row is gone.
// - queue, key and dedup_key are COLLATE "C": only equality matters, and byte
//   comparison keeps the index inserts of a bulk enqueue cheap whatever the
//   database's locale.
// - items_id_seq is named so EnqueueBatch can reserve ids from it (it COPYs
//   explicit ids with parts computed client-side); part_for_id() is PartForId
//   in SQL for the one-statement enqueue of a keyless item.
// - schema_migrations is created by Migrate() itself, before any migration.
// - Migration 2 (the Kafka bridge): an ingested item keeps its origin
//   (topic, partition, offset) and headers in nullable columns, which cost
//   nothing for other items (no default: no table rewrite, NULLs live in the
//   null bitmap). kafka_offsets is keyed by queue too, so one topic can feed
//   two queues; the bridge moves next_offset by compare-and-set in the same
//   transaction as the items (producer/README.md). outbox is read in id order
//   and its rows deleted after delivery, so it stays small.
// - Migration 3 (the dead-letter topic): queues.dlq_topic names a Kafka topic
//   for the queue's dead items (NULL: none; the CHECK repeats
//   ValidateTopicName so a hand-written UPDATE cannot store a name the
//   producer would refuse). dead_items gains the origin columns and headers
//   of items, so a dead item keeps where it came from and the finish
//   statement can put both into the dead-letter message. Nullable columns
//   without defaults: no rewrite of either table.
// - Migration 4 (claims in memory): a claim no longer writes the item row
//   (store.h, "Claims"), so items get the default fillfactor back (the room
//   kept for the claim's HOT update only spread a part over twice the pages
//   and doubled the full-page images a drain writes after a checkpoint).
//   claim_epoch becomes abandoned_epoch: set only on an item whose owner died
//   while it was in flight, which makes it a suspect (items_abandoned finds
//   them without reading the ready backlog; it holds only such rows).
//   Items claimed by older binaries when the migration runs are thereby
//   abandoned claims, which is what they are once those binaries stop.
//   part_claims holds one row per owned part: what its owner had in flight
//   at its last claim (made empty when a tenure starts, also for the parts
//   owned when the migration runs). No FK to queues or sessions: an FK check would lock the
//   queue row on every claim, and the row must outlive a session that dies
//   (its next owner reads it); DeleteQueue deletes the rows itself.
//   ack_items() is the ack's delete, in a function so that its plans are
//   made with enable_seqscan off (pg_store_sql.cc, AckCtes, says why).
// - Migration 5 (the pipelined ack): the hot path of Finish sends its ack
//   statement and the COMMIT in one flight (pg_connection.h), so the
//   statement itself must fail when the fence or a count is off, which
//   makes the server skip the COMMIT. finish_refused() is that failure, with
//   its own SQLSTATE (PQ001) so PgStore can tell it from any other error;
//   it is called only then.
// The coordinator README ("PgStore") has the longer story.
const std::vector<Migration>& Migrations() {
  static const auto* migrations = new std::vector<Migration>{
      {1, "queues, sessions, parts, items, dead items, results", R"sql(
CREATE SEQUENCE {schema}.epochs;

CREATE TABLE {schema}.queues (
  name          text COLLATE "C" PRIMARY KEY,
  parts         int NOT NULL CHECK (parts BETWEEN 1 AND 4096),
  assignment    text NOT NULL DEFAULT 'lexical' CHECK (assignment IN ('lexical', 'sticky')),
  session_ttl   interval NOT NULL DEFAULT '10 seconds'
                CHECK (session_ttl BETWEEN '100 milliseconds' AND '1 day'),
  max_attempts  int NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
  ordered       boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {schema}.sessions (
  id            uuid PRIMARY KEY,
  queue         text COLLATE "C" NOT NULL REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  incarnation   bigint NOT NULL DEFAULT 1,
  instance_id   text,
  host          text NOT NULL DEFAULT '',
  pid           int NOT NULL DEFAULT 0,
  started_at    timestamptz NOT NULL DEFAULT now(),
  heartbeat_at  timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL
) WITH (fillfactor = 50);
CREATE INDEX sessions_queue ON {schema}.sessions (queue);

CREATE TABLE {schema}.session_parts (
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  session_id    uuid NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
  epoch         bigint NOT NULL,
  acquired_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, part)
) WITH (fillfactor = 50);
CREATE INDEX session_parts_session ON {schema}.session_parts (session_id);

CREATE TABLE {schema}.items (
  id            bigint GENERATED BY DEFAULT AS IDENTITY (SEQUENCE NAME {schema}.items_id_seq)
                PRIMARY KEY,
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  key           text COLLATE "C",
  dedup_key     text COLLATE "C",
  priority      smallint NOT NULL DEFAULT 0,
  run_at        timestamptz NOT NULL DEFAULT now(),
  attempts      int NOT NULL DEFAULT 0,
  claim_epoch   bigint,
  claimed_at    timestamptz,
  enqueued_at   timestamptz NOT NULL DEFAULT now(),
  last_error    text,
  payload       bytea NOT NULL DEFAULT ''
) WITH (fillfactor = 50);
CREATE INDEX items_ready ON {schema}.items (queue, part, priority, id);
CREATE INDEX items_key ON {schema}.items (queue, part, key, id) WHERE key IS NOT NULL;
CREATE UNIQUE INDEX items_dedup ON {schema}.items (queue, dedup_key) WHERE dedup_key IS NOT NULL;

-- PartForId (partitioner/part.cc) in SQL, for the one-round-trip enqueue of a
-- keyless item: splitmix64's finalizer on the id's 64 bits, then mod parts.
-- bigint has no unsigned multiply, so the two multiplications go through
-- numeric mod 2^64; the logical right shifts mask off the sign extension.
CREATE FUNCTION {schema}.part_for_id(id bigint, parts int) RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  two64 CONSTANT numeric := 18446744073709551616;
  two63 CONSTANT numeric := 9223372036854775808;
  x bigint := id;
  u numeric;
BEGIN
  x := x # ((x >> 30) & 17179869183);
  u := mod((CASE WHEN x < 0 THEN x + two64 ELSE x END) * 13787848793156543929, two64);
  x := (CASE WHEN u >= two63 THEN u - two64 ELSE u END)::bigint;
  x := x # ((x >> 27) & 137438953471);
  u := mod((CASE WHEN x < 0 THEN x + two64 ELSE x END) * 10723151780598845931, two64);
  x := (CASE WHEN u >= two63 THEN u - two64 ELSE u END)::bigint;
  x := x # ((x >> 31) & 8589934591);
  RETURN mod(CASE WHEN x < 0 THEN x + two64 ELSE x END, parts)::int;
END
$$;

CREATE TABLE {schema}.dead_items (
  id            bigint PRIMARY KEY,
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  key           text COLLATE "C",
  dedup_key     text COLLATE "C",
  priority      smallint NOT NULL,
  attempts      int NOT NULL,
  enqueued_at   timestamptz NOT NULL,
  failed_at     timestamptz NOT NULL DEFAULT now(),
  last_error    text NOT NULL,
  payload       bytea NOT NULL
);
CREATE INDEX dead_items_queue ON {schema}.dead_items (queue, part);
CREATE INDEX dead_items_dedup ON {schema}.dead_items (queue, dedup_key) WHERE dedup_key IS NOT NULL;

CREATE TABLE {schema}.results (
  id            bigint PRIMARY KEY,
  queue         text COLLATE "C" NOT NULL,
  dedup_key     text COLLATE "C",
  result        bytea,
  finished_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX results_dedup ON {schema}.results (queue, dedup_key, id) WHERE dedup_key IS NOT NULL;
)sql"},
      {2, "kafka bridge: item origins, kafka_offsets, outbox", R"sql(
ALTER TABLE {schema}.items
  ADD COLUMN origin_topic     text,
  ADD COLUMN origin_partition int,
  ADD COLUMN origin_offset    bigint,
  ADD COLUMN headers          jsonb;

CREATE TABLE {schema}.kafka_offsets (
  queue         text COLLATE "C" NOT NULL,
  topic         text COLLATE "C" NOT NULL,
  partition     int NOT NULL,
  next_offset   bigint NOT NULL CHECK (next_offset >= 0),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, topic, partition)
);

CREATE TABLE {schema}.outbox (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  topic         text NOT NULL,
  key           bytea,
  payload       bytea NOT NULL,
  headers       jsonb,
  created_at    timestamptz NOT NULL DEFAULT now()
);
)sql"},
      {3, "dead-letter topic: queues.dlq_topic, origins of dead items", R"sql(
ALTER TABLE {schema}.queues
  ADD COLUMN dlq_topic text
  CONSTRAINT queues_dlq_topic_name
  CHECK (dlq_topic ~ '^[A-Za-z0-9._-]{1,249}$' AND dlq_topic NOT IN ('.', '..'));

ALTER TABLE {schema}.dead_items
  ADD COLUMN origin_topic     text,
  ADD COLUMN origin_partition int,
  ADD COLUMN origin_offset    bigint,
  ADD COLUMN headers          jsonb;
)sql"},
      {4, "claims in memory: part_claims, abandoned_epoch, items fillfactor 100", R"sql(
ALTER TABLE {schema}.items RENAME COLUMN claim_epoch TO abandoned_epoch;
ALTER TABLE {schema}.items DROP COLUMN claimed_at;
ALTER TABLE {schema}.items SET (fillfactor = 100);
CREATE INDEX items_abandoned ON {schema}.items (queue, part, priority, id)
  WHERE abandoned_epoch IS NOT NULL;

CREATE TABLE {schema}.part_claims (
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  epoch         bigint NOT NULL,
  ids           bigint[] NOT NULL,
  claimed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, part)
) WITH (fillfactor = 50);
INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
SELECT queue, part, epoch, '{}' FROM {schema}.session_parts;

CREATE FUNCTION {schema}.ack_items(tids tid[], ids bigint[])
RETURNS TABLE (acked_id bigint, acked_queue text, acked_dedup_key text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  n bigint;
BEGIN
  RETURN QUERY
    DELETE FROM {schema}.items i WHERE i.ctid = ANY(tids) AND i.id = ANY(ids)
    RETURNING i.id, i.queue::text, i.dedup_key::text;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n < cardinality(ids) THEN
    -- Not where the claim saw them (a table rewrite moves rows): by id. The
    -- rows deleted above are no longer visible to this statement.
    RETURN QUERY
      DELETE FROM {schema}.items i WHERE i.id = ANY(ids)
      RETURNING i.id, i.queue::text, i.dedup_key::text;
  END IF;
END
$$;
)sql"},
      {5, "finish_refused(): the pipelined ack's refusal", R"sql(
CREATE FUNCTION {schema}.finish_refused(held bigint, wanted int, acked bigint, expected int)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'PQ001',
    MESSAGE = format('partq: finish refused: %s of %s parts held at their epochs, %s of %s items '
                     'still there', held, wanted, acked, expected);
END
$$;
)sql"},
  };
  return *migrations;
}

std::string WithSchema(absl::string_view sql, absl::string_view schema) {
  // The schema name is validated ([a-z_][a-z0-9_]*) before it gets here; the
  // quotes make it an identifier even if it is a reserved word.
  return absl::StrReplaceAll(sql, {{"{schema}", absl::StrCat("\"", schema, "\"")}});
}

}  // namespace partq
