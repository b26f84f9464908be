-- A CTE for the general Finish: retried and dead items ($9 ids, $10 parts)
-- are no longer in flight, so they come off their parts' claim records (a
-- record that still listed them would count them in flight in `partq
-- status`, and as abandoned if this session died). With a claim in the
-- same statement, the parts it takes from are left to it ({not_claimed}):
-- `recorded` replaces those without them, and one statement must not
-- change a row twice. Only each part's latest record is current (migration
-- 9): that row is changed in place, which a retry or a dead item (rare)
-- can afford, and found by its ctid (a join by key read the queue's every
-- dead record, as a claim's replace did: migration 33).
unrecorded AS (
  UPDATE {schema}.part_claims c
  SET ids = ARRAY(SELECT x FROM unnest(c.ids) AS x WHERE x <> ALL($9::bigint[]))
  FROM (SELECT p.part, l.tid FROM (SELECT DISTINCT part FROM unnest($10::int[]) AS u(part)) p
        CROSS JOIN LATERAL (
          SELECT c2.ctid AS tid FROM {schema}.part_claims c2
          WHERE c2.queue = $1 AND c2.part = p.part ORDER BY c2.seq DESC LIMIT 1) l) cur
  WHERE c.ctid = cur.tid AND cardinality($9::bigint[]) > 0{not_claimed}
  RETURNING 1)
