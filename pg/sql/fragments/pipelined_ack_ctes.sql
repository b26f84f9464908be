-- The pipelined ack's CTEs ({fence}: fence_cte.sql): the delete by ctid
-- alone, and the results `partq wait` needs (pipelined_ack.sql says why).
{fence},
done AS (
  {delete_done}),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, finished_at)
  SELECT id, queue, dedup_key, statement_timestamp() FROM done WHERE dedup_key IS NOT NULL
  RETURNING 1)
