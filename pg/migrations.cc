#include "pg/migrations.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace partq {

namespace {

// The checks of a new item in PL/pgSQL (the C++ producer's ValidateNewItem),
// over the variables named here, with `lim` the payload limit: the text the
// older migrations' enqueue_item() has inline, and the body of
// check_new_item() (migration 12), kept once.
std::string ItemChecks(absl::string_view payload, absl::string_view prio, absl::string_view key) {
  return absl::StrReplaceAll(R"sql(
  IF $payload IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload must not be NULL';
  END IF;
  IF octet_length($payload) > lim THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'payload is %s bytes; the limit is %s (partq.max_payload_bytes)', octet_length($payload), lim);
  END IF;
  IF $prio NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('priority %s is out of range -32768..32767', $prio);
  END IF;
  IF octet_length($key) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('key is %s bytes; the limit is 1024', octet_length($key));
  END IF;)sql",
                             {{"$payload", payload}, {"$prio", prio}, {"$key", key}});
}

// What every enqueue of the SQL API does before it inserts (enqueue_item
// says why): items' lock, then the queue's part count into `nparts`, the row
// locked FOR KEY SHARE outside READ COMMITTED; an unknown queue raises.
constexpr char kLockAndReadQueue[] = R"sql(  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q;
  ELSE
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q FOR KEY SHARE;
  END IF;
  IF nparts IS NULL THEN
    PERFORM {schema}.unknown_queue(q);
  END IF;
)sql";

// enqueue_item(queue, payload bytea, ...) of the SQL API, as migration 6
// made it (the notice naming the part) and migration 8 remade it (the
// notice carrying the item's key too, Notice::from): `notice` is the
// payload's SQL expression. Kept once, so the two cannot drift apart.
//
// With `with_group` (migration 12) it takes a queue group's id too: the
// group's row is held (created when missing) for the rest of the caller's
// transaction, an item of a group not yet started is held back (run_at
// 'infinity' until group_start), and the group counts it.
std::string EnqueueItemFunction(absl::string_view notice, bool with_group = false) {
  const absl::string_view group_param = with_group ? ",\n                                      group_id text DEFAULT NULL" : "";
  const absl::string_view group_decl = with_group ? "\n  grp CONSTANT text := group_id;\n  held boolean := false;" : "";
  const absl::string_view group_hold = with_group ? R"sql(
  IF grp IS NOT NULL THEN
    IF d > interval '0' THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
        'an item of a group runs when its group starts; it cannot have a delay (group "%s")', grp);
    END IF;
    held := NOT {schema}.group_hold(q, grp);
  END IF;)sql" : "";
  // Migration 12 made the item's checks a function of their own
  // (check_new_item), which add_schedule shares.
  const std::string item_checks = with_group
                                      ? "\n  PERFORM {schema}.check_new_item(body, prio, k);"
                                      : ItemChecks("body", "prio", "k");
  const absl::string_view insert_cols = with_group ? ", group_id" : "";
  const absl::string_view insert_vals = with_group ? ", grp" : "";
  const absl::string_view run_at = with_group ? "CASE WHEN held THEN 'infinity' ELSE now() + d END" : "now() + d";
  const absl::string_view group_count = with_group ? R"sql(
      IF grp IS NOT NULL THEN
        UPDATE {schema}.groups g SET pending = g.pending + 1 WHERE g.queue = q AND g.id = grp;
      END IF;
      IF NOT held THEN
        PERFORM pg_notify({schema}.channel_for(q), {notice});
      END IF;)sql" : R"sql(
      PERFORM pg_notify({schema}.channel_for(q), {notice});)sql";
  return absl::StrReplaceAll(
      absl::StrReplaceAll(R"sql(FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0{group_param})
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
  new_part int;{group_decl}
BEGIN
  PERFORM {schema}.check_queue_name(q);{item_checks}
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
{lock_and_read_queue}
  IF k IS NOT NULL THEN
    h := {schema}.murmur2(convert_to(k, 'UTF8')) & 2147483647;
  END IF;{group_hold}

  -- A dedup hit whose live item is acked before the lookup: insert again
  -- (once; a second miss is a real race worth reporting), as EnqueueIn does.
  FOR attempt IN 1..2 LOOP
    new_id := nextval('{schema}.items_id_seq');
    INSERT INTO {schema}.items AS i (id, queue, part, key, dedup_key, priority, run_at, payload{insert_cols})
    VALUES (new_id, q,
            CASE WHEN h IS NULL THEN {schema}.part_for_id(new_id, nparts)
                 ELSE (h % nparts)::int END,
            k, dk, prio::smallint, {run_at}, body{insert_vals})
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.part INTO new_part;
    IF new_part IS NOT NULL THEN{group_count}
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
                          {{"{group_param}", group_param},
                           {"{group_decl}", group_decl},
                           {"{group_hold}", group_hold},
                           {"{item_checks}", item_checks},
                           {"{insert_cols}", insert_cols},
                           {"{insert_vals}", insert_vals},
                           {"{run_at}", run_at},
                           {"{lock_and_read_queue}",
                            absl::string_view(kLockAndReadQueue, sizeof(kLockAndReadQueue) - 2)},
                           {"{group_count}", group_count}}),
      {{"{notice}", notice}});
}

// group_start() of the SQL API, as migration 12 made it and migration 26
// remade it: with `count_items` it returns how many held items it released,
// as docs/sql-api.md says; migration 12's returned how many parts they were
// in. Kept once, so the versions cannot drift apart.
std::string GroupStartFunction(bool count_items) {
  return absl::StrReplaceAll(R"sql(FUNCTION {schema}.group_start(queue text, group_id text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  n bigint;
  ps int[];
  prs int[];
  ids bigint[];
  lo int := 1;{count_decl}
BEGIN
  -- Items' lock before the queue row, as every writer of items takes it
  -- (enqueue_item says why).
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.group_hold(q, g);
  UPDATE {schema}.groups x SET started_at = coalesce(x.started_at, now())
  WHERE x.queue = q AND x.id = g RETURNING x.pending INTO n;
  WITH released AS (
    UPDATE {schema}.items i SET run_at = statement_timestamp()
    WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'
    RETURNING i.part, i.priority, i.id),
  lowest AS (
    SELECT DISTINCT ON (r.part) r.part, r.priority, r.id FROM released r
    ORDER BY r.part, r.priority, r.id)
  SELECT array_agg(l.part ORDER BY l.part), array_agg(l.priority ORDER BY l.part),
         array_agg(l.id ORDER BY l.part){count_col}
  INTO ps, prs, ids{count_into} FROM lowest l;
  IF cardinality(ps) > 32 THEN
    -- Too many parts: one notice for all, from the lowest key of all.
    FOR i IN 2..cardinality(ps) LOOP
      IF (prs[i], ids[i]) < (prs[lo], ids[lo]) THEN lo := i; END IF;
    END LOOP;
    PERFORM pg_notify({schema}.channel_for(q), 'i:-1:' || prs[lo] || ':' || ids[lo]);
  ELSIF ps IS NOT NULL THEN
    FOR i IN 1..cardinality(ps) LOOP
      PERFORM pg_notify({schema}.channel_for(q), 'i:' || ps[i] || ':' || prs[i] || ':' || ids[i]);
    END LOOP;
  END IF;
  IF n <= 0 THEN
    PERFORM {schema}.group_end(q, g);
  END IF;
  RETURN {returned};
END
$$;
)sql",
      {{"{count_decl}", count_items ? "\n  n_released bigint;" : ""},
       {"{count_col}", count_items ? ",\n         (SELECT count(*) FROM released)" : ""},
       {"{count_into}", count_items ? ", n_released" : ""},
       {"{returned}", count_items ? "n_released" : "coalesce(cardinality(ids), 0)"}});
}

