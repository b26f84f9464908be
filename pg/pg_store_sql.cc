// Every SQL statement PgStore prepares, in one place, with the reasons for
// their shape. Statements are prepared once per connection (libpqxx sends the
// Parse on first use) and take arrays as text literals ("{1,2,3}"), because
// libpqxx 6.4 cannot bind vectors.
//
// Conventions: times travel as microseconds since the epoch (or microseconds
// of an interval) in bigint, so the client never parses timestamp text (the
// claim's per-item ones via date_part, a float8, where extract would be
// numeric arithmetic twice per item); bytea travels as its text form
// ("\x0a0b") and is decoded by DecodeBytea.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"

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
       CASE WHEN ins.id IS NOT NULL
            THEN pg_notify($8, 'i:' || ins.part || ':' || $5 || ':' || ins.id) END
FROM q LEFT JOIN ins ON true
)sql";

// An item of a queue group: enqueue_item() (migration 12) holds the group's
// row and counts the item; a rare path, not worth a statement of its own.
// $1 queue, $2 payload, $3 key, $4 dedup key, $5 priority, $6 group.
constexpr const char* kEnqueueGrouped = R"sql(
SELECT e.id, e.part, e.duplicate
FROM {schema}.enqueue_item($1, $2::bytea, $3, $4, interval '0', $5, $6) e
)sql";

// The columns of `items i` that every claim read returns.
constexpr const char* kReadColumns =
    "i.ctid AS tid, i.id, i.key, i.dedup_key, i.priority, i.attempts, i.payload, "
    "i.enqueued_at, i.run_at, i.group_id";
// kReadColumns of a subquery `x` that selected them.
constexpr const char* kReadColumnsOf =
    "x.tid, x.id, x.key, x.dedup_key, x.priority, x.attempts, x.payload, x.enqueued_at, x.run_at, "
    "x.group_id";

// What makes an item `i` of the part ready for a claim (ReadyItems says why
// statement_timestamp()). `bound` is an int expression, KeyBound of the
// claim: 1 (ordered) probes for any older live item of the key, as it always
// did; N > 1 (key concurrency) counts them, at most N from each probe, and
// wants fewer than N; 0 evaluates neither. The two forms are apart so an
// ordered queue's probe stays the NOT EXISTS it was.
std::string ReadyCondition(absl::string_view queue, absl::string_view part,
                           absl::string_view bound) {
  // At most `limit` of the key's older items in the parts it had before the
  // queue's grows (i.part % c for each earlier count c). Each earlier part
  // is probed on its own, `j.part` bound to one value: written as `j.part =
  // ANY(earlier parts)`, a plan made while `items` was empty (or its
  // statistics were) scanned items_key for the key across every part of
  // the queue, since the key is not a prefix of that index without the part
  // (9.7 ms and 650 buffers per probe; BENCHMARKS.md "Ordered queues over
  // empty statistics"). The LIMIT keeps each probe a subquery evaluated
  // per earlier part, not a join the planner could turn around.
  auto earlier = [&](absl::string_view limit) {
    return absl::StrCat(R"sql(SELECT 1
          FROM unnest((SELECT g.grown_from FROM {schema}.queues g WHERE g.name = )sql",
                        queue, R"sql()) AS c(n)
          CROSS JOIN LATERAL (
            SELECT 1 FROM {schema}.items j
            WHERE j.queue = )sql",
                        queue, R"sql( AND j.part = i.part % c.n AND j.key = i.key
              AND j.id < i.id
            LIMIT )sql",
                        limit, R"sql() x
          WHERE c.n <= i.part)sql");
  };
  return absl::StrCat("i.queue = ", queue, " AND i.part = ", part, R"sql(
      AND i.run_at <= statement_timestamp() AND i.abandoned_epoch IS NULL
      AND ()sql",
                      bound, R"sql(::int < 2 OR i.key IS NULL OR (
        (SELECT count(*) FROM (
          SELECT 1 FROM {schema}.items j
          WHERE j.queue = )sql",
                      queue, R"sql( AND j.part = i.part AND j.key = i.key AND j.id < i.id
          LIMIT )sql",
                      bound, R"sql(::int) o)
        + (SELECT count(*) FROM ()sql",
                      earlier(absl::StrCat(bound, "::int")), R"sql(
          LIMIT )sql",
                      bound, R"sql(::int) e) < )sql", bound, R"sql(::int))
      AND ()sql",
                      bound, R"sql(::int <> 1 OR i.key IS NULL OR (NOT EXISTS (
        SELECT 1 FROM {schema}.items j
        WHERE j.queue = )sql",
                      queue, R"sql( AND j.part = i.part AND j.key = i.key
          AND j.id < i.id)
      AND NOT EXISTS ()sql",
                      earlier("1"), ")))");
}

}  // namespace

// The items a claim reads in one part, as a subquery: the columns of
// `items i` that both claim forms return, in (priority, id) order, at most
// `limit`. Written once for the general claim (ClaimCtes, `ready`) and the
// pipelined one (PipelinedAck, `pick`). The arguments are SQL expressions:
// the queue, the part, where to read from (priority, id; the id must be a
// bigint expression: the sentinel -32768, minimum bigint reads from the
// head), the session's cursor there (nothing past it can be in flight), the
// bigint[] of what is in flight (and being finished), the claim's KeyBound
// (ReadyCondition), the limit, and whether to look behind the start
// (ClaimPart::behind, a boolean expression; empty leaves that read out of
// the statement). Two
// reads, in key order one after the other:
// - `later`: behind where the read starts, the items that came due there
//   (retried, delayed or requeued: run_at later than enqueued_at). They are
//   found through items_later (migration 8), which holds only such rows, in
//   run_at order: a read never walks the part's acked rows, whose index
//   entries stay until vacuum removes them (and while a snapshot holds the
//   vacuum horizon, vacuum removes none). The casts keep the planner off
//   items_ready here, whose order it would otherwise buy with that walk.
// - `onward`: from where the read starts on, in items_ready. Items up to the
//   cursor may be in flight and are skipped; past it, the skip list is not
//   even looked at.
// Ready means ready when the claim reads: statement_timestamp(), not now()
// (the transaction's start), because a claim ahead runs in an ack
// transaction that began before its handler, and must see what was enqueued
// meanwhile. An ordered queue yields only each key's oldest live item
// (items_key serves the probe), across the grows of its parts too
// (Store::GrowParts): the key's items enqueued before a grow stay in the
// part it had then, p % c for an earlier count c, so the probe looks there
// as well. The earlier counts are read once per statement (an uncorrelated
// subquery); for a queue that never grew the list is empty and the second
// probe finds nothing at once. An unordered queue evaluates neither.
std::string ReadyItems(absl::string_view queue, absl::string_view part,
                       absl::string_view after_prio, absl::string_view after_id,
                       absl::string_view cursor_prio, absl::string_view cursor_id,
                       absl::string_view skip, absl::string_view bound, absl::string_view limit,
                       absl::string_view behind) {
  const std::string columns = kReadColumns;
  const std::string common = ReadyCondition(queue, part, bound);
  const std::string onward = absl::StrCat("SELECT ", columns, R"sql(
    FROM {schema}.items i
    WHERE )sql",
                                          common, R"sql(
      AND (i.priority, i.id) > ()sql",
                                          after_prio, "::smallint, ", after_id, R"sql()
      AND ((i.priority, i.id) > ()sql",
                                          cursor_prio, "::smallint, ", cursor_id,
                                          ") OR i.id <> ALL(", skip, R"sql())
    ORDER BY i.priority, i.id LIMIT )sql",
                                          limit);
  if (behind.empty()) return onward;
  return absl::StrCat("SELECT * FROM ((SELECT ", columns, R"sql(
    FROM {schema}.items i
    WHERE )sql",
                      common, R"sql(
      AND i.run_at > i.enqueued_at AND )sql",
                      behind, " AND ", after_id, R"sql( <> -9223372036854775808
      AND (i.priority::int, i.id) <= ()sql",
                      after_prio, "::int, ", after_id, ") AND i.id <> ALL(", skip, R"sql()
    ORDER BY i.priority::int, i.id LIMIT )sql",
                      limit, ")\n  UNION ALL\n  (", onward, ")) r LIMIT ", limit);
}

