-- Queue groups (migration 12; store.h, "Queue groups"). An item of a group
-- alone goes through enqueue_item() (enqueue_grouped.sql), which holds the
-- group's row and counts the item.
-- The batch path's groups: each row held until commit, in id order
-- (no deadlock between two batches), with whether it has started.
SELECT g, {schema}.group_hold($1, g) FROM unnest($2::text[]) AS g ORDER BY g