// item_state() and item_state_by_dedup_key() of the SQL API, as migration 6
// made them and migration 13 remade them (cancelled items, from
// cancelled_items): `cancelled` is the SQL that looks there (empty for
// migration 6). Kept once, so the versions cannot drift apart.
std::string ItemStateFunction(absl::string_view cancelled) {
  return absl::StrReplaceAll(R"sql(FUNCTION {schema}.item_state(queue text, id bigint)
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
{cancelled}  IF FOUND THEN
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
)sql",
                             {{"{cancelled}", cancelled}});
}
std::string ItemStateByDedupKeyFunction(absl::string_view cancelled) {
  return absl::StrReplaceAll(R"sql(FUNCTION {schema}.item_state_by_dedup_key(queue text, dedup_key text)
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
      FROM {schema}.dead_items d WHERE d.queue = q AND d.dedup_key = dk{cancelled}) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text, 0, NULL::bytea, NULL::text;
END
$$;
)sql",
                             {{"{cancelled}", cancelled}});
}
// The SQL both look into cancelled_items with (migration 13).
constexpr const char* kItemStateCancelled = R"sql(  IF NOT FOUND THEN
    SELECT 'cancelled' AS s, c.queue, c.attempts, NULL::bytea AS result,
           NULL::text AS last_error INTO r
    FROM {schema}.cancelled_items c WHERE c.id = want;
  END IF;
)sql";
constexpr const char* kItemStateByDedupKeyCancelled = R"sql(
      UNION ALL
      SELECT c.id, 'cancelled', c.attempts, NULL, NULL
      FROM {schema}.cancelled_items c WHERE c.queue = q AND c.dedup_key = dk)sql";

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
// - Migration 13 (cancel): cancelled_items keeps what a cancel removed (no
//   payload: the record answers `partq wait` and item_state(), it is not
//   work to run again), deleted with its queue, as results are. The cancel
//   itself is a function, cancel_items(), so the C++ store and the SQL API
//   share its lock order (its comment, and docs/architecture.md, "Cancel").
// - Migration 15 (schedules, `partq schedule`): one row per schedule with
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
// - Migration 16 (growing a queue's parts, `partq queue set --parts`):
//   queues.grown_from lists the counts before each grow. Items keep the part
//   they were enqueued into (no row is rewritten, so nothing in flight
//   changes under its owner), and only an ordered queue's claim reads the
//   list: a key's item waits while an earlier part of its part still holds
//   an older item of the key (ReadyItems in pg_store_sql.cc). NOT NULL with
//   a constant default: adding it rewrites no row.
// - Migration 17 (throughput, `partq status` rates): the database keeps no
//   count of acks (acked items are deleted, and a count would be a write on
//   every ack), so each session counts what its consumer finished in memory
//   and its heartbeat adds the counts since its last one to a row keyed by
//   (queue, minute, session): every session writes only rows of its own, so
//   a fleet heartbeating at once never waits on a shared row, and a row is
//   updated once per heartbeat (HOT: no index covers the counts). Rows older
//   than an hour are deleted by the heartbeats. No FK to sessions: a dead
//   session's counts still count; DeleteQueue deletes the queue's rows.
// - Migration 23 (vacuum without truncation): a queue's table empties at its
//   end again and again, so a vacuum of items often finds empty pages there
//   and then tries for the exclusive lock that truncating them needs. Some
//   statement holds a lock on items nearly always, so it tries for 5 s
//   (PostgreSQL's VACUUM_TRUNCATE_LOCK_TIMEOUT) and mostly gives up: in issue
//   27's half-hour soak 54 of 179 vacuums of items spent 5 s so, against 0.3 s
//   for the vacuum itself, and no other vacuum of the table can start
//   meanwhile; 11 got the lock, and every claim, ack and COPY waited behind
//   it (a hot standby replays that lock too). Without truncation: 0 of 180.
//   The pages stay; the free space map hands them to the next COPY, so the
//   table's size stays bounded by its peak.
// - Migration 24 (expiry sweeps, issue 26): an idle heartbeat asks whether
//   any member is past its TTL, which read every session row of the queue
//   (no index may cover expires_at: the heartbeat's update would stop being
//   HOT). With 200 sessions spread over 31 pages that was 0.24 ms of the
//   statement's 0.39, 80 times a second. A member's expiry only moves later
//   while it lives, and a join or leave moves the group generation, so the
//   earliest expiry among the members, read at one generation, is a time
//   before which nobody of that generation can expire. expiry_sweeps keeps
//   it per queue: an idle heartbeat reads the members only once that time
//   has passed or the generation moved (PgStore, "heartbeat_idle"), about
//   once per TTL minus an interval for a whole fleet. No index on the
//   timestamp, so the row's updates are HOT too.
// - Migration 25 (enqueue_many(), docs/sql-api.md): a program enqueueing a
//   list through its driver called enqueue_item once per item, each call its
//   own lock, queue read, checks, insert and notice: 20000 items took
//   1.3-1.8 s. enqueue_many checks what all items share once and each item in
//   one pass, inserts all in one statement, reads the live items of dedup
//   keys that met one in a statement of its own (which sees them), and sends
//   the notices of the C++ producer's batches (0.21-0.23 s). Items of a group
//   go through enqueue_item, which holds and counts the group per item.
// - Migration 26: group_start() returned how many parts its released items
//   were in (one notice's worth each), not how many items, as docs/sql-api.md
//   says it does: five items of one key started as 1 (found by a walkthrough).
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
)sql",
                    "CREATE ", ItemStateFunction(""), R"sql(
