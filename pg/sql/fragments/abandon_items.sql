-- A takeover's mark on the items a dead owner had in flight
-- (take_over_claims.sql), by a role that may update items.
abandoned AS (
  UPDATE {schema}.items i SET attempts = least(i.attempts + 1, 1000000), abandoned_epoch = l.epoch
  FROM left_claims l WHERE i.id = ANY(l.ids)
  RETURNING 1)
