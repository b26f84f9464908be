-- DeleteOutbox: the rows $1 (ids), once Kafka has acknowledged them.
DELETE FROM {schema}.outbox WHERE id = ANY($1::bigint[])
