-- Owners: one statement, so one snapshot; the queue's row says it
-- exists and how many parts it has, EXISTS stops at the first item.
-- Sessions come with their heartbeat's age and their expiry, as in
-- status_sessions, so a reader tells live ones from expired ones.
-- NextDue: the first retried, delayed or requeued item per part (by
-- items_later), in microseconds from now: 0 or less when one is due
-- already (it came due since the claim read). Held group items
-- ('infinity') are not due at any time.
SELECT (extract(epoch FROM min(d.run_at) - now()) * 1000000)::bigint
FROM unnest($2::int[]) AS p(part)
CROSS JOIN LATERAL (
  SELECT i.run_at FROM {schema}.items i
  WHERE i.queue = $1 AND i.part = p.part AND i.run_at > i.enqueued_at
    AND i.run_at < 'infinity'
  ORDER BY i.run_at LIMIT 1) d
