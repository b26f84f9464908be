-- Migration 46: list_groups(), so that a producer or an operator lists its queues' groups
--
-- `partq group list` read the groups table, which only the owner, a viewer
-- (its columns but end_payload, migration 35) and a worker (its queues'
-- rows) may read: a producer that creates, starts and cancels groups
-- through the SQL API (migration 29) could not list them. list_groups()
-- answers any role granted the queue (as group_status(), and a worker's),
-- newest first, and the end payload only to a role that may read it
-- (may_read_payload(), migration 37). PgStore::ListGroups calls it for every
-- role but the tables' owner. (RolesTest.AProducerCancelsAndRunsGroupsWithTheCli)

CREATE FUNCTION {schema}.list_groups(queue text, include_ended boolean DEFAULT false,
                                     max_rows int DEFAULT 50)
RETURNS TABLE (group_id text, pending bigint, done bigint, dead bigint, cancelled bigint,
               created_at timestamptz, started_at timestamptz, cancelled_at timestamptz,
               ended_at timestamptz, end_queue text, end_payload jsonb, end_item bigint,
               end_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  payload boolean;
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator', 'viewer', 'worker'], 'groups',
                             'SELECT');
  PERFORM {schema}.require_queue(queue);
  IF max_rows IS NULL OR max_rows < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('max_rows must be 1 or more, not %s', coalesce(max_rows::text, 'NULL'));
  END IF;
  payload := {schema}.may_read_payload(queue, 'groups', 'end_payload');
  RETURN QUERY
    SELECT x.id::text, x.pending, x.done, x.dead, x.cancelled, x.created_at, x.started_at,
           x.cancelled_at, x.ended_at, x.end_queue::text,
           CASE WHEN payload THEN x.end_payload END, x.end_item, x.end_error
    FROM {schema}.groups x
    WHERE x.queue = list_groups.queue AND (include_ended OR x.ended_at IS NULL)
    ORDER BY x.created_at DESC, x.id
    LIMIT max_rows;
END
$$;
