-- CancelByDedupKey for a role that may not read the queues table itself (a
-- producer's, an operator's: migration 29): the SQL API's
-- cancel_by_dedup_key(), which checks the role's grant on queue $1.
SELECT id, state FROM {schema}.cancel_by_dedup_key($1, $2)
