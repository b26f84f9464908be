-- ready_keyed.sql's read of each key's first {bound} items in the part, for
-- a claim with a key bound {bound}: from the part's head ({after_id} the
-- sentinel), or, in an ordered claim, from a cursor when the claim asks
-- for the keys' heads there ({floors}' "heads": ClaimPart::key_heads). The
-- keys come from a skip scan of items_key (each step fair_next_key.sql: one
-- descent to the next key's first live entry, at most 8 times {limit}
-- keys, in key order); each key's items are read on from its floor
-- (key_floors.sql: the id of it the session claimed last in the part),
-- or from its head without one. So a key whose items are all held back
-- (its first ones delayed, retried, in flight, or behind items in an
-- earlier part of a grown queue) costs a descent however many rows it has,
-- and cannot hide the other keys behind it, as it could from a window of
-- rows. A key with a floor is visited without a descent to its head (the
-- skip scan looks in the index only between such keys): behind a held
-- snapshot a key's head is every acked entry of it the snapshot keeps, and
-- the descents to them walked those on every read from the heads, which
-- stopped an ordered queue within five minutes of a hold
-- (bench/held_snapshot_ordered.sh). When the floor's item was claimed no
-- older item of its key was live, and the floor's item is read too (a
-- retried one is live: it takes the key's first place). The k-th of a
-- key's first items has k - 1 live items of the key before it in the part
-- by construction, so only the earlier parts are probed ({earlier}:
-- earlier_parts.sql with the limit {bound}). The bounds are rows of
-- items_key's columns and the order is its (key, id), as in
-- ready_released.sql: as `k.id >=` a floor, the planner read some keys
-- through items_pkey from the floor on, every later item of the queue,
-- until it met one of the key; and with the key's rank numbered in id
-- order alone, it read the key through items_pkey, every later item of
-- the queue, for that order (plan_guard_keyed.sql keeps it from sorts). The window (ready_window.sql)
-- reads keyless items and what it holds of these; ready_keyed.sql drops
-- what both return.
SELECT {columns_of_i}
    FROM (
      WITH RECURSIVE floors AS MATERIALIZED (SELECT * FROM {key_floors}),
      heads AS (
        (SELECT s.key, 1 AS n FROM (SELECT {first_key} AS key WHERE {gate}) s
         WHERE s.key IS NOT NULL)
        UNION ALL
        SELECT s.key, hd.n + 1
        FROM heads hd CROSS JOIN LATERAL (SELECT {next_key} AS key) s
        WHERE s.key IS NOT NULL AND hd.n < 8 * {limit})
      SELECT f.* FROM heads hd CROSS JOIN LATERAL (
        SELECT k.ctid AS tid, k.*, row_number() OVER (ORDER BY k.key, k.id) AS key_rank
        FROM {schema}.items k
        WHERE k.queue = {queue} AND k.part = {part} AND k.key IS NOT NULL
          AND (k.key, k.id) >= (hd.key, coalesce((SELECT c.id FROM floors c WHERE c.key = hd.key),
                                                 -9223372036854775808))
          AND (k.key, k.id) <= (hd.key, 9223372036854775807)
        ORDER BY k.key, k.id LIMIT {bound}::int) f) i
    WHERE i.run_at <= statement_timestamp() AND i.abandoned_epoch IS NULL
      AND i.id <> ALL({skip})
      AND i.key_rank - 1 + (SELECT count(*) FROM ({earlier}) e) < {bound}::int
    ORDER BY i.priority, i.id LIMIT {limit}
