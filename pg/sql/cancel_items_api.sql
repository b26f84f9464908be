-- CancelItems for a role that may not read the item tables itself (a
-- producer's, an operator's: migration 29): the SQL API's cancel_items(),
-- which checks the role's grant on queue $1, called once per id: such a
-- role cannot read which part each id is in (cancel_parts.sql does for the
-- owner), and a transaction that cancels in two parts can deadlock with a
-- claim of both (cancel_items() says so).
SELECT id, state FROM {schema}.cancel_items($1, $2::bigint[])
