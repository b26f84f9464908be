// Every SQL statement PgStore prepares, in one place, with the reasons for
// their shape. Statements are prepared once per connection (libpqxx sends the
// Parse on first use) and take arrays as text literals ("{1,2,3}"), because
// libpqxx 6.4 cannot bind vectors.
//
// Conventions: times travel as microseconds since the epoch (or microseconds
// of an interval) in bigint, so the client never parses timestamp text; bytea
// travels as its text form ("\x0a0b") and is decoded by DecodeBytea.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/migrations.h"
#include "coordinator/pg_store_internal.h"

namespace partq {
namespace pg_internal {
namespace {

// The single-row enqueue. One round trip: the queue lookup (NotFound and the
// part count), the id (nextval, so a keyless item's part can come from its id
// in the same statement, via part_for_id which mirrors PartForId), the insert
// with dedup, and the NOTIFY. $2 is the key's positive murmur2 (NULL without a
// key), so `$2 % parts` is PartForKey and no client-side cache of part counts
// can go stale. A dedup hit returns the parts but no id.
constexpr const char* kEnqueue = R"sql(
WITH q AS (SELECT parts FROM {schema}.queues WHERE name = $1),
n AS (SELECT nextval('{schema}.items_id_seq') AS id, parts FROM q),
ins AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload)
  SELECT n.id, $1,
         CASE WHEN $2::bigint IS NULL THEN {schema}.part_for_id(n.id, n.parts)
              ELSE ($2::bigint % n.parts)::int END,
         $3, $4, $5::smallint, now() + $6::bigint * interval '1 microsecond', $7::bytea
  FROM n
  ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
  RETURNING id, part)
SELECT q.parts, ins.id, ins.part,
       CASE WHEN ins.id IS NOT NULL THEN pg_notify($8, 'i:' || ins.part) END
FROM q LEFT JOIN ins ON true
)sql";

}  // namespace

std::string EnqueueSql(absl::string_view schema) { return WithSchema(kEnqueue, schema); }

