-- Migration 26: group_start() returns how many items it released, not how many parts
--
-- group_start() returned how many parts its released items
-- were in (one notice's worth each), not how many items, as docs/sql-api.md
-- says it does: five items of one key started as 1 (found by a walkthrough).

CREATE OR REPLACE FUNCTION {schema}.group_start(queue text, group_id text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  n bigint;
  ps int[];
  prs int[];
  ids bigint[];
  lo int := 1;
  n_released bigint;
BEGIN
  -- Items' lock before the queue row, as every writer of items takes it
  -- (enqueue_item says why).
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.group_hold(q, g);
  UPDATE {schema}.groups x SET started_at = coalesce(x.started_at, now())
  WHERE x.queue = q AND x.id = g RETURNING x.pending INTO n;
  WITH released AS (
    UPDATE {schema}.items i SET run_at = statement_timestamp()
    WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'
    RETURNING i.part, i.priority, i.id),
  lowest AS (
    SELECT DISTINCT ON (r.part) r.part, r.priority, r.id FROM released r
    ORDER BY r.part, r.priority, r.id)
  SELECT array_agg(l.part ORDER BY l.part), array_agg(l.priority ORDER BY l.part),
         array_agg(l.id ORDER BY l.part),
         (SELECT count(*) FROM released)
  INTO ps, prs, ids, n_released FROM lowest l;
  IF cardinality(ps) > 32 THEN
    -- Too many parts: one notice for all, from the lowest key of all.
    FOR i IN 2..cardinality(ps) LOOP
      IF (prs[i], ids[i]) < (prs[lo], ids[lo]) THEN lo := i; END IF;
    END LOOP;
    PERFORM pg_notify({schema}.channel_for(q), 'i:-1:' || prs[lo] || ':' || ids[lo]);
  ELSIF ps IS NOT NULL THEN
    FOR i IN 1..cardinality(ps) LOOP
      PERFORM pg_notify({schema}.channel_for(q), 'i:' || ps[i] || ':' || prs[i] || ':' || ids[i]);
    END LOOP;
  END IF;
  IF n <= 0 THEN
    PERFORM {schema}.group_end(q, g);
  END IF;
  RETURN n_released;
END
$$;
