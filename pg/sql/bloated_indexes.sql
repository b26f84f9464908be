-- Store::VacuumQueueTables, after a vacuum of table $2 of schema $1: its
-- valid btree indexes of plain columns of at least $3 bytes that are more
-- than $4 times the size their entries need, with their sizes. What they
-- need: the entries the vacuum just counted (reltuples) at 16 bytes of
-- overhead plus the average width of the index's columns (pg_stats), on
-- pages 70% full, plus 8 pages. An index whose entries were never counted
-- (reltuples -1) or one of whose columns has no statistics yet is left
-- alone: its need is unknown. A btree never gives pages back: after a held
-- snapshot let an index grow to hold every dead entry, only a rebuild
-- returns its space (issue 47). Only a role with its table's owner's
-- privileges may rebuild (REINDEX asks that; the database's owner, which
-- may vacuum, may not), and never while an index of the table is being
-- built (an operator's REINDEX, as far as this role may see it).
SELECT i.relname::text, pg_relation_size(i.oid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_am am ON am.oid = i.relam AND am.amname = 'btree'
JOIN pg_class t ON t.oid = x.indrelid
CROSS JOIN LATERAL (
  SELECT 16 + sum(s.avg_width) AS width, count(*) FILTER (WHERE s.avg_width IS NULL) AS unknown
  FROM unnest(x.indkey::int2[]) AS k(attnum)
  JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
  LEFT JOIN pg_stats s
    ON s.schemaname = $1 AND s.tablename = t.relname AND s.attname = a.attname
   AND NOT s.inherited) w
WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $1)
  AND t.relname = $2 AND x.indisvalid AND x.indisready AND x.indexprs IS NULL
  AND pg_has_role(t.relowner, 'USAGE')
  AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.relid = t.oid)
  AND i.reltuples >= 0 AND w.unknown = 0
  AND pg_relation_size(i.oid) >= $3::bigint
  AND pg_relation_size(i.oid) > $4::float8 * (i.reltuples * w.width / 0.7 + 8 * 8192)
ORDER BY 1
