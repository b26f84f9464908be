-- The slow path of Finish: lock first, so the handler sees only items
-- of parts that are still ours and that are still there (an item gone
-- was finished already: by this session, when a COMMIT whose outcome
-- was unknown did commit). FOR SHARE keeps the rows (and their epochs)
-- as they are until the ack transaction ends: expiry, release and a
-- static re-join all wait for it.
--
-- {fence}: fragments/fence_cte.sql, the fence every Finish begins with.
WITH {fence}
SELECT 'p', part::bigint FROM f
UNION ALL
SELECT 'i', id FROM {schema}.items WHERE id = ANY($5::bigint[])
