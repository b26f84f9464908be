-- Migration 36: a worker or viewer role stays confined when its queue goes, its name changes or its grants change
--
-- A second review of issue 48 found a confined role's bounds tied to its
-- grants rows by name, and its policies made only by partq grant and revoke
-- of its own kind:
-- - A queue deleted took its grants rows with it, but not the role's table
--   privileges nor its policies: worker_scope() then found no worker grant,
--   and may() let a role with table privileges and no scope into the SQL
--   API of every queue (so did a renamed role, whose grants name its old
--   name); the policies still named the deleted queue, so a queue made
--   again under that name was the stale role's to read.
-- - A role both worker and viewer read the viewed queue's payloads: its
--   worker grant gives table privileges, its viewer grant widened the SELECT
--   policy to the viewed queue.
-- - Grants of other kinds (producer, operator) changed what a worker may
--   insert without remaking its policies, and a worker's direct INSERT into
--   items skipped the checks of an enqueue (part, payload limit), or took an
--   id no enqueue had issued yet, so the enqueue that did failed on it; a
--   row in results or dead_items with another queue's id stalled that
--   queue's ack of the item for good.
-- Now:
-- - confined_roles records by oid every role ever granted worker or viewer.
--   Such a role's scope is its worker queues, empty when it has none left
--   (never "unconfined"), and it keeps restrictive policies, over no queue
--   when it has no grant left.
-- - A change of grants, by partq grant or revoke or by a queue's delete,
--   remakes the role's policies when the transaction commits (a deferred
--   trigger, as the owner).
-- - A role with worker grants reads only its worker queues: viewer grants
--   widen nothing for it (partq grant refuses the mix from now on).
-- - A confined role's item must fit its queue (item_fits: a part of the
--   queue, a payload within its limit, an id the sequence issued), and its
--   results and dead items name an item of their queue (item_of).

CREATE TABLE {schema}.confined_roles (
  role_oid     oid PRIMARY KEY,
  confined_at  timestamptz NOT NULL DEFAULT now()
);

INSERT INTO {schema}.confined_roles (role_oid)
SELECT DISTINCT r.oid FROM {schema}.grants g JOIN pg_roles r ON r.rolname = g.role
WHERE g.kind IN ('worker', 'viewer');

-- The queues session_user holds a worker grant on; empty for a confined role
-- (or a member of one) without any; NULL for every other role.
CREATE OR REPLACE FUNCTION {schema}.worker_scope() RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope CONSTANT text[] := ARRAY(
    SELECT g.queue FROM {schema}.grants g JOIN pg_roles r ON r.rolname = g.role
    WHERE g.kind = 'worker' AND pg_has_role(session_user, r.oid, 'MEMBER'));
BEGIN
  IF cardinality(scope) > 0
     OR EXISTS (SELECT 1 FROM {schema}.confined_roles c JOIN pg_roles r ON r.oid = c.role_oid
                WHERE pg_has_role(session_user, r.oid, 'MEMBER')) THEN
    RETURN scope;
  END IF;
  RETURN NULL;
END
$$;

-- Whether a confined role's new item fits its queue, as an enqueue makes
-- one: a part of the queue, a payload within its limit, an id the
-- sequence has issued. As the owner: the role may not read the queue's row
-- or the sequence.
CREATE FUNCTION {schema}.item_fits(id bigint, queue text, part int, payload bytea)
RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT 1 FROM {schema}.queues q
               WHERE q.name = item_fits.queue AND item_fits.part >= 0
                 AND item_fits.part < q.parts
                 AND octet_length(item_fits.payload) <= q.max_payload_bytes)
   AND item_fits.id <= (SELECT s.last_value FROM {schema}.items_id_seq s);

-- Whether id is an item of queue (a row a finish deletes in the same
-- statement still is: the statement's snapshot). As the owner: the role
-- may read only its queues' rows, and must name one of them.
CREATE FUNCTION {schema}.item_of(id bigint, queue text)
RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT 1 FROM {schema}.items i
               WHERE i.id = item_of.id AND i.queue = item_of.queue);

-- Role r's restrictive policies, made again from its grants: none for a role
-- never confined; for a confined one, reads of its worker queues (or, with
-- none, its viewed queues), writes of its worker queues only, its new
-- items as item_fits says, its results and dead items of its items.
CREATE OR REPLACE FUNCTION {schema}.apply_worker_policies(r name) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  role_id CONSTANT oid := (SELECT p.oid FROM pg_roles p WHERE p.rolname = r);
  pol CONSTANT text := 'worker_' || role_id;
  confined CONSTANT boolean := EXISTS (SELECT 1 FROM {schema}.confined_roles c
                                       WHERE c.role_oid = role_id);
  work CONSTANT text[] := ARRAY(SELECT g.queue FROM {schema}.grants g
                                WHERE g.role = r AND g.kind = 'worker' ORDER BY 1);
  views CONSTANT text[] := ARRAY(SELECT g.queue FROM {schema}.grants g
                                 WHERE g.role = r AND g.kind = 'viewer' ORDER BY 1);
  reads CONSTANT text[] := CASE WHEN cardinality(work) > 0 THEN work ELSE views END;
  produce CONSTANT text[] := ARRAY(SELECT DISTINCT g.queue FROM {schema}.grants g
                                   WHERE g.role = r AND g.kind IN ('worker', 'producer', 'operator')
                                   ORDER BY 1);
  t text;
  col text;
  cmd text;
