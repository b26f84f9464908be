-- Migration 30: a worker role confined to its queues' rows by row-level security
--
-- Workers use the tables directly (claims, acks, heartbeats), so their role
-- needs privileges on them; with those alone a worker of queue a could take
-- queue b's parts, ack b's items or write the result `partq wait b` prints
-- (issue 48, finding 3). `partq grant worker ROLE --queue a` gives the role
-- the table privileges a worker needs and, through apply_worker_policies(),
-- a restrictive policy TO that role on every table with a queue column: it
-- sees, locks, updates and deletes only its queues' rows and inserts only
-- theirs (items also into queues it may produce to, as new items: a
-- handler's follow-ups). The policies name the queues as constants, so a
-- statement pays a comparison per row, no lookup.
--
-- Every other role keeps what its privileges give: a permissive policy
-- `USING (true)` for PUBLIC (the owner and superusers bypass row-level
-- security anyway). A confined role's table privileges no longer open the
-- SQL API beyond its queues either (may()).

ALTER TABLE {schema}.grants DROP CONSTRAINT grants_kind_check;
ALTER TABLE {schema}.grants ADD CONSTRAINT grants_kind_check
  CHECK (kind IN ('producer', 'operator', 'viewer', 'worker'));

-- The tables a worker's statements touch that have a queue column (and
-- queues, whose column is its name).
CREATE FUNCTION {schema}.worker_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE
RETURN ARRAY['sessions', 'session_parts', 'items', 'dead_items', 'results', 'part_claims',
             'groups', 'cancelled_items', 'kafka_offsets', 'throughput', 'schedules',
             'group_generations', 'expiry_sweeps', 'group_changes', 'queues'];

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY {schema}.worker_tables() LOOP
    EXECUTE format('ALTER TABLE {schema}.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY everyone ON {schema}.%I USING (true)', t);
  END LOOP;
END
$$;

-- Role r's restrictive policies, made again from its grants: dropped when
-- it has no worker grant left. Run by partq grant and revoke, as the owner.
CREATE FUNCTION {schema}.apply_worker_policies(r name) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  pol CONSTANT text := 'worker_' || (SELECT oid FROM pg_roles WHERE rolname = r);
  work CONSTANT text[] := ARRAY(SELECT g.queue FROM {schema}.grants g
                                WHERE g.role = r AND g.kind = 'worker' ORDER BY 1);
  produce CONSTANT text[] := ARRAY(SELECT DISTINCT g.queue FROM {schema}.grants g
                                   WHERE g.role = r AND g.kind IN ('worker', 'producer', 'operator')
                                   ORDER BY 1);
  t text;
  col text;
  cmd text;
BEGIN
  FOREACH t IN ARRAY {schema}.worker_tables() LOOP
    FOREACH cmd IN ARRAY ARRAY['all', 'select', 'update', 'delete', 'insert', 'end'] LOOP
      EXECUTE format('DROP POLICY IF EXISTS %I ON {schema}.%I', pol || '_' || cmd, t);
    END LOOP;
    CONTINUE WHEN cardinality(work) = 0;
    col := CASE WHEN t = 'queues' THEN 'name' ELSE 'queue' END;
    IF t = 'groups' THEN
      -- A group's end item goes into its end queue as the worker acks the
      -- group's last item: only into a queue the worker may produce to.
      EXECUTE format('CREATE POLICY %I ON {schema}.groups AS RESTRICTIVE TO %I USING (true) '
                     'WITH CHECK (end_queue IS NULL OR end_queue = ANY (%L))',
                     pol || '_end', r, produce);
    END IF;
    IF t <> 'items' THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE TO %I USING (%I = ANY (%L))',
                     pol || '_all', t, r, col, work);
      CONTINUE;
    END IF;
    FOREACH cmd IN ARRAY ARRAY['select', 'update', 'delete'] LOOP
      EXECUTE format('CREATE POLICY %I ON {schema}.items AS RESTRICTIVE FOR %s TO %I '
                     'USING (queue = ANY (%L))', pol || '_' || cmd, cmd, r, work);
    END LOOP;
    -- A handler's follow-up items also go into queues it may produce to, as
    -- new items (an attempts count no claim survives would stall a part).
    EXECUTE format('CREATE POLICY %I ON {schema}.items AS RESTRICTIVE FOR INSERT TO %I '
                   'WITH CHECK (queue = ANY (%L) AND (queue = ANY (%L) OR attempts = 0))',
                   pol || '_insert', r, produce, work);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.apply_worker_policies(name) FROM PUBLIC;

-- The queues session_user holds a worker grant on; NULL with none.
CREATE FUNCTION {schema}.worker_scope() RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope CONSTANT text[] := ARRAY(
    SELECT g.queue FROM {schema}.grants g JOIN pg_roles r ON r.rolname = g.role
    WHERE g.kind = 'worker' AND pg_has_role(session_user, r.oid, 'MEMBER'));
BEGIN
  RETURN CASE WHEN cardinality(scope) = 0 THEN NULL ELSE scope END;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.may(queue text, kinds text[], tbl text, privilege text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope text[];
BEGIN
  IF pg_has_role(session_user,
                 (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                 'MEMBER')
     OR EXISTS (SELECT 1 FROM {schema}.grants g JOIN pg_roles r ON r.rolname = g.role
                WHERE g.queue = may.queue AND g.kind = ANY (may.kinds)
                  AND pg_has_role(session_user, r.oid, 'MEMBER')) THEN
    RETURN true;
  END IF;
  IF NOT has_table_privilege(session_user, format('%I.%I', '{schema_name}', tbl), privilege) THEN
    RETURN false;
  END IF;
  -- The table privileges of a confined worker reach only its queues.
  scope := {schema}.worker_scope();
  RETURN scope IS NULL OR queue = ANY (scope);
END
$$;
