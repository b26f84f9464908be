-- Finish's CTEs ($1 queue, $2 session, $3/$4 fence parts and epochs, $5-$8
-- acks: id, part, ctid, result as hex; $9-$14 other outcomes: id, part,
-- dead, delay in µs, refund, error; $15 max attempts; $16 the attempts each
-- had when it was claimed, NULL if not known). Why they look like this:
-- - {fence} is the fence (fence_cte.sql).
-- - Acks delete by ctid first (a TID scan: no index descent per item); the
--   id check makes a reused ctid harmless, and `moved` deletes by id what
--   was not found there (a table rewrite moves rows).
-- - Results are recorded when there is one or a dedup key (`partq wait`).
-- - Results and dead items carry statement_timestamp(), when the handler
--   had finished, not the column default now(): the transaction of a batch
--   claimed ahead began before its handler ran (COMMIT AND CHAIN), so now()
--   is when the batch was claimed, up to a handler timeout earlier.
-- - Retries and dead letters write only an item whose attempts are still
--   those it was claimed with (`was`): after a COMMIT whose answer was
--   lost, the same Finish sent again finds the retry it wrote there and
--   would count its attempt twice; it finds nothing instead, and its second
--   run, locking first, calls the item not ours (fence.sql). (A refunded
--   retry counted nothing, so it is found and written again: its handler
--   ran again, as a throttled item's does anyway.)
-- - Retries count the attempt unless refunded and clear the abandoned
--   mark; retries that used up max_attempts, and dead items, move to
--   dead_items (counting the attempt unless refunded: an item dead-lettered
--   unrun). retried and dead select disjoint rows, as one statement must.
-- - Dead items keep their Kafka origin and headers, and `dlq` writes one
--   outbox row per dead item of a queue with a dead-letter topic (store.h
--   says what the message carries). When nothing dies, `dead` is empty and
--   `dlq` has nothing to join, so acks pay almost nothing for it. The key
--   goes back to bytes: an ingested key that was not plain UTF-8 (or
--   started with "\x") is stored as "\x" + lowercase hex
--   (pg_store_kafka.cc), any other key is its own UTF-8. Context headers
--   with a NULL value (no Kafka origin) are left out.
{fence},
a AS (
  SELECT * FROM unnest($5::bigint[], $6::int[], $7::tid[], $8::text[]) AS a(id, part, tid, result)
  WHERE a.part IN (SELECT part FROM f)),
{delete_acked},
done AS (SELECT * FROM acked UNION ALL SELECT * FROM moved),
res AS (
  INSERT INTO {schema}.results (id, queue, dedup_key, result, finished_at)
  SELECT d.id, d.queue, d.dedup_key, decode(a.result, 'hex'), statement_timestamp()
  FROM done d JOIN a ON a.id = d.id
  WHERE d.dedup_key IS NOT NULL OR a.result IS NOT NULL
  RETURNING 1),
o AS (
  SELECT * FROM unnest($9::bigint[], $10::int[], $11::bool[], $12::bigint[], $13::bool[],
                       $14::text[], $16::int[]) AS o(id, part, dead, delay_us, refund, error, was)
  WHERE o.part IN (SELECT part FROM f)),
{retry_items},
{delete_dead},
buried AS (
  INSERT INTO {schema}.dead_items
    (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, last_error, payload,
     origin_topic, origin_partition, origin_offset, headers, group_id, failed_at)
  SELECT id, queue, part, key, dedup_key, priority, attempts, enqueued_at, error, payload,
         origin_topic, origin_partition, origin_offset, headers, group_id, statement_timestamp()
  FROM dead
  RETURNING 1),
dlq AS (
  INSERT INTO {schema}.outbox (topic, key, payload, headers)
  SELECT q.dlq_topic,
         CASE WHEN d.origin_topic IS NOT NULL AND d.key ~ '^\\x([0-9a-f]{2})*$'
              THEN decode(substr(d.key, 3), 'hex') ELSE convert_to(d.key, 'UTF8') END,
         d.payload,
         coalesce(d.headers, '[]'::jsonb) || (
           SELECT jsonb_agg(jsonb_build_object('key', h.k, 'value', h.v) ORDER BY h.n)
           FROM (VALUES (1, '__connect.errors.topic', d.origin_topic),
                        (2, '__connect.errors.partition', d.origin_partition::text),
                        (3, '__connect.errors.offset', d.origin_offset::text),
                        (4, '__connect.errors.exception.message', d.error),
                        (5, 'partq.errors.attempts', d.attempts::text),
                        (6, 'partq.errors.queue', d.queue),
                        (7, 'partq.errors.item.id', d.id::text)) AS h(n, k, v)
           WHERE h.v IS NOT NULL)
  FROM dead d JOIN {schema}.queues q ON q.name = d.queue
  WHERE q.dlq_topic IS NOT NULL
  ORDER BY d.id
  RETURNING 1)
