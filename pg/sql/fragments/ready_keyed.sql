-- The onward read (ready_onward.sql) of a claim with a key bound. An
-- ordered read ({windowed}) looks at most 8 times its limit of the part's
-- rows from where it starts (ready_window.sql): at most one item of a key
-- is ready, so in a backlog of few keys nearly every row is held back, and
-- a read that went on until its limit walked the whole backlog, a probe
-- per row: a backlog that grew (behind a held snapshot,
-- bench/held_snapshot_ordered.sh) made every read from the head slower,
-- and the queue stopped. Read from the head, it adds each key's head
-- ({heads}: ready_heads.sql); read on from a cursor, a released key's next
-- item comes from ready_released.sql, and what lies past the window from
-- the next read from the head (every kOrderedRescans rescan_intervals:
-- ClaimSchedulerOptions::ordered). Key-concurrency reads, always from the
-- head, read on until their limit ({flat}). The branches are each gated by
-- conditions on the parameters alone (ready_window_gate.sql: a one-time
-- filter, so a branch not taken never runs, and a plan for known values
-- drops it), so a key-concurrency read keeps the flat form's plan, which
-- stops at its limit. What two branches both return is returned once.
SELECT * FROM (
  SELECT DISTINCT ON (o.id) * FROM (({windowed})
    UNION ALL
    ({flat})
    UNION ALL
    ({heads})) o
  ORDER BY o.id) d
ORDER BY d.priority, d.id LIMIT {limit}
