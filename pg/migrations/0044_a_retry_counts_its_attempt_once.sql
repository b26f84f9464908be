-- Migration 44: a confined worker's retry is written only where the item still has the attempts it was claimed with
--
-- When a COMMIT's answer is lost (the connection breaks while it runs), a
-- worker cannot know whether its Finish committed, and sends it again.
-- An ack is safe to send again: its item is gone, so the second Finish
-- calls it not ours. A retry was not: its item is still there, so the
-- second Finish ran the handler again and counted a second attempt (and a
-- dead letter took the item with one attempt too many), which can
-- dead-letter an item before its max_attempts. Finish now sends the
-- attempts each item had when it was claimed, and its retries and dead
-- letters write only rows that still have them (fragments/retry_items.sql,
-- delete_dead.sql, fence.sql); a refunded retry counted nothing and is
-- written again. A confined worker retries through this
-- view's rule (migration 40), which gains that column: NULL writes the
-- row as before (an Item no claim made).
-- (StoreFinishConformance.AFinishSentAgainAfterItsRetryCommittedCountsTheAttemptOnce,
-- RolesTest.AWorkerRolesRetrySentAgainCountsTheAttemptOnce)

DROP RULE item_retries_update ON {schema}.item_retries;
CREATE OR REPLACE VIEW {schema}.item_retries AS
  SELECT NULL::bigint AS id, NULL::boolean AS refund, NULL::bigint AS delay_us,
         NULL::text AS error, NULL::int AS max_attempts, NULL::int AS attempts
  WHERE false;
CREATE RULE item_retries_update AS ON INSERT TO {schema}.item_retries DO INSTEAD
  UPDATE {schema}.items i
  SET attempts = i.attempts + (NOT NEW.refund)::int,
      run_at = statement_timestamp() + NEW.delay_us * interval '1 microsecond',
      abandoned_epoch = NULL, last_error = NEW.error
  WHERE i.id = NEW.id AND (NEW.refund OR i.attempts + 1 < NEW.max_attempts)
    AND (NEW.attempts IS NULL OR i.attempts = NEW.attempts)
    AND ARRAY[i.queue::text] <@ ARRAY(SELECT q.queue::text FROM {schema}.my_worker_queues q)
  RETURNING i.id, NULL::boolean, NULL::bigint, NULL::text, NULL::int, NULL::int;
