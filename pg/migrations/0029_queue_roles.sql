-- Migration 29: roles per queue: the SQL API runs as its owner, for the queues a caller was granted
--
-- Before, the SQL API ran with the caller's rights, so the grants it needed
-- (SELECT and INSERT on items, UPDATE on groups and queues) let a producer
-- read every queue's payloads, insert rows no enqueue would write, end
-- another queue's group or shrink its parts (issue 48). Now each function
-- of the API is SECURITY DEFINER with a pinned search_path, and asks first
-- whether the caller may use that queue (authorize): the schema's owner and
-- its members may; so may a role the owner granted a right on the queue
-- (`partq grant producer|operator|viewer ROLE --queue Q`, the table
-- grants); and so may a role that already holds the table privilege the
-- function used to need (the grants the docs listed before), so producers
-- set up that way keep working until their table privileges are revoked.
-- Everyone else gets 42501. A role needs only USAGE on the schema.
--
-- The caller is session_user: inside a SECURITY DEFINER function
-- current_user is the owner, and PostgreSQL keeps no other name of the
-- invoker (so a SET ROLE does not narrow the check: log in as the role).
--
-- The functions keep their names, arguments and answers: each old one is
-- renamed to <name>_as_owner (EXECUTE revoked from PUBLIC) and a wrapper of
-- the old name checks and calls it. The payload limit is the queue's
-- (queues.max_payload_bytes, 1 MiB), no longer a setting the caller can
-- raise: the wrappers that write items set partq.max_payload_bytes to it
-- (set_config, local to the transaction) just before they call the function
-- that reads it. (A SET clause on the function would scope it to the call,
-- but CREATE FUNCTION ... SET of a custom setting needs a superuser or a
-- GRANT SET ON PARAMETER, and the schema's owner need not be either.)

CREATE TABLE {schema}.grants (
  queue      text COLLATE "C" NOT NULL REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  role       name NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('producer', 'operator', 'viewer')),
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, role, kind)
);

ALTER TABLE {schema}.queues ADD COLUMN max_payload_bytes int NOT NULL DEFAULT 1048576
  CHECK (max_payload_bytes BETWEEN 1 AND 1073741824);