std::vector<Statement> PreparedStatements(absl::string_view schema) {
  std::vector<Statement> s = {
      // --- queues ---------------------------------------------------------------
      {"create_queue", R"sql(
INSERT INTO {schema}.queues (name, parts, assignment, session_ttl, max_attempts, ordered,
                            dlq_topic)
VALUES ($1, $2, $3, $4::bigint * interval '1 microsecond', $5, $6, $7)
ON CONFLICT (name) DO NOTHING
RETURNING name
)sql"},
      {"get_queue", R"sql(
SELECT name, parts, assignment, (extract(epoch FROM session_ttl) * 1000000)::bigint,
       max_attempts, ordered, dlq_topic
FROM {schema}.queues WHERE name = $1
)sql"},
      {"list_queues", R"sql(
SELECT name, parts, assignment, (extract(epoch FROM session_ttl) * 1000000)::bigint,
       max_attempts, ordered, dlq_topic
FROM {schema}.queues ORDER BY name
)sql"},

      // --- sessions -------------------------------------------------------------
      // Join, dynamic ($2 NULL: a random id) or static ($2 = instance id: a
      // stable id, so a restart within the TTL finds its row). A static
      // re-join bumps the incarnation (fencing the old process's heartbeats)
      // and moves every part the row still owns to a fresh epoch (fencing its
      // acks); the parts are returned as "part:epoch,...". The NOTIFY goes out
      // on commit; the statement is its own transaction.
      {"join", R"sql(
WITH q AS (SELECT name, session_ttl FROM {schema}.queues WHERE name = $1),
up AS (
  INSERT INTO {schema}.sessions AS t (id, queue, instance_id, host, pid, expires_at)
  SELECT CASE WHEN $2::text IS NULL THEN gen_random_uuid()
              ELSE md5($1 || '/' || $2::text)::uuid END,
         q.name, $2::text, $3, $4, now() + q.session_ttl
  FROM q
  ON CONFLICT (id) DO UPDATE
    SET incarnation = t.incarnation + 1, host = excluded.host, pid = excluded.pid,
        heartbeat_at = now(), expires_at = excluded.expires_at
  RETURNING id, incarnation),
kept AS (
  UPDATE {schema}.session_parts sp SET epoch = nextval('{schema}.epochs'), acquired_at = now()
  FROM up WHERE sp.session_id = up.id AND sp.queue = $1
  RETURNING sp.part, sp.epoch)
SELECT up.id, up.incarnation,
       (SELECT string_agg(part || ':' || epoch, ',' ORDER BY part) FROM kept),
       pg_notify($5, 'g')
FROM up
)sql"},
      // Heartbeat: one round trip. The update touches only heartbeat_at and
      // expires_at (no index covers them: a HOT update). Expired sessions of
      // the queue are deleted (their parts cascade), but a heartbeat never
      // waits: a locked session row is one in the middle of its own
      // heartbeat or leave (and two expired members deleting each other must
      // not deadlock), and a locked part row is a Finish of that session
      // still running (a paused process can hold it for long; its parts are
      // fenced until it ends anyway), so those sessions are left for a later
      // heartbeat. The part rows are locked here first (all or none) so the
      // cascade cannot wait either. All
      // CTEs read one snapshot, so rows deleted here are still visible to the
      // reads below and are excluded by hand; our own row is taken from the
      // update (the snapshot still has the old expires_at).
      {"heartbeat", R"sql(
WITH me AS (
  UPDATE {schema}.sessions s
  SET heartbeat_at = now(), expires_at = now() + q.session_ttl
  FROM {schema}.queues q
  WHERE s.id = $2 AND s.incarnation = $3 AND s.queue = $1 AND q.name = $1
  RETURNING s.id),
gone AS (
  DELETE FROM {schema}.sessions d
  WHERE d.id IN (
    SELECT x.id FROM {schema}.sessions x
    WHERE x.queue = $1 AND x.expires_at < now() AND x.id <> $2
      AND (SELECT count(*) FROM {schema}.session_parts sp WHERE sp.session_id = x.id)
          = (SELECT count(*) FROM (SELECT 1 FROM {schema}.session_parts sp
                                   WHERE sp.session_id = x.id FOR UPDATE SKIP LOCKED) l)
    FOR UPDATE SKIP LOCKED)
  RETURNING d.id),
members AS (
  SELECT id FROM {schema}.sessions
  WHERE queue = $1 AND expires_at >= now() AND id <> $2 AND id NOT IN (SELECT id FROM gone)
  UNION ALL SELECT id FROM me)
SELECT (SELECT count(*) FROM me), (SELECT count(*) FROM gone),
       (SELECT string_agg(id::text, ',' ORDER BY id) FROM members),
       (SELECT string_agg(part || ':' || session_id || ':' || epoch, ',' ORDER BY part)
        FROM {schema}.session_parts
        WHERE queue = $1 AND session_id NOT IN (SELECT id FROM gone)),
       (SELECT count(pg_notify($4, 'g')) FROM (SELECT 1 FROM gone LIMIT 1) g)
)sql"},
      {"read_group", R"sql(
SELECT (SELECT count(*) FROM {schema}.queues WHERE name = $1),
       (SELECT string_agg(id::text, ',' ORDER BY id) FROM {schema}.sessions
        WHERE queue = $1 AND expires_at >= now()),
       (SELECT string_agg(part || ':' || session_id || ':' || epoch, ',' ORDER BY part)
        FROM {schema}.session_parts WHERE queue = $1)
)sql"},
      // AcquireParts: the primary key (queue, part) makes a second owner
      // impossible (I1); ON CONFLICT DO NOTHING skips owned parts. Rows go in
      // part order so two sessions racing for overlapping sets wait on each
      // other in one order and cannot deadlock. A row (-1, 0) says our session
      // row is gone; a session deleted concurrently surfaces as an FK error.
      {"acquire", R"sql(
WITH s AS (SELECT id FROM {schema}.sessions WHERE id = $2 AND queue = $1),
ins AS (
  INSERT INTO {schema}.session_parts (queue, part, session_id, epoch)
  SELECT $1, p.part, s.id, nextval('{schema}.epochs')
  FROM s, {schema}.queues q, unnest($3::int[]) AS p(part)
  WHERE q.name = $1 AND p.part >= 0 AND p.part < q.parts
  ORDER BY p.part
  ON CONFLICT DO NOTHING
  RETURNING part, epoch)
SELECT part, epoch FROM ins
UNION ALL SELECT -1, 0 WHERE NOT EXISTS (SELECT 1 FROM s)
)sql"},
      // ReleaseParts: deletes our rows at the given epochs and returns the
      // items still claimed under them (attempt refunded: a graceful
      // hand-off is not a failure). One statement, so one transaction.
      {"release", R"sql(
WITH rel AS (
  DELETE FROM {schema}.session_parts sp
  USING unnest($3::int[], $4::bigint[]) AS r(part, epoch)
  WHERE sp.queue = $1 AND sp.session_id = $2 AND sp.part = r.part AND sp.epoch = r.epoch
  RETURNING sp.part, sp.epoch),
back AS (
  UPDATE {schema}.items i
  SET claim_epoch = NULL, claimed_at = NULL, attempts = greatest(i.attempts - 1, 0)
  FROM rel WHERE i.queue = $1 AND i.part = rel.part AND i.claim_epoch = rel.epoch
  RETURNING 1)
SELECT (SELECT count(*) FROM rel), (SELECT count(*) FROM back),
       (SELECT count(pg_notify($5, 'g')) FROM (SELECT 1 FROM rel LIMIT 1) x)
)sql"},
      // Leave: deletes this incarnation's row; its parts cascade at the end
      // of the statement, after `p` has read them from the snapshot.
      {"leave", R"sql(
WITH s AS (
  DELETE FROM {schema}.sessions WHERE id = $2 AND incarnation = $3 AND queue = $1
  RETURNING id),
p AS (SELECT sp.part, sp.epoch FROM {schema}.session_parts sp JOIN s ON sp.session_id = s.id),
back AS (
  UPDATE {schema}.items i
  SET claim_epoch = NULL, claimed_at = NULL, attempts = greatest(i.attempts - 1, 0)
  FROM p WHERE i.queue = $1 AND i.part = p.part AND i.claim_epoch = p.epoch
  RETURNING 1)
SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM back),
       (SELECT count(pg_notify($4, 'g')) FROM s)
)sql"},
      {"notify", "SELECT pg_notify($1, $2)"},
      {"notify_parts", "SELECT count(pg_notify($1, 'i:' || p)) FROM unnest($2::int[]) AS p"},

      // --- items ------------------------------------------------------------------
      {"enqueue", kEnqueue},
      {"dedup_lookup", R"sql(
SELECT id, part FROM {schema}.items WHERE queue = $1 AND dedup_key = $2
)sql"},
      // EnqueueBatch reserves ids for its rows (so the client can compute
      // PartForId and COPY explicit ids). Usually the n values are contiguous
      // and min/max/count say so; if concurrent nextval calls interleaved,
      // reserve_id_list fetches a fresh, explicit list instead.
      {"reserve_ids", R"sql(
WITH q AS (SELECT parts FROM {schema}.queues WHERE name = $1),
s AS (SELECT nextval('{schema}.items_id_seq') AS v FROM q, generate_series(1, $2::int))
SELECT (SELECT parts FROM q), min(v), max(v), count(v),
       (extract(epoch FROM now()) * 1000000)::bigint
FROM s
)sql"},
      {"reserve_id_list", R"sql(
SELECT nextval('{schema}.items_id_seq') FROM generate_series(1, $1::int)
)sql"},
      // The batch path for items with dedup keys (COPY cannot skip conflicts).
      {"insert_batch", R"sql(
WITH ins AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload)
  SELECT t.id, $1, t.part, t.key, t.dedup, t.prio,
         now() + t.delay_us * interval '1 microsecond', decode(t.payload, 'hex')
  FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::smallint[], $7::bigint[],
              $8::text[]) AS t(id, part, key, dedup, prio, delay_us, payload)
  ORDER BY t.id
  ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
  RETURNING 1)
