-- AcquireParts: the primary key (queue, part) makes a second owner
-- impossible (I1); ON CONFLICT DO NOTHING skips owned parts. Rows go in
-- part order so two sessions racing for overlapping sets wait on each
-- other in one order and cannot deadlock. A row (-1, 0) says our session
-- row is gone; a session deleted concurrently surfaces as an FK error.
-- A claim record in an acquired part was left by an owner that died
-- (a graceful one deletes it): its items are marked abandoned.
-- The queue row is locked FOR SHARE before anything is written, so a
-- part gets no owner while a cancel holds the row (cancel_items(),
-- migration 13, says why); acquisitions do not wait for each other.
--
-- {take_over_claims}: fragments/take_over_claims.sql of `ins`.
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
{take_over_claims}
SELECT part, epoch FROM ins
UNION ALL SELECT -1, 0 WHERE NOT EXISTS (SELECT 1 FROM s)
