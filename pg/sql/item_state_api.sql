-- GetItemState for a role that may not read the item tables itself (a
-- producer's, a viewer's: migrations 29 and 35): the SQL API's
-- item_state(), which checks the role's grant on queue $1 (migration 29).
SELECT state, attempts, result, last_error FROM {schema}.item_state($1, $2)
