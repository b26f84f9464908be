-- The lean ack's delete (ack_ctes.sql) by a confined worker, in a statement
-- run after plan_guard.sql: through the rule of item_acks (migration 39),
-- by ctid and id as ack_items() deletes first; a row a table rewrite moved
-- makes the count short, and Finish rolls back and runs the general
-- statements, which find it by id.
INSERT INTO {schema}.item_acks (tids, ids) VALUES ($6::tid[], $5::bigint[])
  RETURNING id AS acked_id, queue AS acked_queue, dedup_key AS acked_dedup_key
