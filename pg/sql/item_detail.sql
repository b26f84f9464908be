-- DescribeItem: queue $1's pending item $2 as `partq item` shows it: where
-- it is, when it runs (NULL: held until its group starts), and whether its
-- part's owner has it in flight: its id on the owner's newest claim record
-- at the owner's epoch, as cancel_items() (migration 13) tells in flight.
-- No row when it is not a pending item of the queue (GetItemState says what
-- it is then). Then the server's clock, which says how long the item has
-- been ready or when it is due, and its payload's size and first $3 bytes.
-- Run for the owner of the item tables only (DescribeItem: any other role
-- gets the item's state alone, from the SQL API).
SELECT i.part, i.key, i.group_id, i.priority,
       (date_part('epoch', i.enqueued_at) * 1000000)::bigint,
       CASE WHEN i.run_at = 'infinity' THEN NULL
            ELSE (date_part('epoch', i.run_at) * 1000000)::bigint END,
       EXISTS (SELECT 1 FROM {schema}.session_parts sp
               CROSS JOIN LATERAL (SELECT c.ids FROM {schema}.part_claims c
                                   WHERE c.queue = sp.queue AND c.part = sp.part
                                     AND c.epoch = sp.epoch
                                   ORDER BY c.seq DESC LIMIT 1) c
               WHERE sp.queue = i.queue AND sp.part = i.part AND i.id = ANY(c.ids)),
       (date_part('epoch', now()) * 1000000)::bigint,
       octet_length(i.payload), substring(i.payload FROM 1 FOR $3)
FROM {schema}.items i
WHERE i.id = $2 AND i.queue = $1
