-- Migration 21: prune(): retention for results, cancelled items, ended groups and dead items
--
-- Retention (Store::Prune, `partq prune`): what finished work leaves
-- behind, older than a cutoff, in one transaction. No index on the
-- times: a prune reads the queue's rows of each table once, run every
-- hour or day, and an index would cost every ack and cancel a write.

CREATE FUNCTION {schema}.prune(queue text, older_than interval, dead boolean DEFAULT false)
RETURNS TABLE (results bigint, cancelled bigint, groups bigint, dead_items bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  cutoff timestamptz;
BEGIN
  PERFORM {schema}.require_queue(q);
  IF older_than IS NULL OR older_than < interval '0' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'a retention age must be zero or more, not %s', coalesce(older_than::text, 'NULL'));
  END IF;
  cutoff := now() - older_than;
  DELETE FROM {schema}.results r WHERE r.queue = q AND r.finished_at <= cutoff;
  GET DIAGNOSTICS results = ROW_COUNT;
  DELETE FROM {schema}.cancelled_items c WHERE c.queue = q AND c.cancelled_at <= cutoff;
  GET DIAGNOSTICS cancelled = ROW_COUNT;
  DELETE FROM {schema}.groups g WHERE g.queue = q AND g.ended_at <= cutoff;
  GET DIAGNOSTICS groups = ROW_COUNT;
  dead_items := 0;
  IF coalesce(dead, false) THEN
    DELETE FROM {schema}.dead_items d WHERE d.queue = q AND d.failed_at <= cutoff;
    GET DIAGNOSTICS dead_items = ROW_COUNT;
  END IF;
  RETURN NEXT;
END
$$;
