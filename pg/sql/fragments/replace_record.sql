-- The pipelined ack's claim ahead drops its part's current record
-- (pipelined_ack_claim.sql), by a role that may delete from part_claims.
replaced AS (
  DELETE FROM {schema}.part_claims c
  WHERE c.queue = $1 AND c.part = $7 AND c.epoch = $8 AND EXISTS (SELECT 1 FROM pick)
    AND c.seq = coalesce(
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7 AND l.seq = $17),
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7
         AND l.epoch = $8
       ORDER BY l.seq DESC LIMIT 1))
  RETURNING 1)
