-- cancel_items() and cancel_by_dedup_key() (migration 13), called only
-- for a queue that exists: no rows for one that does not (NotFound),
-- where the functions would raise an error of their own.
SELECT c.id, c.state FROM {schema}.queues q
CROSS JOIN LATERAL {schema}.cancel_items(q.name, $2::bigint[]) c
WHERE q.name = $1
