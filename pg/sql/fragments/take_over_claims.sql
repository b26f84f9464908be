-- CTEs for a statement whose CTE {src} yields (part, epoch) of parts this
-- session just took over (join.sql, acquire.sql): the claim record an
-- earlier owner left there is read (a graceful owner deleted its own, so
-- only a dead owner's remain) and its items marked abandoned, one attempt
-- counted each (store.h, "Claims"; at most 1,000,000, the range migration
-- 38 holds attempts to, so no item a worker set there stops the takeover);
-- then those records go (through delete_rows(), migration 39: a worker
-- role may not delete from part_claims; `fresh` reads `cleared`, so it
-- runs whenever there is a part to take over) and the part
-- gets an empty one at the new epoch, which the tenure's claims replace
-- (only at that epoch: a session that lost the part cannot write it). $1
-- is the queue.
-- The abandoned items are found by id alone (ids are unique across
-- queues): with `i.queue = $1` the planner could read the queue through
-- items_ready and match ids on the way, and it did whenever the table's
-- statistics were taken while the queue was empty (most moments of a
-- queue that keeps up): every join and every acquisition then read the
-- whole backlog, 3-10 s each under millions of items (issue 27's soak),
-- long enough for sessions to expire and rebalance again. Nor by part: the
-- record is the part's, so its ids are too, and `i.part = l.part` was a
-- way in (the part is items_ready's second column, a walk of the whole
-- index) that the planner took when a busy part's records, thousands of
-- dead entries in part_claims until vacuum, made the other order look
-- dear: 0.4-1.1 s per acquisition of one part in the soak. By id alone the
-- only cheap way is items_pkey; a scan of the table is costed by its real
-- size.
left_claims AS (
  SELECT c.part, c.epoch, c.ids FROM {schema}.part_claims c JOIN {src} n ON c.part = n.part
  WHERE c.queue = $1 AND c.epoch < n.epoch),
{abandon_items},
cleared AS (
  SELECT count(*) FROM {schema}.delete_rows('part_claims', ARRAY(
    SELECT c.ctid FROM {schema}.part_claims c JOIN {src} n ON c.part = n.part
    WHERE c.queue = $1 AND c.epoch < n.epoch)) d),
fresh AS (
  INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
  SELECT $1, n.part, n.epoch, '{}' FROM {src} n, cleared
  WHERE NOT EXISTS (SELECT 1 FROM {schema}.part_claims c
                    WHERE c.queue = $1 AND c.part = n.part AND c.epoch >= n.epoch)
  RETURNING 1)
