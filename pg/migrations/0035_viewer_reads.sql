-- Migration 35: a viewer role reads its queues' counts, owners and dead items, never a payload
--
-- The console reads the tables (Status, Owners, ListDead, ListSchedules,
-- ListGroups), so a role it logs in as needed the owner's rights, which read
-- and change every queue (issue 48). `partq grant viewer ROLE --queue a` now
-- also gives the role, through viewer_privileges(), SELECT on the columns of
-- the tables the console reads but payloads and what may carry them (the
-- payload columns, groups' end_payload, results' result, Kafka headers), and
-- apply_worker_policies()
-- adds a restrictive SELECT policy TO that role naming the queues it views:
-- it sees only their rows. Column privileges, not table ones: a role with
-- only those is not let into the SQL API by may()'s table-privilege path,
-- and a payload stays unreadable unless the schema's owner grants its
-- column (`GRANT SELECT (payload) ON partq.dead_items TO role`; the policy
-- still keeps the role to its queues' rows).

-- SELECT on the columns of the tables with a queue column (and the schema's
-- version) but those, to role r (revoke: taken back; column privileges only, so a
-- worker grant's table privileges are left as they were). Run by partq
-- grant and revoke, as the owner.
CREATE FUNCTION {schema}.viewer_privileges(r name, revoke boolean) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  t text;
  cols text;
BEGIN
  FOREACH t IN ARRAY {schema}.worker_tables() || ARRAY['schema_migrations'] LOOP
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
    FROM pg_attribute a
    WHERE a.attrelid = format('%I.%I', '{schema_name}', t)::regclass AND a.attnum > 0
      AND NOT a.attisdropped AND a.attname NOT IN ('payload', 'end_payload', 'headers', 'result');
    IF revoke THEN
      EXECUTE format('REVOKE SELECT (%s) ON {schema}.%I FROM %I', cols, t, r);
    ELSE
      EXECUTE format('GRANT SELECT (%s) ON {schema}.%I TO %I', cols, t, r);
    END IF;
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.viewer_privileges(name, boolean) FROM PUBLIC;

-- Role r's restrictive policies, made again from its grants: its worker
-- queues' rows for every command (as migration 30 made them), and with
-- viewer grants, reads of its viewed queues' rows too. Restrictive
-- policies of a command must all pass, so a role with both kinds gets one
-- policy per command: reads of either kind's queues, writes of its worker
-- queues only.
CREATE OR REPLACE FUNCTION {schema}.apply_worker_policies(r name) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  pol CONSTANT text := 'worker_' || (SELECT oid FROM pg_roles WHERE rolname = r);
  work CONSTANT text[] := ARRAY(SELECT g.queue FROM {schema}.grants g
                                WHERE g.role = r AND g.kind = 'worker' ORDER BY 1);
  seen CONSTANT text[] := ARRAY(SELECT DISTINCT g.queue FROM {schema}.grants g
                                WHERE g.role = r AND g.kind IN ('worker', 'viewer') ORDER BY 1);
  views CONSTANT boolean := EXISTS (SELECT 1 FROM {schema}.grants g
                                    WHERE g.role = r AND g.kind = 'viewer');
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
    CONTINUE WHEN cardinality(seen) = 0;
    col := CASE WHEN t = 'queues' THEN 'name' ELSE 'queue' END;
    IF t = 'groups' AND cardinality(work) > 0 THEN
      -- A group's end item goes into its end queue as the worker acks the
      -- group's last item: a group the worker makes ends only into a queue
      -- it may produce to (it may not update end_queue at all: its UPDATE
      -- privilege names the count columns only, grant_worker_tables.sql).
      EXECUTE format('CREATE POLICY %I ON {schema}.groups AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK (end_queue IS NULL OR end_queue = ANY (%L))',
                     pol || '_end', r, produce);
    END IF;
    IF t <> 'items' AND NOT views THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE TO %I USING (%I = ANY (%L))',
                     pol || '_all', t, r, col, work);
      CONTINUE;
    END IF;
    EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE FOR SELECT TO %I '
                   'USING (%I = ANY (%L))', pol || '_select', t, r, col, seen);
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
                   'WITH CHECK (queue = ANY (%L) AND (queue = ANY (%L) OR attempts = 0))',
                   pol || '_insert', r, produce, work);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.apply_worker_policies(name) FROM PUBLIC;

-- Viewers granted before this version get what the console reads.
DO $$
DECLARE
  r name;
BEGIN
  FOR r IN SELECT DISTINCT g.role FROM {schema}.grants g JOIN pg_roles p ON p.rolname = g.role
           WHERE g.kind = 'viewer' LOOP
    PERFORM {schema}.viewer_privileges(r, false);
    PERFORM {schema}.apply_worker_policies(r);
  END LOOP;
END
$$;
