-- What the queue's sessions reported finished per minute over the last
-- hour (the heartbeat's `done`), summed over sessions, oldest first.
SELECT (extract(epoch FROM minute))::bigint, sum(acked)::bigint, sum(retried)::bigint,
       sum(dead)::bigint
FROM {schema}.throughput
WHERE queue = $1 AND minute >= date_trunc('minute', now() - interval '1 hour')
GROUP BY minute ORDER BY minute