-- Whether session_user may call a function of kind `kinds` on `queue`: the
-- owner (or a member), a role granted one of `kinds` there (or a member of
-- one), or a role holding `privilege` on the table `tbl` (the grants before
-- this migration). A dropped role's grants count for no one.
CREATE FUNCTION {schema}.may(queue text, kinds text[], tbl text, privilege text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN pg_has_role(session_user,
                     (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                     'MEMBER')
         OR EXISTS (SELECT 1 FROM {schema}.grants g JOIN pg_roles r ON r.rolname = g.role
                    WHERE g.queue = may.queue AND g.kind = ANY (may.kinds)
                      AND pg_has_role(session_user, r.oid, 'MEMBER'))
         OR has_table_privilege(session_user, format('%I.%I', '{schema_name}', tbl), privilege);
END
$$;

-- 42501 unless may(); the queue's name is checked first (22023), so the
-- message never carries more than a valid name.
CREATE FUNCTION {schema}.authorize(queue text, kinds text[], tbl text, privilege text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM {schema}.check_queue_name(queue);
  IF NOT {schema}.may(queue, kinds, tbl, privilege) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
      'permission denied for queue "%s" of schema "%s": role "%s" is not its %s',
      queue, '{schema_name}', session_user, array_to_string(kinds, ' or ')),
      HINT = format('the schema''s owner grants it: partq grant %s %s --queue %s%s', kinds[1],
                    quote_ident(session_user), queue,
                    CASE WHEN '{schema_name}' = 'partq' THEN '' ELSE ' --schema {schema_name}' END);
  END IF;
END
$$;

-- authorize() for a writer of items, and the queue's payload limit for what
-- the wrapper calls next (and, harmlessly, the rest of the transaction: every
-- writer sets it again before it reads it).
CREATE FUNCTION {schema}.authorize_enqueue(queue text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'INSERT');
  PERFORM set_config('partq.max_payload_bytes',
                     coalesce((SELECT q.max_payload_bytes FROM {schema}.queues q
                               WHERE q.name = authorize_enqueue.queue), 1048576)::text, true);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.check_new_item(payload bytea, priority int, key text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
BEGIN
  IF payload IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload must not be NULL';
  END IF;
  IF octet_length(payload) > lim THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'payload is %s bytes; the limit is %s (the queue''s, partq queue set --max-payload)',
      octet_length(payload), lim);
  END IF;
  IF priority NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('priority %s is out of range -32768..32767', priority);
  END IF;
  IF octet_length(key) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('key is %s bytes; the limit is 1024', octet_length(key));
  END IF;
END
$$;

ALTER FUNCTION {schema}.enqueue_item(text, bytea, text, text, interval, int, text)
  RENAME TO enqueue_item_as_owner;
ALTER FUNCTION {schema}.enqueue_item(text, text, text, text, interval, int, text)
  RENAME TO enqueue_item_as_owner;
ALTER FUNCTION {schema}.enqueue(text, bytea, text, text, interval, int, text)
  RENAME TO enqueue_as_owner;
ALTER FUNCTION {schema}.enqueue(text, text, text, text, interval, int, text)
  RENAME TO enqueue_as_owner;
ALTER FUNCTION {schema}.enqueue_many(text, bytea[], text[], text[], interval, int, text)
  RENAME TO enqueue_many_as_owner;
ALTER FUNCTION {schema}.enqueue_many(text, text[], text[], text[], interval, int, text)
  RENAME TO enqueue_many_as_owner;
ALTER FUNCTION {schema}.item_state(text, bigint) RENAME TO item_state_as_owner;
ALTER FUNCTION {schema}.item_state_by_dedup_key(text, text)
  RENAME TO item_state_by_dedup_key_as_owner;
ALTER FUNCTION {schema}.cancel_items(text, bigint[]) RENAME TO cancel_items_as_owner;
ALTER FUNCTION {schema}.cancel(text, bigint) RENAME TO cancel_as_owner;
ALTER FUNCTION {schema}.cancel_by_dedup_key(text, text) RENAME TO cancel_by_dedup_key_as_owner;
ALTER FUNCTION {schema}.group_create(text, text, text, jsonb) RENAME TO group_create_as_owner;
ALTER FUNCTION {schema}.group_start(text, text) RENAME TO group_start_as_owner;
ALTER FUNCTION {schema}.group_status(text, text) RENAME TO group_status_as_owner;
ALTER FUNCTION {schema}.group_cancel(text, text, boolean) RENAME TO group_cancel_as_owner;
ALTER FUNCTION {schema}.add_schedule(text, text, bytea, interval, text, text, text, int,
                                     timestamptz, interval)
  RENAME TO add_schedule_as_owner;
ALTER FUNCTION {schema}.add_schedule(text, text, text, interval, text, text, text, int,
                                     timestamptz, interval)
  RENAME TO add_schedule_as_owner;
ALTER FUNCTION {schema}.list_schedules(text) RENAME TO list_schedules_as_owner;
ALTER FUNCTION {schema}.delete_schedule(text) RENAME TO delete_schedule_as_owner;
ALTER FUNCTION {schema}.prune(text, interval, boolean) RENAME TO prune_as_owner;

-- add_schedule's body names itself (add_schedule.name, its parameter, beside
-- the column): the same body under its new name.
CREATE OR REPLACE FUNCTION {schema}.add_schedule_as_owner(
  name text, queue text, payload bytea, every interval DEFAULT NULL, cron text DEFAULT NULL,
  time_zone text DEFAULT NULL, key text DEFAULT NULL, priority int DEFAULT 0,
  first_tick timestamptz DEFAULT NULL, catch_up interval DEFAULT NULL)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_variable
DECLARE
  names CONSTANT text[] := ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
  fields text[];
  secs numeric;
  prio CONSTANT int := coalesce(priority, 0);
  other text;
BEGIN
  IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid schedule name %s (use 1-63 letters, digits, ''_'', ''.'' or ''-'', starting with '
      'a letter or digit)', coalesce('"' || name || '"', 'NULL'));
  END IF;
  PERFORM {schema}.require_queue(queue);
  IF (every IS NULL) = (cron IS NULL) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = CASE WHEN every IS NULL
      THEN 'a schedule needs every (an interval) or cron (''MIN HOUR DOM MON DOW'')'
      ELSE 'give either every or cron, not both' END;
  END IF;
  IF every IS NOT NULL THEN
    secs := extract(epoch FROM every);
    IF secs < 1 OR secs > 366 * 86400 OR secs <> trunc(secs) THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
        'every %s: the interval must be a whole number of seconds from 1s to 366 days', every);
    END IF;
    IF time_zone IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
        'time_zone applies to cron only (an interval ticks on multiples of it since the Unix '
        'epoch, the same in every time zone)';
    END IF;
  ELSE
    IF left(btrim(cron), 1) <> '@' THEN
      fields := regexp_split_to_array(btrim(cron), '\s+');
      IF btrim(cron) = '' OR array_length(fields, 1) <> 5 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
          'cron expression "%s" has %s fields; partq takes 5: minute hour day-of-month month '
          'day-of-week%s', btrim(cron), CASE WHEN btrim(cron) = '' THEN 0
                                            ELSE array_length(fields, 1) END,
          CASE WHEN array_length(fields, 1) = 6 THEN ' (no seconds or year field)' ELSE '' END);
      END IF;
      FOR i IN 1..5 LOOP
        IF fields[i] !~ '^[A-Za-z0-9*/,-]+$' THEN
          RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'cron field %s (%s): "%s" has characters cron does not use', i, names[i], fields[i]);
        END IF;
      END LOOP;
    END IF;
    IF time_zone IS NOT NULL THEN
      BEGIN
        PERFORM now() AT TIME ZONE time_zone;
      EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
          'unknown time zone "%s" (use an IANA name such as Europe/Berlin or UTC)', time_zone);
      END;
    END IF;
  END IF;
  IF catch_up IS NOT NULL AND (catch_up < interval '0' OR catch_up > interval '366 days') THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'catch_up %s: the window must be from 0 (fire only the latest missed tick) to 366 days',
      catch_up);
  END IF;
  PERFORM {schema}.check_new_item(payload, prio, key);
  SELECT s.queue INTO other FROM {schema}.schedules s WHERE s.name = add_schedule_as_owner.name;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format(
      'schedule "%s" already exists (on queue "%s"); delete it first to change it', name, other);
  END IF;
  INSERT INTO {schema}.schedules (name, queue, every, cron, time_zone, payload, key, priority,
                                  next_tick, catch_up)
  VALUES (name, queue, every, btrim(cron), time_zone, payload, key, prio, first_tick, catch_up);
