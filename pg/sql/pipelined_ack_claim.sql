-- The pipelined ack (pipelined_ack.sql) that also claims ahead, from one
-- part:
-- - The claim reads one part ($7 at epoch $8, after ($9, $10), at most
--   $11, KeyBound $12: {reads}, fragments/ready_items.sql), so the claim
--   record is that part's row, rewritten from what the caller has in
--   flight there ($13) and the claimed ids, replaced as the general claim
--   replaces it (fragments/claim_ctes.sql) but without its unnest, LATERAL
--   and DISTINCT (with the binary rows: 4 sessions 142k/154k/178k ->
--   147k/190k/204k items/s, docs/benchmarks-history.md). $14 are the ids
--   the read skips at or before the cursor ($15, $16): in flight or being
--   finished. $17 is the record to replace (ClaimPart::record, 0: the
--   latest at $8); a claim that takes nothing leaves the record as it is
--   (its ids that were acked now are gone, and a record's ids count only
--   while their items are there), so the caller's record stays the one to
--   replace. As every claim, it returns no rows when it replaced no record
--   (fragments/claimed_rows.sql says why); the ack commits still.
--   {bytes_before} and {bytes_bound}: the byte-bounded form's
--   (ClaimRequest::max_bytes; its bound is $18), else empty.
-- - A queue without a key bound (KeyBound 0: neither ordered nor key
--   concurrency) has forms of its own, whose bound is the literal 0: the
--   planner folds ready_condition.sql's key probes away, so a generic plan
--   no longer carries their subplans (index scans of `items`, the
--   grown_from reads) that every execution locked, started and shut down
--   without running them (server CPU per item -8-9 % at 4 and 16 sessions,
--   docs/benchmarks-history.md). $12 must then be 0 ({unkeyed_only}: the
--   statement claims nothing otherwise, rather than skip the probes an
--   ordered queue needs).
-- - Its rows are raw columns, returned in binary by the pipeline
--   (ItemFromBinary): no date_part, no hex, no text conversion of a ctid.
-- - The form with the handler's results (pipelined_res_results.sql) takes
--   their ids and bytes as its last two parameters.
-- It returns the claimed rows (one row of NULLs when there are none, so
-- the check always runs).
WITH {ack_ctes},
pick AS (
  SELECT {columns_of_x} FROM (
  SELECT r.*{bytes_before} FROM ({reads}) r
  WHERE EXISTS (SELECT 1 FROM {schema}.session_parts sp
                WHERE sp.queue = $1 AND sp.part = $7 AND sp.epoch = $8){unkeyed_only}) x{bytes_bound}),
{replace_record}
SELECT p.id, p.key, p.dedup_key, p.priority, p.attempts + 1, p.payload, p.enqueued_at,
       p.run_at, p.tid, (SELECT seq FROM recorded), p.group_id
FROM ({check}) c LEFT JOIN pick p ON c.ok AND EXISTS (SELECT 1 FROM recorded)
