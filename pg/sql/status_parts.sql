-- Status, one row per part ($1 queue, $2 its part count): see
-- status_sessions.sql for what counts as ready, delayed, held and in flight.
-- `fly`: the ids the claim records list, a set each of the queue's items is
-- looked up in (a hashed subplan). Joined to `items` by `i.id =
-- ANY(c.ids)`, the planner could drive that join from the items and scan
-- the queue's records once per item: 8.6 s for 24,972 items beside a held
-- snapshot, whose dead records each scan walked.
WITH own AS (SELECT part, session_id, epoch FROM {schema}.session_parts WHERE queue = $1),
fly AS (
  SELECT f.id FROM {schema}.part_claims c CROSS JOIN LATERAL unnest(c.ids) AS f(id)
  WHERE c.queue = $1),
it AS (
  SELECT part,
         count(*) FILTER (WHERE NOT fl AND run_at <= now()) AS ready,
         count(*) FILTER (WHERE NOT fl AND run_at > now() AND run_at < 'infinity') AS delayed,
         count(*) FILTER (WHERE run_at = 'infinity') AS held,
         count(*) FILTER (WHERE fl) AS in_flight,
         min(enqueued_at) FILTER (WHERE NOT fl AND run_at <= now()) AS oldest
  FROM (SELECT part, run_at, enqueued_at, id IN (SELECT id FROM fly) AS fl
        FROM {schema}.items WHERE queue = $1) x
  GROUP BY part),
dd AS (SELECT part, count(*) AS n,
              count(*) FILTER (WHERE failed_at > now() - interval '1 minute') AS recent
       FROM {schema}.dead_items WHERE queue = $1 GROUP BY part),
cc AS (SELECT part, count(*) AS n FROM {schema}.cancelled_items WHERE queue = $1 GROUP BY part)
SELECT p, own.session_id, coalesce(own.epoch, 0), coalesce(it.ready, 0),
       coalesce(it.delayed, 0), coalesce(it.in_flight, 0), coalesce(dd.n, 0),
       coalesce((extract(epoch FROM now() - it.oldest) * 1000000)::bigint, 0),
       coalesce(it.held, 0), coalesce(cc.n, 0), coalesce(dd.recent, 0)
FROM generate_series(0, $2::int - 1) AS p
LEFT JOIN own ON own.part = p
LEFT JOIN it ON it.part = p
LEFT JOIN dd ON dd.part = p
LEFT JOIN cc ON cc.part = p
ORDER BY p