BEGIN
  FOREACH t IN ARRAY {schema}.worker_tables() LOOP
    FOREACH cmd IN ARRAY ARRAY['all', 'select', 'update', 'delete', 'insert', 'end', 'ids'] LOOP
      EXECUTE format('DROP POLICY IF EXISTS %I ON {schema}.%I', pol || '_' || cmd, t);
    END LOOP;
    CONTINUE WHEN role_id IS NULL OR NOT confined;
    col := CASE WHEN t = 'queues' THEN 'name' ELSE 'queue' END;
    IF t = 'groups' THEN
      -- A group's end item goes into its end queue as the worker acks the
      -- group's last item: a group the worker makes ends only into a queue
      -- it may produce to (it may not update end_queue at all: its UPDATE
      -- privilege names the count columns only, grant_worker_tables.sql).
      EXECUTE format('CREATE POLICY %I ON {schema}.groups AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK (end_queue IS NULL OR end_queue = ANY (%L))',
                     pol || '_end', r, produce);
    END IF;
    IF t IN ('results', 'dead_items') THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK ({schema}.item_of(id, queue))', pol || '_ids', t, r);
    END IF;
    IF t <> 'items' AND reads = work THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE TO %I USING (%I = ANY (%L))',
                     pol || '_all', t, r, col, work);
      CONTINUE;
    END IF;
    EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE FOR SELECT TO %I '
                   'USING (%I = ANY (%L))', pol || '_select', t, r, col, reads);
    FOREACH cmd IN ARRAY ARRAY['update', 'delete'] LOOP
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE FOR %s TO %I '
                     'USING (%I = ANY (%L))', pol || '_' || cmd, t, cmd, r, col, work);
    END LOOP;
    IF t <> 'items' THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK (%I = ANY (%L))', pol || '_insert', t, r, col, work);
      CONTINUE;
    END IF;
    -- A handler's follow-up items also go into queues it may produce to, as
    -- new items (an attempts count no claim survives would stall a part).
    EXECUTE format('CREATE POLICY %I ON {schema}.items AS RESTRICTIVE FOR INSERT TO %I '
                   'WITH CHECK (queue = ANY (%L) AND (queue = ANY (%L) OR attempts = 0) '
                   'AND {schema}.item_fits(id, queue, part, payload))',
                   pol || '_insert', r, produce, work);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.apply_worker_policies(name) FROM PUBLIC;

-- A grant of worker or viewer confines its role for good; any change of a
-- confined role's grants remakes its policies at commit, once the
-- statements that changed them (a queue's delete among them) are done.
CREATE FUNCTION {schema}.grants_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  g CONSTANT {schema}.grants := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
  IF TG_OP = 'INSERT' AND g.kind IN ('worker', 'viewer') THEN
    INSERT INTO {schema}.confined_roles (role_oid)
    SELECT p.oid FROM pg_roles p WHERE p.rolname = g.role
    ON CONFLICT DO NOTHING;
  END IF;
  -- A confined role's, and one whose last confining grant partq revoke
  -- just took (its policies go); any other role has none to remake.
  IF EXISTS (SELECT 1 FROM pg_roles p
             WHERE p.rolname = g.role
               AND (EXISTS (SELECT 1 FROM {schema}.confined_roles c WHERE c.role_oid = p.oid)
                    OR EXISTS (SELECT 1 FROM pg_policy y
                               WHERE y.polrelid = '{schema}.items'::regclass
                                 AND y.polname LIKE 'worker\_' || p.oid || '\_%'))) THEN
    PERFORM {schema}.apply_worker_policies(g.role);
  END IF;
  RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.grants_changed() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER grants_changed AFTER INSERT OR DELETE ON {schema}.grants
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION {schema}.grants_changed();

-- Every confined role's policies, as this version makes them.
DO $$
DECLARE
  r name;
BEGIN
  FOR r IN SELECT p.rolname FROM {schema}.confined_roles c JOIN pg_roles p ON p.oid = c.role_oid LOOP
    PERFORM {schema}.apply_worker_policies(r);
  END LOOP;
END
$$;
