-- The single-row enqueue. One round trip: the queue lookup (NotFound and the
-- part count), the id (nextval, so a keyless item's part can come from its id
-- in the same statement, via part_for_id which mirrors PartForId), the insert
-- with dedup, and the NOTIFY. $2 is the key's positive murmur2 (NULL without a
-- key), so `$2 % parts` is PartForKey and no client-side cache of part counts
-- can go stale. A dedup hit returns the parts but no id. The xid comes
-- before the id (`x`), as in reserve_ids.sql.
WITH x AS MATERIALIZED (SELECT pg_current_xact_id()),
q AS (SELECT parts FROM {schema}.queues WHERE name = $1),
n AS (SELECT nextval('{schema}.items_id_seq') AS id, parts FROM q, x),
ins AS (
  INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload)
  SELECT n.id, $1,
         CASE WHEN $2::bigint IS NULL THEN {schema}.part_for_id(n.id, n.parts)
              ELSE ($2::bigint % n.parts)::int END,
         $3, $4, $5::smallint, now() + $6::bigint * interval '1 microsecond', $7::bytea
  FROM n
  ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
  RETURNING id, part)
SELECT q.parts, ins.id, ins.part,
       CASE WHEN ins.id IS NOT NULL
            THEN pg_notify($8, 'i:' || ins.part || ':' || $5 || ':' || ins.id) END
FROM q LEFT JOIN ins ON true
