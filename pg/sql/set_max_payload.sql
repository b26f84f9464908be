-- SetMaxPayload: the SQL API reads it at each call (migration 29,
-- authorize_enqueue()); no notice, workers do not use it.
UPDATE {schema}.queues SET max_payload_bytes = $2::int WHERE name = $1
