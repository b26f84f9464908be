-- The pipelined ack's claim ahead replaces its part's current record
-- (pipelined_ack_claim.sql) by a new row, as a role that may delete from
-- part_claims (migration 9 says why a new row).
replaced AS (
  DELETE FROM {schema}.part_claims c
  WHERE c.queue = $1 AND c.part = $7 AND c.epoch = $8 AND EXISTS (SELECT 1 FROM pick)
    AND c.seq = coalesce(
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7 AND l.seq = $17),
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7
         AND l.epoch = $8
       ORDER BY l.seq DESC LIMIT 1))
  RETURNING 1),
recorded AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT $1, $7, $8, $13::bigint[] || ARRAY(SELECT k.id FROM pick k) FROM replaced
  RETURNING seq)
