-- The items a fair claim (ClaimRequest::fair) reads in one part, as a
-- subquery with the columns of ready_items.sql: the part's keys take
-- turns, one item each per turn, starting after the key `key_after` (text,
-- NULL: from the first key) and going around; keyless items come after.
-- FairItems (pg_store_sql.cc) fills it. Why it looks like this:
-- - The keys come from items_key by a skip scan (`onward`, `around`; each
--   step is fair_next_key.sql): each step one index descent to the next
--   key, so a key with a million items costs one probe, not a walk. It
--   finds keys of items not ready too (delayed, in flight); those turns
--   yield nothing. A key with a cursor is visited without a probe (the step
--   looks in the index only before it): a descent to a key lands at its
--   head, which for a key being drained is the acked rows vacuum has not
--   removed yet, walked entry by entry (most of what a fair claim cost once
--   the keys had cursors: docs/benchmarks-history.md). At most 2 * limit
--   keys are visited, so a part with more keys than that is read in slices,
--   the next claim going on after the last key served (ClaimScheduler).
-- - Each key visited is read in id order (items_key again: no index was
--   added for fair queues, so ordinary queues pay nothing), from after its
--   cursor if the claim gives one ({cursors}: key_cursors.sql, looked up
--   per key visited: a few dozen entries), so a key with a long backlog is
--   not walked from its head, through the items in flight and the acked
--   rows vacuum has not removed, on every claim (the walk was most of a
--   fair claim's time: docs/benchmarks-history.md), up to an even share of
--   twice the limit (never more than the limit: a key alone is read for
--   the limit, not twice it), so the turns can fill the read even when
--   some keys have fewer items than their share; the rows are then ordered
--   by turn (their number within the key) and key, and cut at the limit.
--   An ordered key's items are probed only from its cursor on
--   ({ready_after}; ready_condition.sql says why). With a key bound
--   ({bound}: ordered 1, key concurrency N) only the key's first {bound}
--   items past its cursor are read, since a later one has {bound} live
--   items of its key before it and cannot be ready: the second of the two
--   reads below, each gated by the bound (the first, without one, keeps
--   the plan a fair queue had). Read on until the share was ready, an
--   ordered key's read probed every item of its backlog, on every claim
--   (a fair ordered queue drained 250-340 items/s from a backlog of
--   200,000 items over 997 keys, bench/ordered_drain.sh).
-- - Behind the cursors, first when the claim looks behind ({behind}): what
--   came due there (retried, delayed, requeued: run_at later than
--   enqueued_at), through items_later in run_at order as
--   ready_behind.sql reads it, so the cursors are kept across it where a
--   read from the heads walked the acked entries every rescan_interval.
--   These take no turns: like an ordinary claim's look behind, they come
--   before the rest, up to the whole read.
-- - Keyless items are not in items_key: they are looked for among the
--   part's first 2 * limit items due in (priority, id) order, read only
--   when the keys did not fill the read. The keyed ones among those are
--   dropped, so they are not probed ({ready_keyless} has no key bound),
--   and they count whether their keys hold them back or not: a keyless
--   item waits behind the keyed items due before it, as in a fair queue
--   without a key bound. Probed, in an ordered queue, each walked its
--   key's acked entries a held snapshot keeps (PgStoreTest's fair probe
--   test), and the read went on through every held-back item of the
--   part's backlog, probing each, until it had 2 * limit ready ones.
-- Every item read is checked against {skip}: a key read from its head, or
-- from a cursor a late enqueue's notice lowered, meets the items in flight.
SELECT * FROM ((
    SELECT {columns}
    FROM {schema}.items i
    WHERE {ready} AND i.run_at > i.enqueued_at AND {behind}
      AND i.id <= (SELECT max(c.id) FROM {cursors} AND c.key = i.key) AND i.id <> ALL({skip})
    ORDER BY i.run_at, i.id LIMIT {limit})
  UNION ALL
  (SELECT {columns_of_x}
    FROM (
      WITH RECURSIVE onward(key, n) AS (
        SELECT {onward_first}, 1
        UNION ALL
        SELECT {onward_next}, w.n + 1
        FROM onward w WHERE w.key IS NOT NULL AND w.n < 2 * {limit}),
      around(key, n) AS (
        SELECT {around_first}, 1
        UNION ALL
        SELECT {around_next}, a.n + 1
        FROM around a WHERE a.key IS NOT NULL AND a.n < 2 * {limit}),
      visit AS (
        SELECT v.key, v.lap, v.n
        FROM (SELECT key, 0 AS lap, n FROM onward WHERE key IS NOT NULL
              UNION ALL SELECT key, 1, n FROM around WHERE key IS NOT NULL) v
        ORDER BY v.lap, v.n LIMIT 2 * {limit})
      SELECT key, row_number() OVER (ORDER BY lap, n) AS pos, count(*) OVER () AS keys,
             (SELECT max(c.id) FROM {cursors} AND c.key = visit.key) AS after_id
      FROM visit) t
    CROSS JOIN LATERAL ((
      SELECT {columns}, row_number() OVER (ORDER BY i.id) AS turn
      FROM {schema}.items i
      WHERE {bound}::int = 0 AND {ready_after} AND i.key = t.key
        AND i.id > coalesce(t.after_id, -9223372036854775808) AND i.id <> ALL({skip})
      ORDER BY i.id LIMIT least({limit}, ceil(2.0 * {limit} / t.keys)::int))
      UNION ALL
      (SELECT {columns_of_i}, row_number() OVER (ORDER BY i.id) AS turn
      FROM (SELECT k.ctid AS tid, k.* FROM {schema}.items k
            WHERE {bound}::int > 0 AND k.queue = {queue} AND k.part = {part} AND k.key = t.key
              AND k.id > coalesce(t.after_id, -9223372036854775808)
            ORDER BY k.id LIMIT {bound}::int) i
      WHERE {ready_after} AND i.id <> ALL({skip})
      ORDER BY i.id LIMIT least({limit}, ceil(2.0 * {limit} / t.keys)::int))) x
    ORDER BY x.turn, t.pos LIMIT {limit})
  UNION ALL
  (SELECT {columns_of_x}
    FROM (SELECT {columns}
          FROM {schema}.items i
          WHERE {ready_keyless} AND i.id <> ALL({skip})
          ORDER BY i.priority, i.id LIMIT 2 * {limit}) x
    WHERE x.key IS NULL)) r LIMIT {limit}
