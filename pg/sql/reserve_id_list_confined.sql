-- reserve_id_list.sql for a confined worker (migration 40): $1 ids one by
-- one, recorded as its (reserve_ids_confined.sql).
SELECT v FROM {schema}.reserve_item_ids($1::int) AS v
