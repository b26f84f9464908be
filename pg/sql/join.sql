-- Join, dynamic ($2 NULL: a random id) or static ($2 = instance id: a
-- stable id, so a restart within the TTL finds its row). A static
-- re-join bumps the incarnation (fencing the old process's heartbeats)
-- and moves every part the row still owns to a fresh epoch (fencing its
-- acks); the parts are returned as "part:epoch,...". What the old
-- process had in flight there (its claim records) is marked abandoned,
-- one attempt counted each (store.h, "Claims"). The NOTIFY goes out on
-- commit; the statement is its own transaction.
--
-- {take_over_claims}: fragments/take_over_claims.sql of `kept`.
WITH q AS (SELECT name, session_ttl, paused, rate FROM {schema}.queues WHERE name = $1),
up AS (
  INSERT INTO {schema}.sessions AS t (id, queue, instance_id, host, pid, expires_at)
  SELECT CASE WHEN $2::text IS NULL THEN gen_random_uuid()
              ELSE md5($1 || '/' || $2::text)::uuid END,
         q.name, $2::text, $3, $4, now() + q.session_ttl
  FROM q
  ON CONFLICT (id) DO UPDATE
    SET incarnation = t.incarnation + 1, host = excluded.host, pid = excluded.pid,
        heartbeat_at = now(), expires_at = excluded.expires_at
  RETURNING id, incarnation),
kept AS (
  UPDATE {schema}.session_parts sp SET epoch = nextval('{schema}.epochs'), acquired_at = now()
  FROM up WHERE sp.session_id = up.id AND sp.queue = $1
  RETURNING sp.part, sp.epoch),
{take_over_claims}
SELECT up.id, up.incarnation,
       (SELECT string_agg(part || ':' || epoch, ',' ORDER BY part) FROM kept),
       pg_notify($5, 'g'), (SELECT paused FROM q), (SELECT rate FROM q)
FROM up
