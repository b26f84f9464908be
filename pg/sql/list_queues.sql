-- ListQueues: every queue's row, by name (QueueFromRow reads the columns).
SELECT name, parts, assignment, (extract(epoch FROM session_ttl) * 1000000)::bigint,
       max_attempts, ordered, dlq_topic, paused, rate, array_to_string(grown_from, ','), fair_by,
       key_concurrency, max_payload_bytes
FROM {schema}.queues ORDER BY name
