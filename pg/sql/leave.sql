-- Leave: deletes this incarnation's row; its parts cascade at the end
-- of the statement, after `p` has read them from the snapshot. Their
-- claim records go too, as in a release.
WITH s AS (
  DELETE FROM {schema}.sessions WHERE id = $2 AND incarnation = $3 AND queue = $1
  RETURNING id),
p AS (SELECT sp.part FROM {schema}.session_parts sp JOIN s ON sp.session_id = s.id),
rec AS (
  DELETE FROM {schema}.part_claims c USING p WHERE c.queue = $1 AND c.part = p.part
  RETURNING 1)
SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM rec),
       (SELECT count(pg_notify($4, 'g')) FROM s)
