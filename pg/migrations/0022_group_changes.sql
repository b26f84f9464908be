-- Migration 22: group changes: a group read after a change returns only the owners that changed

-- The owner rows each generation wrote or deleted (issue 26,
-- GroupView::delta): a session whose last view is at generation g reads the
-- parts changed since g here, not every owner row. Written by the triggers
-- that move the generation, in the same statement and transaction, so a
-- snapshot that sees generation G sees exactly the changes of generations up
-- to G (the generation row's lock orders them by commit). session_id NULL:
-- the row went. The changes of the last 1024 generations are kept
-- (kGroupChangesKept in store/types.h): older callers read the whole group.
-- Pruned by the transaction that moves the generation to a multiple of 64,
-- which holds the generation row, so two prunes never overlap.
CREATE TABLE {schema}.group_changes (
  queue       text COLLATE "C" NOT NULL,
  generation  bigint NOT NULL,
  part        int NOT NULL,
  session_id  uuid,
  epoch       bigint,
  PRIMARY KEY (queue, generation, part)
);

-- The session_parts triggers of migration 19 call move_group_generation();
-- it now also logs their rows (PL/pgSQL compiles a trigger function for each
-- table, so the sessions triggers never plan the branch that reads parts).
CREATE OR REPLACE FUNCTION {schema}.move_group_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME <> 'session_parts' THEN
    INSERT INTO {schema}.group_generations AS g (queue, generation)
    SELECT DISTINCT c.queue, 1 FROM changed c
    ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
    RETURN NULL;
  END IF;
  WITH moved AS (
    INSERT INTO {schema}.group_generations AS g (queue, generation)
    SELECT DISTINCT c.queue, 1 FROM changed c
    ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1
    RETURNING g.queue, g.generation),
  logged AS (
    INSERT INTO {schema}.group_changes (queue, generation, part, session_id, epoch)
    SELECT c.queue, m.generation, c.part,
           CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE c.session_id END,
           CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE c.epoch END
    FROM changed c JOIN moved m ON m.queue = c.queue)
  DELETE FROM {schema}.group_changes x USING moved m
  WHERE x.queue = m.queue AND m.generation % 64 = 0 AND x.generation <= m.generation - 1024;
  RETURN NULL;
END
$$;

-- The owners changed in `queue` after generation `since`, as the group
-- reads return owners (part:session:epoch, by part), each part's latest
-- change; an empty session and epoch for a row that went.
CREATE FUNCTION {schema}.owner_changes(queue text, since bigint) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT string_agg(d.part || ':' || coalesce(d.session_id::text, '') || ':'
                    || coalesce(d.epoch::text, ''), ',' ORDER BY d.part)
  FROM (SELECT DISTINCT ON (c.part) c.part, c.session_id, c.epoch
        FROM {schema}.group_changes c
        WHERE c.queue = owner_changes.queue AND c.generation > since
        ORDER BY c.part, c.generation DESC) d
$$;