SELECT count(*) FROM ins
)sql"},
      // Claim: one statement, no SKIP LOCKED (only the owner claims in a
      // part). `own` keeps the (part, epoch) pairs that are still ours, so a
      // session that lost a part cannot stamp its items. Per part, one index
      // scan of items_ready in (priority, id) order takes up to $4 ready
      // items (ordered queues keep only each key's oldest live item; items_key
      // serves that probe), and a second scan looks for one item claimed
      // under an older epoch (its claimer died mid-item) within the index
      // range the first scan covered: claims take a part's head, so abandoned
      // claims sit there, and the scan stays bounded (no bound when the ready
      // scan did not fill up: it went through the whole part already). Both
      // run inside one LATERAL per part, so the work is linear in the parts.
      // The update finds rows by primary key only: `= ANY(ARRAY(...))` keeps
      // a join to `pick` from becoming a scan of all items, and there is no
      // `queue = $1` (pick's ids are this queue's), which a planner without
      // statistics (a freshly filled table) would serve from items_ready,
      // scanning the whole queue once per row. It re-checks the claim state,
      // so a concurrent claim, retry or release of the same row (EvalPlanQual
      // after a row lock wait) makes it skip that row, not claim it twice.
      //
      // The claim commits asynchronously (synchronous_commit off for this
      // statement's own transaction only): it saves a WAL flush per batch, a
      // whole fsync where those are slow (bench/: the claim's commit was half
      // of partq's commits). A server crash can lose a claim that was not yet
      // flushed; the item is then simply unclaimed again, its ack (which
      // needs claim_epoch) cannot commit, and the attempt is not counted. The
      // ack itself commits synchronously, flushing any earlier claim with it.
      // Fencing is unchanged.
      {"claim", R"sql(
WITH own AS (
  SELECT o.part, o.epoch
  FROM unnest($2::int[], $3::bigint[]) AS o(part, epoch)
  JOIN {schema}.session_parts sp ON sp.queue = $1 AND sp.part = o.part AND sp.epoch = o.epoch
  WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL),
per_part AS (
  SELECT own.part, own.epoch, r.ids, r.prios, a.id AS sid, a.priority AS sprio,
         a.claim_epoch AS sprev
  FROM own
  CROSS JOIN LATERAL (
    SELECT array_agg(c.id ORDER BY c.priority, c.id) AS ids,
           array_agg(c.priority ORDER BY c.priority, c.id) AS prios
    FROM (
      SELECT i.id, i.priority FROM {schema}.items i
      WHERE i.queue = $1 AND i.part = own.part AND i.claim_epoch IS NULL AND i.run_at <= now()
        AND (NOT $5::bool OR i.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM {schema}.items j
          WHERE j.queue = $1 AND j.part = i.part AND j.key = i.key AND j.id < i.id))
      ORDER BY i.priority, i.id LIMIT $7::int) c) r
  LEFT JOIN LATERAL (
    SELECT i.id, i.priority, i.claim_epoch FROM {schema}.items i
    WHERE $6::bool AND i.queue = $1 AND i.part = own.part AND i.claim_epoch <> own.epoch
      AND (i.priority, i.id) < (coalesce(r.prios[$7::int], 32767),
                                coalesce(r.ids[$7::int], 9223372036854775807))
    ORDER BY i.priority, i.id LIMIT 1) a ON true),
