-- The heartbeat's renewal of our row, the first CTE of both heartbeat
-- statements ("heartbeat" and "heartbeat_idle"): $1 queue, $2 session, $3
-- incarnation. An expiry never moves back (a heartbeat that started earlier
-- can commit later, e.g. one the client gave up on), which the expiry sweep
-- of heartbeat_idle counts on.
WITH me AS (
  UPDATE {schema}.sessions s
  SET heartbeat_at = now(), expires_at = greatest(s.expires_at, now() + q.session_ttl)
  FROM {schema}.queues q
  WHERE s.id = $2 AND s.incarnation = $3 AND s.queue = $1 AND q.name = $1
  RETURNING s.id)
