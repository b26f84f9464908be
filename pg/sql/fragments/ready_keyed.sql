-- The onward read (ready_onward.sql) of a claim with a key bound (ordered:
-- 1; key concurrency: N). It looks at a window of the part's rows from
-- where it starts, 8 times its limit from the head and at most 256 rows or
-- its limit on from a cursor ({windowed}: ready_window.sql says why), probing only
-- the rows within their key's first N there: few items of a key are ready,
-- so in a backlog of few keys nearly every row is held back, and a read
-- that went on until its limit walked the whole backlog, a probe per row:
-- a backlog that grew (behind a held snapshot,
-- bench/held_snapshot_ordered.sh) made every read from the head slower, and
-- the queue stopped. Read from the head, it adds each key's first N items
-- ({heads}: ready_heads.sql), and only when those two found nothing does it
-- walk on as that read did ({flat}): a ready item past the window that no
-- key's first items hold (a keyless one, or one of a key past the heads'
-- keys) is then found, as before, while a part with anything ready in its
-- window or among its keys' first items pays for no walk. An ordered read
-- on from a cursor finds a released key's next item through
-- ready_released.sql, and what lies past the window at the next read from
-- the head (every kOrderedRescans rescan_intervals:
-- ClaimSchedulerOptions::ordered); key-concurrency reads are always from
-- the head. The heads and the walk are gated by conditions on the
-- parameters and on what was found (one-time filters: neither runs from a
-- cursor, the walk not when something was found). What the window and the
-- heads both return is returned once.
SELECT * FROM (
  WITH found AS MATERIALIZED (
    SELECT DISTINCT ON (o.id) * FROM (({windowed})
      UNION ALL
      ({heads})) o
    ORDER BY o.id)
  SELECT * FROM found
  UNION ALL
  ({flat})) d
ORDER BY d.priority, d.id LIMIT {limit}
