-- The common Finish's CTEs after the fence ({fence}: fence_cte.sql): every
-- item acked, every row where the claim saw it ($5 ids, $6 ctids; results
-- for some: $7 ids, $8 hex). The deletes go through ack_items() (migration
-- 4): a TID scan, the id check making a reused ctid harmless, and a
-- fallback by id for rows a table rewrite moved. It is a function because
-- its statements are planned with enable_seqscan off: a generic plan made
-- while the table was nearly empty would otherwise scan the whole table for
-- every batch once a backlog has come. The statement's fixed cost (each
-- CTE is a plan node to start and end) is most of what an ack costs beyond
-- its writes, so this form has no CTE it does not need, and it returns the
-- count, not the ids.
{fence},
done AS ({delete_done_lean}),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, result, finished_at)
  SELECT d.acked_id, d.acked_queue, d.acked_dedup_key, decode(r.result, 'hex'),
         statement_timestamp()
  FROM done d LEFT JOIN unnest($7::bigint[], $8::text[]) AS r(id, result) ON r.id = d.acked_id
  WHERE d.acked_dedup_key IS NOT NULL OR r.id IS NOT NULL
  RETURNING 1)
