-- Store::Prune: the function checks the name, the queue and the age.
SELECT results, cancelled, groups, dead_items
FROM {schema}.prune($1, $2::bigint * interval '1 microsecond', $3::boolean)
