-- An item of a queue group: enqueue_item() (migration 12) holds the group's
-- row and counts the item; a rare path, not worth a statement of its own.
-- $1 queue, $2 payload, $3 key, $4 dedup key, $5 priority, $6 group.
SELECT e.id, e.part, e.duplicate
FROM {schema}.enqueue_item($1::text, $2::bytea, $3::text, $4::text, interval '0', $5::int, $6::text) e
