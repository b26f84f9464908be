-- The pipelined ack's delete (pipelined_ack_ctes.sql) by a role that may
-- delete from items: by ctid alone.
DELETE FROM {schema}.items i WHERE i.ctid = ANY($6::tid[])
  RETURNING i.id, i.queue, i.dedup_key
