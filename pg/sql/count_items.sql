-- CountItems: the items of queue $1, counted up to $2. Counting stops at the
-- limit: the bridge only needs "above the high-water mark or not", and a
-- capped count reads at most $2 index entries.
SELECT count(*) FROM (SELECT 1 FROM {schema}.items WHERE queue = $1 LIMIT $2) x
