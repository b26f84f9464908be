-- CancelGroup for a role that may not read or write the tables itself (a
-- producer's, an operator's: migration 29): the SQL API's group_cancel(),
-- which checks the role's grant on queue $1, marks the group cancelled and
-- cancels its ready items in one transaction.
SELECT {schema}.group_cancel($1, $2, $3)
