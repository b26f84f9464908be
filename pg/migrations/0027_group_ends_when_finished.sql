-- Migration 27: a group's ended_at and its end item's enqueued_at are when its last item finished
--
-- group_end set ended_at = now(), and its end item took enqueue_item's now():
-- the start of the transaction. A worker's batch claimed ahead runs in the
-- transaction COMMIT AND CHAIN began when it was claimed (migration 9's
-- pipelined ack), so groups whose items ran for seconds ended, by their
-- rows, 6-8 ms after the start: when their last batch was claimed. As
-- dead_items.failed_at and results.finished_at (statement_timestamp() since
-- 83cc52d), the end is the time of the statement that finished the last
-- item (or cancelled it, or started an empty group).

CREATE OR REPLACE FUNCTION {schema}.group_end(queue text, group_id text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
  end_id bigint;
  was_there boolean;
BEGIN
  UPDATE {schema}.groups x SET ended_at = statement_timestamp(), pending = 0
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.* INTO r;
  IF NOT FOUND OR r.end_queue IS NULL THEN
    RETURN;
  END IF;
  IF r.end_skipped THEN
    UPDATE {schema}.groups x SET end_error = 'cancelled without its end work (--no-end)'
    WHERE x.queue = q AND x.id = g;
    RETURN;
  END IF;
  BEGIN
    SELECT e.id, e.duplicate INTO end_id, was_there
    FROM {schema}.enqueue_item(r.end_queue,
           convert_to(jsonb_build_object('queue', q, 'group', g, 'done', r.done, 'dead', r.dead,
                                         'cancelled', r.cancelled,
                                         'payload', r.end_payload)::text, 'UTF8'),
           dedup_key => 'partq.group:' || q || ':' || g) e;
    -- enqueue_item stamps the transaction's start; the end item is enqueued
    -- now. Both columns alike: due at once, so not among items_later.
    IF NOT was_there THEN
      UPDATE {schema}.items i SET enqueued_at = statement_timestamp(), run_at = statement_timestamp()
      WHERE i.queue = r.end_queue AND i.id = end_id;
    END IF;
    UPDATE {schema}.groups x SET end_item = end_id WHERE x.queue = q AND x.id = g;
  EXCEPTION WHEN undefined_object THEN
    UPDATE {schema}.groups x SET end_error = SQLERRM WHERE x.queue = q AND x.id = g;
  END;
END
$$;
