-- Migration 33: a claim drops its part's old record by its row's address
--
-- A claim replaces each part's record in part_claims (a new row, the old one
-- deleted) in the claim's own statement. That delete was a join of the
-- records the claim found (by `(queue, part, seq)`, an index probe each) with
-- part_claims, and with the table's statistics saying a queue has a few rows,
-- a generic plan read it as a hash join over every entry of the queue in
-- part_claims_pkey: at 5,000 items/s, 10,000-14,000 entries of records
-- replaced since the last vacuum, and a claim took 1.1 ms, an ack with its
-- claim 1.4-1.7 ms, where 0.3-0.4 ms will do (issue 51). The claim now finds each old record's ctid with the probes it
-- already makes, and drop_claim_records() deletes those rows through a TID
-- scan: in a function, so that its plan is made with enable_seqscan off (the
-- only other way to a row by its address), as ack_items() does for items.
-- Only a row still at the claiming epoch goes, so a session that lost the
-- part cannot replace the new owner's record; a row changed meanwhile keeps
-- its record and that part's claim returns nothing this time.

CREATE FUNCTION {schema}.drop_claim_records(tids tid[], epochs bigint[])
RETURNS TABLE (dropped_part int, dropped_epoch bigint)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
  RETURN QUERY
    DELETE FROM {schema}.part_claims c USING unnest(tids, epochs) AS l(tid, epoch)
    WHERE c.ctid = l.tid AND c.epoch = l.epoch
    RETURNING c.part, c.epoch;
END
$$;
