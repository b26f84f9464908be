-- ready_keyed.sql's read of a part from its head ({after_id} the sentinel)
-- for a claim with a key bound {bound}: each key's first {bound} items in
-- the part. The keys come from a skip scan of items_key (each step one
-- descent to the next key's first live entry, at most 8 times {limit}
-- keys, in key order); each key's items are read on from that entry. So a
-- key whose items are all held back (its first ones delayed, retried, in
-- flight, or behind items in an earlier part of a grown queue) costs a
-- descent however many rows it has, and cannot hide the other keys behind
-- it, as it could from a window of rows. The k-th of a key's first items
-- has k - 1 live items of the key before it in the part by construction,
-- so only the earlier parts are probed ({earlier}: earlier_parts.sql with
-- the limit {bound}). The window (ready_window.sql) reads keyless items and
-- what it holds of these; ready_keyed.sql drops what both return.
SELECT {columns_of_i}
    FROM (
      WITH RECURSIVE heads AS (
        (SELECT k.key, k.id, 1 AS n FROM {schema}.items k
         WHERE {after_id} = -9223372036854775808
           AND k.queue = {queue} AND k.part = {part} AND k.key IS NOT NULL
         ORDER BY k.key, k.id LIMIT 1)
        UNION ALL
        SELECT nx.key, nx.id, hd.n + 1
        FROM heads hd CROSS JOIN LATERAL (
          SELECT k.key, k.id FROM {schema}.items k
          WHERE k.queue = {queue} AND k.part = {part} AND k.key > hd.key
          ORDER BY k.key, k.id LIMIT 1) nx
        WHERE hd.n < 8 * {limit})
      SELECT f.* FROM heads hd CROSS JOIN LATERAL (
        SELECT k.ctid AS tid, k.*, row_number() OVER (ORDER BY k.id) AS key_rank
        FROM {schema}.items k
        WHERE k.queue = {queue} AND k.part = {part} AND k.key = hd.key AND k.id >= hd.id
        ORDER BY k.id LIMIT {bound}::int) f) i
    WHERE i.run_at <= statement_timestamp() AND i.abandoned_epoch IS NULL
      AND i.id <> ALL({skip})
      AND i.key_rank - 1 + (SELECT count(*) FROM ({earlier}) e) < {bound}::int
    ORDER BY i.priority, i.id LIMIT {limit}
