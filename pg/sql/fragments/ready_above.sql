-- ready_items.sql's read, from the part's head, of its items of a priority
-- below 0 (lower runs first), which sort before a start at priority 0
-- (ClaimPart::above): a read that starts at a floor of priority
-- 0 instead of at the head (a poll-only consumer's, ClaimScheduler) finds
-- them so without walking the index entries of the part's acked items
-- before the floor, which a held snapshot keeps. It reads what came due
-- there too, in (priority, id) order with the rest (the look behind,
-- ready_behind.sql, leaves those to it). {above}: whether to read (a
-- boolean expression); {ready}: ready_condition.sql; {columns}:
-- read_columns.sql.
SELECT {columns}
    FROM {schema}.items i
    WHERE {ready}
      AND {above} AND {after_prio}::int >= 0 AND i.priority < 0 AND i.id <> ALL({skip})
    ORDER BY i.priority, i.id LIMIT {limit}