namespace {

// The items a fair claim (ClaimRequest::fair) reads in one part, as a
// subquery with the columns of ReadyItems: the part's keys take turns, one
// item each per turn, starting after `key_after` (text, NULL: from the
// first key) and going around; keyless items come after. Why it looks like
// this:
// - The keys come from items_key by a skip scan (`onward`, `around`): each
//   step one index descent to the next key, so a key with a million items
//   costs one probe, not a walk. It finds keys of items not ready too
//   (delayed, in flight); those turns yield nothing. A key with a cursor is
//   visited without a probe (the step looks in the index only before it):
//   a descent to a key lands at its head, which for a key being drained is
//   the acked rows vacuum has not removed yet, walked entry by entry (most
//   of what a fair claim cost once the keys had cursors: BENCHMARKS.md). At most 2 * limit keys
//   are visited, so a part with more keys than that is read in slices, the
//   next claim going on after the last key served (ClaimScheduler).
// - Each key visited is read in id order (items_key again: no index was
//   added for fair queues, so ordinary queues pay nothing), from after its
//   cursor if the claim gives one (the arrays `cursor_parts`, `cursor_keys`
//   and `cursor_ids`, looked up per key visited: a few dozen entries), so a
//   key with a long backlog is not walked from its head, through the items
//   in flight and the acked rows vacuum has not removed, on every claim (the
//   walk was most of a fair claim's time: BENCHMARKS.md), up to an even
//   share of twice the limit (never more than the limit: a key alone is
//   read for the limit, not twice it), so the turns can fill the read even
//   when some keys have fewer items than their share; the rows are then
//   ordered by turn (their number within the key) and key, and cut at the
//   limit.
// - Keyless items are not in items_key: they are looked for among the
//   part's first 2 * limit ready items in (priority, id) order, read only
//   when the keys did not fill the read.
// Every item read is checked against `skip`: a key read from its head, or
// from a cursor a late enqueue's notice lowered, meets the items in flight.
std::string FairItems(absl::string_view queue, absl::string_view part, absl::string_view key_after,
                      absl::string_view cursor_parts, absl::string_view cursor_keys,
                      absl::string_view cursor_ids, absl::string_view skip, absl::string_view bound,
                      absl::string_view limit) {
  const std::string common = ReadyCondition(queue, part, bound);
  const std::string key_of =
      absl::StrCat("{schema}.items k WHERE k.queue = ", queue, " AND k.part = ", part);
  const std::string from = absl::StrCat("coalesce(", key_after, ", '')");
  const std::string cursors =
      absl::StrCat("unnest(", cursor_parts, "::int[], ", cursor_keys, "::text[], ", cursor_ids,
                   "::bigint[]) AS c(part, key, id) WHERE c.part = ", part);
  // The first key `op` `lower` (and at most `upper`, if given): the first
  // key with a cursor there, unless the index has one before it.
  auto next_key = [&](absl::string_view op, absl::string_view lower, absl::string_view upper) {
    const std::string at_most = upper.empty() ? "" : absl::StrCat(" AND k.key <= ", upper);
    return absl::StrCat("(SELECT coalesce((SELECT k.key FROM ", key_of, " AND k.key ", op, " ",
                        lower, " AND k.key < nk.key ORDER BY k.key LIMIT 1), (SELECT k.key FROM ",
                        key_of, " AND k.key ", op, " ", lower, at_most,
                        " AND nk.key IS NULL ORDER BY k.key LIMIT 1), nk.key)\n"
                        "           FROM (SELECT min(c.key) AS key FROM ",
                        cursors, " AND c.key ", op, " ", lower,
                        upper.empty() ? "" : absl::StrCat(" AND c.key <= ", upper), ") nk)");
  };
  return absl::StrCat(R"sql(SELECT * FROM ((
    SELECT )sql",
                      kReadColumnsOf, R"sql(
    FROM (
      WITH RECURSIVE onward(key, n) AS (
        SELECT )sql",
                      next_key(">", from, ""), R"sql(, 1
        UNION ALL
        SELECT )sql",
                      next_key(">", "w.key", ""), R"sql(, w.n + 1
        FROM onward w WHERE w.key IS NOT NULL AND w.n < 2 * )sql",
                      limit, R"sql(),
      around(key, n) AS (
        SELECT )sql",
                      next_key(">=", "''", from), R"sql(, 1
        UNION ALL
        SELECT )sql",
                      next_key(">", "a.key", from), R"sql(, a.n + 1
        FROM around a WHERE a.key IS NOT NULL AND a.n < 2 * )sql",
                      limit, R"sql(),
      visit AS (
        SELECT v.key, v.lap, v.n
        FROM (SELECT key, 0 AS lap, n FROM onward WHERE key IS NOT NULL
              UNION ALL SELECT key, 1, n FROM around WHERE key IS NOT NULL) v
        ORDER BY v.lap, v.n LIMIT 2 * )sql",
                      limit, R"sql()
      SELECT key, row_number() OVER (ORDER BY lap, n) AS pos, count(*) OVER () AS keys,
             (SELECT max(c.id) FROM )sql",
                      cursors, R"sql( AND c.key = visit.key) AS after_id
      FROM visit) t
    CROSS JOIN LATERAL (
      SELECT )sql",
                      kReadColumns, R"sql(, row_number() OVER (ORDER BY i.id) AS turn
      FROM {schema}.items i
      WHERE )sql",
                      common, R"sql( AND i.key = t.key
        AND i.id > coalesce(t.after_id, -9223372036854775808) AND i.id <> ALL()sql",
                      skip, R"sql()
      ORDER BY i.id LIMIT least()sql",
                      limit, ", ceil(2.0 * ", limit, R"sql( / t.keys)::int)) x
    ORDER BY x.turn, t.pos LIMIT )sql",
                      limit, R"sql()
  UNION ALL
  (SELECT )sql",
                      kReadColumnsOf, R"sql(
    FROM (SELECT )sql",
                      kReadColumns, R"sql(
          FROM {schema}.items i
          WHERE )sql",
                      common, " AND i.id <> ALL(", skip, R"sql()
          ORDER BY i.priority, i.id LIMIT 2 * )sql",
                      limit, R"sql() x
    WHERE x.key IS NULL)) r LIMIT )sql",
                      limit);
}

// The claim's CTEs, ending with `pick` (the claimed rows) and `recorded` (the
// claim records written). Why they look like this:
// - `own` keeps the requested parts that are still ours at their epochs, so
//   a session that lost a part reads nothing there, in the order requested.
// - `ready`: per part, the items due behind where the read starts and then
//   a scan of items_ready in (priority, id) order from there (ReadyItems);
//   the parts go in order in a nested loop under the total LIMIT, which stops
//   pulling (and so reading parts) once it has enough. Items up to the
//   part's cursor must be checked against what the session has in flight;
//   past it nothing can be in flight (the cursor is the last key this
//   session claimed), so the skip test is not even evaluated there.
// - `suspect`: at most one abandoned item in any part this session owns, in
//   (priority, id) order; items_abandoned holds only such rows, so the probe
//   costs an index page when there are none.
// - `recorded` replaces the claim record of every part it took items from
//   with what the session has in flight there plus the new items: a new
//   row, the old one deleted (`replaced`), never an update (migration 9 says
//   why). The old one is the row the session wrote last (ClaimPart::record:
//   one primary-key lookup), else the part's latest at the owner's epoch
//   (read from the end of the part's records: a planner may choose to read
//   them all; a stale owner's record at an older epoch, which migration 9
//   says a race can leave, is passed over rather than blocking the part).
//   An owner whose epoch is older than the record's (a session that lost
//   the part and does not know it yet) finds nothing to replace, so it
//   cannot write one; and a claim that replaced no record returns nothing
//   from that part (kPickFrom says why).
// - The skip and in-flight lists are arrays compared linearly; they hold
//   what one session has in flight (a few batches), and only rows at or
//   before a cursor are compared with them.
//
// Parameters: $1 queue, $2 session, then from `first` on: parts, epochs,
// priorities and ids to read after, limits, KeyBound, suspect probe,
// in-flight parts and ids, total limit, cursor priorities and ids, records
// to replace, whether to look behind, and the keys to start after (text[],
// read by the fair form only; ClaimRequest, as PgStore::Claim binds them).
// `fair`: each part is read by FairItems instead of ReadyItems, and three
// more follow: the key cursors (ClaimPart::key_cursors) as parts, keys and
// ids.
//
// `unkeyed`: the form for a claim without a key bound (KeyBound 0), whose
// bound is the literal 0, which the planner folds away, so that a generic plan
// carries none of ReadyCondition's key probes (the pipelined ack's forms say
// why); the bound's parameter must then be 0, else the claim reads nothing.
std::string ClaimCtes(int first, absl::string_view extra_skip, bool async_commit, bool fair,
                      bool unkeyed = false) {
  struct {
    int queue = 1, session = 2, parts, epochs, after_prio, after_id, limits, key_bound, suspect,
        fly_parts, fly_ids, total, cursor_prio, cursor_id, records, behind, key_after,
        key_cursor_parts = 0, key_cursor_keys = 0, key_cursor_ids = 0;
  } p;
  int n = first;
  for (int* f : {&p.parts, &p.epochs, &p.after_prio, &p.after_id, &p.limits, &p.key_bound,
                 &p.suspect, &p.fly_parts, &p.fly_ids, &p.total, &p.cursor_prio, &p.cursor_id,
                 &p.records, &p.behind, &p.key_after}) {
    *f = n++;
  }
  // Only the fair form has the key cursors (the ordinary one would leave
  // them untyped).
  if (fair) {
    for (int* f : {&p.key_cursor_parts, &p.key_cursor_keys, &p.key_cursor_ids}) *f = n++;
  }
  auto d = [](int k) { return absl::StrCat("$", k); };
  const std::string bound = unkeyed ? "0" : d(p.key_bound);
  const std::string unkeyed_only =
      unkeyed ? absl::StrCat(" AND ", d(p.key_bound), "::int = 0") : std::string();
  const std::string pick =
      absl::StrCat(R"sql(suspect AS (
  SELECT sp.part, sp.epoch, i.ctid AS tid, i.id, i.key, i.dedup_key, i.priority, i.attempts,
         i.payload, i.enqueued_at, i.run_at, i.group_id, true AS suspect
  FROM {schema}.items i
  JOIN {schema}.session_parts sp
    ON sp.queue = i.queue AND sp.part = i.part AND sp.session_id = )sql",
                   d(p.session), R"sql(
  WHERE )sql",
                   d(p.suspect), R"sql(::bool AND i.queue = )sql", d(p.queue), R"sql(
    AND i.abandoned_epoch IS NOT NULL AND i.run_at <= statement_timestamp()
    AND i.id <> ALL((SELECT ids FROM skip)::bigint[]))sql",
                   unkeyed_only, R"sql(
  ORDER BY i.priority, i.id LIMIT 1),
pick AS (SELECT * FROM ready UNION ALL SELECT * FROM suspect))sql");
  return absl::StrCat(
      R"sql(own AS (
  SELECT o.part, o.epoch, o.after_prio, o.after_id, o.lim, o.cursor_prio, o.cursor_id, o.record,
         o.behind, o.key_after
  FROM unnest()sql",
      d(p.parts), "::int[], ", d(p.epochs), "::bigint[], ", d(p.after_prio), "::int[], ",
      d(p.after_id), "::bigint[], ", d(p.limits), "::int[], ", d(p.cursor_prio), "::int[], ",
      d(p.cursor_id), "::bigint[], ", d(p.records), "::bigint[], ", d(p.behind), "::bool[], ",
      d(p.key_after), R"sql(::text[])
       WITH ORDINALITY AS o(part, epoch, after_prio, after_id, lim, cursor_prio, cursor_id, record,
                            behind, key_after, n)
  JOIN {schema}.session_parts sp
    ON sp.queue = )sql",
      d(p.queue), R"sql( AND sp.part = o.part AND sp.epoch = o.epoch)sql", unkeyed_only,
      async_commit ? "\n  WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL" : "",
      R"sql(
  ORDER BY o.n),
