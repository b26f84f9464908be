-- The lean ack's delete (ack_ctes.sql) by a confined worker (migration 39):
-- delete_items(), as ack_items() deletes, rows of its queues only.
SELECT d.id AS acked_id, d.queue::text AS acked_queue, d.dedup_key::text AS acked_dedup_key
FROM {schema}.delete_items($6::tid[], $5::bigint[]) d
