-- ready_items.sql's read from where the read starts on, in items_ready, of
-- {rows} (the table `items i`, or ready_window.sql); {gate}: empty, or a
-- condition on the parameters alone that picks this read (ready_keyed.sql).
SELECT {columns}
    FROM {rows}
    WHERE {ready}
      AND (i.priority, i.id) > ({after_prio}::smallint, {after_id})
      AND ((i.priority, i.id) > ({cursor_prio}::smallint, {cursor_id}) OR i.id <> ALL({skip})){gate}
    ORDER BY i.priority, i.id LIMIT {limit}
