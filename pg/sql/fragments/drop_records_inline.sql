-- A claim's drop of its parts' old records (claim_ctes.sql) by a role that
-- may delete from part_claims, in a statement run after plan_guard.sql:
-- planned into the statement, a TID scan per record (the guard's
-- enable_seqscan = off rules out a sequential scan), where a call of
-- drop_claim_records() (drop_records.sql) sets up PL/pgSQL and its SET
-- clause in every claim: 0.15 ms of a 0.38 ms claim that picks up one item
-- (auto_explain; docs/benchmarks-history.md). The function's DELETE took a
-- snapshot of its own, so a record a cancel rewrote after the claim began
-- (a new row version, at a new ctid) was not found; here the statement's
-- snapshot finds the old version, and the xmin it saw keeps the rewritten
-- one from being deleted when the DELETE follows the update, whether or not
-- the server's TID scan rechecks the ctid then (PostgreSQL minor releases
-- before that fix did not).
replaced AS (
  DELETE FROM {schema}.part_claims c USING current_records l
  WHERE c.ctid = l.tid AND c.epoch = l.epoch
    AND c.xmin = (SELECT s.xmin FROM {schema}.part_claims s WHERE s.ctid = l.tid)
  RETURNING c.part, c.epoch)
