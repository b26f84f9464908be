-- Migration 18: queues.fair_by: fair share across keys (partq queue set --fair-by key)
--
-- The owner of a part serves a fair queue's keys in turn (pg_store_sql.cc,
-- FairItems); NULL is the ordinary (priority, id) order. A text with
-- one allowed value rather than a boolean, so another basis (a header,
-- a group) can come without a migration of its meaning.

ALTER TABLE {schema}.queues ADD COLUMN fair_by text CHECK (fair_by IS NULL OR fair_by = 'key');
