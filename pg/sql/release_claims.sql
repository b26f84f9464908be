-- ReleaseClaims: a static member stopping empties the records of its
-- parts at their epochs (what it had not finished is ready again, no
-- attempt counted) and keeps its session and parts for its restart.
UPDATE {schema}.part_claims c SET ids = '{}'
FROM {schema}.session_parts sp JOIN {schema}.sessions s ON s.id = sp.session_id
WHERE s.id = $2 AND s.incarnation = $3 AND s.queue = $1 AND sp.queue = $1
  AND c.queue = $1 AND c.part = sp.part AND c.epoch = sp.epoch AND c.ids <> '{}'
