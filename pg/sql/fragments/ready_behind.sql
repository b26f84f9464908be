-- ready_items.sql's read behind where the read starts: the items that came
-- due there, through items_later. {behind}: whether to look (a boolean
-- expression); {ready}: ready_condition.sql; {columns}: read_columns.sql;
-- {not_above}: empty, or leaves what ready_above.sql reads to it.
SELECT {columns}
    FROM {schema}.items i
    WHERE {ready}
      AND i.run_at > i.enqueued_at AND {behind} AND {after_id} <> -9223372036854775808
      AND (i.priority::int, i.id) <= ({after_prio}::int, {after_id}) AND i.id <> ALL({skip}){not_above}
    ORDER BY i.priority::int, i.id LIMIT {limit}
