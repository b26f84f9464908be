-- DeleteQueue's check of what a queue still holds ($1), split as `partq
-- status` splits it: in flight (in its owners' claim records), else ready or
-- delayed by run_at; and its dead items. Run under the delete's lock on
-- items, so nothing can be added between this count and the delete.
WITH fly AS (
  SELECT i.id FROM {schema}.part_claims c
  JOIN {schema}.items i ON i.id = ANY(c.ids) AND i.part = c.part AND i.queue = c.queue
  WHERE c.queue = $1)
SELECT count(*) FILTER (WHERE NOT fl AND run_at <= now()),
       count(*) FILTER (WHERE NOT fl AND run_at > now()),
       count(*) FILTER (WHERE fl),
       (SELECT count(*) FROM {schema}.dead_items WHERE queue = $1)
FROM (SELECT run_at, id IN (SELECT id FROM fly) AS fl FROM {schema}.items WHERE queue = $1) x
