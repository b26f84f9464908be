-- The pipelined ack's delete (pipelined_ack_ctes.sql) by a confined worker,
-- which may not delete from items itself (migration 39): an insert into
-- item_acks, whose rule deletes the items at those addresses, of its
-- queues only, planned into this statement as one TID scan.
INSERT INTO {schema}.item_acks (tids) VALUES ($6::tid[])
  RETURNING id, queue, dedup_key