-- Store::GetItemStateByDedupKey: the live item with that dedup key, else the
-- newest finished one (done with a result row, or dead), else unknown (id
-- NULL).
)sql",
                    "CREATE ", ItemStateByDedupKeyFunction(""))},
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
      {12, "queue groups: items.group_id, groups, group_*(), enqueue_item(group_id)",
       absl::StrCat(R"sql(
-- Queue groups (store.h, "Queue groups"). An item of a group not yet started
-- waits with run_at 'infinity' (claims read only what is due, and
-- items_later holds it, so a claim never walks it); group_start makes it due.
-- The group's row counts what is pending and how it ended; every writer of
-- those counts holds the row (FOR UPDATE, or its UPDATE) until it commits,
-- so the last finisher of a started group is decided by the row's lock, not
-- by a snapshot: exactly one transaction sees pending reach 0, and it
-- enqueues the end item.
ALTER TABLE {schema}.items ADD COLUMN group_id text COLLATE "C";
ALTER TABLE {schema}.dead_items ADD COLUMN group_id text COLLATE "C";
CREATE INDEX items_group ON {schema}.items (queue, group_id, part) WHERE group_id IS NOT NULL;

CREATE TABLE {schema}.groups (
  queue         text COLLATE "C" NOT NULL REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  id            text COLLATE "C" NOT NULL,
  end_queue     text COLLATE "C",
  end_payload   jsonb,
  pending       bigint NOT NULL DEFAULT 0,  -- enqueued, not yet acked, dead or cancelled
  done          bigint NOT NULL DEFAULT 0,
  dead          bigint NOT NULL DEFAULT 0,
  cancelled     bigint NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  started_at    timestamptz,
  cancelled_at  timestamptz,
  ended_at      timestamptz,
  end_item      bigint,   -- the end item's id
  end_error     text,     -- why there is no end item though there was end work
  end_skipped   boolean NOT NULL DEFAULT false,  -- cancelled without its end work
  PRIMARY KEY (queue, id)
);

CREATE FUNCTION {schema}.check_group_id(group_id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF group_id IS NULL OR group_id = '' OR octet_length(group_id) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid group id %s (use 1-200 bytes of text)', coalesce('"' || group_id || '"', 'NULL'));
  END IF;
END
$$;

-- Holds the group's row for the rest of the transaction, creating it (not
-- started) when missing; returns whether it has started. A group that has
-- ended takes no more items. The queue must exist (the caller checks).
CREATE FUNCTION {schema}.group_hold(queue text, group_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
BEGIN
  PERFORM {schema}.check_group_id(g);
  LOOP
    SELECT x.started_at, x.ended_at, x.cancelled_at INTO r FROM {schema}.groups x
    WHERE x.queue = q AND x.id = g FOR UPDATE;
    IF FOUND THEN
      IF r.ended_at IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format(
          'group "%s" of queue "%s" has ended; it takes no more items (use a new group id)', g, q);
      END IF;
      IF r.cancelled_at IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format(
          'group "%s" of queue "%s" was cancelled; it takes no more items', g, q);
      END IF;
      RETURN r.started_at IS NOT NULL;
    END IF;
    INSERT INTO {schema}.groups (queue, id) VALUES (q, g) ON CONFLICT DO NOTHING;
  END LOOP;
END
$$;

-- Ends a started group whose pending count reached 0, in the caller's
-- transaction (which holds the row): marks it ended and enqueues its end
-- work, once. The end item's payload is JSON: the queue, the group, its
-- counts and the end payload given at group_create. An end queue deleted
-- since leaves the group ended with end_error set, rather than failing the
-- ack that finished the group's last item.
CREATE FUNCTION {schema}.group_end(queue text, group_id text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
  end_id bigint;
BEGIN
  UPDATE {schema}.groups x SET ended_at = now(), pending = 0
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.* INTO r;
  IF NOT FOUND OR r.end_queue IS NULL THEN
    RETURN;
  END IF;
  IF r.end_skipped THEN
    UPDATE {schema}.groups x SET end_error = 'cancelled without its end work (--no-end)'
    WHERE x.queue = q AND x.id = g;
    RETURN;
  END IF;
  BEGIN
    SELECT e.id INTO end_id
    FROM {schema}.enqueue_item(r.end_queue,
           convert_to(jsonb_build_object('queue', q, 'group', g, 'done', r.done, 'dead', r.dead,
                                         'cancelled', r.cancelled,
                                         'payload', r.end_payload)::text, 'UTF8'),
           dedup_key => 'partq.group:' || q || ':' || g) e;
    UPDATE {schema}.groups x SET end_item = end_id WHERE x.queue = q AND x.id = g;
  EXCEPTION WHEN undefined_object THEN
    UPDATE {schema}.groups x SET end_error = SQLERRM WHERE x.queue = q AND x.id = g;
  END;
END
$$;

-- Counts items of groups that finished in the caller's transaction (acked,
-- dead-lettered, cancelled), and ends each started group whose last pending
-- item this was. The rows are taken in group order, so two transactions
-- finishing items of the same groups cannot deadlock on them.
CREATE FUNCTION {schema}.groups_finished(queue text, group_ids text[], done bigint[],
                                         dead bigint[], cancelled bigint[])
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  t record;
  r record;
BEGIN
  FOR t IN SELECT u.g, sum(u.d) AS d, sum(u.x) AS x, sum(u.c) AS c
           FROM unnest(group_ids, done, dead, cancelled) AS u(g, d, x, c)
           WHERE u.g IS NOT NULL GROUP BY u.g ORDER BY u.g LOOP
    UPDATE {schema}.groups x
    SET pending = x.pending - t.d - t.x - t.c, done = x.done + t.d, dead = x.dead + t.x,
        cancelled = x.cancelled + t.c
    WHERE x.queue = q AND x.id = t.g AND x.ended_at IS NULL
    RETURNING x.pending, x.started_at, x.cancelled_at INTO r;
    IF FOUND AND r.pending <= 0 AND (r.started_at IS NOT NULL OR r.cancelled_at IS NOT NULL) THEN
      PERFORM {schema}.group_end(q, t.g);
    END IF;
  END LOOP;
END
$$;

-- Creates a group (not started) with its end work, or gives a group that
-- enqueues created its end work. The same call again does nothing; other end
-- work for a group that has some, or any for a group that ended, is refused.
CREATE FUNCTION {schema}.group_create(queue text, group_id text, end_queue text DEFAULT NULL,
                                      end_payload jsonb DEFAULT NULL)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  eq CONSTANT text := end_queue;
  ep CONSTANT jsonb := end_payload;
  r record;
BEGIN
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.check_group_id(g);
  IF eq IS NOT NULL THEN
    PERFORM {schema}.require_queue(eq);
  ELSIF ep IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'an end payload needs an end queue to go to';
  END IF;
  PERFORM {schema}.group_hold(q, g);
  SELECT x.end_queue, x.end_payload INTO r FROM {schema}.groups x WHERE x.queue = q AND x.id = g;
  IF r.end_queue IS NULL THEN
    UPDATE {schema}.groups x SET end_queue = eq, end_payload = ep
    WHERE x.queue = q AND x.id = g;
  ELSIF r.end_queue IS DISTINCT FROM eq OR r.end_payload IS DISTINCT FROM ep THEN
    RAISE EXCEPTION USING ERRCODE = '42710', MESSAGE = format(
      'group "%s" of queue "%s" already has other end work (end queue "%s")', g, q, r.end_queue);
  END IF;
END
$$;

-- A group as `partq group status` shows it. pending = held (not started) +
-- ready or delayed + in flight (listed in its part's claim record).
CREATE FUNCTION {schema}.group_status(queue text, group_id text)
RETURNS TABLE (pending bigint, held bigint, in_flight bigint, done bigint, dead bigint,
               cancelled bigint, created_at timestamptz, started_at timestamptz,
               cancelled_at timestamptz, ended_at timestamptz, end_queue text,
               end_payload jsonb, end_item bigint, end_error text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
BEGIN
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.check_group_id(g);
  RETURN QUERY
    SELECT x.pending,
           (SELECT count(*) FROM {schema}.items i
            WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'),
           (SELECT count(*) FROM {schema}.items i
            WHERE i.queue = q AND i.group_id = g AND EXISTS (
              SELECT 1 FROM {schema}.part_claims c
              WHERE c.queue = q AND c.part = i.part AND i.id = ANY(c.ids))),
           x.done, x.dead, x.cancelled, x.created_at, x.started_at, x.cancelled_at, x.ended_at,
           x.end_queue::text, x.end_payload, x.end_item, x.end_error
    FROM {schema}.groups x WHERE x.queue = q AND x.id = g;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = format('unknown group "%s" in queue "%s"', g, q);
  END IF;
END
$$;

-- Starts a group: its held items become due (one notice per part, with the
-- lowest key released there, as an enqueue sends), and from now on its new
-- items are due as they come. A group with nothing pending ends at once.
-- Starting a started group does nothing; an ended one is refused.
CREATE )sql",
                    GroupStartFunction(/*count_items=*/false), R"sql(

-- The checks of a new item that every writer of the SQL API makes
-- (enqueue_item, add_schedule), as the C++ producer's ValidateNewItem: a
-- payload of at most partq.max_payload_bytes (1 MiB when unset), a priority
-- in -32768..32767, a key of at most 1024 bytes. 22023 with the C++ message.
CREATE FUNCTION {schema}.check_new_item(payload bytea, priority int, key text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
BEGIN)sql",
                    ItemChecks("payload", "priority", "key"), R"sql(
END
$$;

-- enqueue() and enqueue_item() take a group id (named group_id; the older
-- calls, by position or by name, mean the same as before).
DROP FUNCTION {schema}.enqueue(text, text, text, text, interval, int);
DROP FUNCTION {schema}.enqueue(text, bytea, text, text, interval, int);
DROP FUNCTION {schema}.enqueue_item(text, text, text, text, interval, int);
DROP FUNCTION {schema}.enqueue_item(text, bytea, text, text, interval, int);
CREATE )sql",
                    EnqueueItemFunction("'i:' || new_part || ':' || prio || ':' || new_id",
                                        /*with_group=*/true),
                    R"sql(
CREATE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT * FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key, dedup_key, delay,
                                      priority, group_id);
END;

CREATE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, payload, key, dedup_key, delay, priority,
                                               group_id) e);

CREATE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key,
                                               dedup_key, delay, priority, group_id) e);
)sql")},
      {13, "cancel: cancelled_items, cancel_items(), cancel(); item_state() says cancelled",
       absl::StrCat(R"sql(
CREATE TABLE {schema}.cancelled_items (
  id            bigint PRIMARY KEY,
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  key           text COLLATE "C",
  dedup_key     text COLLATE "C",
  priority      smallint NOT NULL,
  attempts      int NOT NULL,
  enqueued_at   timestamptz NOT NULL,
  cancelled_at  timestamptz NOT NULL DEFAULT now(),
  group_id      text COLLATE "C"
);
CREATE INDEX cancelled_items_queue ON {schema}.cancelled_items (queue, part);
CREATE INDEX cancelled_items_dedup ON {schema}.cancelled_items (queue, dedup_key)
  WHERE dedup_key IS NOT NULL;

-- Store::CancelItems (store.h): removes the items among `ids` that are
-- ready or delayed, recording each in cancelled_items, and returns one row
-- per distinct id: cancelled, in_flight, already_cancelled, done, dead or
-- unknown (not an item of this queue). docs/architecture.md ("Cancel") has
-- the lock order and why it is exact; in short, per part of the asked items:
--   1. items' ROW EXCLUSIVE lock, then the queue row FOR NO KEY UPDATE (once):
--      DeleteQueue waits for this transaction or this for it (it takes
--      items' lock first too), and AcquireParts, which locks the queue row
--      FOR SHARE before anything else, cannot give an unowned part an owner
--      until this transaction ends. Enqueues and joins (FOR KEY SHARE, via
--      the sessions FK) are not held up.
--   2. If the part has an owner: its current claim record (the latest at the
--      owner's epoch) gets a new seq. A claim replaces exactly that row
--      (found by its seq); one under way waits for this transaction and then
--      finds the row gone from under it, so it records nothing and returns
--      nothing from this part (pg_store_sql.cc, ClaimCtes), however old its
--      snapshot. A claim that committed first is seen: the UPDATE waits for
--      it, finds the row replaced, and looks again. The ids on the record are
--      in flight; no other items of the part can be, until this commits.
--   3. The other asked items of the part are deleted and recorded in one
--      statement, skipping rows another transaction holds (a static re-join
--      marking them abandoned): those stay, reported in flight. This never
--      waits while holding the record, so it cannot close a deadlock.
-- With no owner, no claim can run in the part (an owner comes only through
-- AcquireParts, held off by the queue row), and a dead owner's record names
-- items nobody runs: they are cancelled, and the next owner's takeover
-- finds their ids gone, as it finds acked ones. Parts are taken in order;
-- the C++ store cancels one part per transaction, because a claim across
-- parts replaces several records in one statement, and a transaction that
-- held one record while waiting for another could deadlock with it
-- (PostgreSQL would then abort one of the two).
-- Items of queue groups count as cancelled in their groups (groups_finished,
-- last, after the parts' records and rows: the order of an ack), which may
-- end a group.
CREATE FUNCTION {schema}.cancel_items(queue text, ids bigint[])
RETURNS TABLE (id bigint, state text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  p int;
  owner_epoch bigint;
  flying bigint[];
  cancelled bigint[] := '{}';
  cgroups text[] := '{}';
  done_now bigint[];
  tries int;
  high_water bigint;
BEGIN
  PERFORM {schema}.check_queue_name(q);
  IF ids IS NULL OR EXISTS (SELECT 1 FROM unnest(ids) AS x WHERE x IS NULL OR x < 1) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'item ids must be 1 or more, not %s', coalesce(ids::text, 'NULL'));
  END IF;
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  PERFORM 1 FROM {schema}.queues qq WHERE qq.name = q FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    PERFORM {schema}.unknown_queue(q);
  END IF;
  FOR p IN SELECT DISTINCT i.part FROM {schema}.items i
           WHERE i.id = ANY(ids) AND i.queue = q ORDER BY 1 LOOP
    flying := '{}';
    tries := 0;
    LOOP
      SELECT sp.epoch INTO owner_epoch FROM {schema}.session_parts sp
      WHERE sp.queue = q AND sp.part = p;
      EXIT WHEN NOT FOUND;
      UPDATE {schema}.part_claims c SET seq = nextval('{schema}.claim_seq')
      WHERE c.queue = q AND c.part = p AND c.epoch = owner_epoch
        AND c.seq = (SELECT l.seq FROM {schema}.part_claims l
                     WHERE l.queue = q AND l.part = p AND l.epoch = owner_epoch
                     ORDER BY l.seq DESC LIMIT 1)
      RETURNING c.ids INTO flying;
      IF FOUND THEN
        PERFORM 1 FROM {schema}.session_parts sp
        WHERE sp.queue = q AND sp.part = p AND sp.epoch = owner_epoch;
        EXIT WHEN FOUND;
        flying := '{}';  -- a static re-join moved the epoch: the new tenure's record
      ELSE
        PERFORM 1 FROM {schema}.part_claims l
        WHERE l.queue = q AND l.part = p AND l.epoch = owner_epoch;
        IF NOT FOUND THEN
          PERFORM 1 FROM {schema}.session_parts sp
          WHERE sp.queue = q AND sp.part = p AND sp.epoch = owner_epoch;
          IF FOUND THEN
            -- An owner without a record (an owner writes one when its tenure
            -- starts, so never expected): what it runs cannot be told, so
            -- nothing of the part is taken from it.
            flying := ids;
            EXIT;
          END IF;
        END IF;
      END IF;
      tries := tries + 1;
      IF tries >= 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = format(
          'cancel in queue "%s": part %s''s claims changed 1000 times meanwhile; retry', q, p);
      END IF;
    END LOOP;
    WITH gone AS (
      DELETE FROM {schema}.items i
      WHERE i.id IN (SELECT x.id FROM {schema}.items x
                     WHERE x.id = ANY(ids) AND x.queue = q AND x.part = p
                       AND x.id <> ALL(flying)
                     FOR UPDATE SKIP LOCKED)
      RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority, i.attempts, i.enqueued_at,
                i.group_id),
    recorded AS (
      INSERT INTO {schema}.cancelled_items
        (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, group_id)
      SELECT * FROM gone
      RETURNING cancelled_items.id, cancelled_items.group_id)
    SELECT cancelled || coalesce(array_agg(r.id), '{}'),
           cgroups || coalesce(array_agg(r.group_id) FILTER (WHERE r.group_id IS NOT NULL), '{}')
    INTO cancelled, cgroups FROM recorded r;
  END LOOP;
  IF cardinality(cgroups) > 0 THEN
    PERFORM {schema}.groups_finished(q, cgroups, array_fill(0::bigint, ARRAY[cardinality(cgroups)]),
                                     array_fill(0::bigint, ARRAY[cardinality(cgroups)]),
                                     array_fill(1::bigint, ARRAY[cardinality(cgroups)]));
  END IF;
  SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO high_water
  FROM {schema}.items_id_seq s;
  -- What became of the others, as item_state() tells it (in flight: still an
  -- item, on a record or held by another transaction).
  RETURN QUERY
    SELECT a.id, CASE
      WHEN a.id = ANY(cancelled) THEN 'cancelled'
      WHEN i.queue IS NOT NULL THEN CASE WHEN i.queue = q THEN 'in_flight' ELSE 'unknown' END
      WHEN d.queue IS NOT NULL THEN CASE WHEN d.queue = q THEN 'dead' ELSE 'unknown' END
      WHEN c.queue IS NOT NULL THEN
        CASE WHEN c.queue = q THEN 'already_cancelled' ELSE 'unknown' END
      WHEN x.queue IS NOT NULL THEN CASE WHEN x.queue = q THEN 'done' ELSE 'unknown' END
      WHEN a.id BETWEEN 1 AND high_water THEN 'done'
      ELSE 'unknown' END
    FROM (SELECT u.id, min(u.n) AS n FROM unnest(ids) WITH ORDINALITY AS u(id, n)
          GROUP BY u.id) a
    LEFT JOIN {schema}.items i ON i.id = a.id
    LEFT JOIN {schema}.dead_items d ON d.id = a.id
    LEFT JOIN {schema}.cancelled_items c ON c.id = a.id
    LEFT JOIN {schema}.results x ON x.id = a.id
    ORDER BY a.n;
END
$$;

-- By dedup key: the live item holding it, cancelled as above; with none,
-- the newest finished one's state (done, dead, already_cancelled), else
-- unknown with id NULL.
CREATE FUNCTION {schema}.cancel_by_dedup_key(queue text, dedup_key text)
RETURNS TABLE (id bigint, state text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  dk CONSTANT text := dedup_key;
  live bigint;
BEGIN
  PERFORM {schema}.require_queue(q);
  SELECT i.id INTO live FROM {schema}.items i WHERE i.queue = q AND i.dedup_key = dk;
  IF FOUND THEN
    RETURN QUERY SELECT c.id, c.state FROM {schema}.cancel_items(q, ARRAY[live]) c;
    RETURN;
  END IF;
  RETURN QUERY
    SELECT f.id, f.s FROM (
      SELECT x.id, 'done'::text AS s FROM {schema}.results x
      WHERE x.queue = q AND x.dedup_key = dk
      UNION ALL
      SELECT d.id, 'dead' FROM {schema}.dead_items d WHERE d.queue = q AND d.dedup_key = dk
      UNION ALL
      SELECT c.id, 'already_cancelled' FROM {schema}.cancelled_items c
      WHERE c.queue = q AND c.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text;
END
$$;

-- The SQL API's cancel of one item (docs/sql-api.md), in the caller's
-- transaction: its state after the call, as cancel_items() names it.
CREATE FUNCTION {schema}.cancel(queue text, id bigint) RETURNS text
LANGUAGE sql VOLATILE
RETURN (SELECT c.state FROM {schema}.cancel_items(queue, ARRAY[id]) c);

-- Cancelling a queue group (migration 12), step one: the group takes no
-- more items and, with run_end false, ends without its end item; a group
-- with nothing pending ends now. Its items are then cancelled with
-- cancel_items(), which counts them in the group (Store::CancelGroup does it
-- part by part, one transaction each, as CancelItems does); those in flight
-- finish, and the last to finish ends the group. Returns the ids of its items
-- still there. Unknown group 42704, one that ended 55000.
CREATE FUNCTION {schema}.group_mark_cancelled(queue text, group_id text, run_end boolean)
RETURNS bigint[] LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  left_over bigint;
  out bigint[];
BEGIN
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.check_group_id(g);
  UPDATE {schema}.groups x
  SET cancelled_at = coalesce(x.cancelled_at, now()),
      end_skipped = x.end_skipped OR NOT coalesce(run_end, true)
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.pending INTO left_over;
  IF NOT FOUND THEN
    PERFORM 1 FROM {schema}.groups x WHERE x.queue = q AND x.id = g;
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = format('group "%s" of queue "%s" has ended; there is nothing to cancel', g, q);
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = format('unknown group "%s" in queue "%s"', g, q);
  END IF;
  IF left_over <= 0 THEN
    PERFORM {schema}.group_end(q, g);
  END IF;
  SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}') INTO out
  FROM {schema}.items i WHERE i.queue = q AND i.group_id = g;
  RETURN out;
END
$$;

-- The SQL API's group cancel, in the caller's transaction: both steps at
-- once; returns how many items it cancelled. (Across several parts a
-- transaction can meet a claim in a deadlock, 40P01: retry it.)
CREATE FUNCTION {schema}.group_cancel(queue text, group_id text, run_end boolean DEFAULT true)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT count(*) FROM {schema}.cancel_items(
          queue, {schema}.group_mark_cancelled(queue, group_id, run_end)) c
        WHERE c.state = 'cancelled');

-- item_state() and item_state_by_dedup_key() of migration 6, with cancelled
-- items.
)sql",
                    "CREATE OR REPLACE ", ItemStateFunction(kItemStateCancelled),
                    "\nCREATE OR REPLACE ",
                    ItemStateByDedupKeyFunction(kItemStateByDedupKeyCancelled))},
      {14, "queues.rate: a fleet-wide rate limit, kept per part by its owner (partq queue set --rate)",
       R"sql(
ALTER TABLE {schema}.queues ADD COLUMN rate double precision
  CHECK (rate IS NULL OR (rate > 0 AND rate <= 1000000));
)sql"},
      {15,
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
  PERFORM {schema}.check_new_item(payload, prio, key);
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
      {16, "queues.grown_from: the part counts before each grow (partq queue set --parts)",
       R"sql(
ALTER TABLE {schema}.queues ADD COLUMN grown_from int[] NOT NULL DEFAULT '{}';
)sql"},
      {17, "throughput: what sessions finished per minute, carried by their heartbeats", R"sql(
CREATE TABLE {schema}.throughput (
  queue       text COLLATE "C" NOT NULL,
  minute      timestamptz NOT NULL,
  session_id  uuid NOT NULL,
  acked       bigint NOT NULL DEFAULT 0,
  retried     bigint NOT NULL DEFAULT 0,
  dead        bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, minute, session_id)
);
)sql"},
      // The owner of a part serves a fair queue's keys in turn (pg_store_sql.cc,
      // FairItems); NULL is the ordinary (priority, id) order. A text with
      // one allowed value rather than a boolean, so another basis (a header,
      // a group) can come without a migration of its meaning.
      {18, "queues.fair_by: fair share across keys (partq queue set --fair-by key)",
       R"sql(
ALTER TABLE {schema}.queues ADD COLUMN fair_by text CHECK (fair_by IS NULL OR fair_by = 'key');
)sql"},
      {19, "group generations: a heartbeat reads members and owners only when they changed",
       R"sql(
-- The group generation of each queue (issue 26, Store::HeartbeatSince): moved
-- in every transaction that changes the queue's members or owners, so a
-- heartbeat that finds it where its session last saw it reads no owner row.
-- Moved by triggers rather than by each statement, so that no path (join,
-- leave, expiry, acquire, release, a static re-join's kept parts, a queue's
-- deletion, and those added later) can forget it. Statement triggers: one
-- move per statement, whatever its rows, and none for a statement that
-- changed no row (an acquisition that got nothing). They fire at the end of
-- the statement, after every row lock it takes, so a transaction holds this
-- row's lock only from there to its commit and two changes cannot deadlock
-- on it. A table of its own: moving a column of the queue row would deadlock
-- two acquisitions, which both hold that row FOR SHARE. No foreign key: the
-- cascades of a queue's deletion move it after the queue row is gone; the
-- row left behind is harmless (a re-created queue's sessions start from
-- kNoGeneration and read its value).
CREATE TABLE {schema}.group_generations (
  queue       text COLLATE "C" PRIMARY KEY,
  generation  bigint NOT NULL
);

CREATE FUNCTION {schema}.move_group_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {schema}.group_generations AS g (queue, generation)
  SELECT DISTINCT c.queue, 1 FROM changed c
  ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
  RETURN NULL;
END
$$;

-- A session past its TTL that heartbeats again before anyone deleted it
-- comes back into the members (which are read by time), so its heartbeat
-- moves the generation too; other heartbeats (the WHEN is false) do not, and
-- stay HOT updates.
CREATE FUNCTION {schema}.move_group_generation_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {schema}.group_generations AS g (queue, generation)
  VALUES (NEW.queue, 1)
  ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
  RETURN NULL;
END
$$;

CREATE TRIGGER group_parts_inserted AFTER INSERT ON {schema}.session_parts
  REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_parts_updated AFTER UPDATE ON {schema}.session_parts
  REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_parts_deleted AFTER DELETE ON {schema}.session_parts
  REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_sessions_inserted AFTER INSERT ON {schema}.sessions
  REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_sessions_deleted AFTER DELETE ON {schema}.sessions
  REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_sessions_revived AFTER UPDATE ON {schema}.sessions
  FOR EACH ROW WHEN (OLD.expires_at < now())
  EXECUTE FUNCTION {schema}.move_group_generation_row();
)sql"},
      // At most this many items of a key in flight at once (pg_store_sql.cc,
      // ReadyCondition); NULL is no bound.
      {20, "queues.key_concurrency: items of a key in flight at once (--key-concurrency N)",
       R"sql(
ALTER TABLE {schema}.queues ADD COLUMN key_concurrency int
  CHECK (key_concurrency IS NULL OR key_concurrency BETWEEN 1 AND 1000000);
)sql"},
      // Retention (Store::Prune, `partq prune`): what finished work leaves
      // behind, older than a cutoff, in one transaction. No index on the
      // times: a prune reads the queue's rows of each table once, run every
      // hour or day, and an index would cost every ack and cancel a write.
      {21, "prune(): retention for results, cancelled items, ended groups and dead items",
       R"sql(
CREATE FUNCTION {schema}.prune(queue text, older_than interval, dead boolean DEFAULT false)
RETURNS TABLE (results bigint, cancelled bigint, groups bigint, dead_items bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  cutoff timestamptz;
BEGIN
  PERFORM {schema}.require_queue(q);
  IF older_than IS NULL OR older_than < interval '0' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'a retention age must be zero or more, not %s', coalesce(older_than::text, 'NULL'));
  END IF;
  cutoff := now() - older_than;
  DELETE FROM {schema}.results r WHERE r.queue = q AND r.finished_at <= cutoff;
  GET DIAGNOSTICS results = ROW_COUNT;
  DELETE FROM {schema}.cancelled_items c WHERE c.queue = q AND c.cancelled_at <= cutoff;
  GET DIAGNOSTICS cancelled = ROW_COUNT;
  DELETE FROM {schema}.groups g WHERE g.queue = q AND g.ended_at <= cutoff;
  GET DIAGNOSTICS groups = ROW_COUNT;
  dead_items := 0;
  IF coalesce(dead, false) THEN
    DELETE FROM {schema}.dead_items d WHERE d.queue = q AND d.failed_at <= cutoff;
    GET DIAGNOSTICS dead_items = ROW_COUNT;
  END IF;
  RETURN NEXT;
END
$$;
)sql"},
      {22, "group changes: a group read after a change returns only the owners that changed",
       R"sql(
-- The owner rows each generation wrote or deleted (issue 26,
-- GroupView::delta): a session whose last view is at generation g reads the
-- parts changed since g here, not every owner row. Written by the triggers
-- that move the generation, in the same statement and transaction, so a
-- snapshot that sees generation G sees exactly the changes of generations up
-- to G (the generation row's lock orders them by commit). session_id NULL:
-- the row went. The changes of the last 1024 generations are kept
-- (kGroupChangesKept in store/types.h): older callers read the whole group.
-- Pruned by the transaction that moves the generation to a multiple of 64,
-- which holds the generation row, so two prunes never overlap.
CREATE TABLE {schema}.group_changes (
  queue       text COLLATE "C" NOT NULL,
  generation  bigint NOT NULL,
  part        int NOT NULL,
  session_id  uuid,
  epoch       bigint,
  PRIMARY KEY (queue, generation, part)
);

-- The session_parts triggers of migration 19 call move_group_generation();
-- it now also logs their rows (PL/pgSQL compiles a trigger function for each
-- table, so the sessions triggers never plan the branch that reads parts).
CREATE OR REPLACE FUNCTION {schema}.move_group_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME <> 'session_parts' THEN
    INSERT INTO {schema}.group_generations AS g (queue, generation)
    SELECT DISTINCT c.queue, 1 FROM changed c
    ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
    RETURN NULL;
  END IF;
  WITH moved AS (
    INSERT INTO {schema}.group_generations AS g (queue, generation)
    SELECT DISTINCT c.queue, 1 FROM changed c
    ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1
    RETURNING g.queue, g.generation),
  logged AS (
    INSERT INTO {schema}.group_changes (queue, generation, part, session_id, epoch)
    SELECT c.queue, m.generation, c.part,
           CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE c.session_id END,
           CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE c.epoch END
    FROM changed c JOIN moved m ON m.queue = c.queue)
  DELETE FROM {schema}.group_changes x USING moved m
  WHERE x.queue = m.queue AND m.generation % 64 = 0 AND x.generation <= m.generation - 1024;
  RETURN NULL;
END
$$;

-- The owners changed in `queue` after generation `since`, as the group
-- reads return owners (part:session:epoch, by part), each part's latest
-- change; an empty session and epoch for a row that went.
CREATE FUNCTION {schema}.owner_changes(queue text, since bigint) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT string_agg(d.part || ':' || coalesce(d.session_id::text, '') || ':'
                    || coalesce(d.epoch::text, ''), ',' ORDER BY d.part)
  FROM (SELECT DISTINCT ON (c.part) c.part, c.session_id, c.epoch
        FROM {schema}.group_changes c
        WHERE c.queue = owner_changes.queue AND c.generation > since
        ORDER BY c.part, c.generation DESC) d
$$;
)sql"},
      // Vacuum without truncation (issue 27; the comment above the list,
      // "Migration 23").
      {23, "items and part_claims: vacuum never truncates them (no exclusive lock, no 5 s wait)",
       R"sql(
ALTER TABLE {schema}.items SET (vacuum_truncate = false);
ALTER TABLE {schema}.part_claims SET (vacuum_truncate = false);
)sql"},
      // Expiry sweeps (issue 26; the comment above the list, "Migration 24").
      {24, "expiry_sweeps: an idle heartbeat reads the members only when one may have expired",
       R"sql(
CREATE TABLE {schema}.expiry_sweeps (
  queue        text COLLATE "C" PRIMARY KEY
               REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  generation   bigint NOT NULL,
  sweep_after  timestamptz NOT NULL
) WITH (fillfactor = 50);
INSERT INTO {schema}.expiry_sweeps (queue, generation, sweep_after)
SELECT name, -1, '-infinity' FROM {schema}.queues;
)sql"},
      // Many items in one call (the comment above the list, "Migration 25").
      {25, "enqueue_many(): many items in one call of the SQL API", absl::StrCat(R"sql(
CREATE FUNCTION {schema}.enqueue_many(queue text, payloads bytea[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
-- JIT off: the insert's estimates are a guess, and compiling it took longer
-- than inserting 20000 items.
LANGUAGE plpgsql VOLATILE SET jit = off AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  grp CONSTANT text := group_id;
  n CONSTANT int := cardinality(payloads);
  prio CONSTANT int := coalesce(priority, 0);
  d interval := coalesce(delay, interval '0');
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
  nparts int;
  bad record;
  r record;
  ids bigint[];
  item_parts int[];
  dups boolean[];
  one record;
  ps int[];
  firsts bigint[];
BEGIN
  PERFORM {schema}.check_queue_name(q);
  IF payloads IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payloads must not be NULL';
  END IF;
  IF array_ndims(payloads) > 1 OR array_ndims(keys) > 1 OR array_ndims(dedup_keys) > 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'payloads, keys and dedup_keys must be one-dimensional arrays';
  END IF;
  IF cardinality(keys) <> n THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'keys must have one element per payload (NULL for none): %s for %s payloads',
      cardinality(keys), n);
  END IF;
  IF cardinality(dedup_keys) <> n THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'dedup_keys must have one element per payload (NULL for none): %s for %s payloads',
      cardinality(dedup_keys), n);
  END IF;
  -- The checks of enqueue_item, once for what all items share ...
  PERFORM {schema}.check_new_item(''::bytea, prio, NULL);
  IF d > interval '3650 days' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('delay %s is longer than 10 years', d);
  END IF;
  d := greatest(d, interval '0');
  -- ... and for each item in one pass; the first refused one is named.
  SELECT u.o, u.p, u.k, u.dk INTO bad
  FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
  WHERE u.p IS NULL OR octet_length(u.p) > lim OR octet_length(u.k) > 1024
     OR octet_length(u.dk) > 1024
  ORDER BY u.o LIMIT 1;
  IF FOUND THEN
    BEGIN
      PERFORM {schema}.check_new_item(bad.p, prio, bad.k);
      RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('dedup key is %s bytes; the limit is 1024', octet_length(bad.dk));
    EXCEPTION WHEN invalid_parameter_value THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('item %s: %s', bad.o, SQLERRM);
    END;
  END IF;

  IF grp IS NOT NULL THEN
    -- A group's items are held and counted by enqueue_item, one by one.
    RETURN QUERY
      SELECT e.id, e.part, e.duplicate
      FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
      CROSS JOIN LATERAL {schema}.enqueue_item(q, u.p, u.k, u.dk, d, prio, grp) e
      ORDER BY u.o;
    RETURN;
  END IF;

  -- The lock and the queue read of enqueue_item (which says why).
)sql", kLockAndReadQueue, R"sql(
  -- One insert for all; ids in the order given, so a key's items keep it.
  -- Each item's answer goes into ids/item_parts/dups at its position: the
  -- new item, or NULL where its dedup key already had a live item.
  WITH src AS MATERIALIZED (
    SELECT u.o, u.p, u.k, u.dk, nextval('{schema}.items_id_seq') AS nid
    FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
    ORDER BY u.o),
  ins AS (
    INSERT INTO {schema}.items AS i (id, queue, part, key, dedup_key, priority, run_at, payload)
    SELECT s.nid, q,
           CASE WHEN s.k IS NULL THEN {schema}.part_for_id(s.nid, nparts)
                ELSE (({schema}.murmur2(convert_to(s.k, 'UTF8')) & 2147483647) % nparts)::int
           END,
           s.k, s.dk, prio::smallint, now() + d, s.p
    FROM src s
    -- In dedup key order (ids stay in the order given): calls that share
    -- keys then wait for each other's in one order, never in a cycle.
    ORDER BY s.dk, s.o
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.id, i.part),
  lowest AS (SELECT x.part, min(x.id) AS first FROM ins x GROUP BY x.part)
  SELECT array_agg(m.id ORDER BY s.o), array_agg(m.part ORDER BY s.o),
         array_agg(m.id IS NULL ORDER BY s.o),
         (SELECT array_agg(l.part ORDER BY l.part) FROM lowest l),
         (SELECT array_agg(l.first ORDER BY l.part) FROM lowest l)
  INTO ids, item_parts, dups, ps, firsts
  FROM src s LEFT JOIN ins m ON m.id = s.nid;

  IF array_position(ids, NULL) IS NOT NULL THEN
    -- The live items of those keys, read in a statement of its own, which
    -- sees the items this call inserted (a key given twice) and, under READ
    -- COMMITTED, those whose inserts the one above waited for ...
    FOR r IN
      SELECT t.o, x.id, x.part
      FROM unnest(ids, dedup_keys) WITH ORDINALITY AS t(id, dk, o)
      JOIN {schema}.items x ON x.queue = q AND x.dedup_key = t.dk
      WHERE t.id IS NULL
    LOOP
      ids[r.o] := r.id;
      item_parts[r.o] := r.part;
    END LOOP;
    -- ... and any finished meanwhile enqueued anew, as enqueue_item does.
    -- (By position, not subscript: the caller's arrays may not start at 1.)
    FOR r IN
      SELECT t.o, t.p, t.k, t.dk
      FROM unnest(ids, payloads, keys, dedup_keys) WITH ORDINALITY AS t(id, p, k, dk, o)
      WHERE t.id IS NULL
    LOOP
      SELECT e.id, e.part, e.duplicate INTO one
      FROM {schema}.enqueue_item(q, r.p, r.k, r.dk, d, prio) e;
      ids[r.o] := one.id;
      item_parts[r.o] := one.part;
      dups[r.o] := one.duplicate;
    END LOOP;
  END IF;

  -- The notices of the C++ producer's batches (NotifyParts): one per part
  -- with the lowest id it added there; past 32 parts one for all parts.
  IF cardinality(ps) > 32 THEN
    PERFORM pg_notify({schema}.channel_for(q),
                      'i:-1:' || prio || ':' || (SELECT min(f) FROM unnest(firsts) f));
  ELSIF ps IS NOT NULL THEN
    PERFORM pg_notify({schema}.channel_for(q), 'i:' || t.p || ':' || prio || ':' || t.i)
    FROM unnest(ps, firsts) AS t(p, i);
  END IF;
  RETURN QUERY SELECT t.id, t.part, t.dup FROM unnest(ids, item_parts, dups) AS t(id, part, dup);
END
$$;

-- Text payloads are their UTF-8 bytes, as enqueue_item's.
CREATE FUNCTION {schema}.enqueue_many(queue text, payloads text[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF array_ndims(payloads) > 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'payloads, keys and dedup_keys must be one-dimensional arrays';
  END IF;
  RETURN QUERY SELECT * FROM {schema}.enqueue_many(
    queue,
    CASE WHEN payloads IS NOT NULL THEN ARRAY(
      SELECT convert_to(t.p, 'UTF8') FROM unnest(payloads) WITH ORDINALITY AS t(p, o) ORDER BY t.o)
    END,
    keys, dedup_keys, delay, priority, group_id);
END
$$;
)sql")},
      {26, "group_start() returns how many items it released, not how many parts",
       absl::StrCat("CREATE OR REPLACE ", GroupStartFunction(/*count_items=*/true))},
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
