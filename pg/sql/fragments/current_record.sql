-- The part's current record c (replace_record.sql, replace_record_confined.sql),
-- when the claim ahead took something: the one the caller named ($17), or
-- the newest at its epoch $8.
WHERE c.queue = $1 AND c.part = $7 AND c.epoch = $8 AND EXISTS (SELECT 1 FROM pick)
    AND c.seq = coalesce(
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7 AND l.seq = $17),
      (SELECT l.seq FROM {schema}.part_claims l WHERE l.queue = $1 AND l.part = $7
         AND l.epoch = $8
       ORDER BY l.seq DESC LIMIT 1))
