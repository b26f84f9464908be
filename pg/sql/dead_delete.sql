-- DeleteDead: queue $1's dead items $2 (all when empty) deleted for good;
-- returns whether the queue exists, how many were deleted, and the ids of
-- $2 that were not dead items of the queue, in order, joined by commas. The queue check
-- and the delete in one statement, one snapshot: items that die meanwhile
-- are not in it and stay ("all" is all that were dead when it began).
WITH q AS (SELECT 1 FROM {schema}.queues WHERE name = $1),
gone AS (
  DELETE FROM {schema}.dead_items d
  WHERE d.queue = $1 AND (cardinality($2::bigint[]) = 0 OR d.id = ANY($2::bigint[]))
  RETURNING d.id)
SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM gone),
       (SELECT string_agg(m::text, ',' ORDER BY m)
        FROM (SELECT unnest($2::bigint[]) EXCEPT SELECT id FROM gone) x(m))
