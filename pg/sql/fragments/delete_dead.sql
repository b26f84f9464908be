-- Finish's delete of dead items (finish_ctes.sql) by a role that may
-- delete from items.
dead AS (
  DELETE FROM {schema}.items i USING o
  WHERE i.id = o.id AND (o.dead OR (NOT o.refund AND i.attempts + 1 >= $15::int))
    AND (o.was IS NULL OR i.attempts = o.was)
  RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority,
            i.attempts + (NOT o.refund)::int AS attempts,
            i.enqueued_at, i.payload, coalesce(o.error, '') AS error,
            i.origin_topic, i.origin_partition, i.origin_offset, i.headers, i.group_id)
