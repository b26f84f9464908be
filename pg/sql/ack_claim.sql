-- The common Finish (ack.sql) with a claim ahead (claim.sql's CTEs, its
-- parameters from $9 on), skipping the batch being acked. Its forms
-- (AckClaimStatement, pg_store_sql.cc): "ack_claim", for a queue with a
-- key bound, not fair; partq_pl_lean_ack_claim (no key bound) and
-- partq_pl_lean_ack_claim_fair, after plan_guard.sql, where the pipelined
-- ack (pipelined_ack_claim.sql) does not serve: a claim of several parts,
-- a suspect probe, a fair queue. Each has a byte-bounded form.
--
-- {ack_ctes}: fragments/ack_ctes.sql; {claim_ctes}:
-- fragments/claim_ctes.sql; {pad}, {typed_pad}: fragments/claimed_pad.sql,
-- fragments/claimed_pad_typed.sql.
WITH {ack_ctes},
{claim_ctes}
SELECT 'p' AS k, part::bigint AS id, {typed_pad}
FROM f
UNION ALL SELECT 'n', count(*), {pad}
FROM done
UNION ALL
SELECT 'c', {claimed_rows}