skip AS (SELECT )sql",
      d(p.fly_ids), "::bigint[] || ", extra_skip, R"sql( AS ids),
ready AS (
  SELECT own.part, own.epoch, c.*, false AS suspect
  FROM own CROSS JOIN LATERAL ()sql",
      fair ? FairItems(d(p.queue), "own.part", "own.key_after", d(p.key_cursor_parts),
                       d(p.key_cursor_keys), d(p.key_cursor_ids),
                       "(SELECT ids FROM skip)::bigint[]", bound, "own.lim")
           : ReadyItems(d(p.queue), "own.part", "own.after_prio", "own.after_id", "own.cursor_prio",
                        "own.cursor_id", "(SELECT ids FROM skip)::bigint[]", bound,
                        "own.lim", "own.behind"),
      R"sql() c
  LIMIT )sql",
      d(p.total), "),\n", pick, R"sql(,
current_records AS (
  SELECT r.part, r.epoch,
         coalesce((SELECT c.seq FROM {schema}.part_claims c
                   WHERE c.queue = )sql",
      d(p.queue), R"sql( AND c.part = r.part AND c.seq = r.record),
                  (SELECT c.seq FROM {schema}.part_claims c
                   WHERE c.queue = )sql",
      d(p.queue), R"sql( AND c.part = r.part AND c.epoch = r.epoch
                   ORDER BY c.seq DESC LIMIT 1)) AS seq
  FROM (SELECT DISTINCT k.part, k.epoch, o.record
        FROM pick k LEFT JOIN own o ON o.part = k.part) r),
replaced AS (
  DELETE FROM {schema}.part_claims c USING current_records l
  WHERE c.queue = )sql",
      d(p.queue), R"sql( AND c.part = l.part AND c.seq = l.seq AND c.epoch = l.epoch
  RETURNING c.part, c.epoch),
recorded AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT )sql",
      d(p.queue), R"sql(, r.part, r.epoch,
         ARRAY(SELECT f.id FROM unnest()sql",
      d(p.fly_parts), "::int[], ", d(p.fly_ids),
      R"sql(::bigint[]) AS f(part, id)
               WHERE f.part = r.part
               UNION ALL SELECT k.id FROM pick k WHERE k.part = r.part)
  FROM replaced r
  RETURNING part, seq))sql");
}

// A CTE for the general Finish: retried and dead items ($9 ids, $10 parts)
// are no longer in flight, so they come off their parts' claim records (a
// record that still listed them would count them in flight in `partq
// status`, and as abandoned if this session died). With a claim in the same
// statement, the parts it takes from are left to it: `recorded` replaces
// those without them, and one statement must not change a row twice.
// Only each part's latest record is current (migration 9): that row is
// changed in place, which a retry or a dead item (rare) can afford.
std::string UnrecordCte(bool with_claim) {
  return absl::StrCat(R"sql(unrecorded AS (
  UPDATE {schema}.part_claims c
  SET ids = ARRAY(SELECT x FROM unnest(c.ids) AS x WHERE x <> ALL($9::bigint[]))
  FROM (SELECT p.part, l.seq FROM (SELECT DISTINCT part FROM unnest($10::int[]) AS u(part)) p
        CROSS JOIN LATERAL (
          SELECT c2.seq FROM {schema}.part_claims c2
          WHERE c2.queue = $1 AND c2.part = p.part ORDER BY c2.seq DESC LIMIT 1) l) cur
  WHERE c.queue = $1 AND c.part = cur.part AND c.seq = cur.seq
    AND cardinality($9::bigint[]) > 0)sql",
                      with_claim ? "\n    AND c.part NOT IN (SELECT part FROM pick)" : "",
                      R"sql(
  RETURNING 1))sql");
}

// The fence of Finish (both forms): our session_parts rows still at the
// claimed epochs ($3 parts, $4 epochs), locked FOR SHARE until commit.
constexpr const char* kFence = R"sql(f AS (
  SELECT sp.part FROM {schema}.session_parts sp
  JOIN unnest($3::int[], $4::bigint[]) AS w(part, epoch)
    ON sp.part = w.part AND sp.epoch = w.epoch
  WHERE sp.queue = $1 AND sp.session_id = $2
  FOR SHARE OF sp))sql";

// The common Finish: every item acked, every row where the claim saw it ($5
// ids, $6 ctids; results for some: $7 ids, $8 hex). The deletes go through
// ack_items() (migration 4): a TID scan, the id check making a reused ctid
// harmless, and a fallback by id for rows a table rewrite moved. It is a
// function because its statements are planned with enable_seqscan off: a
// generic plan made while the table was nearly empty would otherwise scan the
// whole table for every batch once a backlog has come. The statement's fixed
// cost (each CTE is a plan node to start and end) is most of what an ack
// costs beyond its writes, so this form has no CTE it does not need, and it
// returns the count, not the ids.
std::string AckCtes() {
  return absl::StrCat(kFence, R"sql(,
done AS (SELECT * FROM {schema}.ack_items($6::tid[], $5::bigint[])),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, result, finished_at)
  SELECT d.acked_id, d.acked_queue, d.acked_dedup_key, decode(r.result, 'hex'),
         statement_timestamp()
  FROM done d LEFT JOIN unnest($7::bigint[], $8::text[]) AS r(id, result) ON r.id = d.acked_id
  WHERE d.acked_dedup_key IS NOT NULL OR r.id IS NOT NULL
  RETURNING 1))sql");
}

// Finish's CTEs ($1 queue, $2 session, $3/$4 fence parts and epochs, $5-$8
// acks: id, part, ctid, result as hex; $9-$14 other outcomes: id, part, dead,
// delay in µs, refund, error; $15 max attempts). Why they look like this:
// - `f` is the fence: our session_parts rows still at the claimed epochs,
//   locked FOR SHARE until commit. Items of other parts are left alone.
// - Acks delete by ctid first (a TID scan: no index descent per item); the
//   id check makes a reused ctid harmless, and `moved` deletes by id what
//   was not found there (a table rewrite moves rows).
// - Results are recorded when there is one or a dedup key (`partq wait`).
// - Results and dead items carry statement_timestamp(), when the handler
//   had finished, not the column default now(): the transaction of a batch
//   claimed ahead began before its handler ran (COMMIT AND CHAIN), so now()
//   is when the batch was claimed, up to a handler timeout earlier.
// - Retries count the attempt unless refunded and clear the abandoned mark;
//   retries that used up max_attempts, and dead items, move to dead_items
//   (counting the attempt unless refunded: an item dead-lettered unrun).
//   retried and dead select disjoint rows, as one statement must.
// - Dead items keep their Kafka origin and headers, and `dlq` writes one
//   outbox row per dead item of a queue with a dead-letter topic (store.h
//   says what the message carries). When nothing dies, `dead` is empty and
//   `dlq` has nothing to join, so acks pay almost nothing for it. The key
//   goes back to bytes: an ingested key that was not plain UTF-8 (or started
//   with "\x") is stored as "\x" + lowercase hex (pg_store_kafka.cc), any
//   other key is its own UTF-8. Context headers with a NULL value (no Kafka
//   origin) are left out.
std::string FinishCtes() {
  return absl::StrCat(kFence, R"sql(,
a AS (
  SELECT * FROM unnest($5::bigint[], $6::int[], $7::tid[], $8::text[]) AS a(id, part, tid, result)
  WHERE a.part IN (SELECT part FROM f)),
acked AS (
  DELETE FROM {schema}.items i
  WHERE i.ctid = ANY(ARRAY(SELECT tid FROM a)) AND i.id = ANY(ARRAY(SELECT id FROM a))
  RETURNING i.id, i.queue, i.dedup_key),
moved AS (
  DELETE FROM {schema}.items i
  WHERE i.id = ANY(ARRAY(SELECT id FROM a WHERE id NOT IN (SELECT id FROM acked)))
  RETURNING i.id, i.queue, i.dedup_key),
done AS (SELECT * FROM acked UNION ALL SELECT * FROM moved),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, result, finished_at)
  SELECT d.id, d.queue, d.dedup_key, decode(a.result, 'hex'), statement_timestamp()
  FROM done d JOIN a ON a.id = d.id
  WHERE d.dedup_key IS NOT NULL OR a.result IS NOT NULL
  RETURNING 1),
o AS (
  SELECT * FROM unnest($9::bigint[], $10::int[], $11::bool[], $12::bigint[], $13::bool[],
                       $14::text[]) AS o(id, part, dead, delay_us, refund, error)
  WHERE o.part IN (SELECT part FROM f)),
retried AS (
  UPDATE {schema}.items i
  SET attempts = i.attempts + (NOT o.refund)::int,
      run_at = statement_timestamp() + o.delay_us * interval '1 microsecond',
      abandoned_epoch = NULL, last_error = o.error
  FROM o
  WHERE i.id = o.id AND NOT o.dead AND (o.refund OR i.attempts + 1 < $15::int)
  RETURNING i.id),
dead AS (
  DELETE FROM {schema}.items i USING o
  WHERE i.id = o.id AND (o.dead OR (NOT o.refund AND i.attempts + 1 >= $15::int))
  RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority,
            i.attempts + (NOT o.refund)::int AS attempts,
            i.enqueued_at, i.payload, coalesce(o.error, '') AS error,
            i.origin_topic, i.origin_partition, i.origin_offset, i.headers, i.group_id),
buried AS (
  INSERT INTO {schema}.dead_items
    (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, last_error, payload,
     origin_topic, origin_partition, origin_offset, headers, group_id, failed_at)
  SELECT id, queue, part, key, dedup_key, priority, attempts, enqueued_at, error, payload,
         origin_topic, origin_partition, origin_offset, headers, group_id, statement_timestamp()
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
  RETURNING 1))sql");
}

