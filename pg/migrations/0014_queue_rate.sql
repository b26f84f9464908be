-- Migration 14: queues.rate: a fleet-wide rate limit, kept per part by its owner (partq queue set --rate)

ALTER TABLE {schema}.queues ADD COLUMN rate double precision
  CHECK (rate IS NULL OR (rate > 0 AND rate <= 1000000));
