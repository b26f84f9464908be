-- IngestKafka's compare-and-set of one partition's next offset ($1 queue,
-- $2 topic, $3 partition, $4 the offset expected, $5 the new one). With $4
-- NULL the row must not exist yet (insert); else it must hold $4 (update).
-- Under READ COMMITTED a concurrent writer of the same row makes this
-- statement wait, then re-check the condition against the committed row, so
-- two bridges can never both move a partition from the same offset: one of
-- them gets 0.
WITH upd AS (
  UPDATE {schema}.kafka_offsets SET next_offset = $5, updated_at = now()
  WHERE queue = $1 AND topic = $2 AND partition = $3 AND next_offset = $4::bigint
  RETURNING 1),
ins AS (
  INSERT INTO {schema}.kafka_offsets (queue, topic, partition, next_offset)
  SELECT $1, $2, $3, $5 WHERE $4::bigint IS NULL
  ON CONFLICT (queue, topic, partition) DO NOTHING
  RETURNING 1)
SELECT (SELECT count(*) FROM upd) + (SELECT count(*) FROM ins)
