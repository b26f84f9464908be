-- The common Finish, without a claim ahead (ack_claim.sql has one):
-- every item acked, some with results. Returns ('p', part) for each part
-- still held at its epoch and ('n', the count of rows deleted).
--
-- {ack_ctes}: fragments/ack_ctes.sql.
WITH {ack_ctes}
SELECT 'p' AS k, part::bigint AS id FROM f
UNION ALL SELECT 'n', count(*) FROM done
