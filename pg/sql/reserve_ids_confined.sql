-- reserve_ids.sql for a confined worker (migration 40): its ids come from
-- reserve_item_ids(), which records them as its, since its items may have
-- no other ids (the INSERT policy's fresh_item_id()).
WITH q AS (SELECT parts FROM {schema}.queues WHERE name = $1),
s AS (SELECT v FROM q CROSS JOIN {schema}.reserve_item_ids($2::int) AS v)
SELECT (SELECT parts FROM q), min(v), max(v), count(v),
       (extract(epoch FROM now()) * 1000000)::bigint
FROM s
