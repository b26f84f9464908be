-- Migration 32: a schedule added, or its timing changed, is announced
--
-- The owner of a queue's part 0 fires its schedules and used to ask the
-- database every 5 s whether one had been added: one transaction per queue
-- per 5 s, even for the many queues that never have a schedule (issue 52: a
-- worker of 50 idle queues). Now the insert of a schedule, or an update of
-- its timing (add_schedule over an existing name), notifies the queue's
-- channel with 's', and a listening firer looks at once; one with nothing to
-- fire asks only once a minute. The firer's own updates (next tick, counts)
-- touch no column named here and send nothing. Workers older than this
-- migration skip the payload. SECURITY DEFINER: channel_for is the schema's.

CREATE FUNCTION {schema}.notify_schedule() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM pg_notify({schema}.channel_for(NEW.queue), 's');
  RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.notify_schedule() FROM PUBLIC;

CREATE TRIGGER schedules_notify
  AFTER INSERT OR UPDATE OF queue, every, cron, time_zone ON {schema}.schedules
  FOR EACH ROW EXECUTE FUNCTION {schema}.notify_schedule();
