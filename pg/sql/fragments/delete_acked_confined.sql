-- Finish's deletes of acked items (finish_ctes.sql) by a confined worker
-- (migration 39): delete_items() deletes by ctid, then by id what was not
-- found there, rows of its queues only; `moved` is then empty.
acked AS (
  SELECT d.id, d.queue, d.dedup_key
  FROM {schema}.delete_items(ARRAY(SELECT tid FROM a), ARRAY(SELECT id FROM a)) d),
moved AS (SELECT * FROM acked WHERE false)
