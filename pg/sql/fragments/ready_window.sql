-- The window a read with a key bound looks at (ready_keyed.sql): the
-- part's next 8 times {limit} rows from where it starts, ready or not, their
-- ctids as `tid`, and `key_rank`: the row's place among its key's rows in
-- the window, in id order. Only a row within its key's first {bound} there
-- can be ready: a later one has {bound} rows of its key, live, before it.
-- So only those are probed (ready_condition.sql), and a window of a few
-- busy keys costs a few probes per key, not one per row.
(SELECT w.*, row_number() OVER (PARTITION BY w.key ORDER BY w.id) AS key_rank FROM (SELECT i.ctid AS tid, i.* FROM {schema}.items i WHERE i.queue = {queue} AND i.part = {part} AND (i.priority, i.id) > ({after_prio}::smallint, {after_id}) ORDER BY i.priority, i.id LIMIT 8 * {limit}) w) i
