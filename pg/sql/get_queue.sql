-- GetQueue: queue $1's row (QueueFromRow reads the columns in this order).
SELECT name, parts, assignment, (extract(epoch FROM session_ttl) * 1000000)::bigint,
       max_attempts, ordered, dlq_topic, paused, rate, array_to_string(grown_from, ','), fair_by,
       key_concurrency, max_payload_bytes
FROM {schema}.queues WHERE name = $1
