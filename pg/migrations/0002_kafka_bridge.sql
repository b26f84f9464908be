-- Migration 2: kafka bridge: item origins, kafka_offsets, outbox
--
-- The Kafka bridge: an ingested item keeps its origin
-- (topic, partition, offset) and headers in nullable columns, which cost
-- nothing for other items (no default: no table rewrite, NULLs live in the
-- null bitmap). kafka_offsets is keyed by queue too, so one topic can feed
-- two queues; the bridge moves next_offset by compare-and-set in the same
-- transaction as the items (producer/README.md). outbox is read in id order
-- and its rows deleted after delivery, so it stays small.

ALTER TABLE {schema}.items
  ADD COLUMN origin_topic     text,
  ADD COLUMN origin_partition int,
  ADD COLUMN origin_offset    bigint,
  ADD COLUMN headers          jsonb;

CREATE TABLE {schema}.kafka_offsets (
  queue         text COLLATE "C" NOT NULL,
  topic         text COLLATE "C" NOT NULL,
  partition     int NOT NULL,
  next_offset   bigint NOT NULL CHECK (next_offset >= 0),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, topic, partition)
);

CREATE TABLE {schema}.outbox (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  topic         text NOT NULL,
  key           bytea,
  payload       bytea NOT NULL,
  headers       jsonb,
  created_at    timestamptz NOT NULL DEFAULT now()
);
