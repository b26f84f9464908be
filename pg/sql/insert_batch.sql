-- The batch path for items with dedup keys (COPY cannot skip conflicts).
WITH ins AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload)
  SELECT t.id, $1, t.part, t.key, t.dedup, t.prio,
         now() + t.delay_us * interval '1 microsecond', decode(t.payload, 'hex')
  FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::smallint[], $7::bigint[],
              $8::text[]) AS t(id, part, key, dedup, prio, delay_us, payload)
  ORDER BY t.id
  ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
  RETURNING 1)
SELECT count(*) FROM ins
