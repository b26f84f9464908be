-- The pipelined ack's results rows when no handler result came back: only
-- what `partq wait` needs (items with a dedup key; the caller's copy of an
-- item may not know it has one).
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, finished_at)
  SELECT id, queue, dedup_key, statement_timestamp() FROM done WHERE dedup_key IS NOT NULL
  RETURNING 1)