// CTEs for a statement whose CTE `src` yields (part, epoch) of parts this
// session just took over: the claim record an earlier owner left there is
// read (a graceful owner deleted its own, so only a dead owner's remain) and
// its items marked abandoned, one attempt counted each (store.h, "Claims");
// then those records go and the part gets an empty one at the new epoch,
// which the tenure's claims replace (only at that epoch: a session that lost
// the part cannot write it). $1 is the queue.
// The abandoned items are found by id alone (ids are unique across queues):
// with `i.queue = $1` the planner could read the queue through items_ready
// and match ids on the way, and it did whenever the table's statistics were
// taken while the queue was empty (most moments of a queue that keeps up):
// every join and every acquisition then read the whole backlog, 3-10 s each
// under millions of items (issue 27's soak), long enough for sessions to
// expire and rebalance again. Nor by part: the record is the part's, so
// its ids are too, and `i.part = l.part` was a way in (the part is
// items_ready's second column, a walk of the whole index) that the planner
// took when a busy part's records, thousands of dead entries in part_claims
// until vacuum, made the other order look dear: 0.4-1.1 s per acquisition
// of one part in the soak. By id alone the only cheap way is items_pkey; a
// scan of the table is costed by its real size.
std::string TakeOverClaims(absl::string_view src) {
  return absl::StrCat(R"sql(left_claims AS (
  SELECT c.part, c.epoch, c.ids FROM {schema}.part_claims c JOIN )sql",
                      src, R"sql( n ON c.part = n.part
  WHERE c.queue = $1 AND c.epoch < n.epoch),
abandoned AS (
  UPDATE {schema}.items i SET attempts = i.attempts + 1, abandoned_epoch = l.epoch
  FROM left_claims l WHERE i.id = ANY(l.ids)
  RETURNING 1),
cleared AS (
  DELETE FROM {schema}.part_claims c USING )sql",
                      src, R"sql( n WHERE c.queue = $1 AND c.part = n.part AND c.epoch < n.epoch
  RETURNING 1),
fresh AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT $1, n.part, n.epoch, '{}' FROM )sql",
                      src, R"sql( n
  WHERE NOT EXISTS (SELECT 1 FROM {schema}.part_claims c
                    WHERE c.queue = $1 AND c.part = n.part AND c.epoch >= n.epoch)
  RETURNING 1)
)sql");
}

// The claimed rows' columns, as every claiming statement returns them
// (pg_store_items.cc, ItemFromRow), and the NULLs that pad the other rows
// of a statement that returns them next to ('p'|'a'|...) rows.
constexpr const char* kPickColumns =
    R"sql(p.id, p.part, p.key, p.dedup_key, p.priority, p.attempts + 1, p.payload,
       (date_part('epoch', p.enqueued_at) * 1000000)::bigint,
       (date_part('epoch', p.run_at) * 1000000)::bigint, p.epoch, p.suspect, p.tid::text,
       r.seq, p.group_id)sql";
// Where every claiming statement reads its claimed rows from: only those of
// parts whose claim record it replaced. A claim that found its record
// replaced under it (a cancel took it: cancel_items(), migration 13) read
// items in a snapshot that may still show cancelled ones, so it returns
// none from that part; the items stay ready for its next claim.
constexpr const char* kPickFrom = "pick p JOIN recorded r ON r.part = p.part";
constexpr const char* kPad =
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL";
// The same NULLs typed, for the first row, which sets the columns' types.
constexpr const char* kTypedPad =
    "NULL::int, NULL::text, NULL::text, NULL::smallint, NULL::int, NULL::bytea, NULL::bigint, "
    "NULL::bigint, NULL::bigint, NULL::bool, NULL::text, NULL::bigint, NULL::text";

// The pipelined ack (PgStore::FinishOnce; pg_connection.h says why a
// pipeline): the common Finish — every item acked where its claim saw it, no
// handler result to record — as the least statement that fences, deletes,
// records what `partq wait` needs (items with a dedup key: the caller's copy
// of an item may not know it has one) and, in its second form, claims ahead
// from one part ($1 queue, $2 session, $3/$4 fence parts and epochs, $5 ids,
// $6 ctids; the claim's parameters are listed below). It is sent with its
// COMMIT, so it fails (finish_refused(), migration 5) instead of returning
// what went wrong; the caller then runs the general statements. Why it is
// cheaper than `ack_claim` (single-client server CPU per batch of 100, see
// BENCHMARKS.md):
// - The delete is inline, not in ack_items(): a PL/pgSQL call, and its
//   RETURN QUERY into a tuplestore, cost more than the delete itself. The
//   frozen sequential scan ack_items() guards against is kept away by the
//   statement that runs before it in the same flight (kPlanGuard).
// - No results from the handler, no suspect probe, no ('p'|'n') rows to read
//   before the COMMIT: the check is one CASE whose function is called only
//   to fail.
// - The delete goes by ctid alone, and the check compares the ids it deleted
//   with $5 (sorted) once: a filter `id = ANY($5)` on the delete compared
//   every row with every id (a generic plan cannot hash a parameter's array),
//   ~4% of the server's CPU in a drain (perf). A ctid reused by another row
//   since the claim deletes that row, the ids differ, and the statement is
//   refused: nothing of it commits.
// - The claim reads one part ($7 at epoch $8, after ($9, $10), at most $11,
//   KeyBound $12), so the claim record is that part's row, rewritten from
//   what the caller has in flight there ($13) and the claimed ids, replaced
//   as the general claim replaces it (ClaimCtes) but without its unnest,
//   LATERAL and DISTINCT (with the binary rows:
//   4 sessions 142k/154k/178k -> 147k/190k/204k items/s, BENCHMARKS.md).
//   $14 are the ids the read skips at or before the cursor ($15, $16): in
//   flight or being finished. $17 is the record to replace
//   (ClaimPart::record, 0: the latest at $8); a claim that takes nothing
//   leaves the record as it is (its ids that were acked now are gone, and a
//   record's ids count only while their items are there), so the caller's
//   record stays the one to replace. As every claim, it returns no rows
//   when it replaced no record (kPickFrom says why); the ack commits still.
// - A queue without a key bound (KeyBound 0: neither ordered nor key
//   concurrency) has forms of its own, whose bound is the literal 0: the
//   planner folds ReadyCondition's key probes away, so a generic plan no
//   longer carries their subplans (index scans of `items`, the grown_from
//   reads) that every execution locked, started and shut down without
//   running them (server CPU per item -8-9 % at 4 and 16 sessions,
//   BENCHMARKS.md). $12 must then be 0 (the statement claims nothing
//   otherwise, rather than skip the probes an ordered queue needs).
// - Its rows are raw columns, returned in binary by the pipeline
//   (ItemFromBinary): no date_part, no hex, no text conversion of a ctid.
// It returns the claimed rows (one row of NULLs when there are none, so the
// check always runs).
std::string PipelinedAck(bool with_claim, bool behind = false, bool keyed = false) {
  const std::string check = R"sql(SELECT CASE
  WHEN (SELECT count(*) FROM f) = cardinality($3::int[])
       AND (SELECT array_agg(id ORDER BY id) FROM done) = $5::bigint[] THEN true
  ELSE {schema}.finish_refused((SELECT count(*) FROM f), cardinality($3::int[]),
                               (SELECT count(*) FROM done WHERE id = ANY($5::bigint[])),
                               cardinality($5::bigint[]))
  END AS ok)sql";
  const std::string head = absl::StrCat("WITH ", kFence, R"sql(,
done AS (
  DELETE FROM {schema}.items i WHERE i.ctid = ANY($6::tid[])
  RETURNING i.id, i.queue, i.dedup_key),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, finished_at)
  SELECT id, queue, dedup_key, statement_timestamp() FROM done WHERE dedup_key IS NOT NULL
  RETURNING 1))sql");
  if (!with_claim) return absl::StrCat(head, "\n", check, "\n");
  return absl::StrCat(head, R"sql(,
pick AS (
  SELECT r.* FROM ()sql",
                      ReadyItems("$1", "$7", "$9", "$10::bigint", "$15", "$16::bigint",
                                 "$14::bigint[]", keyed ? "$12" : "0", "$11", behind ? "true" : ""),
                      R"sql() r
  WHERE EXISTS (SELECT 1 FROM {schema}.session_parts sp
                WHERE sp.queue = $1 AND sp.part = $7 AND sp.epoch = $8))sql",
                      keyed ? "" : " AND $12::int = 0", R"sql(),
replaced AS (
  DELETE FROM {schema}.part_claims c
  WHERE c.queue = $1 AND c.part = $7 AND c.epoch = $8 AND EXISTS (SELECT 1 FROM pick)
    AND c.seq = coalesce(
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7 AND l.seq = $17),
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7
         AND l.epoch = $8
       ORDER BY l.seq DESC LIMIT 1))
  RETURNING 1),
recorded AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT $1, $7, $8, $13::bigint[] || ARRAY(SELECT k.id FROM pick k) FROM replaced
  RETURNING seq)
SELECT p.id, p.key, p.dedup_key, p.priority, p.attempts + 1, p.payload, p.enqueued_at,
       p.run_at, p.tid, (SELECT seq FROM recorded), p.group_id
FROM ()sql",
                      check, R"sql() c LEFT JOIN pick p ON c.ok AND EXISTS (SELECT 1 FROM recorded)
)sql");
}

// The statements that claim (PreparedStatements says what each does), each
// in two forms: with ReadyItems or, for fair queues, FairItems. Two
// statements rather than one with both reads, so an ordinary claim's plan
// is exactly what it was.
std::string ClaimStatement(bool fair, bool unkeyed = false) {
  return absl::StrCat("WITH ",
                      ClaimCtes(/*first=*/3, "'{}'::bigint[]", /*async_commit=*/true, fair, unkeyed),
                      R"sql(
SELECT )sql",
                      kPickColumns, R"sql(
FROM )sql",
                      kPickFrom, R"sql(
ORDER BY p.priority, p.id
)sql");
}

