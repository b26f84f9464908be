-- ReleaseParts: deletes our rows at the given epochs, and their claim
-- records: a graceful hand-off abandons nothing. One statement, so one
-- transaction. Its notice is 'r' (Notice::kReleased), not 'g': only the
-- members waiting for a hand-off read the group for it, not the whole
-- fleet for every release of a join storm.
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
