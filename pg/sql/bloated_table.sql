-- Store::VacuumQueueTables, after a vacuum of table $1 (items or
-- part_claims): its size, when that is at least $3 bytes and more than $4
-- times what its rows need. What they need: the live rows the vacuum just
-- counted (reltuples) and the rows that die between two vacuums at the rate
-- the queue runs now ($2: the more dead rows of its last two vacuums), each
-- at the average size of up to 100 of its live rows (the newest items by
-- their ids, not a walk of the empty pages a bloated table starts with;
-- pg_column_size, the tuple header included; items whose payload is kept
-- out of line are left out, as a row read whole would fetch it: among the
-- newest 1,000, so a queue of large payloads only is left alone) plus a
-- line pointer, on pages 90% full, plus 8 pages. Statistics (pg_stats)
-- cannot say: a queue's table is nearly empty whenever ANALYZE samples it.
-- A table with no live row is left alone (its
-- rows' size is unknown; nor does a vacuum come due while it stays empty).
-- Read only by a role that may read both tables (vacuum_due.sql says).
-- The sample is read only for a table past the size that rows of 32 bytes
-- would need. A queue's table keeps the size of its peak (migration 23:
-- vacuum does not truncate it as it goes); after a held snapshot let it grow
-- to hold every row that died under it, or a backlog since drained, that
-- peak is many times what it needs (issue 47).
SELECT bytes
FROM (
  SELECT pg_relation_size(t.oid) AS bytes, t.reltuples + $2::float8 AS rows,
         CASE t.relname
           WHEN 'items' THEN (SELECT avg(pg_column_size(r.*)) FROM (
                                SELECT * FROM (SELECT * FROM {schema}.items
                                               ORDER BY id DESC LIMIT 1000) n
                                WHERE pg_column_size(payload) <= 2000 LIMIT 100) r)
           WHEN 'part_claims' THEN (SELECT avg(pg_column_size(r.*)) FROM (
                                      SELECT * FROM {schema}.part_claims LIMIT 100) r)
         END AS row_bytes
  FROM pg_class t
  WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $5)
    AND t.relname = $1 AND t.reltuples >= 0
    AND pg_relation_size(t.oid) >= $3::bigint
    AND pg_relation_size(t.oid) > $4::float8 * ((t.reltuples + $2::float8) * 32 / 0.9 + 8 * 8192)
  ) s
WHERE bytes > $4::float8 * (rows * (row_bytes + 4) / 0.9 + 8 * 8192)
