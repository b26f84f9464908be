-- ready_condition.sql's ordered probe without a bound: is there a live item
-- of the key before `i` in the part? Read down from the item, where those
-- sit (ready_condition.sql says why).
(SELECT j.id FROM {schema}.items j
          WHERE j.queue = {queue} AND j.part = i.part AND j.key IS NOT NULL
            AND (j.key, j.id) < (i.key, i.id) AND (j.key, j.id) >= (i.key, -9223372036854775808)
          ORDER BY j.key DESC, j.id DESC LIMIT 1) IS NULL
