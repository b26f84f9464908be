-- ReadKafkaOffsets: the next offset of each partition of topic $2 ingested
-- into queue $1.
SELECT partition, next_offset FROM {schema}.kafka_offsets
WHERE queue = $1 AND topic = $2 ORDER BY partition
