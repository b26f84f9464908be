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
      -- group's last item: a group the worker makes ends only into a queue
      -- it may produce to (it may not update end_queue at all: its UPDATE
      -- privilege names the count columns only, grant_worker_tables.sql).
      EXECUTE format('CREATE POLICY %I ON {schema}.groups AS RESTRICTIVE FOR INSERT TO %I '
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

-- A group whose end item cannot be enqueued ends with the reason in
-- end_error, whatever the reason: before, only an unknown end queue was
-- caught, so an end payload over the end queue's limit, or an acking worker
-- without the right to produce to it, failed the ack of the group's last
-- item again and again (its batch with it). The same body as migration 27's
-- otherwise.
CREATE OR REPLACE FUNCTION {schema}.group_end(queue text, group_id text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
  end_id bigint;
  was_there boolean;
BEGIN
  UPDATE {schema}.groups x SET ended_at = statement_timestamp(), pending = 0
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.* INTO r;
  IF NOT FOUND OR r.end_queue IS NULL THEN
    RETURN;
  END IF;
  IF r.end_skipped THEN
    UPDATE {schema}.groups x SET end_error = 'cancelled without its end work (--no-end)'
    WHERE x.queue = q AND x.id = g;
    RETURN;
  END IF;
  BEGIN
    SELECT e.id, e.duplicate INTO end_id, was_there
    FROM {schema}.enqueue_item(r.end_queue,
           convert_to(jsonb_build_object('queue', q, 'group', g, 'done', r.done, 'dead', r.dead,
                                         'cancelled', r.cancelled,
                                         'payload', r.end_payload)::text, 'UTF8'),
           dedup_key => 'partq.group:' || q || ':' || g) e;
    -- enqueue_item stamps the transaction's start; the end item is enqueued
    -- now. Both columns alike: due at once, so not among items_later.
    IF NOT was_there THEN
      UPDATE {schema}.items i SET enqueued_at = statement_timestamp(), run_at = statement_timestamp()
      WHERE i.queue = r.end_queue AND i.id = end_id;
    END IF;
    UPDATE {schema}.groups x SET end_item = end_id WHERE x.queue = q AND x.id = g;
  EXCEPTION WHEN undefined_object OR insufficient_privilege OR invalid_parameter_value THEN
    UPDATE {schema}.groups x SET end_error = SQLERRM WHERE x.queue = q AND x.id = g;
  END;
END
$$;
