-- With its expiry sweep row, due at once (migration 24).
WITH q AS (
  INSERT INTO {schema}.queues (name, parts, assignment, session_ttl, max_attempts, ordered,
                              dlq_topic, rate, fair_by, key_concurrency, max_payload_bytes)
  VALUES ($1, $2, $3, $4::bigint * interval '1 microsecond', $5, $6, $7, $8::double precision,
          $9::text, $10::int, $11::int)
  ON CONFLICT (name) DO NOTHING
  RETURNING name),
sweep AS (
  INSERT INTO {schema}.expiry_sweeps (queue, generation, sweep_after)
  SELECT name, -1, '-infinity' FROM q)
SELECT name FROM q
