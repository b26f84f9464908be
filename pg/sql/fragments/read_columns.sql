-- The columns of `items i` that every claim read returns (ready_items.sql).
i.ctid AS tid, i.id, i.key, i.dedup_key, i.priority, i.attempts, i.payload, i.enqueued_at, i.run_at, i.group_id
