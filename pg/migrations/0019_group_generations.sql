-- Migration 19: group generations: a heartbeat reads members and owners only when they changed

-- The group generation of each queue (issue 26, Store::HeartbeatSince): moved
-- in every transaction that changes the queue's members or owners, so a
-- heartbeat that finds it where its session last saw it reads no owner row.
-- Moved by triggers rather than by each statement, so that no path (join,
-- leave, expiry, acquire, release, a static re-join's kept parts, a queue's
-- deletion, and those added later) can forget it. Statement triggers: one
-- move per statement, whatever its rows, and none for a statement that
-- changed no row (an acquisition that got nothing). They fire at the end of
-- the statement, after every row lock it takes, so a transaction holds this
-- row's lock only from there to its commit and two changes cannot deadlock
-- on it. A table of its own: moving a column of the queue row would deadlock
-- two acquisitions, which both hold that row FOR SHARE. No foreign key: the
-- cascades of a queue's deletion move it after the queue row is gone; the
-- row left behind is harmless (a re-created queue's sessions start from
-- kNoGeneration and read its value).
CREATE TABLE {schema}.group_generations (
  queue       text COLLATE "C" PRIMARY KEY,
  generation  bigint NOT NULL
);

CREATE FUNCTION {schema}.move_group_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {schema}.group_generations AS g (queue, generation)
  SELECT DISTINCT c.queue, 1 FROM changed c
  ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
  RETURN NULL;
END
$$;

-- A session past its TTL that heartbeats again before anyone deleted it
-- comes back into the members (which are read by time), so its heartbeat
-- moves the generation too; other heartbeats (the WHEN is false) do not, and
-- stay HOT updates.
CREATE FUNCTION {schema}.move_group_generation_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {schema}.group_generations AS g (queue, generation)
  VALUES (NEW.queue, 1)
  ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
  RETURN NULL;
END
$$;

CREATE TRIGGER group_parts_inserted AFTER INSERT ON {schema}.session_parts
  REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_parts_updated AFTER UPDATE ON {schema}.session_parts
  REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_parts_deleted AFTER DELETE ON {schema}.session_parts
  REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_sessions_inserted AFTER INSERT ON {schema}.sessions
  REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_sessions_deleted AFTER DELETE ON {schema}.sessions
  REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();
CREATE TRIGGER group_sessions_revived AFTER UPDATE ON {schema}.sessions
  FOR EACH ROW WHEN (OLD.expires_at < now())
  EXECUTE FUNCTION {schema}.move_group_generation_row();
