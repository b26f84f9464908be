-- Store::VacuumQueueTables, before it rebuilds indexes of table $2 of
-- schema $1: invalid indexes that a rebuild interrupted left behind (REINDEX
-- CONCURRENTLY names its new index NAME_ccnew and the old one NAME_ccold;
-- a rebuild that failed or was cancelled leaves one of them invalid). Read
-- while the rebuild lock is held, so none of them is another keeper's work
-- under way.
SELECT i.relname::text
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = $1)
  AND t.relname = $2 AND NOT x.indisvalid
  AND i.relname ~ '_cc(new|old)[0-9]*$'
ORDER BY 1
