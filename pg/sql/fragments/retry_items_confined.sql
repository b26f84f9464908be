-- Finish's retries (finish_ctes.sql) by a confined worker, which may not
-- update items (migration 40): the same rows and values, written through
-- item_retries' rule, of its queues only.
retried AS (
  INSERT INTO {schema}.item_retries (id, refund, delay_us, error, max_attempts, attempts)
  SELECT o.id, o.refund, o.delay_us, o.error, $15::int, o.was FROM o WHERE NOT o.dead
  RETURNING id)
