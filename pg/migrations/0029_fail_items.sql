-- Migration 29: fail_items(): a batch's failed items beside its acks, without the general Finish
--
-- A batch in which one item of a hundred failed went to the general Finish
-- statement (pg_store_sql.cc, FinishCtes), 3.7 ms a batch against 1.9 ms for
-- the lean ack of a batch without a failure, so with 1 % of items failing an
-- exec or http drain lost a fifth of its speed (issue 49). The lean ack now
-- takes the failures too (pg_store_sql.cc, AckFailCtes), through this
-- function, which is what FinishCtes does with them, in the same words:
-- items dead, or out of attempts, move to dead_items (counting the attempt
-- unless refunded), with an outbox row each for a queue with a dead-letter
-- topic; the others are retried (the attempt counted unless refunded, their
-- delay, their error, no longer abandoned). Only items of `p_fenced` parts
-- (the statement's fence) are touched. The dead go first: the retry's update
-- would otherwise count an attempt that the dead-letter test then reads.
-- Returns ('r', id) per retried item and ('d', id) per dead one. Its plans
-- are made with enable_seqscan off, as ack_items()'s are (migration 4).

CREATE FUNCTION {schema}.fail_items(p_fenced int[], p_ids bigint[], p_parts int[], p_dead bool[],
                                    p_delays bigint[], p_refunds bool[], p_errors text[],
                                    p_max_attempts int)
RETURNS TABLE (failed_kind text, failed_id bigint)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
  RETURN QUERY
    WITH o AS (
      SELECT * FROM unnest(p_ids, p_parts, p_dead, p_delays, p_refunds, p_errors)
        AS o(id, part, dead, delay_us, refund, error)
      WHERE o.part = ANY(p_fenced)),
    dead AS (
      DELETE FROM {schema}.items i USING o
      WHERE i.id = o.id AND (o.dead OR (NOT o.refund AND i.attempts + 1 >= p_max_attempts))
      RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority,
                i.attempts + (NOT o.refund)::int AS attempts,
                i.enqueued_at, i.payload, coalesce(o.error, '') AS error,
                i.origin_topic, i.origin_partition, i.origin_offset, i.headers, i.group_id),
    buried AS (
      INSERT INTO {schema}.dead_items
        (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, last_error, payload,
         origin_topic, origin_partition, origin_offset, headers, group_id, failed_at)
      SELECT d.id, d.queue, d.part, d.key, d.dedup_key, d.priority, d.attempts, d.enqueued_at,
             d.error, d.payload, d.origin_topic, d.origin_partition, d.origin_offset, d.headers,
             d.group_id, statement_timestamp()
      FROM dead d
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
    SELECT 'd'::text, d.id FROM dead d;
  RETURN QUERY
    WITH o AS (
      SELECT * FROM unnest(p_ids, p_parts, p_dead, p_delays, p_refunds, p_errors)
        AS o(id, part, dead, delay_us, refund, error)
      WHERE o.part = ANY(p_fenced))
    UPDATE {schema}.items i
    SET attempts = i.attempts + (NOT o.refund)::int,
        run_at = statement_timestamp() + o.delay_us * interval '1 microsecond',
        abandoned_epoch = NULL, last_error = o.error
    FROM o
    WHERE i.id = o.id AND NOT o.dead AND (o.refund OR i.attempts + 1 < p_max_attempts)
    RETURNING 'r'::text, i.id;
END
$$;
