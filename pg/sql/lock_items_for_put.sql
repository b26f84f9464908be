-- lock_items_for_enqueue.sql for a worker role, which may not lock items
-- itself (migration 41: it holds no INSERT there): put_items() with no
-- items takes the same lock as the owner, after checking the role's grant
-- on $1. A schedule's firing runs it before it locks its schedule row, so
-- a queue's delete (items' SHARE lock, then the cascade to that row)
-- never meets the two in the other order.
SELECT count(*) FROM {schema}.put_items($1::text, '{}'::text[], '{}'::text[], '{}'::smallint[],
                                       '{}'::bigint[], '{}'::bytea[], '{}'::text[])
