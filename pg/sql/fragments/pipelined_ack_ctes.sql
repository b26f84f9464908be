-- The pipelined ack's CTEs ({fence}: fence_cte.sql): the delete by ctid
-- alone, and the results rows ({res}: pipelined_res.sql, or
-- pipelined_res_results.sql when the handler returned results).
{fence},
done AS (
  {delete_done}),
{res}
