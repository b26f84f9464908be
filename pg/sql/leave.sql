-- Leave: deletes this incarnation's row; its parts cascade at the end
-- of the statement, after `p` has read them from the snapshot. Their
-- claim records go too, as in a release. The rows go through delete_rows()
-- (migration 39: a worker role may not delete from the tables).
WITH me AS (
  SELECT x.ctid AS tid FROM {schema}.sessions x
  WHERE x.id = $2 AND x.incarnation = $3 AND x.queue = $1
  FOR UPDATE),
s AS (SELECT (d->>'id')::uuid AS id FROM {schema}.delete_rows('sessions', ARRAY(SELECT tid FROM me)) d),
p AS (SELECT sp.part FROM {schema}.session_parts sp JOIN s ON sp.session_id = s.id),
rec AS (
  SELECT 1 FROM {schema}.delete_rows('part_claims', ARRAY(
    SELECT c.ctid FROM {schema}.part_claims c WHERE c.queue = $1 AND c.part IN (SELECT part FROM p))) d)
SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM rec),
       (SELECT count(pg_notify($4, 'g')) FROM s)
