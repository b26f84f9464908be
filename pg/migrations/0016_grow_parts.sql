-- Migration 16: queues.grown_from: the part counts before each grow (partq queue set --parts)
--
-- Growing a queue's parts (`partq queue set --parts`):
-- queues.grown_from lists the counts before each grow. Items keep the part
-- they were enqueued into (no row is rewritten, so nothing in flight
-- changes under its owner), and only an ordered queue's claim reads the
-- list: a key's item waits while an earlier part of its part still holds
-- an older item of the key (ReadyItems in pg_store_sql.cc). NOT NULL with
-- a constant default: adding it rewrites no row.

ALTER TABLE {schema}.queues ADD COLUMN grown_from int[] NOT NULL DEFAULT '{}';