abandoned AS (
  SELECT sid AS id, sprio AS priority, epoch, sprev AS prev, true AS suspect
  FROM per_part WHERE sid IS NOT NULL ORDER BY sprio, sid LIMIT 1),
ready AS (
  SELECT u.id, u.priority, p.epoch, NULL::bigint AS prev, false AS suspect
  FROM per_part p CROSS JOIN LATERAL unnest(p.ids, p.prios) AS u(id, priority)
  ORDER BY u.priority, u.id LIMIT $4::int),
pick AS (
  SELECT * FROM (SELECT * FROM abandoned UNION ALL SELECT * FROM ready) x LIMIT $4::int),
claimed AS (
  UPDATE {schema}.items i
  SET attempts = i.attempts + 1, claim_epoch = p.epoch, claimed_at = now()
  FROM pick p
  WHERE i.id = p.id AND i.id = ANY(ARRAY(SELECT id FROM pick))
    AND CASE WHEN p.suspect THEN i.claim_epoch = p.prev
             ELSE i.claim_epoch IS NULL AND i.run_at <= now() END
  RETURNING i.id, i.part, i.key, i.dedup_key, i.priority, i.attempts, i.payload,
            (extract(epoch FROM i.enqueued_at) * 1000000)::bigint AS enqueued_us,
            (extract(epoch FROM i.run_at) * 1000000)::bigint AS run_us,
            i.claim_epoch, p.suspect)
