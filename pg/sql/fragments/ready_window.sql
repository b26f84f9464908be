-- The window an ordered read looks at (ready_keyed.sql): the part's next 8
-- times {limit} rows from where it starts, ready or not, their ctids as
-- `tid`, and `first_of_key`: whether the row is its key's first (lowest id)
-- in the window. Only such a row can be ready: a later one of its key has
-- it, live, before it. So only they are probed (ready_condition.sql), and
-- a window of a few busy keys costs a probe per key, not per row.
(SELECT w.*, w.id = min(w.id) OVER (PARTITION BY w.key) AS first_of_key FROM (SELECT i.ctid AS tid, i.* FROM {schema}.items i WHERE i.queue = {queue} AND i.part = {part} AND (i.priority, i.id) > ({after_prio}::smallint, {after_id}) ORDER BY i.priority, i.id LIMIT 8 * {limit}) w) i
