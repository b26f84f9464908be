-- ready_condition.sql's ordered probe from a bound {probe_from} (an id
-- expression): is the key's first live entry at or after the bound `i`
-- itself, or past it? Read up from the bound, which ends the scan at that
-- entry (ready_condition.sql says why not down to it). When the item at
-- the bound is in flight ({skip}: the claim's ids in flight), it is that
-- entry, and the probe is not run: in a backlog that is most of an
-- ordered part's keys, and reading up passes the acked entries between
-- the bound and the first live one, where a read down from the item met
-- the live one right below it first (the read up alone cost the ordered
-- drain 0.82-0.93x). A bound that is the least bigint (a key without a
-- floor or a cursor) reads down from the item instead ({down}:
-- ordered_probe_down.sql): read up, it would pass every acked entry of
-- the key first.
CASE WHEN {probe_from} = -9223372036854775808 THEN {down}
      ELSE NOT ({probe_from} < i.id AND {probe_from} = ANY({skip}))
      AND coalesce((SELECT j.id FROM {schema}.items j
          WHERE j.queue = {queue} AND j.part = i.part AND j.key IS NOT NULL
            AND (j.key, j.id) >= (i.key, {probe_from})
            AND (j.key, j.id) <= (i.key, 9223372036854775807)
          ORDER BY j.key, j.id LIMIT 1), i.id) >= i.id END
