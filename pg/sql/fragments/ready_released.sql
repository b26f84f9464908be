-- ready_items.sql's read of an ordered claim's released keys: {released}
-- is a FROM item of (key, id) rows (key_cursors.sql), each key's next item
-- after that id read through items_key. {not_behind} leaves out what the
-- look behind (ready_behind.sql) returns, when there is one. The bounds
-- are rows of items_key's columns and the order is its (key, id): as
-- `n.key = rel.key AND n.id > rel.id ORDER BY n.id`, a plan made after an
-- ANALYZE that found `items` nearly empty read each key's next item
-- through items_pkey, every later item of the queue, filtered by key
-- (ready_condition.sql).
SELECT {columns_of_rows}
    FROM (SELECT rel.key, rel.id FROM {released}) rel
    CROSS JOIN LATERAL (
      SELECT n.ctid AS tid, n.* FROM {schema}.items n
      WHERE n.queue = {queue} AND n.part = {part} AND n.key IS NOT NULL
        AND (n.key, n.id) > (rel.key, rel.id)
        AND (n.key, n.id) <= (rel.key, 9223372036854775807)
      ORDER BY n.key, n.id LIMIT 1) i
    WHERE {ready}
      AND (i.priority::int, i.id) <= ({after_prio}::int, {after_id}) AND i.id <> ALL({skip}){not_behind}
    ORDER BY i.priority::int, i.id LIMIT {limit}
