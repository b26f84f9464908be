-- Store::VacuumQueueTables, before it rebuilds indexes of table $2 of
-- schema $1: invalid indexes that an interrupted rebuild left behind
-- (REINDEX CONCURRENTLY names its new index NAME_ccnew and the old one
-- NAME_ccold; one that gave up, failed or died leaves one of them invalid,
-- the new one still written by every insert). Read while the rebuild lock
-- is held, so none of them is another keeper's work under way, and never
-- while an index of the table is being built (an operator's REINDEX, as
-- far as this role may see it), nor by a role without the owner's
-- privileges.
SELECT i.relname::text
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $1)
  AND t.relname = $2 AND NOT x.indisvalid
  AND i.relname ~ '_cc(new|old)[0-9]*$'
  AND pg_has_role(t.relowner, 'USAGE')
  AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.relid = t.oid)
ORDER BY 1