SELECT * FROM claimed ORDER BY priority, id
)sql"},
      // Finish, step 1: the fence. FOR SHARE keeps the rows (and their epochs)
      // as they are until the ack transaction ends: expiry, release and a
      // static re-join all wait for it. The same round trip reads the claim
      // epoch of each item, so an item finished twice is fenced, not written.
      {"fence", R"sql(
WITH f AS (
  SELECT part, epoch FROM {schema}.session_parts
  WHERE queue = $1 AND session_id = $2 AND part = ANY($3::int[])
  FOR SHARE)
SELECT 'p', part::bigint, epoch FROM f
UNION ALL
SELECT 'i', id, claim_epoch FROM {schema}.items WHERE id = ANY($4::bigint[])
)sql"},
      // Finish, step 3: every outcome in one statement. Acks delete (only at
      // the claimed epoch) and record a result when there is one or a dedup
      // key; retries reschedule and free the claim; dead items, and retries
      // that used up max_attempts (unless the attempt is refunded), move to
      // dead_items. The retry and dead
      // CTEs select disjoint rows, as one statement must. Rows are found by
      // id and claim epoch only (epochs are global, so a match is this
      // queue's item; see "claim" for why not by queue). Returns one row per
      // row written ('a'/'r'/'d', id); the caller checks the counts.
      //
      // Dead items keep their Kafka origin and headers, and `dlq` writes one
      // outbox row per dead item of a queue with a dead-letter topic (store.h
      // says what the message carries). When nothing dies, `dead` is empty
      // and `dlq` has nothing to join, so acks pay almost nothing for it.
      // The key goes back to bytes: an ingested key that was not plain UTF-8
      // (or started with "\x") is stored as "\x" + lowercase hex
      // (pg_store_kafka.cc), any other key is its own UTF-8. Context headers
      // with a NULL value (no Kafka origin) are left out.
      {"finish", R"sql(
WITH acked AS (
  DELETE FROM {schema}.items i
  USING unnest($1::bigint[], $2::bigint[], $3::text[]) AS a(id, epoch, result)
  WHERE i.id = a.id AND i.claim_epoch = a.epoch
  RETURNING i.id, i.queue, i.dedup_key, a.result),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, result)
  SELECT id, queue, dedup_key, decode(result, 'hex') FROM acked
  WHERE dedup_key IS NOT NULL OR result IS NOT NULL
  RETURNING 1),
o AS (
  SELECT * FROM unnest($4::bigint[], $5::bigint[], $6::bool[], $7::bigint[], $8::bool[],
                       $9::text[]) AS o(id, epoch, dead, delay_us, refund, error)),
retried AS (
  UPDATE {schema}.items i
  SET attempts = greatest(i.attempts - o.refund::int, 0),
      run_at = now() + o.delay_us * interval '1 microsecond',
      claim_epoch = NULL, claimed_at = NULL, last_error = o.error
  FROM o
  WHERE i.id = o.id AND i.claim_epoch = o.epoch AND NOT o.dead
    AND (o.refund OR i.attempts < $10::int)
  RETURNING i.id),
dead AS (
  DELETE FROM {schema}.items i USING o
  WHERE i.id = o.id AND i.claim_epoch = o.epoch
    AND (o.dead OR (NOT o.refund AND i.attempts >= $10::int))
  RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority, i.attempts,
            i.enqueued_at, i.payload, coalesce(o.error, '') AS error,
            i.origin_topic, i.origin_partition, i.origin_offset, i.headers),
buried AS (
  INSERT INTO {schema}.dead_items
    (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, last_error, payload,
     origin_topic, origin_partition, origin_offset, headers)
  SELECT id, queue, part, key, dedup_key, priority, attempts, enqueued_at, error, payload,
         origin_topic, origin_partition, origin_offset, headers
  FROM dead
  RETURNING 1),
dlq AS (
  INSERT INTO {schema}.outbox (topic, key, payload, headers)
  SELECT q.dlq_topic,
         CASE WHEN d.origin_topic IS NOT NULL AND d.key ~ '^\\x([0-9a-f]{2})*$'
              THEN decode(substr(d.key, 3), 'hex') ELSE convert_to(d.key, 'UTF8') END,
         d.payload,
         coalesce(d.headers, '[]'::jsonb) || (
           SELECT jsonb_agg(jsonb_build_object('key', h.k, 'value', h.v) ORDER BY h.n)
           FROM (VALUES (1, '__connect.errors.topic', d.origin_topic),
                        (2, '__connect.errors.partition', d.origin_partition::text),
                        (3, '__connect.errors.offset', d.origin_offset::text),
                        (4, '__connect.errors.exception.message', d.error),
                        (5, 'partq.errors.attempts', d.attempts::text),
                        (6, 'partq.errors.queue', d.queue),
                        (7, 'partq.errors.item.id', d.id::text)) AS h(n, k, v)
           WHERE h.v IS NOT NULL)
  FROM dead d JOIN {schema}.queues q ON q.name = d.queue
  WHERE q.dlq_topic IS NOT NULL
  ORDER BY d.id
  RETURNING 1)
