-- The onward read (ready_onward.sql) of a claim with a key bound. An
-- ordered read on from a cursor ({windowed}) looks at most 8 times its
-- limit of the part's rows (ready_window.sql): at most one item of a key
-- is ready, so in a backlog of few keys nearly every row is held back, and
-- a read that went on until its limit walked the whole backlog on every
-- claim (bench/held_snapshot_ordered.sh). What lies past that window is
-- found by the next read from the head, which looks at every row (every
-- kOrderedRescans rescan_intervals: ClaimSchedulerOptions::ordered), as
-- key-concurrency reads, always from the head, do ({flat}). The windowed
-- and the flat form are branches of one read, each gated by a condition
-- on its parameters alone (ready_window_gate.sql: a one-time filter, so
-- the other branch never runs, and a plan for known values drops it), so a
-- key-concurrency read keeps the flat form's plan, which stops at its
-- limit.
SELECT * FROM (({windowed})
  UNION ALL
  ({flat})) o
