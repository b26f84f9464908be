-- The window an ordered read on from a cursor looks at (ready_keyed.sql):
-- the part's next 8 times {limit} rows, ready or not, their ctids as `tid`.
(SELECT i.ctid AS tid, i.* FROM {schema}.items i WHERE i.queue = {queue} AND i.part = {part} AND (i.priority, i.id) > ({after_prio}::smallint, {after_id}) ORDER BY i.priority, i.id LIMIT 8 * {limit}) i
