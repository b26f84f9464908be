-- The lean ack's delete (ack_ctes.sql) by a role that may delete from
-- items: ack_items() (migration 4).
SELECT * FROM {schema}.ack_items($6::tid[], $5::bigint[])
