-- Finish's deletes of acked items (finish_ctes.sql) by a role that may
-- delete from items: by ctid, then by id what was not found there.
acked AS (
  DELETE FROM {schema}.items i
  WHERE i.ctid = ANY(ARRAY(SELECT tid FROM a)) AND i.id = ANY(ARRAY(SELECT id FROM a))
  RETURNING i.id, i.queue, i.dedup_key),
moved AS (
  DELETE FROM {schema}.items i
  WHERE i.id = ANY(ARRAY(SELECT id FROM a WHERE id NOT IN (SELECT id FROM acked)))
  RETURNING i.id, i.queue, i.dedup_key)
