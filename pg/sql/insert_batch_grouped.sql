-- insert_batch for a batch with groups: held items wait ('infinity'
-- until group_start), and each group counts the items inserted.
WITH ins AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload,
                              group_id)
  SELECT t.id, $1, t.part, t.key, t.dedup, t.prio,
         CASE WHEN t.held THEN 'infinity' ELSE now() + t.delay_us * interval '1 microsecond' END,
         decode(t.payload, 'hex'), t.grp
  FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::smallint[], $7::bigint[],
              $8::text[], $9::text[], $10::bool[])
       AS t(id, part, key, dedup, prio, delay_us, payload, grp, held)
  ORDER BY t.id
  ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
  RETURNING group_id),
counted AS (
  UPDATE {schema}.groups x SET pending = x.pending + c.n
  FROM (SELECT group_id, count(*) AS n FROM ins WHERE group_id IS NOT NULL GROUP BY group_id) c
  WHERE x.queue = $1 AND x.id = c.group_id
  RETURNING 1)
SELECT count(*), (SELECT count(*) FROM counted) FROM ins
