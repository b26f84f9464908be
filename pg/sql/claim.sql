-- Claim (store.h, ClaimRequest): reads, and writes only the claim
-- records. {claim_ctes}: fragments/claim_ctes.sql with $1 queue, $2
-- session and the claim's parameters from $3 on (pg_store_items.cc,
-- AppendClaimParams). Its forms (ClaimStatement, pg_store_sql.cc): "claim", for
-- a queue with a key bound (ordered, key concurrency), not fair, keeps the
-- plan the planner picks (PgStore::Claim says why: its key probes); the
-- others run the pipelined forms, after plan_guard.sql, and commit
-- asynchronously (fragments/claim_async_commit.sql): partq_pl_claim
-- without a key bound, partq_pl_claim_fair for fair queues. Each has a
-- byte-bounded form (name + "_bytes", ClaimRequest::max_bytes).
WITH {claim_ctes}
SELECT {claimed_rows}
ORDER BY p.priority, p.id
