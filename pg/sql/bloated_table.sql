-- Store::VacuumQueueTables, after a vacuum of table $2 of schema $1: its
-- size, when that is at least $4 bytes and more than $5 times what its rows
-- need. What they need: the live rows the vacuum just counted (reltuples)
-- and the rows that die between two vacuums at the rate the queue runs now
-- ($3: the fewer dead rows of its last two vacuums), each at 28 bytes of
-- header and line pointer plus the average width of its columns (pg_stats),
-- on pages 90% full, plus 8 pages. A table whose rows were never counted
-- (reltuples -1), or one of whose columns has no statistics yet, is left
-- alone: its need is unknown. A queue's table keeps the size of its peak
-- (migration 23: vacuum does not truncate it as it goes); after a held
-- snapshot let it grow to hold every row that died under it, or a backlog
-- since drained, that peak is many times what it needs (issue 47).
SELECT pg_relation_size(t.oid)
FROM pg_class t
CROSS JOIN LATERAL (
  SELECT 28 + sum(s.avg_width) AS width, count(*) FILTER (WHERE s.avg_width IS NULL) AS unknown
  FROM pg_attribute a
  LEFT JOIN pg_stats s
    ON s.schemaname = $1 AND s.tablename = t.relname AND s.attname = a.attname
   AND NOT s.inherited
  WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped) w
WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $1)
  AND t.relname = $2 AND t.reltuples >= 0 AND w.unknown = 0
  AND pg_relation_size(t.oid) >= $4::bigint
  AND pg_relation_size(t.oid) > $5::float8 * ((t.reltuples + $3::float8) * w.width / 0.9 + 8 * 8192)
