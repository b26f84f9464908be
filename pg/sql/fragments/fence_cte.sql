-- The fence every Finish begins with: our session_parts rows still at the
-- claimed epochs ($3 parts, $4 epochs; $1 queue, $2 session), locked FOR
-- SHARE until commit. Items of other parts are left alone.
f AS (
  SELECT sp.part FROM {schema}.session_parts sp
  JOIN unnest($3::int[], $4::bigint[]) AS w(part, epoch)
    ON sp.part = w.part AND sp.epoch = w.epoch
  WHERE sp.queue = $1 AND sp.session_id = $2
  FOR SHARE OF sp)
