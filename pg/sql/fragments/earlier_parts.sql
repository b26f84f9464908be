-- At most {limit} of the key's older items (than `i`) in the parts it had
-- before the queue's grows (i.part % c for each earlier count c). Each
-- earlier part is probed on its own, `j.part` bound to one value: written
-- as `j.part = ANY(earlier parts)`, a plan made while `items` was empty (or
-- its statistics were) scanned items_key for the key across every part of
-- the queue, since the key is not a prefix of that index without the part
-- (9.7 ms and 650 buffers per probe; docs/benchmarks-history.md "Ordered
-- queues over empty statistics"). The LIMIT keeps each probe a subquery
-- evaluated per earlier part, not a join the planner could turn around.
-- The bound on the id is a row of items_key's columns, which items_pkey
-- cannot serve (ready_condition.sql says why).
SELECT 1
          FROM unnest((SELECT g.grown_from FROM {schema}.queues g WHERE g.name = {queue})) AS c(n)
          CROSS JOIN LATERAL (
            SELECT 1 FROM {schema}.items j
            WHERE j.queue = {queue} AND j.part = i.part % c.n AND j.key = i.key
              AND (j.key, j.id) < (i.key, i.id)
            LIMIT {limit}) x
          WHERE c.n <= i.part
