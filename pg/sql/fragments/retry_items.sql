-- Finish's retries (finish_ctes.sql) by a role that may update items:
-- the attempt counted unless refunded, the abandoned mark cleared.
retried AS (
  UPDATE {schema}.items i
  SET attempts = i.attempts + (NOT o.refund)::int,
      run_at = statement_timestamp() + o.delay_us * interval '1 microsecond',
      abandoned_epoch = NULL, last_error = o.error
  FROM o
  WHERE i.id = o.id AND NOT o.dead AND (o.refund OR i.attempts + 1 < $15::int)
    AND (o.was IS NULL OR i.attempts = o.was)
  RETURNING i.id)
