-- The pipelined ack's claim ahead drops its part's current record
-- (pipelined_ack_claim.sql), by a confined worker (migration 39): the same
-- row, found here and dropped through drop_claim_records_of_mine(), of its
-- queues only.
replaced AS (
  SELECT 1 FROM {schema}.drop_claim_records_of_mine(ARRAY(
    SELECT c.ctid FROM {schema}.part_claims c
    WHERE c.queue = $1 AND c.part = $7 AND c.epoch = $8 AND EXISTS (SELECT 1 FROM pick)
      AND c.seq = coalesce(
        (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7 AND l.seq = $17),
        (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7
           AND l.epoch = $8
         ORDER BY l.seq DESC LIMIT 1))), ARRAY[$8::bigint]))
