-- A claim's drop of its parts' old records (claim_ctes.sql) by a confined
-- worker, in a statement run after plan_guard.sql: through the rule of
-- claim_record_drops (migration 39), planned into the statement.
replaced AS (
  INSERT INTO {schema}.claim_record_drops (tids, epochs)
  SELECT array_agg(l.tid), array_agg(l.epoch) FROM current_records l
  RETURNING part, epoch)
