-- Migration 37: the SQL API shows a viewer no schedule payload and no group end payload
--
-- A viewer reads its queues' rows without payloads (migration 35), but the
-- SQL API, which runs as the owner, still returned them: list_schedules()
-- each schedule's payload, group_status() a group's end payload (issue
-- 48's second review). Both now return NULL there unless the caller may
-- produce to the queue or operate it (the roles that write them), or holds
-- SELECT on that column itself (a viewer the owner granted payloads).

-- Whether session_user may read payloads of queue q's rows in table tbl's
-- column col: it may write them, or the owner granted it the column.
CREATE FUNCTION {schema}.may_read_payload(q text, tbl text, col text) RETURNS boolean
LANGUAGE sql STABLE
RETURN {schema}.may(q, ARRAY['producer', 'operator'], tbl, 'INSERT')
    OR has_column_privilege(session_user, format('%I.%I', '{schema_name}', tbl), col, 'SELECT');

CREATE OR REPLACE FUNCTION {schema}.group_status(queue text, group_id text)
RETURNS TABLE (pending bigint, held bigint, in_flight bigint, done bigint, dead bigint,
               cancelled bigint, created_at timestamptz, started_at timestamptz,
               cancelled_at timestamptz, ended_at timestamptz, end_queue text,
               end_payload jsonb, end_item bigint, end_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  payload CONSTANT boolean := {schema}.may_read_payload(queue, 'groups', 'end_payload');
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator', 'viewer'], 'items', 'SELECT');
  RETURN QUERY
    SELECT g.pending, g.held, g.in_flight, g.done, g.dead, g.cancelled, g.created_at,
           g.started_at, g.cancelled_at, g.ended_at, g.end_queue,
           CASE WHEN payload THEN g.end_payload END, g.end_item, g.end_error
    FROM {schema}.group_status_as_owner(queue, group_id) g;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.list_schedules(queue text DEFAULT NULL)
RETURNS SETOF {schema}.schedules
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s {schema}.schedules;
BEGIN
  IF list_schedules.queue IS NOT NULL THEN
    PERFORM {schema}.authorize(list_schedules.queue, ARRAY['operator', 'viewer'], 'schedules',
                               'SELECT');
  END IF;
  FOR s IN
    SELECT l.* FROM {schema}.list_schedules_as_owner(list_schedules.queue) l
    WHERE {schema}.may(l.queue, ARRAY['operator', 'viewer'], 'schedules', 'SELECT')
    ORDER BY l.name
  LOOP
    IF NOT {schema}.may_read_payload(s.queue, 'schedules', 'payload') THEN
      s.payload := NULL;
    END IF;
    RETURN NEXT s;
  END LOOP;
END
$$;
