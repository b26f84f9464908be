-- Migration 28: schedules.catch_up: ticks a dead or stalled firer missed fire late, once, within a window
--
-- A schedule's firer is the worker owning part 0. When it died or stalled,
-- the next owner found several ticks due and fired only the latest,
-- counting the rest missed: with a 4 s TTL a 1 s schedule lost 3 ticks to a
-- SIGKILL (issue 49). Now each due tick at most catch_up old fires, late
-- but once, oldest first (schedule/timing.h, PlanCatchUp; a Kubernetes
-- CronJob's startingDeadlineSeconds); older ones are missed as before, and
-- with none inside the window only the latest fires. NULL: the default
-- window, the queue's session TTL plus a heartbeat (a third of it) plus one
-- period of the schedule, which covers a failover (DefaultCatchUp). 0: the
-- old rule. add_schedule() takes it as its last argument; the old
-- functions go first (a call with their nine arguments would match both).

ALTER TABLE {schema}.schedules ADD COLUMN catch_up interval
  CHECK (catch_up IS NULL OR (catch_up >= interval '0' AND catch_up <= interval '366 days'));

DROP FUNCTION {schema}.add_schedule(text, text, text, interval, text, text, text, int, timestamptz);
DROP FUNCTION {schema}.add_schedule(text, text, bytea, interval, text, text, text, int, timestamptz);

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload bytea,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL,
                                      catch_up interval DEFAULT NULL)
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
  SELECT s.queue INTO other FROM {schema}.schedules s WHERE s.name = add_schedule.name;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format(
      'schedule "%s" already exists (on queue "%s"); delete it first to change it', name, other);
  END IF;
  INSERT INTO {schema}.schedules (name, queue, every, cron, time_zone, payload, key, priority,
                                  next_tick, catch_up)
  VALUES (name, queue, every, btrim(cron), time_zone, payload, key, prio, first_tick, catch_up);
END
$$;

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload text,
                                      every interval DEFAULT NULL, cron text DEFAULT NULL,
                                      time_zone text DEFAULT NULL, key text DEFAULT NULL,
                                      priority int DEFAULT 0, first_tick timestamptz DEFAULT NULL,
                                      catch_up interval DEFAULT NULL)
RETURNS void LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT {schema}.add_schedule(name, queue, convert_to(payload, 'UTF8'), every, cron, time_zone,
                               key, priority, first_tick, catch_up);
END;
