-- The common Finish (AckCtes), without and with a claim ahead. With
-- one, a queue without a key bound, and a fair one, run
-- kPipelinedLeanAckClaim(Fair) (PipelinedStatements) instead.
--
-- {ack_ctes}: AckCtes() (pg_store_sql.cc).
WITH {ack_ctes}
SELECT 'p' AS k, part::bigint AS id FROM f
UNION ALL SELECT 'n', count(*) FROM done