// The general Finish without a claim ("finish", kPipelinedFinish): returns
// ('p', part) for each part still held at its epoch, and ('a'|'r'|'d', id)
// per row written.
std::string FinishStatement() {
  return absl::StrCat("WITH ", FinishCtes(), ",\n", UnrecordCte(false), R"sql(
SELECT 'p' AS k, part::bigint AS id FROM f
UNION ALL SELECT 'a', id FROM done
UNION ALL SELECT 'r', id FROM retried
UNION ALL SELECT 'd', id FROM dead
)sql");
}

std::string FinishClaimStatement(bool fair, bool unkeyed = false) {
  return absl::StrCat("WITH ", FinishCtes(), ",\n",
                      ClaimCtes(/*first=*/16, "$5::bigint[] || $9::bigint[]",
                                /*async_commit=*/false, fair, unkeyed),
                      ",\n", UnrecordCte(true), R"sql(
SELECT 'p' AS k, part::bigint AS id, )sql",
                      kTypedPad, R"sql(
FROM f
UNION ALL SELECT 'a', id, )sql",
                      kPad, R"sql(
FROM done
UNION ALL SELECT 'r', id, )sql",
                      kPad, R"sql(
FROM retried
UNION ALL SELECT 'd', id, )sql",
                      kPad, R"sql(
FROM dead
UNION ALL
SELECT 'c', )sql",
                      kPickColumns, R"sql(
FROM )sql",
                      kPickFrom, "\n");
}

std::string AckClaimStatement(bool fair, bool unkeyed = false) {
  return absl::StrCat("WITH ", AckCtes(), ",\n",
                      ClaimCtes(/*first=*/9, "$5::bigint[]", /*async_commit=*/false, fair, unkeyed),
                      R"sql(
SELECT 'p' AS k, part::bigint AS id, )sql",
                      kTypedPad, R"sql(
FROM f
UNION ALL SELECT 'n', count(*), )sql",
                      kPad, R"sql(
FROM done
UNION ALL
SELECT 'c', )sql",
                      kPickColumns, R"sql(
FROM )sql",
                      kPickFrom, "\n");
}

}  // namespace

std::vector<std::pair<const char*, std::string>> PipelinedStatements(absl::string_view schema) {
  std::vector<std::pair<const char*, std::string>> s = {
      // kPlanGuard: for the rest of the transaction (the ack and its COMMIT),
      // plans use no sequential scan and are generic from the first run. A
      // generic plan made while `items` was nearly empty (a worker that
      // started on an idle queue) would otherwise scan the whole table for
      // every batch once a backlog has come; and the claim's LIMIT $n makes
      // the planner prefer a custom plan, planned anew on every run (over a
      // millisecond for this statement). JIT off again here (OpenConnection
      // sets it for the session) in case a handler turned it on. The
      // handler's statements ran before it, under the session's own
      // settings.
      {kPlanGuard,
       "SELECT set_config('enable_seqscan', 'off', true), "
       "set_config('plan_cache_mode', 'force_generic_plan', true), "
       "set_config('jit', 'off', true)"},
      {kPipelinedAck, PipelinedAck(/*with_claim=*/false)},
      {kPipelinedAckClaim, PipelinedAck(/*with_claim=*/true)},
      {kPipelinedAckClaimBehind, PipelinedAck(/*with_claim=*/true, /*behind=*/true)},
      {kPipelinedAckClaimKeyed,
       PipelinedAck(/*with_claim=*/true, /*behind=*/false, /*keyed=*/true)},
      {kPipelinedAckClaimBehindKeyed,
       PipelinedAck(/*with_claim=*/true, /*behind=*/true, /*keyed=*/true)},
      {kPipelinedCommit, "COMMIT"},
      // Commits and begins the next transaction, where the claimed batch
      // runs (FinishRequest::begin_next).
      {kPipelinedChain, "COMMIT AND CHAIN"},
      {kPipelinedLocalSettings, kLocalSettings},
      // Claim (store.h, ClaimRequest), after kPlanGuard (PgStore::Claim),
      // without a key bound or fair: reads, and writes only the claim records. Its own transaction
      // commits asynchronously (synchronous_commit off for this statement
      // only): a record lost in a server crash only means those items are
      // not counted as abandoned, and the claim saves a WAL flush.
      {kPipelinedClaim, ClaimStatement(/*fair=*/false, /*unkeyed=*/true)},
      {kPipelinedClaimFair, ClaimStatement(/*fair=*/true)},
      // The common Finish (AckCtes) with a claim ahead, where the pipelined
      // ack does not serve (a claim of several parts, a suspect probe, a fair
      // queue, a handler's result): also after kPlanGuard.
      {kPipelinedLeanAckClaim, AckClaimStatement(/*fair=*/false, /*unkeyed=*/true)},
      {kPipelinedLeanAckClaimFair, AckClaimStatement(/*fair=*/true)},
      // The general Finish (FinishCtes: retries, dead items), with and
      // without a claim ahead, also after kPlanGuard. Planned for its
      // arguments on every call it took 13 ms a batch (pg_stat_statements:
      // 8.5 s of planning for 646 calls), more than running it; a failing
      // item no longer makes its batch run again (exec and http handlers
      // record their replies as they are), so a queue where 1 % of items
      // fail sends most of its batches here (BENCHMARKS.md, "One reply, one
      // ack").
      {kPipelinedFinish, FinishStatement()},
      {kPipelinedFinishClaim, FinishClaimStatement(/*fair=*/false, /*unkeyed=*/true)},
      {kPipelinedFinishClaimFair, FinishClaimStatement(/*fair=*/true)},
  };
  for (auto& st : s) st.second = WithSchema(st.second, schema);
  return s;
}

std::string EnqueueSql(absl::string_view schema) { return WithSchema(kEnqueue, schema); }
std::string EnqueueGroupedSql(absl::string_view schema) {
  return WithSchema(kEnqueueGrouped, schema);
}

// The heartbeat's renewal of our row, the first CTE of both heartbeat
// statements ("heartbeat" and "heartbeat_idle"): $1 queue, $2 session, $3
// incarnation. An expiry never moves back (a heartbeat that started earlier
// can commit later, e.g. one the client gave up on), which the expiry sweep
// of heartbeat_idle counts on.
constexpr const char* kHeartbeatMe = R"sql(
WITH me AS (
  UPDATE {schema}.sessions s
  SET heartbeat_at = now(), expires_at = greatest(s.expires_at, now() + q.session_ttl)
  FROM {schema}.queues q
  WHERE s.id = $2 AND s.incarnation = $3 AND s.queue = $1 AND q.name = $1
  RETURNING s.id))sql";

