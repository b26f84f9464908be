-- RequeueDead: queue $1's dead items $2 (all when empty) back into items, a
-- new item in all but its id and enqueue time: no attempt counted, due now,
-- no abandoned mark. ON CONFLICT leaves an item whose dedup key a live item
-- holds where it is (its id cannot be live: ids are never reused). Returns
-- how many moved, how many stayed, each moved item's part:priority:id (the
-- notices to send: owners find the items behind their cursors, since run_at
-- is later than enqueued_at, the claim's `later` read), and the ids that
-- stayed.
WITH asked AS (
  SELECT d.* FROM {schema}.dead_items d
  WHERE d.queue = $1 AND (cardinality($2::bigint[]) = 0 OR d.id = ANY($2::bigint[]))),
moved AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, attempts,
                              enqueued_at, payload, origin_topic, origin_partition,
                              origin_offset, headers)
  SELECT id, queue, part, key, dedup_key, priority, now(), 0, enqueued_at, payload,
         origin_topic, origin_partition, origin_offset, headers
  FROM asked
  ON CONFLICT DO NOTHING
  RETURNING id, part, priority),
gone AS (DELETE FROM {schema}.dead_items d USING moved m WHERE d.id = m.id RETURNING 1)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM asked) - (SELECT count(*) FROM gone),
       (SELECT coalesce(string_agg(m.part || ':' || m.priority || ':' || m.id, ','), '')
        FROM moved m),
       (SELECT coalesce(string_agg(a.id::text, ',' ORDER BY a.id), '') FROM asked a
        WHERE a.id NOT IN (SELECT m.id FROM moved m))
