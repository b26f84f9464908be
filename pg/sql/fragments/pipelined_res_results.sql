-- The pipelined ack's results rows when the handler returned results
-- ({result_ids}: the ids that have one, in binary; {results}: their bytes,
-- a bytea[] in binary, so neither side converts them to hex and back): a
-- row for each of those, and for each item with a dedup key, as
-- pipelined_res.sql writes. A form of its own, so that the common ack does
-- not start a join it does not need.
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, result, finished_at)
  SELECT d.id, d.queue, d.dedup_key, r.result, statement_timestamp()
  FROM done d LEFT JOIN unnest({result_ids}::bigint[], {results}::bytea[]) AS r(id, result)
    ON r.id = d.id
  WHERE d.dedup_key IS NOT NULL OR r.id IS NOT NULL
  RETURNING 1)
