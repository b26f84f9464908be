-- Finish's delete of dead items (finish_ctes.sql) by a confined worker
-- (migration 39): the same rows, chosen here and deleted by id through
-- delete_items(), of its queues only.
dead AS (
  SELECT i.id, i.queue, i.part, i.key, i.dedup_key, i.priority,
         i.attempts + (NOT o.refund)::int AS attempts,
         i.enqueued_at, i.payload, coalesce(o.error, '') AS error,
         i.origin_topic, i.origin_partition, i.origin_offset, i.headers, i.group_id
  FROM {schema}.delete_items(NULL::tid[], ARRAY(
         SELECT x.id FROM {schema}.items x JOIN o ON x.id = o.id
         WHERE (o.dead OR (NOT o.refund AND x.attempts + 1 >= $15::int))
           AND (o.was IS NULL OR x.attempts = o.was))) i
  JOIN o ON o.id = i.id)
