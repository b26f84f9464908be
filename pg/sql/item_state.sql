-- GetItemState by id: where the id is now, in any queue, and the id
-- sequence's high-water mark (an allocated id found nowhere finished
-- without leaving a result row).
SELECT 'p' AS k, queue, attempts, last_error, NULL::bytea FROM {schema}.items WHERE id = $2
UNION ALL
SELECT 'd', queue, attempts, last_error, NULL FROM {schema}.dead_items WHERE id = $2
UNION ALL
SELECT 'r', queue, 0, NULL, result FROM {schema}.results WHERE id = $2
UNION ALL
SELECT 'c', queue, attempts, NULL, NULL FROM {schema}.cancelled_items WHERE id = $2
UNION ALL
SELECT 's', NULL, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::int,
       CASE WHEN is_called THEN last_value ELSE last_value - 1 END::text, NULL
FROM {schema}.items_id_seq
