-- ready_keyed.sql's read of an ordered claim's part from its head
-- ({after_id} the sentinel): each key's head, its lowest id in the part,
-- found by a skip scan of items_key (one descent per key, at most 8 times
-- {limit} keys, in key order), so a key whose items are all held back
-- (its head delayed, retried, or behind an item in an earlier part of a
-- grown queue) costs one descent however many rows it has, and cannot hide
-- the other keys' heads behind it, as it could from a window of rows. A
-- head is the key's oldest live item in the part by construction, so
-- only the earlier parts are probed ({earlier_one}: earlier_parts.sql).
-- The window (ready_window.sql) reads keyless items and the heads it
-- holds; ready_keyed.sql drops what both return.
SELECT {columns_of_i}
    FROM (
      WITH RECURSIVE heads AS (
        (SELECT k.ctid AS tid, k.*, 1 AS n FROM {schema}.items k
         WHERE {bound}::int = 1 AND {after_id} = -9223372036854775808
           AND k.queue = {queue} AND k.part = {part} AND k.key IS NOT NULL
         ORDER BY k.key, k.id LIMIT 1)
        UNION ALL
        SELECT nx.*, hd.n + 1
        FROM heads hd CROSS JOIN LATERAL (
          SELECT k.ctid AS tid, k.* FROM {schema}.items k
          WHERE k.queue = {queue} AND k.part = {part} AND k.key > hd.key
          ORDER BY k.key, k.id LIMIT 1) nx
        WHERE hd.n < 8 * {limit})
      SELECT * FROM heads) i
    WHERE i.run_at <= statement_timestamp() AND i.abandoned_epoch IS NULL
      AND i.id <> ALL({skip}) AND NOT EXISTS ({earlier_one})
    ORDER BY i.priority, i.id LIMIT {limit}
