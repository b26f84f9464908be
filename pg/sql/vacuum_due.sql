-- Store::VacuumQueueTables: the schema's queue tables whose dead rows
-- have passed their own autovacuum threshold (reloptions, else the
-- server's settings), whether this role may vacuum them (their
-- owner's or the database owner's privileges, as VACUUM asks), and
-- the vacuum horizon: the xmin of its oldest holder other than this
-- backend and running vacuums (as in status_horizon), NULL when there
-- is none; and whether this role may read both tables (what
-- bloated_indexes.sql and bloated_table.sql sample of their rows: a role
-- that owns only the database may vacuum them, but not read them).
WITH t AS (
  SELECT c.relname::text AS name, s.n_dead_tup AS dead, c.reltuples, c.relowner,
         (SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
          WHERE option_name = 'autovacuum_vacuum_threshold') AS threshold,
         (SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
          WHERE option_name = 'autovacuum_vacuum_scale_factor') AS scale
  FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
  WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
    AND c.relname IN ('items', 'part_claims')
), h AS (
  SELECT backend_xmin AS x FROM pg_stat_activity
  WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
    AND (datname = current_database() OR backend_type = 'walsender')
    AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)
  UNION ALL
  SELECT transaction FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
)
SELECT name, dead,
       pg_has_role(relowner, 'USAGE')
         OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()),
                        'USAGE'),
       (SELECT x::text FROM h ORDER BY age(x) DESC LIMIT 1),
       has_table_privilege(format('%I.items', $1), 'SELECT')
         AND has_table_privilege(format('%I.part_claims', $1), 'SELECT')
FROM t
WHERE dead >= coalesce(threshold, current_setting('autovacuum_vacuum_threshold')::float8)
              + coalesce(scale, current_setting('autovacuum_vacuum_scale_factor')::float8)
                * greatest(reltuples, 0)
ORDER BY name
