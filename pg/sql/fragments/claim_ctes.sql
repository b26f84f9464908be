-- The claim's CTEs, ending with `pick` (the claimed rows) and `recorded`
-- (the claim records written); ClaimCtes (pg_store_sql.cc) fills them.
-- Why they look like this:
-- - `own` keeps the requested parts that are still ours at their epochs,
--   so a session that lost a part reads nothing there, in the order
--   requested.
-- - `ready`: per part, {reads}: the items of a priority below 0 when the
--   read starts at a floor (ClaimPart::above), the items due behind where
--   the read starts and then a scan of items_ready in (priority, id) order
--   from there (ready_items.sql), or a fair read (fair_items.sql); the parts go in
--   order in a nested loop under the total LIMIT, which stops pulling (and
--   so reading parts) once it has enough. Items up to the part's cursor
--   must be checked against what the session has in flight; past it
--   nothing can be in flight (the cursor is the last key this session
--   claimed), so the skip test is not even evaluated there. Given a byte
--   bound ({bytes_before}: bytes_before.sql, and {bytes_bound}), it is cut
--   where the payloads read before a row reach it: only the byte-bounded
--   form (ClaimRequest::max_bytes) has it, as the running sum it needs
--   costs the server about a tenth of a drain's CPU.
-- - `suspect`: at most one abandoned item in any part this session owns,
--   in (priority, id) order; items_abandoned holds only such rows, so the
--   probe costs an index page when there are none.
-- - `recorded` replaces the claim record of every part it took items from
--   with what the session has in flight there plus the new items: a new
--   row, the old one deleted (`replaced`), never an update (migration 9
--   says why). The old one is the row the session wrote last
--   (ClaimPart::record: one primary-key lookup), else the part's latest at
--   the owner's epoch (read from the end of the part's records: a planner
--   may choose to read them all; a stale owner's record at an older epoch,
--   which migration 9 says a race can leave, is passed over rather than
--   blocking the part). An owner whose epoch is older than the record's (a
--   session that lost the part and does not know it yet) finds nothing to
--   replace, so it cannot write one; and a claim that replaced no record
--   returns nothing from that part (claimed_rows.sql says why).
-- - The skip and in-flight lists are arrays compared linearly; they hold
--   what one session has in flight (a few batches), and only rows at or
--   before a cursor are compared with them.
-- {unkeyed_only} is empty, or, in the form for a claim without a key bound
-- (KeyBound 0, whose bound is the literal 0, which the planner folds away,
-- so that a generic plan carries none of ready_condition.sql's key probes:
-- pipelined_ack_claim.sql says why), a condition that the bound's
-- parameter is 0, else the claim reads nothing. {async_commit} is empty,
-- or claim_async_commit.sql. {extra_skip}: the ids a claim ahead skips
-- besides those in flight, the batch being finished.
own AS (
  SELECT o.part, o.epoch, o.after_prio, o.after_id, o.lim, o.cursor_prio, o.cursor_id, o.record,
         o.behind, o.key_after, o.above
  FROM unnest({parts}::int[], {epochs}::bigint[], {after_prio}::int[], {after_id}::bigint[], {limits}::int[], {cursor_prio}::int[], {cursor_id}::bigint[], {records}::bigint[], {behind}::bool[], {key_after}::text[], {above}::bool[])
       WITH ORDINALITY AS o(part, epoch, after_prio, after_id, lim, cursor_prio, cursor_id, record,
                            behind, key_after, above, n)
  JOIN {schema}.session_parts sp
    ON sp.queue = {queue} AND sp.part = o.part AND sp.epoch = o.epoch{unkeyed_only}{async_commit}
  ORDER BY o.n),
skip AS (SELECT {fly_ids}::bigint[] || {extra_skip} AS ids),
ready AS (
  SELECT x.part, x.epoch, {columns_of_x}, false AS suspect FROM (
  SELECT own.part, own.epoch, c.*{bytes_before}
  FROM own CROSS JOIN LATERAL ({reads}) c
  LIMIT {total}) x{bytes_bound}),
suspect AS (
  SELECT sp.part, sp.epoch, i.ctid AS tid, i.id, i.key, i.dedup_key, i.priority, i.attempts,
         i.payload, i.enqueued_at, i.run_at, i.group_id, true AS suspect
  FROM {schema}.items i
  JOIN {schema}.session_parts sp
    ON sp.queue = i.queue AND sp.part = i.part AND sp.session_id = {session}
  WHERE {suspect}::bool AND i.queue = {queue}
    AND i.abandoned_epoch IS NOT NULL AND i.run_at <= statement_timestamp()
    AND i.id <> ALL((SELECT ids FROM skip)::bigint[]){unkeyed_only}
  ORDER BY i.priority, i.id LIMIT 1),
pick AS (SELECT * FROM ready UNION ALL SELECT * FROM suspect),
current_records AS (
  SELECT r.part, r.epoch,
         coalesce((SELECT c.ctid FROM {schema}.part_claims c
                   WHERE c.queue = {queue} AND c.part = r.part AND c.seq = r.record),
                  (SELECT c.ctid FROM {schema}.part_claims c
                   WHERE c.queue = {queue} AND c.part = r.part AND c.epoch = r.epoch
                   ORDER BY c.seq DESC LIMIT 1)) AS tid
  FROM (SELECT DISTINCT k.part, k.epoch, o.record
        FROM pick k LEFT JOIN own o ON o.part = k.part) r),
{drop_records},
recorded AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT {queue}, r.part, r.epoch,
         ARRAY(SELECT f.id FROM unnest({fly_parts}::int[], {fly_ids}::bigint[]) AS f(part, id)
               WHERE f.part = r.part
               UNION ALL SELECT k.id FROM pick k WHERE k.part = r.part)
  FROM replaced r
  RETURNING part, seq)
