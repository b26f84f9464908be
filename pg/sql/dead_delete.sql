-- DeleteDead: queue $1's dead items $2 (all when empty) deleted for good;
-- returns whether the queue exists and how many were deleted. The queue check
-- and the delete in one statement, one snapshot: items that die meanwhile
-- are not in it and stay ("all" is all that were dead when it began).
WITH q AS (SELECT 1 FROM {schema}.queues WHERE name = $1),
gone AS (
  DELETE FROM {schema}.dead_items d
  WHERE d.queue = $1 AND (cardinality($2::bigint[]) = 0 OR d.id = ANY($2::bigint[]))
  RETURNING 1)
SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM gone)
