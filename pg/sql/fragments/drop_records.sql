-- A claim's drop of its parts' old records (claim_ctes.sql), through
-- {drop_fn}: drop_claim_records() (migration 33) for a role that may delete
-- from part_claims, drop_claim_records_of_mine() (migration 39) for a
-- confined worker, in a statement that may plan a sequential scan (after
-- plan_guard.sql: drop_records_inline.sql, drop_records_guarded.sql).
replaced AS (
  SELECT d.dropped_part AS part, d.dropped_epoch AS epoch
  FROM (SELECT array_agg(l.tid) AS tids, array_agg(l.epoch) AS epochs FROM current_records l) a
  CROSS JOIN LATERAL {schema}.{drop_fn}(a.tids, a.epochs) d)
