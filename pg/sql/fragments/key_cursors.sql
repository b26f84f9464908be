-- The key cursors of a claim (ClaimPart::key_cursors) in part {part}, as a
-- FROM item {as}(part, key, id) with its WHERE: a fair claim's keys read
-- after an id (fair_items.sql), an ordered claim's released keys
-- (ready_released.sql).
unnest({parts}::int[], {keys}::text[], {ids}::bigint[]) AS {as}(part, key, id) WHERE {as}.part = {part}
