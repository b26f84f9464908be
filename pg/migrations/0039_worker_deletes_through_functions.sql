-- Migration 39: a confined worker deletes through functions and holds no table-level UPDATE or DELETE, so it cannot LOCK the tables
--
-- A worker role held UPDATE and DELETE on the tables every queue's workers
-- share (migration 30), and in PostgreSQL either privilege lets a role take
-- any lock on a table: a worker of queue a could LOCK TABLE items IN ACCESS
-- EXCLUSIVE MODE and stop the claims and acks of every queue of the schema
-- until its transaction ended (issue 48, finding M3). Row-level security
-- does not apply to LOCK.
--
-- Now a worker role gets UPDATE on the columns of those tables, not on the
-- tables (a column privilege allows UPDATE, SELECT ... FOR UPDATE and
-- INSERT ... ON CONFLICT DO UPDATE, and no lock stronger than the ROW
-- EXCLUSIVE its INSERT privilege allows), and no DELETE at all. The deletes
-- a worker makes go through the rules and SECURITY DEFINER functions below,
-- which delete only rows of the caller's queues (worker_scope(), as the
-- policies of migration 36 do). A role that may delete from the table itself (the
-- schema's owner, a role a DBA granted DELETE) deletes inline as before:
-- the store asks at connect (PgStore::EnsureConnected) and builds its
-- statements for what it may do, so the owner's drain pays nothing for
-- this. Cold statements (release, leave, the heartbeat's pruning, a
-- takeover's dropped records) use the functions for every role.

-- The queues whose rows session_user may delete through these functions:
-- NULL for all (the schema's owner or a member, or a role that is not
-- confined and holds DELETE on the table), a confined worker's queues, or
-- an error for any other role.
CREATE FUNCTION {schema}.deletable_queues(tbl text) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope text[];
BEGIN
  IF pg_has_role(session_user,
                 (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                 'MEMBER') THEN
    RETURN NULL;
  END IF;
  scope := {schema}.worker_scope();
  IF scope IS NOT NULL THEN
    RETURN scope;
  END IF;
  IF has_table_privilege(session_user, format('%I.%I', '{schema_name}', tbl), 'DELETE') THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'permission denied for table %', tbl USING ERRCODE = '42501';
END
$$;

-- Deletes the items at `tids` whose ids are in `ids` and, of `ids`, those
-- found elsewhere (a table rewrite moves rows), as ack_items() does; with
-- `tids` NULL, the items of `ids`. Only rows of the caller's queues. Planned with enable_seqscan off, as
-- ack_items() is (migration 4 says why).
CREATE FUNCTION {schema}.delete_items(tids tid[], ids bigint[]) RETURNS SETOF {schema}.items
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off AS $$
DECLARE
  scope CONSTANT text[] := {schema}.deletable_queues('items');
  n bigint := 0;
BEGIN
  IF tids IS NOT NULL THEN
    RETURN QUERY DELETE FROM {schema}.items i
                 WHERE i.ctid = ANY(tids) AND i.id = ANY(ids)
                   AND (scope IS NULL OR i.queue = ANY(scope))
                 RETURNING i.*;
    GET DIAGNOSTICS n = ROW_COUNT;
  END IF;
  IF n < cardinality(ids) THEN
    RETURN QUERY DELETE FROM {schema}.items i
                 WHERE i.id = ANY(ids) AND (scope IS NULL OR i.queue = ANY(scope))
                 RETURNING i.*;
  END IF;
END
$$;

-- The pipelined ack's delete for a confined worker, the one delete a drain
-- makes per batch: `INSERT INTO item_acks (tids) VALUES ($1) RETURNING id,
-- queue, dedup_key` deletes the items at the addresses in the array $1, of
-- the caller's worker queues only (as worker_scope() reads them). A rule,
-- not a function: it is planned into the caller's prepared statement as
-- one TID scan and an array of its queues, so it costs what an inline delete
-- costs. A PL/pgSQL call per batch cost a confined drain about 20 % more
-- server CPU per item, most of it the calls' set-up in every transaction
-- (about 0.1 ms a batch: pg_stat_statements); a row per address, a TID
-- scan started again for each, 0.16 ms a batch. The rule's action runs
-- with the view owner's rights (it reads the grants the worker may not);
-- the view reads no table, so a LOCK of it locks nothing else, and a
-- worker holds only SELECT and INSERT on it (no LOCK past ROW EXCLUSIVE
-- either). With `ids` too, only rows of those ids (the lean ack's, which
-- counts and rolls back when a row moved). Only statements that run after
-- plan_guard.sql use it (PgStore's pipelined ones), so that their generic
-- plan cannot be a sequential scan; the other deletes of a confined worker
-- go through delete_items() below, whose plans are made with
-- enable_seqscan off. my_worker_queues: session_user's worker queues, as
-- worker_scope() reads them (a grant counts for the role of its name and
-- oid), for the rules, which read it as the owner: an array made once per
-- statement (an IN (subquery) built a hash table each time, and the join
-- with pg_roles read pg_authid: about 20 µs a batch together).
CREATE VIEW {schema}.my_worker_queues AS
  SELECT g.queue FROM {schema}.grants g
  WHERE g.kind = 'worker' AND pg_get_userbyid(g.role_oid) = g.role
    AND pg_has_role(session_user, g.role_oid, 'MEMBER');
CREATE VIEW {schema}.item_acks AS
  SELECT NULL::tid[] AS tids, NULL::bigint[] AS ids, NULL::bigint AS id, NULL::text AS queue,
         NULL::text AS dedup_key
  WHERE false;
CREATE RULE item_acks_delete AS ON INSERT TO {schema}.item_acks DO INSTEAD
  DELETE FROM {schema}.items i
  WHERE i.ctid = ANY (NEW.tids) AND (NEW.ids IS NULL OR i.id = ANY (NEW.ids))
    AND i.queue = ANY (ARRAY(SELECT q.queue FROM {schema}.my_worker_queues q))
  RETURNING NULL::tid[], NULL::bigint[], i.id, i.queue::text, i.dedup_key::text;

-- The same for a claim's drop of its parts' old records (claim_ctes.sql):
-- `INSERT INTO claim_record_drops (tids, epochs) ... RETURNING part, epoch`
-- drops the rows at those addresses still at those epochs, as
-- drop_claim_records() does, of the caller's worker queues only.
CREATE VIEW {schema}.claim_record_drops AS
  SELECT NULL::tid[] AS tids, NULL::bigint[] AS epochs, NULL::int AS part, NULL::bigint AS epoch
  WHERE false;
CREATE RULE claim_record_drops_delete AS ON INSERT TO {schema}.claim_record_drops DO INSTEAD
  DELETE FROM {schema}.part_claims c USING unnest(NEW.tids, NEW.epochs) AS l(tid, epoch)
  WHERE c.ctid = l.tid AND c.epoch = l.epoch
    AND c.queue = ANY (ARRAY(SELECT q.queue FROM {schema}.my_worker_queues q))
  RETURNING NULL::tid[], NULL::bigint[], c.part, c.epoch;

-- drop_claim_records() (migration 33) for a role that may not delete from
-- part_claims: the same rows, of the caller's queues only.
CREATE FUNCTION {schema}.drop_claim_records_of_mine(tids tid[], epochs bigint[])
RETURNS TABLE (dropped_part int, dropped_epoch bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off AS $$
DECLARE
  scope CONSTANT text[] := {schema}.deletable_queues('part_claims');
BEGIN
  RETURN QUERY
    DELETE FROM {schema}.part_claims c USING unnest(tids, epochs) AS l(tid, epoch)
    WHERE c.ctid = l.tid AND c.epoch = l.epoch AND (scope IS NULL OR c.queue = ANY(scope))
    RETURNING c.part, c.epoch;
END
$$;

-- The rows at `tids` of `tbl`, one of the tables the cold statements
-- delete from, of the caller's queues, returned as jsonb. A row changed
-- since its caller read it has moved and stays (the callers read and lock
-- the rows they pass, or their rows change only by their own session).
CREATE FUNCTION {schema}.delete_rows(tbl text, tids tid[]) RETURNS SETOF jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  scope text[];
BEGIN
  IF tbl IS NULL OR tbl NOT IN ('part_claims', 'session_parts', 'sessions', 'throughput') THEN
    RAISE EXCEPTION 'delete_rows: no table %', quote_nullable(tbl) USING ERRCODE = '22023';
  END IF;
  scope := {schema}.deletable_queues(tbl);
  RETURN QUERY EXECUTE format(
    'DELETE FROM {schema}.%I t WHERE t.ctid = ANY($1) AND ($2 IS NULL OR t.queue = ANY($2)) '
    'RETURNING to_jsonb(t)', tbl)
    USING tids, scope;
END
$$;

-- Migration 22's trigger, as the owner: its delete of old group changes
-- is the schema's housekeeping, whoever's change fired it.
ALTER FUNCTION {schema}.move_group_generation() SECURITY DEFINER;
ALTER FUNCTION {schema}.move_group_generation() SET search_path = pg_catalog, pg_temp;

-- The privileges `partq grant worker` gives (revoke: takes them back, the
-- schema's USAGE excepted: without a worker grant the role would not be
-- confined). Row-level security keeps the role to its queues' rows. No
-- TRUNCATE (row-level security does not apply to it) and no DELETE; of
-- the tables the worker writes, UPDATE on each column but a row's id, queue
-- and part, not on the table (a worker that moved its row's id ahead took
-- an id another queue's enqueue or ack would need, and stalled it);
-- of queues only the column the part acquisition's FOR SHARE needs an
-- UPDATE privilege on; of outbox (no queue column) only INSERT, which an
-- ack with Kafka messages writes; of groups the count columns an ack
-- moves, never end_queue or end_payload; of cancelled_items, which only a
-- cancel writes (through the SQL API or as the owner), only SELECT: a row
-- with an id not yet issued would fail the cancel that later needs it. Run
-- by partq grant and revoke, as the owner.
CREATE FUNCTION {schema}.worker_privileges(r name, revoke boolean) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  t text;
  cols text;
BEGIN
  IF revoke THEN
    FOREACH t IN ARRAY {schema}.worker_tables() || ARRAY['schema_migrations', 'outbox', 'item_acks',
                                                        'claim_record_drops'] LOOP
      EXECUTE format('REVOKE ALL ON {schema}.%I FROM %I', t, r);
    END LOOP;
    EXECUTE format('REVOKE USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} FROM %I', r);
    RETURN;
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA {schema} TO %I', r);
  FOREACH t IN ARRAY {schema}.worker_tables() LOOP
    CONTINUE WHEN t IN ('groups', 'queues', 'cancelled_items');
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
    FROM pg_attribute a
    WHERE a.attrelid = format('%I.%I', '{schema_name}', t)::regclass AND a.attnum > 0
      AND NOT a.attisdropped AND a.attname NOT IN ('id', 'queue', 'part');
    EXECUTE format('GRANT SELECT, INSERT, UPDATE (%s) ON {schema}.%I TO %I', cols, t, r);
  END LOOP;
  EXECUTE format('GRANT SELECT, INSERT, UPDATE (pending, done, dead, cancelled, ended_at, '
                 'end_error, end_item) ON {schema}.groups TO %I', r);
  EXECUTE format('GRANT SELECT, UPDATE (paused) ON {schema}.queues TO %I', r);
  EXECUTE format('GRANT SELECT ON {schema}.cancelled_items TO %I', r);
  EXECUTE format('GRANT SELECT ON {schema}.schema_migrations TO %I', r);
  EXECUTE format('GRANT INSERT ON {schema}.outbox TO %I', r);
  EXECUTE format('GRANT SELECT, INSERT ON {schema}.item_acks, {schema}.claim_record_drops TO %I', r);
  EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO %I', r);
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.worker_privileges(name, boolean) FROM PUBLIC;

-- The worker roles granted before this migration: their table UPDATE and
-- DELETE go, their column privileges come.
DO $$
DECLARE
  r name;
BEGIN
  FOR r IN SELECT DISTINCT g.role FROM {schema}.grants g
           JOIN pg_roles p ON p.rolname = g.role AND p.oid = g.role_oid
           WHERE g.kind = 'worker' LOOP
    PERFORM {schema}.worker_privileges(r, true);
    PERFORM {schema}.worker_privileges(r, false);
  END LOOP;
END
$$;

-- A confined worker's outbox row takes the next id, whatever id it asked
-- for (OVERRIDING SYSTEM VALUE): an id ahead of the sequence would fail
-- the ack whose Kafka message later needs it. Beside migration 34's
-- trigger, which checks the row's topic.
CREATE FUNCTION {schema}.outbox_ids_of_workers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT pg_has_role(session_user,
                     (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                     'MEMBER')
     AND {schema}.worker_scope() IS NOT NULL THEN
    NEW.id := nextval(pg_get_serial_sequence('{schema}.outbox', 'id'));
  END IF;
  RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.outbox_ids_of_workers() FROM PUBLIC;
CREATE TRIGGER outbox_ids_of_workers BEFORE INSERT ON {schema}.outbox
  FOR EACH ROW EXECUTE FUNCTION {schema}.outbox_ids_of_workers();
