-- A claim in a transaction of its own commits asynchronously
-- (synchronous_commit off for this transaction only; claim_ctes.sql, `own`):
-- a record lost in a server crash only means those items are not counted
-- as abandoned, and the claim saves a WAL flush.
  WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL
