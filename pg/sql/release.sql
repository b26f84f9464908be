-- ReleaseParts: deletes our rows at the given epochs, and their claim
-- records: a graceful hand-off abandons nothing. The rows go through
-- delete_rows() (migration 39: a worker role may not delete from the
-- tables), ours locked first so that their addresses hold. One statement, so one
-- transaction. Its notice is 'r' (Notice::kReleased), not 'g': only the
-- members waiting for a hand-off read the group for it, not the whole
-- fleet for every release of a join storm.
WITH mine AS (
  SELECT sp.ctid AS tid FROM {schema}.session_parts sp
  JOIN unnest($3::int[], $4::bigint[]) AS r(part, epoch) ON sp.part = r.part AND sp.epoch = r.epoch
  WHERE sp.queue = $1 AND sp.session_id = $2
  FOR UPDATE OF sp),
rel AS (
  SELECT (d->>'part')::int AS part
  FROM {schema}.delete_rows('session_parts', ARRAY(SELECT tid FROM mine)) d),
rec AS (
  SELECT 1 FROM {schema}.delete_rows('part_claims', ARRAY(
    SELECT c.ctid FROM {schema}.part_claims c
    WHERE c.queue = $1 AND c.part IN (SELECT part FROM rel))) d)
SELECT (SELECT count(*) FROM rel), (SELECT count(*) FROM rec),
       (SELECT count(pg_notify($5, 'r')) FROM (SELECT 1 FROM rel LIMIT 1) x)
