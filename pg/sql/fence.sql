-- The slow path of Finish: lock first, so the handler sees only items
-- of parts that are still ours and that are still there, with the
-- attempts they were claimed with ($6, NULL if not known): an item gone
-- was finished already, and one whose attempts moved on was retried
-- already, both by this session, when a COMMIT whose outcome was unknown
-- did commit. FOR SHARE keeps the rows (and their epochs)
-- as they are until the ack transaction ends: expiry, release and a
-- static re-join all wait for it.
--
-- {fence}: fragments/fence_cte.sql, the fence every Finish begins with.
WITH {fence}
SELECT 'p', part::bigint FROM f
UNION ALL
SELECT 'i', i.id FROM {schema}.items i
WHERE i.id = ANY($5::bigint[])
  AND EXISTS (SELECT 1 FROM unnest($5::bigint[], $6::int[]) AS w(id, was)
              WHERE w.id = i.id AND (w.was IS NULL OR i.attempts = w.was))