std::vector<Statement> PreparedStatements(absl::string_view schema) {
  std::vector<Statement> s = {
      // --- queues ---------------------------------------------------------------
      // With its expiry sweep row, due at once (migration 24).
      {"create_queue", R"sql(
WITH q AS (
  INSERT INTO {schema}.queues (name, parts, assignment, session_ttl, max_attempts, ordered,
                              dlq_topic, rate, fair_by, key_concurrency)
  VALUES ($1, $2, $3, $4::bigint * interval '1 microsecond', $5, $6, $7, $8::double precision,
          $9::text, $10::int)
  ON CONFLICT (name) DO NOTHING
  RETURNING name),
sweep AS (
  INSERT INTO {schema}.expiry_sweeps (queue, generation, sweep_after)
  SELECT name, -1, '-infinity' FROM q)
SELECT name FROM q
)sql"},
      {"get_queue", R"sql(
SELECT name, parts, assignment, (extract(epoch FROM session_ttl) * 1000000)::bigint,
       max_attempts, ordered, dlq_topic, paused, rate, array_to_string(grown_from, ','), fair_by,
       key_concurrency
FROM {schema}.queues WHERE name = $1
)sql"},
      {"list_queues", R"sql(
SELECT name, parts, assignment, (extract(epoch FROM session_ttl) * 1000000)::bigint,
       max_attempts, ordered, dlq_topic, paused, rate, array_to_string(grown_from, ','), fair_by,
       key_concurrency
FROM {schema}.queues ORDER BY name
)sql"},
      // SetRate: the limit, and a group notice so sessions re-read at once.
      {"set_rate", R"sql(
WITH u AS (UPDATE {schema}.queues SET rate = $2::double precision WHERE name = $1 RETURNING 1)
SELECT count(pg_notify($3, 'g')) FROM u
)sql"},
      // GrowParts ($2 the new count, checked by the caller against $3, the
      // count it read): the row locked FOR UPDATE, so a grow waits for the
      // acquisitions and cancels holding it (and they for the grow), and
      // two grows at once apply one after the other, each checked against
      // the count it read (a grow that read a stale one changes nothing and
      // returns the current count, for the caller to check again). Enqueues
      // take no lock on the row: one that read the old count may still
      // commit an item into the old part, which the ordered claim's probe
      // of earlier parts sees (ReadyItems). A group notice so sessions
      // re-read at once.
      {"grow_parts", R"sql(
WITH q AS (SELECT parts FROM {schema}.queues WHERE name = $1 FOR UPDATE),
u AS (
  UPDATE {schema}.queues SET parts = $2, grown_from = grown_from || q.parts
  FROM q WHERE name = $1 AND q.parts = $3 AND $2 > q.parts
  RETURNING 1)
SELECT q.parts, (SELECT count(*) FROM u), (SELECT count(pg_notify($4, 'g')) FROM u) FROM q
)sql"},
      // SetFairBy: no notice; sessions read it when they start.
      {"set_fair_by", R"sql(
UPDATE {schema}.queues SET fair_by = $2::text WHERE name = $1
)sql"},
      // SetKeyConcurrency: no notice; sessions read it when they start.
      {"set_key_concurrency", R"sql(
UPDATE {schema}.queues SET key_concurrency = $2::int WHERE name = $1
)sql"},
      // SetPaused: the flag, and a group notice so sessions re-read at once.
      {"set_paused", R"sql(
WITH u AS (UPDATE {schema}.queues SET paused = $2 WHERE name = $1 RETURNING 1)
SELECT count(pg_notify($3, 'g')) FROM u
)sql"},

      // --- sessions -------------------------------------------------------------
      // Join, dynamic ($2 NULL: a random id) or static ($2 = instance id: a
      // stable id, so a restart within the TTL finds its row). A static
      // re-join bumps the incarnation (fencing the old process's heartbeats)
      // and moves every part the row still owns to a fresh epoch (fencing its
      // acks); the parts are returned as "part:epoch,...". What the old
      // process had in flight there (its claim records) is marked abandoned,
      // one attempt counted each (store.h, "Claims"). The NOTIFY goes out on
      // commit; the statement is its own transaction.
      {"join",
       absl::StrCat(R"sql(
WITH q AS (SELECT name, session_ttl, paused, rate FROM {schema}.queues WHERE name = $1),
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
  RETURNING sp.part, sp.epoch),
)sql",
                    TakeOverClaims("kept"), R"sql(
SELECT up.id, up.incarnation,
       (SELECT string_agg(part || ':' || epoch, ',' ORDER BY part) FROM kept),
       pg_notify($5, 'g'), (SELECT paused FROM q), (SELECT rate FROM q)
FROM up
)sql"),
       /*prepared=*/false},
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
      // `done` adds what the session finished since its last heartbeat
      // ($5..$7, Store::Heartbeat) to its row of the current minute in
      // throughput (a session writes only its own rows: no row every member
      // updates at once), and only while the session is alive; `pruned`
      // deletes the queue's rows older than an hour, those of dead sessions
      // too, skipping rows another heartbeat is deleting (it never waits).
      // $8 is the group generation the caller last read the whole group at
      // (Store::HeartbeatSince): when it is where it was, nobody expired here
      // and nobody is past its TTL, members and owners stay NULL (a CASE
      // runs its subquery only when it takes that branch) and the statement
      // reads no part row. The generation is read in the statement's one
      // snapshot, so it belongs with the rows read beside it; the triggers of
      // migration 19 move it in every transaction that changes the group.
      // When it moved, and $8 is at most kGroupChangesKept behind, and this
      // statement expired nobody (the changes its own deletions log are not
      // in its snapshot), the owners are only those changed since $8
      // (owner_changes() of migration 22; GroupView::delta): the latest
      // change of each part, an empty session for a row that went.
      {"heartbeat", absl::StrCat(kHeartbeatMe, R"sql(,
done AS (
  INSERT INTO {schema}.throughput AS t (queue, minute, session_id, acked, retried, dead)
  SELECT $1, date_trunc('minute', now()), me.id, $5::bigint, $6::bigint, $7::bigint FROM me
  WHERE $5::bigint <> 0 OR $6::bigint <> 0 OR $7::bigint <> 0
  ON CONFLICT (queue, minute, session_id) DO UPDATE
    SET acked = t.acked + excluded.acked, retried = t.retried + excluded.retried,
        dead = t.dead + excluded.dead),
pruned AS (
  DELETE FROM {schema}.throughput o
  WHERE (o.queue, o.minute, o.session_id) IN (
    SELECT x.queue, x.minute, x.session_id FROM {schema}.throughput x
    WHERE x.queue = $1 AND x.minute < now() - interval '1 hour'
    LIMIT 1000 FOR UPDATE SKIP LOCKED)),
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
  UNION ALL SELECT id FROM me),
gen AS (SELECT coalesce((SELECT generation FROM {schema}.group_generations WHERE queue = $1), 0)
               AS generation),
same AS (
  SELECT $8::bigint >= 0 AND $8::bigint = (SELECT generation FROM gen)
         AND NOT EXISTS (SELECT 1 FROM gone)
         AND NOT EXISTS (SELECT 1 FROM {schema}.sessions x
                         WHERE x.queue = $1 AND x.expires_at < now() AND x.id <> $2) AS yes),
delta AS (
  SELECT NOT (SELECT yes FROM same) AND $8::bigint >= 0
         AND $8::bigint <= (SELECT generation FROM gen)
         AND $8::bigint >= (SELECT generation FROM gen) - $9::bigint
         AND NOT EXISTS (SELECT 1 FROM gone) AS yes)
SELECT (SELECT count(*) FROM me), (SELECT count(*) FROM gone),
       CASE WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(id::text, ',' ORDER BY id) FROM members) END,
       CASE WHEN (SELECT yes FROM delta) THEN
         {schema}.owner_changes($1, $8::bigint)
       WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(part || ':' || session_id || ':' || epoch, ',' ORDER BY part)
          FROM {schema}.session_parts
          WHERE queue = $1 AND session_id NOT IN (SELECT id FROM gone)) END,
       (SELECT count(pg_notify($4, 'g')) FROM (SELECT 1 FROM gone LIMIT 1) g),
       q.paused, q.rate, q.parts, (SELECT generation FROM gen), (SELECT yes FROM same),
       (SELECT yes FROM delta)
FROM (VALUES (1)) AS one LEFT JOIN {schema}.queues q ON q.name = $1
)sql")},
      // The idle heartbeat (PgStore::HeartbeatSince tries it first when the
      // caller knows a generation and has no counts to carry): our row's
      // update, the generation, whether anyone else is past its TTL, and
      // the queue row's fields, all in one snapshot, and nothing else. When
      // it answers alive, at the generation the caller knows, with nobody
      // expired, that is the whole answer (the full statement's `same`,
      // under which it would expire nobody and read no row either). Anything
      // else and the full `heartbeat` follows. Why two statements: an idle
      // fleet's server CPU was mostly the full statement's executor start
      // (its four data-modifying CTEs and every CASE branch are initialized
      // on each run, though only the update does anything) and its planning
      // (BENCHMARKS.md, "The idle heartbeat"); this plan is a few nodes.
      // Whether anyone is past its TTL is read from the members only when
      // the queue's expiry sweep (migration 24) is due: its generation is not
      // the current one, or its time has come. Then `next` is the earliest
      // expiry of the others ('infinity' for none; ours, just renewed, is no
      // earlier than theirs; a row of our id at another incarnation is not
      // ours but a static re-join's, and counts), and when it is still ahead
      // the sweep row takes it, with the generation read beside it. The row
      // is locked SKIP LOCKED and only then (a CASE runs its subquery only in
      // the branch it takes): a heartbeat never waits for another's sweep,
      // and one that is not due writes nothing but its own row. A queue
      // without a sweep row is due every time, which is correct, only slower.
      {"heartbeat_idle", absl::StrCat(kHeartbeatMe, R"sql(,
gen AS (SELECT coalesce((SELECT generation FROM {schema}.group_generations WHERE queue = $1), 0)
               AS generation),
scan AS (
  SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM {schema}.expiry_sweeps w
                               WHERE w.queue = $1 AND w.generation = (SELECT generation FROM gen)
                                 AND w.sweep_after > now())
         THEN coalesce((SELECT min(x.expires_at) FROM {schema}.sessions x
                        WHERE x.queue = $1 AND NOT (x.id = $2 AND x.incarnation = $3)),
                       'infinity') END AS next),
lock AS (
  SELECT CASE WHEN (SELECT next FROM scan) >= now() THEN
           (SELECT w.queue FROM {schema}.expiry_sweeps w WHERE w.queue = $1
            FOR UPDATE SKIP LOCKED) END AS queue),
swept AS (
  UPDATE {schema}.expiry_sweeps w SET generation = gen.generation, sweep_after = scan.next
  FROM gen, scan WHERE w.queue = (SELECT queue FROM lock)
  RETURNING 1)
SELECT (SELECT count(*) FROM me), (SELECT generation FROM gen),
       coalesce((SELECT next FROM scan) < now(), false),
       q.paused, q.rate, q.parts
FROM (VALUES (1)) AS one LEFT JOIN {schema}.queues q ON q.name = $1
)sql")},
      // ReadGroup: as the heartbeat's read, $2 the generation last read, $3
      // kGroupChangesKept.
      {"read_group", R"sql(
WITH gen AS (
  SELECT coalesce((SELECT generation FROM {schema}.group_generations WHERE queue = $1), 0)
         AS generation),
same AS (
  SELECT $2::bigint >= 0 AND $2::bigint = (SELECT generation FROM gen)
         AND NOT EXISTS (SELECT 1 FROM {schema}.sessions x
                         WHERE x.queue = $1 AND x.expires_at < now()) AS yes),
delta AS (
  SELECT NOT (SELECT yes FROM same) AND $2::bigint >= 0
         AND $2::bigint <= (SELECT generation FROM gen)
         AND $2::bigint >= (SELECT generation FROM gen) - $3::bigint AS yes)
SELECT (SELECT count(*) FROM {schema}.queues WHERE name = $1),
       CASE WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(id::text, ',' ORDER BY id) FROM {schema}.sessions
          WHERE queue = $1 AND expires_at >= now()) END,
       CASE WHEN (SELECT yes FROM delta) THEN
         {schema}.owner_changes($1, $2::bigint)
       WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(part || ':' || session_id || ':' || epoch, ',' ORDER BY part)
          FROM {schema}.session_parts WHERE queue = $1) END,
       q.paused, q.rate, q.parts, (SELECT generation FROM gen), (SELECT yes FROM same),
       (SELECT yes FROM delta)
