-- Migration 3: dead-letter topic: queues.dlq_topic, origins of dead items
--
-- The dead-letter topic: queues.dlq_topic names a Kafka topic
-- for the queue's dead items (NULL: none; the CHECK repeats
-- ValidateTopicName so a hand-written UPDATE cannot store a name the
-- producer would refuse). dead_items gains the origin columns and headers
-- of items, so a dead item keeps where it came from and the finish
-- statement can put both into the dead-letter message. Nullable columns
-- without defaults: no rewrite of either table.

ALTER TABLE {schema}.queues
  ADD COLUMN dlq_topic text
  CONSTRAINT queues_dlq_topic_name
  CHECK (dlq_topic ~ '^[A-Za-z0-9._-]{1,249}$' AND dlq_topic NOT IN ('.', '..'));

ALTER TABLE {schema}.dead_items
  ADD COLUMN origin_topic     text,
  ADD COLUMN origin_partition int,
  ADD COLUMN origin_offset    bigint,
  ADD COLUMN headers          jsonb;