END
$$;


DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
           WHERE p.pronamespace = '{schema}'::regnamespace AND p.proname LIKE '%\_as\_owner'
  LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END
$$;

-- The wrappers: the old names, arguments and answers. PL/pgSQL, whose plans
-- a session keeps (a SQL function's are made again at every call: one
-- enqueue() took twice as long that way).

CREATE FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  RETURN QUERY SELECT * FROM {schema}.enqueue_item_as_owner(queue, payload, key, dedup_key, delay,
                                                             priority, group_id);
END
$$;

CREATE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  RETURN QUERY SELECT * FROM {schema}.enqueue_item_as_owner(queue, convert_to(payload, 'UTF8'),
                                                             key, dedup_key, delay, priority,
                                                             group_id);
END
$$;

CREATE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  RETURN (SELECT e.id FROM {schema}.enqueue_item_as_owner(queue, payload, key, dedup_key, delay,
                                                           priority, group_id) e);
END
$$;

CREATE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  RETURN (SELECT e.id FROM {schema}.enqueue_item_as_owner(queue, convert_to(payload, 'UTF8'),
                                                           key, dedup_key, delay, priority,
                                                           group_id) e);
END
$$;

CREATE FUNCTION {schema}.enqueue_many(queue text, payloads bytea[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  RETURN QUERY SELECT * FROM {schema}.enqueue_many_as_owner(queue, payloads, keys, dedup_keys,
                                                             delay, priority, group_id);
END
$$;

CREATE FUNCTION {schema}.enqueue_many(queue text, payloads text[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  RETURN QUERY SELECT * FROM {schema}.enqueue_many_as_owner(queue, payloads, keys, dedup_keys,
                                                             delay, priority, group_id);
END
$$;

CREATE FUNCTION {schema}.item_state(queue text, id bigint)
RETURNS TABLE (state text, attempts int, result bytea, last_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator', 'viewer'], 'items', 'SELECT');
  RETURN QUERY SELECT * FROM {schema}.item_state_as_owner(queue, id);
END
$$;

CREATE FUNCTION {schema}.item_state_by_dedup_key(queue text, dedup_key text)
RETURNS TABLE (id bigint, state text, attempts int, result bytea, last_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator', 'viewer'], 'items', 'SELECT');
  RETURN QUERY SELECT * FROM {schema}.item_state_by_dedup_key_as_owner(queue, dedup_key);
END
$$;

CREATE FUNCTION {schema}.cancel_items(queue text, ids bigint[])
RETURNS TABLE (id bigint, state text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'DELETE');
  RETURN QUERY SELECT * FROM {schema}.cancel_items_as_owner(queue, ids);
END
$$;

CREATE FUNCTION {schema}.cancel(queue text, id bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'DELETE');
  RETURN {schema}.cancel_as_owner(queue, id);
END
$$;

CREATE FUNCTION {schema}.cancel_by_dedup_key(queue text, dedup_key text)
RETURNS TABLE (id bigint, state text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'DELETE');
  RETURN QUERY SELECT * FROM {schema}.cancel_by_dedup_key_as_owner(queue, dedup_key);
END
$$;

CREATE FUNCTION {schema}.group_create(queue text, group_id text, end_queue text DEFAULT NULL,
                                      end_payload jsonb DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'INSERT');
  -- The end item goes into end_queue when the group ends: the caller must
  -- be able to enqueue there too.
  IF end_queue IS NOT NULL AND end_queue <> queue THEN
    PERFORM {schema}.authorize(end_queue, ARRAY['producer', 'operator'], 'items', 'INSERT');
  END IF;
  PERFORM {schema}.group_create_as_owner(queue, group_id, end_queue, end_payload);
END
$$;

CREATE FUNCTION {schema}.group_start(queue text, group_id text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'INSERT');
  RETURN {schema}.group_start_as_owner(queue, group_id);
END
$$;

CREATE FUNCTION {schema}.group_status(queue text, group_id text)
RETURNS TABLE (pending bigint, held bigint, in_flight bigint, done bigint, dead bigint,
               cancelled bigint, created_at timestamptz, started_at timestamptz,
               cancelled_at timestamptz, ended_at timestamptz, end_queue text,
               end_payload jsonb, end_item bigint, end_error text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator', 'viewer'], 'items', 'SELECT');
  RETURN QUERY SELECT * FROM {schema}.group_status_as_owner(queue, group_id);
END
$$;

CREATE FUNCTION {schema}.group_cancel(queue text, group_id text, run_end boolean DEFAULT true)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator'], 'items', 'DELETE');
  RETURN {schema}.group_cancel_as_owner(queue, group_id, run_end);
END
$$;

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload bytea,
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
  PERFORM {schema}.add_schedule_as_owner(name, queue, payload, every, cron, time_zone, key,
                                         priority, first_tick, catch_up);
END
$$;

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload text,
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
  PERFORM {schema}.add_schedule_as_owner(name, queue, payload, every, cron, time_zone, key,
                                         priority, first_tick, catch_up);
END
$$;

-- With a queue, that queue's schedules (42501 without the right); with
-- NULL, those of every queue the caller may see.
CREATE FUNCTION {schema}.list_schedules(queue text DEFAULT NULL)
RETURNS SETOF {schema}.schedules
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF list_schedules.queue IS NOT NULL THEN
    PERFORM {schema}.authorize(list_schedules.queue, ARRAY['operator', 'viewer'], 'schedules',
                               'SELECT');
  END IF;
  RETURN QUERY
    SELECT s.* FROM {schema}.list_schedules_as_owner(list_schedules.queue) s
    WHERE {schema}.may(s.queue, ARRAY['operator', 'viewer'], 'schedules', 'SELECT')
    ORDER BY s.name;
END
$$;

-- A schedule's queue decides; an unknown name is 42704, as before.
CREATE FUNCTION {schema}.delete_schedule(name text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(s.queue, ARRAY['operator'], 'schedules', 'DELETE')
  FROM {schema}.schedules s WHERE s.name = delete_schedule.name;
  PERFORM {schema}.delete_schedule_as_owner(delete_schedule.name);
END
$$;

CREATE FUNCTION {schema}.prune(queue text, older_than interval, dead boolean DEFAULT false)
RETURNS TABLE (results bigint, cancelled bigint, groups bigint, dead_items bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['operator'], 'results', 'DELETE');
  RETURN QUERY SELECT * FROM {schema}.prune_as_owner(queue, older_than, dead);
END
$$;
