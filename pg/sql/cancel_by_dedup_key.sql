-- CancelByDedupKey: cancel_by_dedup_key() (a migration's function) for the
-- live item of queue $1 with dedup key $2; no row when the queue does not exist.
SELECT c.id, c.state FROM {schema}.queues q
CROSS JOIN LATERAL {schema}.cancel_by_dedup_key(q.name, $2) c
WHERE q.name = $1