SELECT 'a', id FROM acked
UNION ALL SELECT 'r', id FROM retried
UNION ALL SELECT 'd', id FROM dead
)sql"},
      // GetItemState by id: where the id is now, in any queue, and the id
      // sequence's high-water mark (an allocated id found nowhere finished
      // without leaving a result row).
      {"item_state", R"sql(
SELECT 'p' AS k, queue, attempts, last_error, NULL::bytea FROM {schema}.items WHERE id = $2
UNION ALL
SELECT 'd', queue, attempts, last_error, NULL FROM {schema}.dead_items WHERE id = $2
UNION ALL
SELECT 'r', queue, 0, NULL, result FROM {schema}.results WHERE id = $2
UNION ALL
SELECT 's', NULL, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::int,
       CASE WHEN is_called THEN last_value ELSE last_value - 1 END::text, NULL
FROM {schema}.items_id_seq
)sql"},
      // By dedup key: the live item first, else the newest finished one.
      {"item_state_dedup", R"sql(
(SELECT 'p' AS k, id, attempts, last_error, NULL::bytea FROM {schema}.items
 WHERE queue = $1 AND dedup_key = $2)
UNION ALL
(SELECT k, id, attempts, last_error, result FROM (
   SELECT 'r' AS k, id, 0 AS attempts, NULL::text AS last_error, result FROM {schema}.results
   WHERE queue = $1 AND dedup_key = $2
   UNION ALL
   SELECT 'd', id, attempts, last_error, NULL FROM {schema}.dead_items
   WHERE queue = $1 AND dedup_key = $2) f
 ORDER BY id DESC LIMIT 1)
UNION ALL
SELECT 'q', 0, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::int, NULL, NULL
)sql"},
      // Status: sessions, then one row per part (zero-filled by
      // generate_series). An item is in flight while claimed (under any
      // epoch: an abandoned claim stays in flight until its part's owner
      // takes it again), else ready or delayed by run_at.
      {"status_sessions", R"sql(
SELECT s.id, coalesce(s.instance_id, ''), s.host, s.pid,
       (extract(epoch FROM now() - s.heartbeat_at) * 1000000)::bigint,
       (extract(epoch FROM s.expires_at - now()) * 1000000)::bigint,
       (SELECT count(*) FROM {schema}.session_parts sp WHERE sp.session_id = s.id),
       (extract(epoch FROM now()) * 1000000)::bigint
FROM {schema}.sessions s WHERE s.queue = $1 ORDER BY s.id
)sql"},
      {"status_parts", R"sql(
WITH own AS (SELECT part, session_id, epoch FROM {schema}.session_parts WHERE queue = $1),
it AS (
  SELECT part,
         count(*) FILTER (WHERE claim_epoch IS NULL AND run_at <= now()) AS ready,
         count(*) FILTER (WHERE claim_epoch IS NULL AND run_at > now()) AS delayed,
         count(*) FILTER (WHERE claim_epoch IS NOT NULL) AS in_flight,
         min(enqueued_at) FILTER (WHERE claim_epoch IS NULL AND run_at <= now()) AS oldest
  FROM {schema}.items WHERE queue = $1 GROUP BY part),
dd AS (SELECT part, count(*) AS n FROM {schema}.dead_items WHERE queue = $1 GROUP BY part)
SELECT p, own.session_id, coalesce(own.epoch, 0), coalesce(it.ready, 0),
       coalesce(it.delayed, 0), coalesce(it.in_flight, 0), coalesce(dd.n, 0),
       coalesce((extract(epoch FROM now() - it.oldest) * 1000000)::bigint, 0)
FROM generate_series(0, $2::int - 1) AS p
LEFT JOIN own ON own.part = p
LEFT JOIN it ON it.part = p
LEFT JOIN dd ON dd.part = p
ORDER BY p
)sql"},
  };
  for (Statement& st : s) st.sql = WithSchema(st.sql, schema);
  return s;
}

}  // namespace pg_internal
}  // namespace partq
