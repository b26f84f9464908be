-- What makes an item `i` of the part ready for a claim (ready_items.sql
-- says why statement_timestamp()). {bound} is an int expression, KeyBound
-- of the claim: 1 (ordered) probes for any older live item of the key, as
-- it always did; N > 1 (key concurrency) counts them, at most N from each
-- probe, and wants fewer than N; 0 evaluates neither. The two forms are
-- apart so an ordered queue's probe stays a test for one row.
--
-- The probes in the part without a bound (below) read the key's entries
-- down from the item (the ordered one a scalar subquery: PostgreSQL drops
-- an EXISTS subquery's ORDER BY): a held-back item finds the live ones
-- before it (in flight, or held back too) at once, where a read up from
-- the key's first entry walked every acked entry vacuum has not removed
-- (all of them behind a held snapshot) first. Only an item that is ready
-- walks them.
--
-- A released key's next item (ready_released.sql), a fair key read on
-- from its cursor (fair_items.sql) and an item of a key with a floor
-- (key_floor.sql) are probed only from that item on (the bound: rel.id,
-- the cursor or the floor, the least bigint for a key without one): when
-- it was claimed no older item of the key was live, so the walk below it,
-- through every entry a held snapshot keeps, found nothing but cost one
-- heap visit per entry, on every claim of the key
-- (bench/held_snapshot_ordered.sh). The finished item itself is probed: a
-- retried one is still live and holds its key. Such a probe
-- (ordered_probe_up.sql) reads UP from the bound, to the key's first live
-- entry at or after it (the item is ready when that is the item itself,
-- or past it), not down to it: a btree stops a scan at a row comparison
-- only when the column that decides it is the comparison's first, so a
-- read down from the item with the bound `>= (i.key, the bound)` went on
-- below the bound through every entry of the key, each failing the bound
-- on `id` in the index alone (no heap visit, and no entry the server
-- counts as read). Behind a held snapshot that grew with every item of
-- the key acked since it began: an ordered queue at 5,000 items/s fell
-- behind after seven minutes of a hold, 45 % of its claims' CPU in
-- _bt_checkkeys. Read up, the scan starts at the bound, passes the
-- entries between it and the first live one (the item at the floor, once
-- acked) and stops there. Without a bound, or with the least bigint, the
-- probe still reads down from the item (ordered_probe_down.sql): the live
-- items before it (in flight, or held back too) sit right below it, and a
-- read up would pass every acked entry of the key first.
--
-- The bounds are a row of items_key's columns, which the primary key
-- cannot serve, as are all the probes' bounds, with no `j.key = i.key`
-- beside them, and the probes ask for items_key's order, (key, id): with
-- the key equal to the item's, the planner took `ORDER BY j.id` as an
-- order items_pkey gives,
-- and over statistics that found `items` nearly empty (a held snapshot's
-- dead rows and few live ones) it read the probes through items_pkey
-- backwards with the rest as a filter, every later item of the queue; the
-- pkey gives (key, id) only with a sort, which the keyed plan guard keeps the
-- planner from (plan_guard_keyed.sql). `j.key IS NOT NULL` says what
-- the key's equality said before: items_key is partial, and the planner
-- does not infer it from a row comparison. Written
-- `j.id >= `, the planner took the two bounds on id for a narrow range and
-- read it through items_pkey, every item of the queue in it, for as long
-- as the statistics of one ANALYZE stood. So is the bound above, below
-- the item: as `j.id < i.id`, after an ANALYZE that found `items` nearly
-- empty (a held snapshot's dead rows and few live ones) the planner read
-- every probe backwards through items_pkey from the item, every later
-- item of the queue, and an ordered queue stopped for a minute
-- (bench/held_snapshot_ordered.sh with auto_explain).
--
-- {queue}, {part}: SQL expressions. {ordered_probe}: ordered_probe_up.sql
-- or ordered_probe_down.sql. {earlier_bound} and {earlier_one}:
-- earlier_parts.sql with its limit {bound}::int and 1.
i.queue = {queue} AND i.part = {part}
      AND i.run_at <= statement_timestamp() AND i.abandoned_epoch IS NULL
      AND ({bound}::int < 2 OR i.key IS NULL OR (
        (SELECT count(*) FROM (
          SELECT 1 FROM {schema}.items j
          WHERE j.queue = {queue} AND j.part = i.part AND j.key IS NOT NULL
            AND (j.key, j.id) < (i.key, i.id)
            AND (j.key, j.id) >= (i.key, -9223372036854775808)
          ORDER BY j.key DESC, j.id DESC LIMIT {bound}::int) o)
        + (SELECT count(*) FROM ({earlier_bound}
          LIMIT {bound}::int) e) < {bound}::int))
      AND ({bound}::int <> 1 OR i.key IS NULL OR ({ordered_probe}
      AND NOT EXISTS ({earlier_one})))
