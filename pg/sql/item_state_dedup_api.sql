-- GetItemStateByDedupKey for a role that may not read the item tables
-- itself: the SQL API's item_state_by_dedup_key() (item_state_api.sql).
SELECT id, state, attempts, result, last_error
FROM {schema}.item_state_by_dedup_key($1, $2)