FROM (VALUES (1)) AS one LEFT JOIN {schema}.queues q ON q.name = $1
)sql"},
      // AcquireParts: the primary key (queue, part) makes a second owner
      // impossible (I1); ON CONFLICT DO NOTHING skips owned parts. Rows go in
      // part order so two sessions racing for overlapping sets wait on each
      // other in one order and cannot deadlock. A row (-1, 0) says our session
      // row is gone; a session deleted concurrently surfaces as an FK error.
      // A claim record in an acquired part was left by an owner that died
      // (a graceful one deletes it): its items are marked abandoned.
      // The queue row is locked FOR SHARE before anything is written, so a
      // part gets no owner while a cancel holds the row (cancel_items(),
      // migration 13, says why); acquisitions do not wait for each other.
      {"acquire",
       absl::StrCat(R"sql(
WITH s AS (SELECT id FROM {schema}.sessions WHERE id = $2 AND queue = $1),
q AS (SELECT parts FROM {schema}.queues WHERE name = $1 FOR SHARE),
ins AS (
  INSERT INTO {schema}.session_parts (queue, part, session_id, epoch)
  SELECT $1, p.part, s.id, nextval('{schema}.epochs')
  FROM s, q, unnest($3::int[]) AS p(part)
  WHERE p.part >= 0 AND p.part < q.parts
  ORDER BY p.part
  ON CONFLICT DO NOTHING
  RETURNING part, epoch),
)sql",
                    TakeOverClaims("ins"), R"sql(
SELECT part, epoch FROM ins
UNION ALL SELECT -1, 0 WHERE NOT EXISTS (SELECT 1 FROM s)
)sql"),
       /*prepared=*/false},
      // ReleaseParts: deletes our rows at the given epochs, and their claim
      // records: a graceful hand-off abandons nothing. One statement, so one
      // transaction. Its notice is 'r' (Notice::kReleased), not 'g': only the
      // members waiting for a hand-off read the group for it, not the whole
      // fleet for every release of a join storm.
      {"release", R"sql(
WITH rel AS (
  DELETE FROM {schema}.session_parts sp
  USING unnest($3::int[], $4::bigint[]) AS r(part, epoch)
  WHERE sp.queue = $1 AND sp.session_id = $2 AND sp.part = r.part AND sp.epoch = r.epoch
  RETURNING sp.part),
rec AS (
  DELETE FROM {schema}.part_claims c USING rel WHERE c.queue = $1 AND c.part = rel.part
  RETURNING 1)
SELECT (SELECT count(*) FROM rel), (SELECT count(*) FROM rec),
       (SELECT count(pg_notify($5, 'r')) FROM (SELECT 1 FROM rel LIMIT 1) x)
)sql"},
      // Leave: deletes this incarnation's row; its parts cascade at the end
      // of the statement, after `p` has read them from the snapshot. Their
      // claim records go too, as in a release.
      {"leave", R"sql(
WITH s AS (
  DELETE FROM {schema}.sessions WHERE id = $2 AND incarnation = $3 AND queue = $1
  RETURNING id),
p AS (SELECT sp.part FROM {schema}.session_parts sp JOIN s ON sp.session_id = s.id),
rec AS (
  DELETE FROM {schema}.part_claims c USING p WHERE c.queue = $1 AND c.part = p.part
  RETURNING 1)
SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM rec),
       (SELECT count(pg_notify($4, 'g')) FROM s)
)sql"},
      // ReleaseClaims: a static member stopping empties the records of its
      // parts at their epochs (what it had not finished is ready again, no
      // attempt counted) and keeps its session and parts for its restart.
      {"release_claims", R"sql(
UPDATE {schema}.part_claims c SET ids = '{}'
FROM {schema}.session_parts sp JOIN {schema}.sessions s ON s.id = sp.session_id
WHERE s.id = $2 AND s.incarnation = $3 AND s.queue = $1 AND sp.queue = $1
  AND c.queue = $1 AND c.part = sp.part AND c.epoch = sp.epoch AND c.ids <> '{}'
)sql"},
      {"notify", "SELECT pg_notify($1, $2)"},
      // One notice per part, with the lowest key the transaction added
      // there (Notice::from): "i:PART:PRIORITY:ID".
      {"notify_parts",
       "SELECT count(pg_notify($1, 'i:' || t.p || ':' || t.pr || ':' || t.id)) "
       "FROM unnest($2::int[], $3::int[], $4::bigint[]) AS t(p, pr, id)"},
      // Tx::Publish: a message for `partq bridge publish`, in the caller's
      // transaction.
      {"write_outbox", R"sql(
INSERT INTO {schema}.outbox (topic, key, payload, headers)
VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4::jsonb)
)sql"},

      // --- items ------------------------------------------------------------------
      {"enqueue", kEnqueue},
      {"dedup_lookup", R"sql(
SELECT id, part FROM {schema}.items WHERE queue = $1 AND dedup_key = $2
)sql"},
      // A transaction that reads the queue row in one statement and writes
      // items in a later one (EnqueueBatch, IngestKafka) runs this first:
      // DeleteQueue's SHARE lock on items then either waits for it to end or
      // makes it wait before it reads the queue row, never between the read
      // and the write (which would leave items in a deleted queue, to turn
      // up again in a queue created later under the same name).
      {"lock_items_for_enqueue", "LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE"},
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
      // --- queue groups (migration 12; store.h, "Queue groups") -------------------
      // An item of a group, one at a time: enqueue_item() holds the group's
      // row and counts the item (a rare path: not worth a statement of its own).
      // The batch path's groups: each row held until commit, in id order
      // (no deadlock between two batches), with whether it has started.
      {"hold_groups", R"sql(
SELECT g, {schema}.group_hold($1, g) FROM unnest($2::text[]) AS g ORDER BY g
)sql",
       /*prepared=*/false},
      // insert_batch for a batch with groups: held items wait ('infinity'
      // until group_start), and each group counts the items inserted.
      {"insert_batch_grouped", R"sql(
WITH ins AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload,
                              group_id)
  SELECT t.id, $1, t.part, t.key, t.dedup, t.prio,
         CASE WHEN t.held THEN 'infinity' ELSE now() + t.delay_us * interval '1 microsecond' END,
         decode(t.payload, 'hex'), t.grp
  FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::smallint[], $7::bigint[],
              $8::text[], $9::text[], $10::bool[])
       AS t(id, part, key, dedup, prio, delay_us, payload, grp, held)
  ORDER BY t.id
  ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
  RETURNING group_id),
counted AS (
  UPDATE {schema}.groups x SET pending = x.pending + c.n
  FROM (SELECT group_id, count(*) AS n FROM ins WHERE group_id IS NOT NULL GROUP BY group_id) c
  WHERE x.queue = $1 AND x.id = c.group_id
  RETURNING 1)
SELECT count(*), (SELECT count(*) FROM counted) FROM ins
)sql",
       /*prepared=*/false},
      // Finish's part: the groups of the items it acked or dead-lettered.
      {"groups_finished", R"sql(
SELECT {schema}.groups_finished($1, $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
)sql",
       /*prepared=*/false},
      // The claim of a queue with a key bound (ordered, key concurrency), not
      // fair; the others run kPipelinedClaim(Fair) (PgStore::Claim says why
      // this one keeps the plan the planner picks: its key probes).
      {"claim", ClaimStatement(/*fair=*/false)},
      // The slow path of Finish: lock first, so the handler sees only items
      // of parts that are still ours and that are still there (an item gone
      // was finished already: by this session, when a COMMIT whose outcome
      // was unknown did commit). FOR SHARE keeps the rows (and their epochs)
      // as they are until the ack transaction ends: expiry, release and a
      // static re-join all wait for it.
      {"fence", absl::StrCat("WITH ", kFence, R"sql(
SELECT 'p', part::bigint FROM f
UNION ALL
SELECT 'i', id FROM {schema}.items WHERE id = ANY($5::bigint[])
)sql")},
      // Finish: the fence and every outcome in one statement, after the
      // handler ran (store.h, Finish). The general form, for batches with
      // retries or dead items and for the second, locked attempt: sent
      // unprepared, planned for its arguments each time (Statement::prepared),
      // only where kPipelinedFinish(Claim)(Fair) does not serve (an ordered
      // or key-concurrency queue's claim ahead). Returns ('p', part) for each
      // part
      // still held at its epoch, and ('a'|'r'|'d', id) per row written; the
      // caller rolls back when a part was not held or a count is off.
      {"finish", FinishStatement(), /*prepared=*/false},
      // Finish and claim ahead: the claim's reads see the statement's
      // snapshot, where the rows this statement deletes or reschedules still
      // look ready, so the batch's ids are skipped explicitly.
      {"finish_claim", FinishClaimStatement(/*fair=*/false), /*prepared=*/false},
      {"finish_claim_fair", FinishClaimStatement(/*fair=*/true), /*prepared=*/false},
      // The common Finish (AckCtes), without and with a claim ahead. With
      // one, a queue without a key bound, and a fair one, run
      // kPipelinedLeanAckClaim(Fair) (PipelinedStatements) instead.
      {"ack", absl::StrCat("WITH ", AckCtes(), R"sql(
SELECT 'p' AS k, part::bigint AS id FROM f
UNION ALL SELECT 'n', count(*) FROM done
)sql")},
      {"ack_claim", AckClaimStatement(/*fair=*/false)},
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
SELECT 'c', queue, attempts, NULL, NULL FROM {schema}.cancelled_items WHERE id = $2
UNION ALL
SELECT 's', NULL, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::int,
       CASE WHEN is_called THEN last_value ELSE last_value - 1 END::text, NULL
FROM {schema}.items_id_seq
)sql"},
      // CancelItems: whether the queue exists, and the parts of the asked
      // items still in it (each part is cancelled in its own transaction).
      {"cancel_parts", R"sql(
SELECT NULL::int, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::bigint
UNION ALL
SELECT part, id FROM {schema}.items WHERE queue = $1 AND id = ANY($2::bigint[])
)sql"},
      // cancel_items() and cancel_by_dedup_key() (migration 13), called only
      // for a queue that exists: no rows for one that does not (NotFound),
      // where the functions would raise an error of their own.
      {"cancel_items", R"sql(
SELECT c.id, c.state FROM {schema}.queues q
CROSS JOIN LATERAL {schema}.cancel_items(q.name, $2::bigint[]) c
WHERE q.name = $1
)sql"},
      // Store::VacuumQueueTables: the schema's queue tables whose dead rows
      // have passed their own autovacuum threshold (reloptions, else the
      // server's settings), whether this role may vacuum them (their
      // owner's or the database owner's privileges, as VACUUM asks), and
      // the vacuum horizon: the xmin of its oldest holder other than this
      // backend and running vacuums (as in status_horizon), NULL when there
      // is none.
      {"vacuum_due", R"sql(
WITH t AS (
  SELECT c.relname::text AS name, s.n_dead_tup AS dead, c.reltuples, c.relowner,
         (SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
          WHERE option_name = 'autovacuum_vacuum_threshold') AS threshold,
         (SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
          WHERE option_name = 'autovacuum_vacuum_scale_factor') AS scale
  FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
  WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
    AND c.relname IN ('items', 'part_claims')
), h AS (
  SELECT backend_xmin AS x FROM pg_stat_activity
  WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
    AND (datname = current_database() OR backend_type = 'walsender')
    AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)
  UNION ALL
  SELECT transaction FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
)
SELECT name, dead,
       pg_has_role(relowner, 'USAGE')
         OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()),
                        'USAGE'),
       (SELECT x::text FROM h ORDER BY age(x) DESC LIMIT 1)
