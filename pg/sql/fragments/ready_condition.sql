-- What makes an item `i` of the part ready for a claim (ready_items.sql
-- says why statement_timestamp()). {bound} is an int expression, KeyBound
-- of the claim: 1 (ordered) probes for any older live item of the key, as
-- it always did; N > 1 (key concurrency) counts them, at most N from each
-- probe, and wants fewer than N; 0 evaluates neither. The two forms are
-- apart so an ordered queue's probe stays the NOT EXISTS it was.
--
-- {queue}, {part}: SQL expressions. {earlier_bound} and {earlier_one}:
-- earlier_parts.sql with its limit {bound}::int and 1.
i.queue = {queue} AND i.part = {part}
      AND i.run_at <= statement_timestamp() AND i.abandoned_epoch IS NULL
      AND ({bound}::int < 2 OR i.key IS NULL OR (
        (SELECT count(*) FROM (
          SELECT 1 FROM {schema}.items j
          WHERE j.queue = {queue} AND j.part = i.part AND j.key = i.key AND j.id < i.id
          LIMIT {bound}::int) o)
        + (SELECT count(*) FROM ({earlier_bound}
          LIMIT {bound}::int) e) < {bound}::int))
      AND ({bound}::int <> 1 OR i.key IS NULL OR (NOT EXISTS (
        SELECT 1 FROM {schema}.items j
        WHERE j.queue = {queue} AND j.part = i.part AND j.key = i.key
          AND j.id < i.id)
      AND NOT EXISTS ({earlier_one})))
