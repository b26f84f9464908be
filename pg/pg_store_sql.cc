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

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "pg/embedded_sql.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"

namespace partq {
namespace pg_internal {
namespace {

// The statement in pg/sql/NAME.sql, without the comment lines that head the
// file (they say why it looks as it does, for its readers, not the server)
// and without the file's last newline: the server sees the statement as it
// is written, which is what pg_stat_activity shows and tests match.
std::string StatementSql(absl::string_view name) {
  absl::string_view text = EmbeddedSql(absl::StrCat("sql/", name, ".sql"));
  while (absl::StartsWith(text, "--")) {
    const size_t nl = text.find('\n');
    text.remove_prefix(nl == absl::string_view::npos ? text.size() : nl + 1);
  }
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

// StatementSql(name) with its holes ("{fence}", ...) filled: fragments that
// several statements share and that live in one place.
std::string Fill(absl::string_view name,
                 std::initializer_list<std::pair<absl::string_view, absl::string_view>> holes) {
  return absl::StrReplaceAll(StatementSql(name), holes);
}

// The columns of `items i` that every claim read returns.
constexpr const char* kReadColumns =
    "i.ctid AS tid, i.id, i.key, i.dedup_key, i.priority, i.attempts, i.payload, "
    "i.enqueued_at, i.run_at, i.group_id";
// The payload bytes a claim read before this row (`r` or `c`, in the order read): a claim
// keeps the rows read before it reached its byte bound (ClaimRequest::max_bytes), so the
// row that reaches it is the last, and the first is always kept. octet_length reads a
// stored value's size from its header, without detoasting it.
constexpr const char* kBytesBefore =
    "sum(octet_length(payload)) OVER (ROWS UNBOUNDED PRECEDING) - octet_length(payload) "
    "AS bytes_before";
// kReadColumns of a subquery `i` of items' rows with their ctids as `tid`.
constexpr const char* kReadColumnsOfRows =
    "i.tid, i.id, i.key, i.dedup_key, i.priority, i.attempts, i.payload, i.enqueued_at, "
    "i.run_at, i.group_id";
// How many times its limit of rows an ordered read on from a cursor looks at (ReadyItems).
constexpr int kKeyedReadRows = 8;
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
// - `released` (an ordered claim's; empty: none): a FROM item of (key, id)
//   rows, the keys whose item at that id this session finished since it
//   last read the part (ClaimPart::key_cursors). Each key's next item, the
//   first of the key after that id, may have come ready behind where the
//   read starts (the read that passed it held it back: its key was busy),
//   so it is read too, found through items_key from the finished id: never
//   from the part's head, whose acked rows a held snapshot keeps.
std::string ReadyItems(absl::string_view queue, absl::string_view part,
                       absl::string_view after_prio, absl::string_view after_id,
                       absl::string_view cursor_prio, absl::string_view cursor_id,
                       absl::string_view skip, absl::string_view bound, absl::string_view limit,
                       absl::string_view behind, absl::string_view released) {
  const std::string columns = kReadColumns;
  const std::string common = ReadyCondition(queue, part, bound);
  // An ordered read on from a cursor looks at most kKeyedReadRows times its
  // limit of the part's rows: at most one item of a key is ready, so in a
  // backlog of few keys nearly every row is held back, and a read that went
  // on until its limit walked the whole backlog on every claim
  // (bench/held_snapshot_ordered.sh). What lies past that window is found
  // by the next read from the head, which looks at every row (every
  // kOrderedRescans rescan_intervals: ClaimSchedulerOptions::ordered), as
  // key-concurrency reads, always from the head, do. The windowed and the
  // flat form are branches of one read, each gated by a condition on its
  // parameters alone (a one-time filter: the other branch never runs, and a
  // plan for known values drops it), so a key-concurrency read keeps the
  // flat form's plan, which stops at its limit.
  auto onward_from = [&](absl::string_view rows, absl::string_view read_columns,
                         absl::string_view gate) {
    return absl::StrCat("SELECT ", read_columns, R"sql(
    FROM )sql",
                        rows, R"sql(
    WHERE )sql",
                        common, R"sql(
      AND (i.priority, i.id) > ()sql",
                        after_prio, "::smallint, ", after_id, R"sql()
      AND ((i.priority, i.id) > ()sql",
                        cursor_prio, "::smallint, ", cursor_id, ") OR i.id <> ALL(", skip, "))",
                        gate, R"sql(
    ORDER BY i.priority, i.id LIMIT )sql",
                        limit);
  };
  const std::string flat = "{schema}.items i";
  std::string onward = onward_from(flat, columns, "");
  if (bound != "0") {
    const std::string windowed =
        absl::StrCat(bound, "::int = 1 AND ", after_id, " <> -9223372036854775808");
    const std::string window = absl::StrCat(
        "(SELECT i.ctid AS tid, i.* FROM {schema}.items i WHERE i.queue = ", queue,
        " AND i.part = ", part, " AND (i.priority, i.id) > (", after_prio, "::smallint, ", after_id,
        ") ORDER BY i.priority, i.id LIMIT ", kKeyedReadRows, " * ", limit, ") i");
    onward =
        absl::StrCat("SELECT * FROM ((",
                     onward_from(window, kReadColumnsOfRows, absl::StrCat(" AND ", windowed)),
                     ")\n  UNION ALL\n  (",
                     onward_from(flat, columns, absl::StrCat(" AND NOT (", windowed, ")")), ")) o");
  }
  // Behind the start, so the onward read cannot return it again; not what
  // the look behind returns.
  const std::string next_of_released =
      released.empty()
          ? std::string()
          : absl::StrCat("(SELECT ", kReadColumnsOfRows, R"sql(
    FROM (SELECT rel.key, rel.id FROM )sql",
                         released, R"sql() rel
    CROSS JOIN LATERAL (
      SELECT n.ctid AS tid, n.* FROM {schema}.items n
      WHERE n.queue = )sql",
                         queue, " AND n.part = ", part, R"sql( AND n.key = rel.key AND n.id > rel.id
      ORDER BY n.id LIMIT 1) i
    WHERE )sql",
                         common, R"sql(
      AND (i.priority::int, i.id) <= ()sql",
                         after_prio, "::int, ", after_id, ") AND i.id <> ALL(", skip, ")",
                         behind.empty()
                             ? std::string()
                             : absl::StrCat(" AND NOT (", behind, " AND i.run_at > i.enqueued_at)"),
                         R"sql(
    ORDER BY i.priority::int, i.id LIMIT )sql",
                         limit, ")\n  UNION ALL\n  ");
  if (behind.empty() && released.empty()) return onward;
  if (behind.empty()) {
    return absl::StrCat("SELECT * FROM (", next_of_released, "(", onward, ")) r LIMIT ", limit);
  }
  return absl::StrCat("SELECT * FROM ((SELECT ", columns, R"sql(
    FROM {schema}.items i
    WHERE )sql",
                      common, R"sql(
      AND i.run_at > i.enqueued_at AND )sql",
                      behind, " AND ", after_id, R"sql( <> -9223372036854775808
      AND (i.priority::int, i.id) <= ()sql",
                      after_prio, "::int, ", after_id, ") AND i.id <> ALL(", skip, R"sql()
    ORDER BY i.priority::int, i.id LIMIT )sql",
                      limit, ")\n  UNION ALL\n  ", next_of_released, "(", onward, ")) r LIMIT ",
                      limit);
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
// ids. The keyed form (not `unkeyed`) takes the same three: an ordered
// claim's released keys (ReadyItems, `released`).
//
// `unkeyed`: the form for a claim without a key bound (KeyBound 0), whose
// bound is the literal 0, which the planner folds away, so that a generic plan
// carries none of ReadyCondition's key probes (the pipelined ack's forms say
// why); the bound's parameter must then be 0, else the claim reads nothing.
// The `ready` CTE of ClaimCtes: each owned part's `reads` (ReadyItems or FairItems of
// `own.part`), in the parts' order, cut at `total` rows and, given `bytes` (a parameter), where
// the payloads read before a row reach it.
std::string ReadyCte(absl::string_view reads, absl::string_view total, absl::string_view bytes) {
  return absl::StrCat(
      "ready AS (\n  SELECT x.part, x.epoch, ", kReadColumnsOf,
      ", false AS suspect FROM (\n  SELECT own.part, own.epoch, c.*",
      bytes.empty() ? "" : absl::StrCat(", ", kBytesBefore), "\n  FROM own CROSS JOIN LATERAL (",
      reads, ") c\n  LIMIT ", total, ") x",
      bytes.empty() ? "" : absl::StrCat("\n  WHERE x.bytes_before < ", bytes, "::bigint"), ")");
}

