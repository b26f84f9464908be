#include "pg/migrations.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace partq {

namespace {

// enqueue_item(queue, payload bytea, ...) of the SQL API, as migration 6
// made it (the notice naming the part) and migration 8 remade it (the
// notice carrying the item's key too, Notice::from): `notice` is the
// payload's SQL expression. Kept once, so the two cannot drift apart.
std::string EnqueueItemFunction(absl::string_view notice) {
  return absl::StrReplaceAll(R"sql(FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  body CONSTANT bytea := payload;
  k CONSTANT text := key;
  dk CONSTANT text := dedup_key;
  prio CONSTANT int := coalesce(priority, 0);
  d interval := coalesce(delay, interval '0');
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
  nparts int;
  h bigint;
  new_id bigint;
  new_part int;
BEGIN
  PERFORM {schema}.check_queue_name(q);
  IF body IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload must not be NULL';
  END IF;
  IF octet_length(body) > lim THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'payload is %s bytes; the limit is %s (partq.max_payload_bytes)', octet_length(body), lim);
  END IF;
  IF prio NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('priority %s is out of range -32768..32767', prio);
  END IF;
  IF octet_length(k) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('key is %s bytes; the limit is 1024', octet_length(k));
  END IF;
  IF octet_length(dk) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('dedup key is %s bytes; the limit is 1024', octet_length(dk));
  END IF;
  IF d > interval '3650 days' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('delay %s is longer than 10 years', d);
  END IF;
  -- A negative delay means now, as in C++.
  d := greatest(d, interval '0');

  -- DeleteQueue takes items' SHARE ROW EXCLUSIVE lock and then deletes the
  -- queue row and its items, so every writer of items takes its ROW
  -- EXCLUSIVE lock before it reads the queue row (pg_store_sql.cc,
  -- lock_items_for_enqueue): either the delete waits for this transaction
  -- to end (and deletes this item with the queue), or this waits for the
  -- delete and then finds no queue. Under READ COMMITTED the read below
  -- takes a new snapshot after the lock is held. A REPEATABLE READ or
  -- SERIALIZABLE transaction keeps the snapshot it started with, which may
  -- predate a delete that has committed since; locking the queue row makes
  -- such a read fail with a serialization failure (40001) instead of
  -- writing into a queue that is gone. READ COMMITTED skips the row lock:
  -- it would write the hot queue row on every enqueue.
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q;
  ELSE
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q FOR KEY SHARE;
  END IF;
  IF nparts IS NULL THEN
    PERFORM {schema}.unknown_queue(q);
  END IF;
  IF k IS NOT NULL THEN
    h := {schema}.murmur2(convert_to(k, 'UTF8')) & 2147483647;
  END IF;

  -- A dedup hit whose live item is acked before the lookup: insert again
  -- (once; a second miss is a real race worth reporting), as EnqueueIn does.
  FOR attempt IN 1..2 LOOP
    new_id := nextval('{schema}.items_id_seq');
    INSERT INTO {schema}.items AS i (id, queue, part, key, dedup_key, priority, run_at, payload)
    VALUES (new_id, q,
            CASE WHEN h IS NULL THEN {schema}.part_for_id(new_id, nparts)
                 ELSE (h % nparts)::int END,
            k, dk, prio::smallint, now() + d, body)
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.part INTO new_part;
    IF new_part IS NOT NULL THEN
      PERFORM pg_notify({schema}.channel_for(q), {notice});
      id := new_id;
      part := new_part;
      duplicate := false;
      RETURN NEXT;
      RETURN;
    END IF;
    SELECT i.id, i.part INTO new_id, new_part
    FROM {schema}.items i WHERE i.queue = q AND i.dedup_key = dk;
    IF new_part IS NOT NULL THEN
      id := new_id;
      part := new_part;
      duplicate := true;
      RETURN NEXT;
      RETURN;
    END IF;
  END LOOP;
  RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = format(
    'enqueue into "%s": dedup key "%s" is being finished concurrently; retry', q, dk);
END
$$;
)sql",
                             {{"{notice}", notice}});
}

}  // namespace

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
// - Migration 6 (the SQL API, docs/sql-api.md): enqueue(), enqueue_item(),
//   item_state() and item_state_by_dedup_key() let a program in any language
//   produce through its own PostgreSQL driver, in its own transaction, with
//   the C++ producer's rules; murmur2(), part_for_key() and channel_for()
//   are PartForKey and ChannelFor in SQL, so an item lands in the part and
//   wakes the channel the C++ code would use (no stored copy to keep in
//   step). The functions are SECURITY INVOKER: the caller needs the
//   privileges the same SQL would need.
// - Migration 7: part_for_key() says what is wrong with a part count outside
//   1..4096 instead of dividing by zero.
// - Migration 8 (claims that do not walk acked rows): an owner reads a part
//   from its cursor on, and what can come due behind the cursor (retried,
//   delayed and requeued items: run_at later than enqueued_at) is found in
//   items_later, in run_at order, which holds only such rows. Before, the
//   owner read the part from its head on every enqueue notice and every
//   second, walking the index entries of every acked row vacuum had not yet
//   removed: while a long transaction held the vacuum horizon, that walk
//   grew with every item acked. A new item that sorts behind a cursor (a
//   late commit, a higher priority) is told by its notice, which now
//   carries its key ("i:PART:PRIORITY:ID", Notice::from), enqueue_item()'s
//   too. A retry already moved run_at, which items_abandoned's predicate
//   column made a non-HOT update anyway; items_later adds an index entry
//   to it. The index is built without CONCURRENTLY (migrations run in a
//   transaction): it blocks enqueues while it is built.
// - Migration 9 (claim records that are never updated): a claim replaced its
//   part's record by an UPDATE, a new version of one row on every batch.
//   While a snapshot held the vacuum horizon, none of those versions could
//   be pruned, and every read of the record walked them all (3.7 ms and 470
//   buffers a minute into a hold at 20k items/s, growing by the minute). Now
//   a claim deletes the part's latest record (found from the end of the
//   primary key (queue, part, seq): the newest entry is the live row) and
//   inserts the new one; the DELETE is the guard an UPDATE was (a session
//   whose epoch is older than the record's finds nothing to replace, and
//   writes nothing). The dead rows stay until vacuum, but nobody walks
//   them. A retry or a dead item still updates the latest row in place (a
//   short chain on a row that is replaced at the next claim). A takeover and
//   a release read and delete all of a part's records (rare; a stale owner
//   racing a takeover can leave one at its old epoch, which the next takeover
//   or release removes).
// - Migration 10 (vacuum that keeps up): every item is a row inserted and
//   deleted, so at 75k items/s the table makes 75k dead rows a second. With
//   PostgreSQL's defaults an autovacuum of items sleeps 2 ms after every 200
//   cost units and starts at 20 % of a
//   row count that is mostly zero; in issue 27's soak it fell behind for
//   good: the table and its indexes grew by 6 MB/s each (1.3 GB after five
//   minutes) with 13M dead rows. Unthrottled (cost delay 0), started by a
//   fixed count of dead rows, it ran about once a minute (the launcher's
//   naptime) and the table and its indexes stayed at 328 and 330 MB for the
//   last 14 minutes of a 30-minute soak at 35k items/s (BENCHMARKS.md). part_claims makes a dead
//   row per claim (migration 9) and is vacuumed the same way. Analyze runs by a fixed count too;
//   statements that must not depend on the statistics of a table that is empty one moment and full
//   the next do not (TakeOverClaims, AckCtes). Per-table settings, so nothing else on the server
//   changes; the launcher still visits a database once per autovacuum_naptime (1 min by default),
//   which sets the table's size (README, "Running it hard").
// - Migration 14 (schedules, `partq schedule`): one row per schedule with
//   its next tick. The queue's workers fire it (Store::FireSchedules): one
//   transaction locks the due row (FOR UPDATE SKIP LOCKED: a worker never
//   waits for another's firing), enqueues through the one enqueue path and
//   moves next_tick on by compare-and-set, so a tick fires once however
//   many workers race (docs/architecture.md, "Schedules"). The FK cascades
//   a queue's delete to its schedules: a schedule is written rarely, so the
//   lookup an FK costs does not matter here as it would for items. Names
//   are unique per schema: `schedule delete NAME` needs no queue. Ticks are
//   computed in C++ (schedule/timing.h: cron, time zones, DST); rows added
//   through the SQL API without a first tick get it from the first worker
//   that looks (next_tick NULL: the first tick after created_at). The SQL
//   functions check what SQL can (the field count and characters of a cron
//   expression, the time zone, the interval); a cron field the C++ parser
//   refuses leaves the row with `error` set and no next tick.
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
      {6, "the SQL API: enqueue(), enqueue_item(), item_state(), murmur2(), channel_for()",
       absl::StrCat(R"sql(
-- murmur2 (partitioner/part.cc, Kafka's Utils.murmur2) over bytes, as an
-- unsigned 32-bit value in a bigint. 32-bit multiplication wraps; a bigint
-- cannot hold the full 64-bit product, so mul32 multiplies the two 16-bit
-- halves of `a` apart: a*b mod 2^32 = a_lo*b + ((a_hi*b) mod 2^16) << 16.
CREATE FUNCTION {schema}.mul32(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (((a & 65535) * b) + ((((a >> 16) * b) & 65535) << 16)) & 4294967295;

CREATE FUNCTION {schema}.murmur2(data bytea) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  m CONSTANT bigint := 1540483477;  -- 0x5bd1e995
  len CONSTANT int := length(data);
  blocks CONSTANT int := len - (len & 3);
  h bigint := 2538058380 # len;     -- the seed 0x9747b28c, xor the length
  k bigint;
  i int := 0;
BEGIN
  WHILE i < blocks LOOP
    -- Little-endian blocks; bytes are unsigned.
    k := get_byte(data, i) | (get_byte(data, i + 1) << 8) | (get_byte(data, i + 2) << 16)
         | (get_byte(data, i + 3)::bigint << 24);
    k := {schema}.mul32(k, m);
    k := k # (k >> 24);
    k := {schema}.mul32(k, m);
    h := {schema}.mul32(h, m) # k;
    i := i + 4;
  END LOOP;
  IF len & 3 = 3 THEN h := h # (get_byte(data, blocks + 2) << 16); END IF;
  IF len & 3 >= 2 THEN h := h # (get_byte(data, blocks + 1) << 8); END IF;
  IF len & 3 >= 1 THEN h := {schema}.mul32(h # get_byte(data, blocks), m); END IF;
  h := h # (h >> 13);
  h := {schema}.mul32(h, m);
  RETURN h # (h >> 15);
END
$$;

-- PartForKey: Kafka's toPositive (the sign bit cleared) mod parts, over the
-- key's UTF-8 bytes whatever the database's encoding.
CREATE FUNCTION {schema}.part_for_key(key text, parts int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (({schema}.murmur2(convert_to(key, 'UTF8')) & 2147483647) % parts)::int;

-- ChannelFor (pg/pg_store.cc): the LISTEN/NOTIFY channel of a queue of this
-- schema. Computed rather than stored: nothing to keep in step with the
-- queues table, and the C++ side computes it the same way.
CREATE FUNCTION {schema}.channel_for(queue text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'partq_'
       || lpad(to_hex({schema}.murmur2(convert_to('{schema_name}.' || queue, 'UTF8'))), 8, '0')
       || lpad(to_hex({schema}.murmur2(convert_to('partq:{schema_name}.' || queue, 'UTF8'))),
               8, '0');

-- The errors the C++ store gives for a queue name (ValidateQueueName) and
-- for a queue this schema does not have (UnknownQueue), with SQLSTATEs a
-- driver can tell apart: 22023 (invalid_parameter_value), 42704
-- (undefined_object).
CREATE FUNCTION {schema}.check_queue_name(queue text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid queue name %s (use 1-63 letters, digits, ''_'', ''.'' or ''-'', starting with a '
      'letter or digit)', coalesce('"' || queue || '"', 'NULL'));
  END IF;
END
$$;

CREATE FUNCTION {schema}.unknown_queue(queue text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
    'unknown queue "%s" in schema "%s" (create it with: partq queue create %s --parts N%s)',
    queue, '{schema_name}', queue,
    CASE WHEN '{schema_name}' = 'partq' THEN '' ELSE ' --schema {schema_name}' END);
END
$$;

-- Both errors, for a reader of the queue (an enqueue reads it under its lock).
CREATE FUNCTION {schema}.require_queue(queue text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM {schema}.check_queue_name(queue);
  PERFORM 1 FROM {schema}.queues q WHERE q.name = queue;
  IF NOT FOUND THEN
    PERFORM {schema}.unknown_queue(queue);
  END IF;
END
$$;

-- The enqueue of Store::Enqueue, in the caller's transaction: the item
-- exists, and its wake-up goes out, exactly when that transaction commits.
-- The same checks (CheckNewItem), part, dedup and notice as the C++ producer
-- (pg_store_items.cc, EnqueueIn; pg_store_sql.cc, kEnqueue). The payload
-- limit is the setting partq.max_payload_bytes (1 MiB, the C++ default,
-- when unset), as the C++ limit is the client's option.
-- A dedup hit returns the live item's id with duplicate = true.
)sql",
                    "CREATE ", EnqueueItemFunction("'i:' || new_part"), R"sql(
-- A text payload is its UTF-8 bytes. A plain string literal resolves to
-- this overload (PostgreSQL prefers the string category for unknown-type
-- arguments), a bytea value to the one above.
CREATE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT * FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key, dedup_key, delay,
                                      priority);
END;

CREATE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, payload, key, dedup_key, delay, priority) e);

CREATE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key,
                                               dedup_key, delay, priority) e);

-- Store::GetItemState in SQL: pending (in items), done (acked: a results
-- row, or an allocated id found nowhere, as acks without a result leave no
-- row), dead (in dead_items), or unknown (never allocated, or an item of
-- another queue). attempts and last_error as the C++ ItemState has them.
CREATE FUNCTION {schema}.item_state(queue text, id bigint)
RETURNS TABLE (state text, attempts int, result bytea, last_error text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  want CONSTANT bigint := id;
  r record;
  high_water bigint;
BEGIN
  PERFORM {schema}.require_queue(q);
  SELECT 'pending' AS s, i.queue, i.attempts, NULL::bytea AS result, i.last_error INTO r
  FROM {schema}.items i WHERE i.id = want;
  IF NOT FOUND THEN
    SELECT 'dead' AS s, d.queue, d.attempts, NULL::bytea AS result, d.last_error INTO r
    FROM {schema}.dead_items d WHERE d.id = want;
  END IF;
  IF NOT FOUND THEN
    SELECT 'done' AS s, x.queue, 0 AS attempts, x.result, NULL::text AS last_error INTO r
    FROM {schema}.results x WHERE x.id = want;
  END IF;
  IF FOUND THEN
    IF r.queue = q THEN
      RETURN QUERY SELECT r.s::text, r.attempts::int, r.result::bytea, r.last_error::text;
    ELSE
      RETURN QUERY SELECT 'unknown'::text, 0, NULL::bytea, NULL::text;
    END IF;
    RETURN;
  END IF;
  SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO high_water
  FROM {schema}.items_id_seq s;
  -- Ids are shared by all queues of the schema, and a vanished id does not
  -- say which queue it had (pg/README.md), as in C++.
  RETURN QUERY SELECT CASE WHEN want BETWEEN 1 AND high_water THEN 'done' ELSE 'unknown' END,
                      0, NULL::bytea, NULL::text;
END
$$;

-- Store::GetItemStateByDedupKey: the live item with that dedup key, else the
-- newest finished one (done with a result row, or dead), else unknown (id
-- NULL).
CREATE FUNCTION {schema}.item_state_by_dedup_key(queue text, dedup_key text)
RETURNS TABLE (id bigint, state text, attempts int, result bytea, last_error text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  dk CONSTANT text := dedup_key;
BEGIN
  PERFORM {schema}.require_queue(q);
  RETURN QUERY
    SELECT i.id, 'pending'::text, i.attempts, NULL::bytea, i.last_error
    FROM {schema}.items i WHERE i.queue = q AND i.dedup_key = dk;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT f.id, f.s, f.attempts, f.result, f.last_error FROM (
      SELECT x.id, 'done'::text AS s, 0 AS attempts, x.result, NULL::text AS last_error
      FROM {schema}.results x WHERE x.queue = q AND x.dedup_key = dk
      UNION ALL
      SELECT d.id, 'dead', d.attempts, NULL, d.last_error
      FROM {schema}.dead_items d WHERE d.queue = q AND d.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text, 0, NULL::bytea, NULL::text;
END
$$;
)sql")},
      {7, "part_for_key() refuses a part count outside 1..4096", R"sql(
-- A part count of 0 was "division by zero", a negative one a negative part.
-- Still a plain SQL function (inlined where it is used): the CASE calls the
-- raising function only for a bad count.
CREATE FUNCTION {schema}.bad_part_count(parts int) RETURNS int
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RAISE EXCEPTION 'parts must be between 1 and 4096, not %', parts USING ERRCODE = '22023';
END
$$;

CREATE OR REPLACE FUNCTION {schema}.part_for_key(key text, parts int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN parts BETWEEN 1 AND 4096
            THEN (({schema}.murmur2(convert_to(key, 'UTF8')) & 2147483647) % parts)::int
            ELSE {schema}.bad_part_count(parts) END;
)sql"},
      {8, "items_later: what comes due behind a cursor; enqueue notices carry the key",
       absl::StrCat(R"sql(
CREATE INDEX items_later ON {schema}.items (queue, part, run_at) WHERE run_at > enqueued_at;

)sql",
                    "CREATE OR REPLACE ",
                    EnqueueItemFunction("'i:' || new_part || ':' || prio || ':' || new_id"))},
      {9, "part_claims: a new row per claim, the old one deleted, never updated", R"sql(
CREATE SEQUENCE {schema}.claim_seq;
ALTER TABLE {schema}.part_claims ADD COLUMN seq bigint;
UPDATE {schema}.part_claims SET seq = nextval('{schema}.claim_seq');
ALTER TABLE {schema}.part_claims
  ALTER COLUMN seq SET NOT NULL,
  ALTER COLUMN seq SET DEFAULT nextval('{schema}.claim_seq'),
  DROP CONSTRAINT part_claims_pkey,
  ADD PRIMARY KEY (queue, part, seq),
  SET (fillfactor = 100);
)sql"},
      {10, "autovacuum of items and part_claims: unthrottled, by a row count", R"sql(
ALTER TABLE {schema}.items SET (
  autovacuum_vacuum_cost_delay = 0,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 10000,
  autovacuum_analyze_scale_factor = 0,
  autovacuum_analyze_threshold = 100000);
ALTER TABLE {schema}.part_claims SET (
  autovacuum_vacuum_cost_delay = 0,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000);
)sql"},
      {11, "queues.paused: a paused queue's workers claim nothing (partq queue pause)", R"sql(
ALTER TABLE {schema}.queues ADD COLUMN paused boolean NOT NULL DEFAULT false;
)sql"},
      {14,
       "schedules: an item per tick (partq schedule), add_schedule(), list_schedules(), "
       "delete_schedule()",
       R"sql(
CREATE TABLE {schema}.schedules (
  name        text COLLATE "C" PRIMARY KEY,
  queue       text COLLATE "C" NOT NULL REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  every       interval,
  cron        text,
  time_zone   text,
  payload     bytea NOT NULL,
  key         text,
  priority    smallint NOT NULL DEFAULT 0,
  next_tick   timestamptz,
  last_tick   timestamptz,
  fired       bigint NOT NULL DEFAULT 0,
  missed      bigint NOT NULL DEFAULT 0,
  error       text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
  CHECK ((every IS NULL) <> (cron IS NULL)),
  CHECK (every IS NULL OR time_zone IS NULL)
);
CREATE INDEX schedules_due ON {schema}.schedules (queue, next_tick);

-- Store::AddSchedule in SQL. `first_tick` NULL: the first worker to look
-- computes it (the first tick after now). Errors as the C++ store gives
-- them: 22023 for bad input, 42704 for an unknown queue, 23505 for a name
-- the schema has.
CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload bytea,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_variable
DECLARE
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
  names CONSTANT text[] := ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
  fields text[];
  secs numeric;
  prio CONSTANT int := coalesce(priority, 0);
  other text;
BEGIN
  IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid schedule name %s (use 1-63 letters, digits, ''_'', ''.'' or ''-'', starting with '
      'a letter or digit)', coalesce('"' || name || '"', 'NULL'));
  END IF;
  PERFORM {schema}.require_queue(queue);
  IF (every IS NULL) = (cron IS NULL) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = CASE WHEN every IS NULL
      THEN 'a schedule needs every (an interval) or cron (''MIN HOUR DOM MON DOW'')'
      ELSE 'give either every or cron, not both' END;
  END IF;
  IF every IS NOT NULL THEN
    secs := extract(epoch FROM every);
    IF secs < 1 OR secs > 366 * 86400 OR secs <> trunc(secs) THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
        'every %s: the interval must be a whole number of seconds from 1s to 366 days', every);
    END IF;
    IF time_zone IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
        'time_zone applies to cron only (an interval ticks on multiples of it since the Unix '
        'epoch, the same in every time zone)';
    END IF;
  ELSE
    IF left(btrim(cron), 1) <> '@' THEN
      fields := regexp_split_to_array(btrim(cron), '\s+');
      IF btrim(cron) = '' OR array_length(fields, 1) <> 5 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
          'cron expression "%s" has %s fields; partq takes 5: minute hour day-of-month month '
          'day-of-week%s', btrim(cron), CASE WHEN btrim(cron) = '' THEN 0
                                            ELSE array_length(fields, 1) END,
          CASE WHEN array_length(fields, 1) = 6 THEN ' (no seconds or year field)' ELSE '' END);
      END IF;
      FOR i IN 1..5 LOOP
        IF fields[i] !~ '^[A-Za-z0-9*/,-]+$' THEN
          RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'cron field %s (%s): "%s" has characters cron does not use', i, names[i], fields[i]);
        END IF;
      END LOOP;
    END IF;
    IF time_zone IS NOT NULL THEN
      BEGIN
        PERFORM now() AT TIME ZONE time_zone;
      EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
          'unknown time zone "%s" (use an IANA name such as Europe/Berlin or UTC)', time_zone);
      END;
    END IF;
  END IF;
  IF payload IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload must not be NULL';
  END IF;
  IF octet_length(payload) > lim THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'payload is %s bytes; the limit is %s (partq.max_payload_bytes)', octet_length(payload), lim);
  END IF;
  IF prio NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('priority %s is out of range -32768..32767', prio);
  END IF;
  IF octet_length(key) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('key is %s bytes; the limit is 1024', octet_length(key));
  END IF;
  SELECT s.queue INTO other FROM {schema}.schedules s WHERE s.name = add_schedule.name;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format(
      'schedule "%s" already exists (on queue "%s"); delete it first to change it', name, other);
  END IF;
  INSERT INTO {schema}.schedules (name, queue, every, cron, time_zone, payload, key, priority,
                                  next_tick)
  VALUES (name, queue, every, btrim(cron), time_zone, payload, key, prio, first_tick);
END
$$;

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload text,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT {schema}.add_schedule(name, queue, convert_to(payload, 'UTF8'), every, cron, time_zone,
                               key, priority, first_tick);
END;

-- The schedules of a queue (all of them with NULL), by name: the rows of
-- the table itself.
CREATE FUNCTION {schema}.list_schedules(queue text DEFAULT NULL)
RETURNS SETOF {schema}.schedules
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_variable
BEGIN
  IF queue IS NOT NULL THEN
    PERFORM {schema}.require_queue(queue);
  END IF;
  RETURN QUERY
    SELECT s.* FROM {schema}.schedules s WHERE queue IS NULL OR s.queue = queue ORDER BY s.name;
END
$$;

-- Deletes a schedule; 42704 when the schema has none of that name.
CREATE FUNCTION {schema}.delete_schedule(name text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_variable
BEGIN
  DELETE FROM {schema}.schedules s WHERE s.name = name;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
      'unknown schedule "%s" in schema "%s" (partq schedule list shows them)', name,
      '{schema_name}');
  END IF;
END
$$;
)sql"},
  };
  return *migrations;
}

std::string WithSchema(absl::string_view sql, absl::string_view schema) {
  // The schema name is validated ([a-z_][a-z0-9_]*) before it gets here; the
  // quotes make it an identifier even if it is a reserved word, and it needs
  // no escaping inside a string literal.
  return absl::StrReplaceAll(sql, {{"{schema}", absl::StrCat("\"", schema, "\"")},
                                   {"{schema_name}", std::string(schema)}});
}

}  // namespace partq
