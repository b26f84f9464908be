-- A takeover's mark on the items a dead owner had in flight
-- (take_over_claims.sql) by a confined worker, which may not update items
-- (migration 40): through item_abandons' rule, of its queues only.
abandoned AS (
  INSERT INTO {schema}.item_abandons (ids, epoch)
  SELECT l.ids, l.epoch FROM left_claims l
  RETURNING 1)
