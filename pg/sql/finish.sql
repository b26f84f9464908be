-- Finish: the fence and every outcome in one statement, after the handler
-- ran (store.h, Finish), without a claim ahead (finish_claim.sql has one).
-- The general form, for batches with retries or dead items and for the
-- second, locked attempt. Returns ('p', part) for each part still held at
-- its epoch, and ('a'|'r'|'d', id) per row written; the caller rolls back
-- when a part was not held or a count is off. "finish" is sent unprepared,
-- planned for its arguments each time (Statement::prepared);
-- partq_pl_finish is the same prepared, after plan_guard.sql: planned for
-- its arguments on every call it took 13 ms a batch (pg_stat_statements:
-- 8.5 s of planning for 646 calls), more than running it; a failing item
-- no longer makes its batch run again (exec and http handlers record their
-- replies as they are), so a queue where 1 % of items fail sends most of
-- its batches here (docs/benchmarks-history.md, "One reply, one ack").
--
-- {finish_ctes}: fragments/finish_ctes.sql; {unrecord}:
-- fragments/unrecord.sql.
WITH {finish_ctes},
{unrecord}
SELECT 'p' AS k, part::bigint AS id FROM f
UNION ALL SELECT 'a', id FROM done
UNION ALL SELECT 'r', id FROM retried
UNION ALL SELECT 'd', id FROM dead