FROM t
WHERE dead >= coalesce(threshold, current_setting('autovacuum_vacuum_threshold')::float8)
              + coalesce(scale, current_setting('autovacuum_vacuum_scale_factor')::float8)
                * greatest(reltuples, 0)
ORDER BY name
)sql"},
      // Store::Prune: the function checks the name, the queue and the age.
      {"prune", R"sql(
SELECT results, cancelled, groups, dead_items
FROM {schema}.prune($1, $2::bigint * interval '1 microsecond', $3::boolean)
)sql"},
      {"cancel_by_dedup_key", R"sql(
SELECT c.id, c.state FROM {schema}.queues q
CROSS JOIN LATERAL {schema}.cancel_by_dedup_key(q.name, $2) c
WHERE q.name = $1
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
   WHERE queue = $1 AND dedup_key = $2
   UNION ALL
   SELECT 'c', id, attempts, NULL, NULL FROM {schema}.cancelled_items
   WHERE queue = $1 AND dedup_key = $2) f
 ORDER BY id DESC LIMIT 1)
UNION ALL
SELECT 'q', 0, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::int, NULL, NULL
)sql"},
      // Status: sessions, then one row per part (zero-filled by
      // generate_series). An item is in flight while a claim record lists it
      // (its owner's, or a dead owner's that no one has taken over yet: the
      // next owner marks those abandoned), else ready or delayed by run_at, or held
      // (run_at 'infinity': an item of a queue group not started).
      // `fly` is small (what sessions have in flight), so the IN test is a
      // hash lookup per item.
      {"status_sessions", R"sql(
SELECT s.id, coalesce(s.instance_id, ''), s.host, s.pid,
       (extract(epoch FROM now() - s.heartbeat_at) * 1000000)::bigint,
       (extract(epoch FROM s.expires_at - now()) * 1000000)::bigint,
       (SELECT count(*) FROM {schema}.session_parts sp WHERE sp.session_id = s.id),
       (extract(epoch FROM now()) * 1000000)::bigint,
       (extract(epoch FROM now() - s.started_at) * 1000000)::bigint
FROM {schema}.sessions s WHERE s.queue = $1 ORDER BY s.id
)sql"},
      // Each session's own throughput rows that may cover the minute before
      // its last heartbeat (RecentRates, store/throughput.h): a row covers
      // from a heartbeat before its minute, and heartbeats come more often
      // than the TTL.
      {"status_session_throughput", R"sql(
SELECT t.session_id::text, (extract(epoch FROM t.minute))::bigint, t.acked, t.retried, t.dead
FROM {schema}.throughput t
JOIN {schema}.sessions s ON s.id = t.session_id
JOIN {schema}.queues q ON q.name = s.queue
WHERE t.queue = $1 AND s.queue = $1 AND q.name = $1
  AND t.minute >= date_trunc('minute', s.heartbeat_at - interval '1 minute' - q.session_ttl)
ORDER BY t.session_id, t.minute
)sql"},
      // Owners: one statement, so one snapshot; the queue's row says it
      // exists and how many parts it has, EXISTS stops at the first item.
      // Sessions come with their heartbeat's age and their expiry, as in
      // status_sessions, so a reader tells live ones from expired ones.
      // NextDue: the first retried, delayed or requeued item per part (by
      // items_later), in microseconds from now: 0 or less when one is due
      // already (it came due since the claim read). Held group items
      // ('infinity') are not due at any time.
      {"next_due", R"sql(
SELECT (extract(epoch FROM min(d.run_at) - now()) * 1000000)::bigint
FROM unnest($2::int[]) AS p(part)
CROSS JOIN LATERAL (
  SELECT i.run_at FROM {schema}.items i
  WHERE i.queue = $1 AND i.part = p.part AND i.run_at > i.enqueued_at
    AND i.run_at < 'infinity'
  ORDER BY i.run_at LIMIT 1) d
)sql"},
      {"owners", R"sql(
SELECT 'q', NULL::text, NULL::text, parts, NULL::bigint, NULL::bigint
FROM {schema}.queues WHERE name = $1
UNION ALL SELECT 's', id::text, host, pid,
                 (extract(epoch FROM now() - heartbeat_at) * 1000000)::bigint,
                 (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM {schema}.sessions WHERE queue = $1
UNION ALL SELECT 'p', session_id::text, NULL, part, NULL, NULL
FROM {schema}.session_parts WHERE queue = $1
UNION ALL SELECT 'i', NULL, NULL, NULL, NULL, NULL
WHERE EXISTS (SELECT 1 FROM {schema}.items WHERE queue = $1)
)sql"},
      // The oldest holder of this database's vacuum horizon: backends of
      // this database (and walsenders, whose hot_standby_feedback holds every
      // database's), prepared transactions, replication slots. Our own
      // snapshot (the status transaction) is left out, and so are backends
      // running a (lazy) VACUUM: their xmin shows in pg_stat_activity, but
      // PostgreSQL leaves it out of every other vacuum's horizon
      // (PROC_IN_VACUUM), so a 20 s autovacuum of a big handler table holds
      // nothing back. An ANALYZE does hold it and stays. Oldest by xid age;
      // the time is the holder's transaction's.
      {"status_horizon", R"sql(
WITH h AS (
  SELECT 'transaction' AS holder,
         format('pid %s (%s, %s)', pid, coalesce(nullif(application_name, ''), backend_type),
                coalesce(state, 'unknown')) AS who,
         age(backend_xmin) AS xid_age,
         coalesce(now() - xact_start, interval '0') AS held
  FROM pg_stat_activity
  WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
    AND (datname = current_database() OR backend_type = 'walsender')
    AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)
  UNION ALL
  SELECT 'prepared transaction', format('gid %s', gid), age(transaction), now() - prepared
  FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT 'replication slot', format('slot %s', slot_name), age(xmin), interval '0'
  FROM pg_replication_slots WHERE xmin IS NOT NULL
)
SELECT holder, who, xid_age, (extract(epoch FROM held) * 1000000)::bigint
FROM h ORDER BY xid_age DESC, held DESC LIMIT 1
)sql"},
      // What the queue's sessions reported finished per minute over the last
      // hour (the heartbeat's `done`), summed over sessions, oldest first.
      {"status_throughput", R"sql(
SELECT (extract(epoch FROM minute))::bigint, sum(acked)::bigint, sum(retried)::bigint,
       sum(dead)::bigint
FROM {schema}.throughput
WHERE queue = $1 AND minute >= date_trunc('minute', now() - interval '1 hour')
GROUP BY minute ORDER BY minute
)sql"},
      // The queue's groups by state, and what the open ones have pending.
      {"status_groups", R"sql(
SELECT count(*) FILTER (WHERE started_at IS NULL AND ended_at IS NULL),
       count(*) FILTER (WHERE started_at IS NOT NULL AND ended_at IS NULL),
       count(*) FILTER (WHERE ended_at IS NOT NULL),
       coalesce(sum(pending) FILTER (WHERE ended_at IS NULL), 0)
FROM {schema}.groups WHERE queue = $1
)sql"},
      {"status_parts", R"sql(
WITH own AS (SELECT part, session_id, epoch FROM {schema}.session_parts WHERE queue = $1),
fly AS (
  SELECT i.id FROM {schema}.part_claims c
  JOIN {schema}.items i ON i.id = ANY(c.ids) AND i.part = c.part AND i.queue = c.queue
  WHERE c.queue = $1),
it AS (
  SELECT part,
         count(*) FILTER (WHERE NOT fl AND run_at <= now()) AS ready,
         count(*) FILTER (WHERE NOT fl AND run_at > now() AND run_at < 'infinity') AS delayed,
         count(*) FILTER (WHERE run_at = 'infinity') AS held,
         count(*) FILTER (WHERE fl) AS in_flight,
         min(enqueued_at) FILTER (WHERE NOT fl AND run_at <= now()) AS oldest
  FROM (SELECT part, run_at, enqueued_at, id IN (SELECT id FROM fly) AS fl
        FROM {schema}.items WHERE queue = $1) x
  GROUP BY part),
dd AS (SELECT part, count(*) AS n,
              count(*) FILTER (WHERE failed_at > now() - interval '1 minute') AS recent
       FROM {schema}.dead_items WHERE queue = $1 GROUP BY part),
cc AS (SELECT part, count(*) AS n FROM {schema}.cancelled_items WHERE queue = $1 GROUP BY part)
SELECT p, own.session_id, coalesce(own.epoch, 0), coalesce(it.ready, 0),
       coalesce(it.delayed, 0), coalesce(it.in_flight, 0), coalesce(dd.n, 0),
       coalesce((extract(epoch FROM now() - it.oldest) * 1000000)::bigint, 0),
       coalesce(it.held, 0), coalesce(cc.n, 0), coalesce(dd.recent, 0)
FROM generate_series(0, $2::int - 1) AS p
LEFT JOIN own ON own.part = p
LEFT JOIN it ON it.part = p
LEFT JOIN dd ON dd.part = p
LEFT JOIN cc ON cc.part = p
ORDER BY p
)sql"},
  };
  for (Statement& st : s) st.sql = WithSchema(st.sql, schema);
  return s;
}

}  // namespace pg_internal
}  // namespace partq
