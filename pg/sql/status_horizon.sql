-- The oldest holder of this database's vacuum horizon: backends of
-- this database (and walsenders, whose hot_standby_feedback holds every
-- database's), prepared transactions, replication slots. Our own
-- snapshot (the status transaction) is left out, and so are backends
-- running a (lazy) VACUUM: their xmin shows in pg_stat_activity, but
-- PostgreSQL leaves it out of every other vacuum's horizon
-- (PROC_IN_VACUUM), so a 20 s autovacuum of a big handler table holds
-- nothing back. An ANALYZE does hold it and stays. Oldest by xid age;
-- the time is the holder's transaction's.
WITH h AS (
  SELECT 'transaction' AS holder,
         format('pid %s (%s, %s)', pid, coalesce(nullif(application_name, ''), backend_type),
                coalesce(state, 'unknown')) AS who,
         age(backend_xmin) AS xid_age,
         coalesce(now() - xact_start, interval '0') AS held
  FROM pg_stat_activity
  WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
    AND (datname = current_database() OR backend_type = 'walsender')
    AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)
  UNION ALL
  SELECT 'prepared transaction', format('gid %s', gid), age(transaction), now() - prepared
  FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT 'replication slot', format('slot %s', slot_name), age(xmin), interval '0'
  FROM pg_replication_slots WHERE xmin IS NOT NULL
)
SELECT holder, who, xid_age, (extract(epoch FROM held) * 1000000)::bigint
FROM h ORDER BY xid_age DESC, held DESC LIMIT 1
