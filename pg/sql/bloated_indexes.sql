-- Store::VacuumQueueTables, after a vacuum of table $2 of schema $1: its
-- valid btree indexes of plain columns of at least $3 bytes that are more
-- than $4 times the size their entries need, with their sizes. What they
-- need: the entries the vacuum just counted (reltuples) and those of the
-- rows that die between two vacuums at the rate the queue runs now ($5: the
-- more dead rows of the table's last two vacuums; a busy queue's index
-- holds them all between two vacuums), at 16 bytes of overhead plus the
-- average width of the index's columns, on pages 70% full, plus 8 pages. A
-- column's width is its statistics' (pg_stats) or, for a table without
-- any, its average over up to 100 live rows (the newest, as text: a queue's
-- table is nearly empty whenever ANALYZE samples it, and then it keeps no
-- statistics; items whose payload is kept out of line are left out, as a
-- row read whole would fetch it: among the newest 1,000). An index one of
-- whose columns has neither (a table with no live row and no statistics),
-- or whose entries were never counted (reltuples -1), is left alone: its
-- need is unknown. Read only by a role that may read both tables
-- (vacuum_due.sql says). A btree never gives pages back: after a held
-- snapshot let an index grow to hold every dead entry, only a rebuild
-- returns its space (issue 47). Only a role with its table's owner's
-- privileges may rebuild (REINDEX asks that; the database's owner, which
-- may vacuum, may not), and never while an index of the table is being
-- built (an operator's REINDEX, as far as this role may see it).
WITH sample AS MATERIALIZED (
  SELECT to_jsonb(r) AS j FROM (
    SELECT * FROM (SELECT * FROM {schema}.items ORDER BY id DESC LIMIT 1000) n
    WHERE pg_column_size(payload) <= 2000 LIMIT 100) r
  WHERE $2 = 'items'
    AND NOT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = $1 AND tablename = $2)
  UNION ALL
  SELECT to_jsonb(r) FROM (SELECT * FROM {schema}.part_claims LIMIT 100) r
  WHERE $2 = 'part_claims'
    AND NOT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = $1 AND tablename = $2)
)
SELECT i.relname::text, pg_relation_size(i.oid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_am am ON am.oid = i.relam AND am.amname = 'btree'
JOIN pg_class t ON t.oid = x.indrelid
CROSS JOIN LATERAL (
  SELECT 16 + sum(coalesce(s.avg_width, c.width)) AS width,
         count(*) FILTER (WHERE coalesce(s.avg_width, c.width) IS NULL) AS unknown
  FROM unnest(x.indkey::int2[]) AS k(attnum)
  JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
  LEFT JOIN pg_stats s
    ON s.schemaname = $1 AND s.tablename = t.relname AND s.attname = a.attname
   AND NOT s.inherited
  CROSS JOIN LATERAL (
    SELECT CASE WHEN count(*) > 0 THEN coalesce(avg(octet_length(m.j ->> a.attname)), 0) END
             AS width
    FROM sample m) c) w
WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $1)
  AND t.relname = $2 AND x.indisvalid AND x.indisready AND x.indexprs IS NULL
  AND pg_has_role(t.relowner, 'USAGE')
  AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.relid = t.oid)
  AND i.reltuples >= 0 AND w.unknown = 0
  AND pg_relation_size(i.oid) >= $3::bigint
  AND pg_relation_size(i.oid) > $4::float8 * ((i.reltuples + $5::float8) * w.width / 0.7 + 8 * 8192)
ORDER BY 1
