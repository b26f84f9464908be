-- The pipelined ack's claim ahead replaces its part's current record
-- (pipelined_ack_claim.sql) by a new row, as a role that may delete from
-- part_claims (migration 9 says why a new row).
replaced AS (
  DELETE FROM {schema}.part_claims c
  {current_record}
  RETURNING 1),
recorded AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT $1, $7, $8, $13::bigint[] || ARRAY(SELECT k.id FROM pick k) FROM replaced
  RETURNING seq)
