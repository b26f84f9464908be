-- The claimed rows, as every claiming statement returns them
-- (pg_store_items.cc, ItemFromRow), and where it reads them from: only
-- those of parts whose claim record it replaced. A claim that found its
-- record replaced under it (a cancel took it: cancel_items(), migration
-- 13) read items in a snapshot that may still show cancelled ones, so it
-- returns none from that part; the items stay ready for its next claim.
-- The rows go out in the order the read took them (a key's in id order,
-- a fair read's by turns; claim.sql then sorts its own by priority and id):
-- `pick` drives a nested loop over the lateral
-- lookup of its record, which OFFSET 0 keeps from being pulled up into a
-- join the planner may hash with `pick` on the hashed side, and a hash
-- table hands a bucket's rows back newest first (a fair queue's batches
-- claimed ahead came in reverse:
-- StoreConformance.EveryClaimHandsAKeysItemsInIdOrder).
p.id, p.part, p.key, p.dedup_key, p.priority, p.attempts + 1, p.payload,
       (date_part('epoch', p.enqueued_at) * 1000000)::bigint,
       (date_part('epoch', p.run_at) * 1000000)::bigint, p.epoch, p.suspect, p.tid::text,
       r.seq, p.group_id
FROM pick p CROSS JOIN LATERAL (SELECT r.seq FROM recorded r WHERE r.part = p.part OFFSET 0) r
