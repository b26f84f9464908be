-- Each session's own throughput rows that may cover the minute before
-- its last heartbeat (RecentRates, store/throughput.h): a row covers
-- from a heartbeat before its minute, and heartbeats come more often
-- than the TTL.
SELECT t.session_id::text, (extract(epoch FROM t.minute))::bigint, t.acked, t.retried, t.dead
FROM {schema}.throughput t
JOIN {schema}.sessions s ON s.id = t.session_id
JOIN {schema}.queues q ON q.name = s.queue
WHERE t.queue = $1 AND s.queue = $1 AND q.name = $1
  AND t.minute >= date_trunc('minute', s.heartbeat_at - interval '1 minute' - q.session_ttl)
ORDER BY t.session_id, t.minute