// An ordered claim's released keys of the part `own.part` (ReadyItems,
// `released`), from the key cursors' parameters.
std::string ReleasedKeys(absl::string_view parts, absl::string_view keys, absl::string_view ids) {
  return absl::StrCat("unnest(", parts, "::int[], ", keys, "::text[], ", ids,
                      "::bigint[]) AS rel(part, key, id) WHERE rel.part = own.part");
}

std::string ClaimCtes(int first, absl::string_view extra_skip, bool async_commit, bool fair,
                      bool unkeyed = false, bool bounded = false) {
  struct {
    int queue = 1, session = 2, parts, epochs, after_prio, after_id, limits, key_bound, suspect,
        fly_parts, fly_ids, total, cursor_prio, cursor_id, records, behind, key_after, bytes = 0,
        key_cursor_parts = 0, key_cursor_keys = 0, key_cursor_ids = 0;
  } p;
  int n = first;
  for (int* f : {&p.parts, &p.epochs, &p.after_prio, &p.after_id, &p.limits, &p.key_bound,
                 &p.suspect, &p.fly_parts, &p.fly_ids, &p.total, &p.cursor_prio, &p.cursor_id,
                 &p.records, &p.behind, &p.key_after}) {
    *f = n++;
  }
  // Only the byte-bounded form (ClaimRequest::max_bytes) has the bound: the
  // running sum it needs costs the server about a tenth of a drain's CPU.
  if (bounded) p.bytes = n++;
  // Only the fair form has the key cursors (an unkeyed one would leave
  // them untyped); the keyed form has them too, as an ordered claim's
  // released keys (ReadyItems).
  if (fair || !unkeyed) {
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
)sql",
      ReadyCte(fair ? FairItems(d(p.queue), "own.part", "own.key_after", d(p.key_cursor_parts),
                                d(p.key_cursor_keys), d(p.key_cursor_ids),
                                "(SELECT ids FROM skip)::bigint[]", bound, "own.lim")
                    : ReadyItems(d(p.queue), "own.part", "own.after_prio", "own.after_id",
                                 "own.cursor_prio", "own.cursor_id",
                                 "(SELECT ids FROM skip)::bigint[]", bound, "own.lim", "own.behind",
                                 unkeyed ? ""
                                         : ReleasedKeys(d(p.key_cursor_parts), d(p.key_cursor_keys),
                                                        d(p.key_cursor_ids))),
               d(p.total), bounded ? d(p.bytes) : ""),
      ",\n", pick, R"sql(,
current_records AS (
  SELECT r.part, r.epoch,
         coalesce((SELECT c.ctid FROM {schema}.part_claims c
                   WHERE c.queue = )sql",
      d(p.queue), R"sql( AND c.part = r.part AND c.seq = r.record),
                  (SELECT c.ctid FROM {schema}.part_claims c
                   WHERE c.queue = )sql",
      d(p.queue), R"sql( AND c.part = r.part AND c.epoch = r.epoch
                   ORDER BY c.seq DESC LIMIT 1)) AS tid
  FROM (SELECT DISTINCT k.part, k.epoch, o.record
        FROM pick k LEFT JOIN own o ON o.part = k.part) r),
