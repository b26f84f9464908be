-- Migration 45: the SQL API's refusals name the narrowest grant that would do, and no queue the caller may not see
--
-- What two walkthroughs of the roles met:
-- - authorize()'s hint named the first kind it was given, so a role refused
--   item_state(), group_status() or list_schedules() was told to get a
--   producer's or an operator's grant, where a viewer's would do (a wider
--   grant than it needs: it could then enqueue or cancel too).
-- - delete_schedule() of a schedule in a queue the caller has no grant on
--   refused it by naming that queue, which the caller could not otherwise
--   learn. A schedule the caller may not even see is now "unknown", as one
--   that does not exist; one it may see (a viewer's) is refused as before.
-- - cancel(queue, 0) said "item ids must be 1 or more, not {0}", the message
--   of cancel_items() with the one id in braces.
-- (RolesTest.RefusalsNameTheNarrowestGrantAndNoQueueTheCallerMayNotSee)

CREATE OR REPLACE FUNCTION {schema}.authorize(queue text, kinds text[], tbl text, privilege text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM {schema}.check_queue_name(queue);
  IF NOT {schema}.may(queue, kinds, tbl, privilege) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
      'permission denied for queue "%s" of schema "%s": role "%s" is not its %s',
      queue, '{schema_name}', session_user, array_to_string(kinds, ' or ')),
      HINT = format('the schema''s owner grants it: partq grant %s %s --queue %s%s',
                    CASE WHEN 'viewer' = ANY (kinds) THEN 'viewer' ELSE kinds[1] END,
                    quote_ident(session_user), queue,
                    CASE WHEN '{schema_name}' = 'partq' THEN '' ELSE ' --schema {schema_name}' END);
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.delete_schedule(name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text;
BEGIN
  SELECT s.queue INTO q FROM {schema}.schedules s WHERE s.name = delete_schedule.name FOR UPDATE;
  IF FOUND AND {schema}.may(q, ARRAY['operator', 'viewer'], 'schedules', 'SELECT') THEN
    PERFORM {schema}.authorize(q, ARRAY['operator'], 'schedules', 'DELETE');
    DELETE FROM {schema}.schedules s WHERE s.name = delete_schedule.name AND s.queue = q;
    RETURN;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
    'unknown schedule "%s" in schema "%s" (partq schedule list shows them)', delete_schedule.name,
    '{schema_name}');
END
$$;

CREATE OR REPLACE FUNCTION {schema}.cancel(queue text, id bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'DELETE');
  IF id IS NULL OR id < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('item id must be 1 or more, not %s', coalesce(id::text, 'NULL'));
  END IF;
  RETURN {schema}.cancel_as_owner(queue, id);
END
$$;
