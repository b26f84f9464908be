-- Migration 15: schedules: an item per tick (partq schedule), add_schedule(), list_schedules(), delete_schedule()
--
-- Schedules, `partq schedule`: one row per schedule with
-- its next tick. The queue's workers fire it (Store::FireSchedules): one
-- transaction locks the due row (FOR UPDATE SKIP LOCKED: a worker never
-- waits for another's firing), enqueues through the one enqueue path and
-- moves next_tick on by compare-and-set, so a tick fires once however
-- many workers race (docs/architecture.md, "Schedules"). The FK cascades
-- a queue's delete to its schedules: a schedule is written rarely, so the
-- lookup an FK costs does not matter here as it would for items. Names
-- are unique per schema: `schedule delete NAME` needs no queue. Ticks are
-- computed in C++ (schedule/timing.h: cron, time zones, DST); rows added
-- through the SQL API without a first tick get it from the first worker
-- that looks (next_tick NULL: the first tick after created_at). The SQL
-- functions check what SQL can (the field count and characters of a cron
-- expression, the time zone, the interval); a cron field the C++ parser
-- refuses leaves the row with `error` set and no next tick.

CREATE TABLE {schema}.schedules (
  name        text COLLATE "C" PRIMARY KEY,
  queue       text COLLATE "C" NOT NULL REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  every       interval,
  cron        text,
  time_zone   text,
  payload     bytea NOT NULL,
  key         text,
  priority    smallint NOT NULL DEFAULT 0,
  next_tick   timestamptz,
  last_tick   timestamptz,
  fired       bigint NOT NULL DEFAULT 0,
  missed      bigint NOT NULL DEFAULT 0,
  error       text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
  CHECK ((every IS NULL) <> (cron IS NULL)),
  CHECK (every IS NULL OR time_zone IS NULL)
);
CREATE INDEX schedules_due ON {schema}.schedules (queue, next_tick);

-- Store::AddSchedule in SQL. `first_tick` NULL: the first worker to look
-- computes it (the first tick after now). Errors as the C++ store gives
-- them: 22023 for bad input, 42704 for an unknown queue, 23505 for a name
-- the schema has.
CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload bytea,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL)
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
  PERFORM {schema}.check_new_item(payload, prio, key);
  SELECT s.queue INTO other FROM {schema}.schedules s WHERE s.name = add_schedule.name;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format(
      'schedule "%s" already exists (on queue "%s"); delete it first to change it', name, other);
  END IF;
  INSERT INTO {schema}.schedules (name, queue, every, cron, time_zone, payload, key, priority,
                                  next_tick)
  VALUES (name, queue, every, btrim(cron), time_zone, payload, key, prio, first_tick);
END
$$;

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload text,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT {schema}.add_schedule(name, queue, convert_to(payload, 'UTF8'), every, cron, time_zone,
                               key, priority, first_tick);
END;

-- The schedules of a queue (all of them with NULL), by name: the rows of
-- the table itself.
CREATE FUNCTION {schema}.list_schedules(queue text DEFAULT NULL)
RETURNS SETOF {schema}.schedules
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_variable
BEGIN
  IF queue IS NOT NULL THEN
    PERFORM {schema}.require_queue(queue);
  END IF;
  RETURN QUERY
    SELECT s.* FROM {schema}.schedules s WHERE queue IS NULL OR s.queue = queue ORDER BY s.name;
END
$$;

-- Deletes a schedule; 42704 when the schema has none of that name.
CREATE FUNCTION {schema}.delete_schedule(name text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_variable
BEGIN
  DELETE FROM {schema}.schedules s WHERE s.name = name;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
      'unknown schedule "%s" in schema "%s" (partq schedule list shows them)', name,
      '{schema_name}');
  END IF;
END
$$;
