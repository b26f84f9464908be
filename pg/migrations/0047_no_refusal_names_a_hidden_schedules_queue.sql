-- Migration 47: no refusal names the queue of a schedule the caller may not see, and a worker is hinted a grant it can hold
--
-- A review of migration 45 found three things it left:
-- - add_schedule() of a name that a schedule of another queue holds said
--   'schedule "sb" already exists (on queue "b")' to a caller with no grant
--   on b (schedule names are the schema's, not a queue's). Now such a
--   caller is told the name is taken, not where.
-- - delete_schedule() locked the schedule's row before it asked whether
--   the caller may see its queue, so a caller with no grant could tell a
--   hidden schedule from a missing one by a lock timeout or a serialization
--   failure, and held up the schedule firer meanwhile. It now reads the row
--   without a lock, answers "unknown" for a hidden one, and locks only the
--   row it will delete (still by name and queue: migration 40's guard
--   against a schedule added again under the name).
-- - authorize()'s hint told a worker role to get a viewer's grant, which
--   partq grant refuses to a worker (migration 36). A worker is hinted the
--   worker's grant where it would do, else the first kind but viewer.
-- (RolesTest.RefusalsNameTheNarrowestGrantAndNoQueueTheCallerMayNotSee)

CREATE OR REPLACE FUNCTION {schema}.authorize(queue text, kinds text[], tbl text, privilege text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
  worker boolean;
  hint text;
BEGIN
  PERFORM {schema}.check_queue_name(queue);
  IF NOT {schema}.may(queue, kinds, tbl, privilege) THEN
    worker := {schema}.worker_scope() IS NOT NULL;
    hint := CASE
      WHEN worker AND 'worker' = ANY (kinds) THEN 'worker'
      WHEN NOT worker AND 'viewer' = ANY (kinds) THEN 'viewer'
      ELSE (SELECT k FROM unnest(kinds) WITH ORDINALITY AS u(k, n)
            WHERE NOT (worker AND k = 'viewer') ORDER BY n LIMIT 1) END;
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
      'permission denied for queue "%s" of schema "%s": role "%s" is not its %s',
      queue, '{schema_name}', session_user, array_to_string(kinds, ' or ')),
      HINT = format('the schema''s owner grants it: partq grant %s %s --queue %s%s',
                    coalesce(hint, kinds[1]), quote_ident(session_user), queue,
                    CASE WHEN '{schema_name}' = 'partq' THEN '' ELSE ' --schema {schema_name}' END);
  END IF;
END
$$;

-- 23505 when a schedule of a queue the caller may not see holds `name`,
-- without naming that queue (add_schedule_as_owner names it to those who
-- may see it).
CREATE FUNCTION {schema}.refuse_a_hidden_schedules_name(name text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  q text;
BEGIN
  SELECT s.queue INTO q FROM {schema}.schedules s
  WHERE s.name = refuse_a_hidden_schedules_name.name;
  IF FOUND AND NOT {schema}.may(q, ARRAY['operator', 'viewer'], 'schedules', 'SELECT') THEN
    RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format(
      'schedule "%s" already exists (on a queue this role may not see): names are the '
      'schema''s, so choose another', refuse_a_hidden_schedules_name.name);
  END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.refuse_a_hidden_schedules_name(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION {schema}.add_schedule(name text, queue text, payload bytea,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL,
                                      catch_up interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['operator'], 'schedules', 'INSERT');
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.refuse_a_hidden_schedules_name(name);
  PERFORM {schema}.add_schedule_as_owner(name, queue, payload, every, cron, time_zone, key,
                                         priority, first_tick, catch_up);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.add_schedule(name text, queue text, payload text,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL,
                                      catch_up interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['operator'], 'schedules', 'INSERT');
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.refuse_a_hidden_schedules_name(name);
  PERFORM {schema}.add_schedule_as_owner(name, queue, payload, every, cron, time_zone, key,
                                         priority, first_tick, catch_up);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.delete_schedule(name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text;
BEGIN
  SELECT s.queue INTO q FROM {schema}.schedules s WHERE s.name = delete_schedule.name;
  IF FOUND AND {schema}.may(q, ARRAY['operator', 'viewer'], 'schedules', 'SELECT') THEN
    PERFORM {schema}.authorize(q, ARRAY['operator'], 'schedules', 'DELETE');
    PERFORM 1 FROM {schema}.schedules s
    WHERE s.name = delete_schedule.name AND s.queue = q FOR UPDATE;
    IF FOUND THEN
      DELETE FROM {schema}.schedules s WHERE s.name = delete_schedule.name AND s.queue = q;
      RETURN;
    END IF;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
    'unknown schedule "%s" in schema "%s" (partq schedule list shows them)', delete_schedule.name,
    '{schema_name}');
END
$$;
