-- The pipelined ack's delete (pipelined_ack_ctes.sql) by a confined worker,
-- which may not delete from items itself (migration 39): through
-- delete_items(), by ctid alone, rows of its queues only.
SELECT d.id, d.queue, d.dedup_key FROM {schema}.delete_items($6::tid[], NULL) d
