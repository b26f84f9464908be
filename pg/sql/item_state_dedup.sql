-- By dedup key: the live item first, else the newest finished one.
(SELECT 'p' AS k, id, attempts, last_error, NULL::bytea FROM {schema}.items
 WHERE queue = $1 AND dedup_key = $2)
UNION ALL
(SELECT k, id, attempts, last_error, result FROM (
   SELECT 'r' AS k, id, 0 AS attempts, NULL::text AS last_error, result FROM {schema}.results
   WHERE queue = $1 AND dedup_key = $2
   UNION ALL
   SELECT 'd', id, attempts, last_error, NULL FROM {schema}.dead_items
   WHERE queue = $1 AND dedup_key = $2
   UNION ALL
   SELECT 'c', id, attempts, NULL, NULL FROM {schema}.cancelled_items
   WHERE queue = $1 AND dedup_key = $2) f
 ORDER BY id DESC LIMIT 1)
UNION ALL
SELECT 'q', 0, (SELECT count(*) FROM {schema}.queues WHERE name = $1)::int, NULL, NULL
