-- ReadOutbox: the oldest $1 rows of the outbox, for `partq bridge publish`.
SELECT id, topic, key, payload, headers::text FROM {schema}.outbox ORDER BY id LIMIT $1
