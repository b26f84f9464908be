-- QueuesWithWork: of the queues given ($1), those that hold an item (ready,
-- delayed or a held group's: the claim and NextDue of the poke that follows
-- tell which) or a schedule that is due. One statement for every queue of a
-- worker: the sweep that stands in for each idle queue's own polls
-- (consumer/worker.h). EXISTS stops at a queue's first entry of items_ready.
SELECT q.name FROM unnest($1::text[]) AS q(name)
WHERE EXISTS (SELECT 1 FROM {schema}.items i WHERE i.queue = q.name)
   OR EXISTS (SELECT 1 FROM {schema}.schedules s
              WHERE s.queue = q.name AND s.error IS NULL
                AND (s.next_tick IS NULL OR s.next_tick <= now()))
