-- Store::VacuumQueueTables, after a vacuum of table $2 of schema $1: its
-- valid indexes of at least $3 bytes that are more than $4 times the size
-- their entries need, with their sizes. What they need: the entries the
-- vacuum just counted (reltuples) at 16 bytes of overhead plus the average
-- width of the index's columns (pg_stats; 8 where there is none), on
-- pages 70% full, plus 8 pages. A btree never gives pages back: after a
-- held snapshot let an index grow to hold every dead entry, only a
-- rebuild returns its space (issue 47). Only a role with its table's
-- owner's privileges may rebuild (REINDEX asks that; the database's owner,
-- which may vacuum, may not): none for another.
SELECT i.relname::text, pg_relation_size(i.oid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
CROSS JOIN LATERAL (
  SELECT 16 + coalesce(sum(coalesce(s.avg_width, 8)), 0) AS width
  FROM unnest(x.indkey::int2[]) AS k(attnum)
  JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
  LEFT JOIN pg_stats s
    ON s.schemaname = $1 AND s.tablename = t.relname AND s.attname = a.attname
   AND NOT s.inherited) w
WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $1)
  AND t.relname = $2 AND x.indisvalid AND x.indisready AND pg_has_role(t.relowner, 'USAGE')
  AND pg_relation_size(i.oid) >= $3::bigint
  AND pg_relation_size(i.oid)
      > $4::float8 * (greatest(i.reltuples, 0) * w.width / 0.7 + 8 * 8192)
ORDER BY 1