replaced AS (
  SELECT d.dropped_part AS part, d.dropped_epoch AS epoch
  FROM (SELECT array_agg(l.tid) AS tids, array_agg(l.epoch) AS epochs FROM current_records l) a
  CROSS JOIN LATERAL {schema}.drop_claim_records(a.tids, a.epochs) d),
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
// changed in place, which a retry or a dead item (rare) can afford, and found
// by its ctid (a join by key read the queue's every dead record, as a claim's
// replace did: migration 33).
std::string UnrecordCte(bool with_claim) {
  return absl::StrCat(R"sql(unrecorded AS (
  UPDATE {schema}.part_claims c
  SET ids = ARRAY(SELECT x FROM unnest(c.ids) AS x WHERE x <> ALL($9::bigint[]))
  FROM (SELECT p.part, l.tid FROM (SELECT DISTINCT part FROM unnest($10::int[]) AS u(part)) p
        CROSS JOIN LATERAL (
          SELECT c2.ctid AS tid FROM {schema}.part_claims c2
          WHERE c2.queue = $1 AND c2.part = p.part ORDER BY c2.seq DESC LIMIT 1) l) cur
  WHERE c.ctid = cur.tid AND cardinality($9::bigint[]) > 0)sql",
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
std::string PipelinedAck(bool with_claim, bool behind = false, bool keyed = false,
                         bool bounded = false) {
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
  SELECT )sql",
                      kReadColumnsOf, R"sql( FROM (
  SELECT r.*)sql",
                      bounded ? absl::StrCat(", ", kBytesBefore) : "", R"sql( FROM ()sql",
                      ReadyItems("$1", "$7", "$9", "$10::bigint", "$15", "$16::bigint",
                                 "$14::bigint[]", keyed ? "$12" : "0", "$11", behind ? "true" : "",
                                 /*released=*/""),
                      R"sql() r
  WHERE EXISTS (SELECT 1 FROM {schema}.session_parts sp
                WHERE sp.queue = $1 AND sp.part = $7 AND sp.epoch = $8))sql",
                      keyed ? "" : " AND $12::int = 0", R"sql() x)sql",
                      bounded ? "\n  WHERE x.bytes_before < $18::bigint" : "", R"sql(),
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
std::string ClaimStatement(bool fair, bool unkeyed = false, bool bounded = false) {
  return absl::StrCat(
      "WITH ",
      ClaimCtes(/*first=*/3, "'{}'::bigint[]", /*async_commit=*/true, fair, unkeyed, bounded),
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

std::string FinishClaimStatement(bool fair, bool unkeyed = false, bool bounded = false) {
  return absl::StrCat("WITH ", FinishCtes(), ",\n",
                      ClaimCtes(/*first=*/16, "$5::bigint[] || $9::bigint[]",
                                /*async_commit=*/false, fair, unkeyed, bounded),
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

std::string AckClaimStatement(bool fair, bool unkeyed = false, bool bounded = false) {
  return absl::StrCat(
      "WITH ", AckCtes(), ",\n",
      ClaimCtes(/*first=*/9, "$5::bigint[]", /*async_commit=*/false, fair, unkeyed, bounded),
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

const char* BoundedName(const char* name) {
  static const auto* const names = [] {
    auto* m = new absl::flat_hash_map<std::string, std::string>;
    for (const char* n :
         {kPipelinedAckClaim, kPipelinedAckClaimBehind, kPipelinedAckClaimKeyed,
          kPipelinedAckClaimBehindKeyed, kPipelinedClaim, kPipelinedClaimFair,
          kPipelinedLeanAckClaim, kPipelinedLeanAckClaimFair, kPipelinedFinishClaim,
          kPipelinedFinishClaimFair, "claim", "finish_claim", "finish_claim_fair", "ack_claim"}) {
      (*m)[n] = absl::StrCat(n, "_bytes");
    }
    return m;
  }();
  return names->at(name).c_str();
}

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
      // A claim in a transaction of its own, which kPipelinedChain commits
      // and follows with the transaction its batch runs in.
      {kPipelinedBegin, "BEGIN"},
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
      // The claiming statements' byte-bounded forms (ClaimRequest::max_bytes).
      {BoundedName(kPipelinedAckClaim), PipelinedAck(true, false, false, /*bounded=*/true)},
      {BoundedName(kPipelinedAckClaimBehind), PipelinedAck(true, true, false, /*bounded=*/true)},
      {BoundedName(kPipelinedAckClaimKeyed), PipelinedAck(true, false, true, /*bounded=*/true)},
      {BoundedName(kPipelinedAckClaimBehindKeyed),
       PipelinedAck(true, true, true, /*bounded=*/true)},
      {BoundedName(kPipelinedClaim), ClaimStatement(false, true, /*bounded=*/true)},
      {BoundedName(kPipelinedClaimFair), ClaimStatement(true, false, /*bounded=*/true)},
      {BoundedName(kPipelinedLeanAckClaim), AckClaimStatement(false, true, /*bounded=*/true)},
      {BoundedName(kPipelinedLeanAckClaimFair), AckClaimStatement(true, false, /*bounded=*/true)},
      {BoundedName(kPipelinedFinishClaim), FinishClaimStatement(false, true, /*bounded=*/true)},
      {BoundedName(kPipelinedFinishClaimFair), FinishClaimStatement(true, false, /*bounded=*/true)},
  };
  for (auto& st : s) st.second = WithSchema(st.second, schema);
  return s;
}

std::string EnqueueSql(absl::string_view schema) {
  return WithSchema(StatementSql("enqueue"), schema);
}
std::string EnqueueGroupedSql(absl::string_view schema) {
  return WithSchema(StatementSql("enqueue_grouped"), schema);
}

std::vector<Statement> PreparedStatements(absl::string_view schema) {
  std::vector<Statement> s;
  // Statements that are a file of pg/sql/ as it is: NAME.sql, whose header
  // says why it looks as it does.
  for (const char* name :
       {// queues
        "create_queue", "get_queue", "list_queues", "set_rate", "grow_parts", "set_fair_by",
        "set_key_concurrency", "set_max_payload", "set_paused",
        // sessions and parts (join, heartbeat and acquire are below)
        "read_group", "release", "leave", "release_claims", "notify", "notify_parts",
        "write_outbox",
        // items
        "enqueue", "dedup_lookup", "lock_items_for_enqueue", "reserve_ids", "reserve_id_list",
        "insert_batch", "item_state", "cancel_parts", "cancel_items", "vacuum_due", "prune",
        "cancel_by_dedup_key", "item_state_dedup",
        // roles per queue (migration 29)
        "grant_queue_right", "revoke_queue_right", "list_grants", "grant_topic", "revoke_topic",
        // status
        "status_sessions", "status_session_throughput", "next_due", "queues_with_work", "owners",
        "status_horizon", "status_throughput", "status_groups", "status_parts"}) {
    s.push_back({name, StatementSql(name)});
  }
  // The same, sent unprepared (Statement::prepared says when and why):
  // queue groups.
  for (const char* name : {"hold_groups", "insert_batch_grouped", "groups_finished"}) {
    s.push_back({name, StatementSql(name), /*prepared=*/false});
  }
  // Files with holes, filled with fragments that other statements share.
  const std::string heartbeat_me = StatementSql("heartbeat_me");
  s.push_back({"join", Fill("join", {{"{take_over_claims}", TakeOverClaims("kept")}}),
               /*prepared=*/false});
  s.push_back({"heartbeat", Fill("heartbeat", {{"{heartbeat_me}", heartbeat_me}})});
  s.push_back({"heartbeat_idle", Fill("heartbeat_idle", {{"{heartbeat_me}", heartbeat_me}})});
  s.push_back({"acquire", Fill("acquire", {{"{take_over_claims}", TakeOverClaims("ins")}}),
               /*prepared=*/false});
  s.push_back({"fence", Fill("fence", {{"{fence}", kFence}})});
  s.push_back({"ack", Fill("ack", {{"{ack_ctes}", AckCtes()}})});
  // The claim and Finish statements are built from the fragments above,
  // one variant per kind of queue.
  //
  // The claim of a queue with a key bound (ordered, key concurrency), not
  // fair; the others run kPipelinedClaim(Fair) (PgStore::Claim says why
  // this one keeps the plan the planner picks: its key probes).
  s.push_back({"claim", ClaimStatement(/*fair=*/false)});
  // Finish: the fence and every outcome in one statement, after the
  // handler ran (store.h, Finish). The general form, for batches with
  // retries or dead items and for the second, locked attempt: sent
  // unprepared, planned for its arguments each time (Statement::prepared),
  // only where kPipelinedFinish(Claim)(Fair) does not serve (an ordered
  // or key-concurrency queue's claim ahead). Returns ('p', part) for each
  // part still held at its epoch, and ('a'|'r'|'d', id) per row written;
  // the caller rolls back when a part was not held or a count is off.
  s.push_back({"finish", FinishStatement(), /*prepared=*/false});
  // Finish and claim ahead: the claim's reads see the statement's
  // snapshot, where the rows this statement deletes or reschedules still
  // look ready, so the batch's ids are skipped explicitly.
  s.push_back({"finish_claim", FinishClaimStatement(/*fair=*/false), /*prepared=*/false});
  s.push_back({"finish_claim_fair", FinishClaimStatement(/*fair=*/true), /*prepared=*/false});
  // The common Finish (ack.sql) with a claim ahead. A queue without a key
  // bound, and a fair one, run kPipelinedLeanAckClaim(Fair)
  // (PipelinedStatements) instead.
  s.push_back({"ack_claim", AckClaimStatement(/*fair=*/false)});
  // Their byte-bounded forms (ClaimRequest::max_bytes), prepared or not as they are.
  s.push_back({BoundedName("claim"), ClaimStatement(false, false, /*bounded=*/true)});
  s.push_back({BoundedName("finish_claim"), FinishClaimStatement(false, false, true), false});
  s.push_back({BoundedName("finish_claim_fair"), FinishClaimStatement(true, false, true), false});
  s.push_back({BoundedName("ack_claim"), AckClaimStatement(false, false, /*bounded=*/true)});
  for (Statement& st : s) st.sql = WithSchema(st.sql, schema);
  return s;
}

}  // namespace pg_internal
}  // namespace partq
