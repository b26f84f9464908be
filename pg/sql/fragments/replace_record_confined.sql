-- The pipelined ack's claim ahead replaces its part's current record
-- (pipelined_ack_claim.sql), as a confined worker, which may not delete
-- from part_claims (migration 39): by updating it, under a new seq, so the
-- row version is new in the primary key as a new row's would be (no read
-- walks the old versions, as migration 9 wants), and without a function
-- call per batch.
recorded AS (
  UPDATE {schema}.part_claims c
  SET ids = $13::bigint[] || ARRAY(SELECT k.id FROM pick k),
      seq = nextval('{schema}.claim_seq'), claimed_at = now()
  {current_record}
  RETURNING c.seq)
