-- Finish (finish.sql) and claim ahead (claim.sql's CTEs, its parameters
-- from $17 on): the claim's reads see the statement's snapshot, where the
-- rows this statement deletes or reschedules still look ready, so the
-- batch's ids are skipped explicitly. Returns finish.sql's rows, then
-- ('c', claimed row...). Its forms (FinishClaimStatement,
-- pg_store_sql.cc): "finish_claim" and "finish_claim_fair", unprepared,
-- where the prepared forms do not serve (an ordered or key-concurrency
-- queue's claim ahead); partq_pl_finish_claim (no key bound) and
-- partq_pl_finish_claim_fair, prepared, after plan_guard.sql; each with a
-- byte-bounded form.
--
-- {finish_ctes}: fragments/finish_ctes.sql; {claim_ctes}:
-- fragments/claim_ctes.sql; {unrecord}: fragments/unrecord.sql; {pad},
-- {typed_pad}: fragments/claimed_pad.sql, fragments/claimed_pad_typed.sql.
WITH {finish_ctes},
{claim_ctes},
{unrecord}
SELECT 'p' AS k, part::bigint AS id, {typed_pad}
FROM f
UNION ALL SELECT 'a', id, {pad}
FROM done
UNION ALL SELECT 'r', id, {pad}
FROM retried
UNION ALL SELECT 'd', id, {pad}
FROM dead
UNION ALL
SELECT 'c', {claimed_rows}
