-- Migration 20: queues.key_concurrency: items of a key in flight at once (--key-concurrency N)
--
-- At most this many items of a key in flight at once (pg_store_sql.cc,
-- ReadyCondition); NULL is no bound.

ALTER TABLE {schema}.queues ADD COLUMN key_concurrency int
  CHECK (key_concurrency IS NULL OR key_concurrency BETWEEN 1 AND 1000000);
