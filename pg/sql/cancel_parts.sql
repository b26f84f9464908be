-- CancelItems: whether the queue exists, and the parts of the asked
-- items still in it (each part is cancelled in its own transaction).
SELECT NULL::int, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::bigint
UNION ALL
SELECT part, id FROM {schema}.items WHERE queue = $1 AND id = ANY($2::bigint[])
