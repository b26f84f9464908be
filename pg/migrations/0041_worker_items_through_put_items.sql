-- Migration 41: a worker role writes no item row itself; its new items go in through put_items()
--
-- Since migration 30 a worker role inserted into items under a restrictive
-- policy, and every review of issue 48 found a row the policy let through
-- that no enqueue would make: another queue's id taken before its insert,
-- a group's uncounted items, ids of finished items, times at +-infinity
-- that made every claim of a queue fail. What was left (low): a key in
-- another part than its key's (which breaks that key's order in an
-- ordered queue), items due never, re-used ids of its own session. The
-- policy checked rows the role wrote; now the role writes none. Its
-- follow-up items (a handler's enqueues, a schedule's ticks, a group's
-- items) go in through put_items(), which runs as the owner and makes
-- every column itself as an enqueue does: the id from the sequence, the
-- part from the key or the id, run_at from a delay of 0 to 10 years (none
-- for an item of a group: infinity while it waits for its group's start),
-- attempts 0, no origin, headers or error. It checks the caller's grant on the queue,
-- so a queue the role only produces to takes its items too (the policies
-- hid that queue's row, and its ungrouped follow-ups failed as "unknown
-- queue"). Worker roles lose INSERT on items, and EXECUTE on migration
-- 40's reserve_item_ids(), fresh_item_id() and item_fits(); its
-- insert_grouped_items() (which let a caller choose parts and times) goes;
-- its INSERT policy stays for a role given INSERT by hand.
-- The reviews of this migration added: item_of() answers only for the
-- caller's worker queues; put_items() locks its queue's row outside READ
-- COMMITTED; the SQL API's enqueues take a queue's worker; put_items() is
-- open to every role and the schema's version readable, so a producer
-- role runs `partq enqueue`.
-- (RolesTest.AWorkerPutsItemsOnlyAsAnEnqueueMakesThem,
-- AWorkerRolesStorePutsItsItemsAndTicks, AProducerRoleEnqueuesWithTheCli)

-- Refuses what an enqueue would refuse: arrays of different lengths, more
-- than a million items, a NULL or oversize payload (the queue's limit), a
-- key or dedup key over 1024 bytes (a longer dedup key did not fit
-- results_dedup, and every ack of its item failed: the attack review), a
-- priority or a delay out of range (0 to 10 years, none for an item of a
-- group), a 'partq.' dedup key.
CREATE FUNCTION {schema}.check_put_items(lim bigint, keys text[], dedups text[], prios smallint[],
                                         delays bigint[], payloads bytea[], grps text[])
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  n CONSTANT int := coalesce(cardinality(payloads), 0);
  bad text;
BEGIN
  IF n > 1000000 OR coalesce(cardinality(keys), 0) <> n OR coalesce(cardinality(dedups), 0) <> n
     OR coalesce(cardinality(prios), 0) <> n OR coalesce(cardinality(delays), 0) <> n
     OR coalesce(cardinality(grps), 0) <> n THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
      'put_items() takes up to 1000000 items, one element of each array per item';
  END IF;
  SELECT CASE WHEN t.pl IS NULL THEN 'payload must not be NULL'
              WHEN octet_length(t.pl) > lim THEN format(
                'payload is %s bytes; the limit is %s (the queue''s, partq queue set --max-payload)',
                octet_length(t.pl), lim)
              WHEN octet_length(t.k) > 1024 THEN format('key is %s bytes; the limit is 1024',
                                                        octet_length(t.k))
              WHEN octet_length(t.dk) > 1024 THEN format(
                'dedup key is %s bytes; the limit is 1024', octet_length(t.dk))
              WHEN t.pr IS NULL THEN 'priority must not be NULL'
              WHEN t.us IS NULL OR t.us NOT BETWEEN 0 AND 315360000000000 THEN format(
                'delay %s µs is out of range 0 to 10 years', t.us)
              WHEN t.g IS NOT NULL AND t.us <> 0 THEN
                'an item of a group runs when its group starts; it cannot have a delay' END
  INTO bad
  FROM unnest(payloads, keys, dedups, prios, delays, grps) AS t(pl, k, dk, pr, us, g)
  WHERE t.pl IS NULL OR octet_length(t.pl) > lim OR octet_length(t.k) > 1024
     OR octet_length(t.dk) > 1024 OR t.pr IS NULL
     OR t.us IS NULL OR t.us NOT BETWEEN 0 AND 315360000000000 OR (t.g IS NOT NULL AND t.us <> 0)
  LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = bad;
  END IF;
  PERFORM {schema}.check_dedup_keys(dedups);
END
$$;

-- A worker's new items of queue q, one per element of the arrays, as the
-- owner: in order, one row each with its id and part; `duplicate` for one
-- whose dedup key a live item holds (that item's id and part, or NULLs if
-- it finished meanwhile), `waits` for one held until its group starts.
-- Each group is held, and its new items counted, as migration 40's
-- insert_grouped_items() did. Takes items' enqueue lock first (lock_items_for_enqueue.sql), as
-- every writer of items does, before it reads the queue row; outside READ
-- COMMITTED it locks that row, as enqueue_item() does (migration 6), so a
-- snapshot older than the queue's delete fails with 40001 instead of
-- writing into a queue made again under its name (the third review).
CREATE FUNCTION {schema}.put_items(q text, keys text[], dedups text[], prios smallint[],
                                   delays bigint[], payloads bytea[], grps text[])
RETURNS TABLE (id bigint, part int, duplicate boolean, waits boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
  qr record;
  ids bigint[];
  ps int[];
  g text;
  started text[] := '{}';
  got bigint[];
BEGIN
  -- The SQL API's check (its producer, operator or worker; below), before
  -- anything of the queue is read.
  PERFORM {schema}.authorize_enqueue(q);
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT x.parts, x.max_payload_bytes INTO qr FROM {schema}.queues x WHERE x.name = q;
  ELSE
    SELECT x.parts, x.max_payload_bytes INTO qr FROM {schema}.queues x WHERE x.name = q
    FOR KEY SHARE;
  END IF;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
      'unknown queue "%s" in schema "%s" (partq queue list shows them)', q, '{schema_name}');
  END IF;
  PERFORM {schema}.check_put_items(qr.max_payload_bytes, keys, dedups, prios, delays, payloads,
                                   grps);
  ids := ARRAY(SELECT nextval('{schema}.items_id_seq') FROM unnest(payloads));
  ps := ARRAY(SELECT CASE WHEN t.k IS NULL THEN {schema}.part_for_id(t.i, qr.parts)
                          ELSE {schema}.part_for_key(t.k, qr.parts) END
              FROM unnest(ids, keys) WITH ORDINALITY AS t(i, k, o) ORDER BY t.o);
  FOR g IN SELECT DISTINCT x FROM unnest(grps) AS x WHERE x IS NOT NULL ORDER BY 1 LOOP
    IF {schema}.group_hold(q, g) THEN
      started := started || g;
    END IF;
  END LOOP;
  WITH ins AS (
    INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload, group_id)
    SELECT t.i, q, t.p, t.k, t.d, t.pr,
           CASE WHEN t.g IS NOT NULL AND NOT t.g = ANY (started) THEN 'infinity'
                ELSE now() + t.us * interval '1 microsecond' END,
           t.pl, t.g
    FROM unnest(ids, ps, keys, dedups, prios, delays, payloads, grps)
         AS t(i, p, k, d, pr, us, pl, g)
    ORDER BY t.i
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING id, group_id),
  counted AS (
    UPDATE {schema}.groups x SET pending = x.pending + c.n
    FROM (SELECT group_id, count(*) AS n FROM ins WHERE group_id IS NOT NULL GROUP BY group_id) c
    WHERE x.queue = q AND x.id = c.group_id)
  SELECT coalesce(array_agg(ins.id), '{}') INTO got FROM ins;
  -- A later statement: it sees the live item a duplicate met, even one of
  -- a transaction that committed while the insert waited for it.
  RETURN QUERY
  SELECT coalesce(n.id, d.id), CASE WHEN n.id IS NULL THEN d.part ELSE t.p END,
         n.id IS NULL, n.id IS NOT NULL AND t.g IS NOT NULL AND NOT t.g = ANY (started)
  FROM unnest(ids, ps, dedups, grps) WITH ORDINALITY AS t(i, p, dk, g, o)
  LEFT JOIN unnest(got) AS n(id) ON n.id = t.i
  LEFT JOIN LATERAL (SELECT x.id, x.part FROM {schema}.items x
                     WHERE n.id IS NULL AND x.queue = q AND x.dedup_key = t.dk) d ON true
  ORDER BY t.o;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.put_items(text, text[], text[], smallint[], bigint[], bytea[],
                                              text[])
  FROM PUBLIC;

-- Migration 40's way in for a worker's grouped items, which put_items()
-- replaces: nothing calls it any more.
DROP FUNCTION {schema}.insert_grouped_items(text, bigint[], int[], text[], text[], smallint[],
                                            bigint[], text[], text[], bool[]);

-- A worker role's privileges, as migration 40 made them but for items:
-- SELECT only (no INSERT), and put_items() to add them; of the functions
-- its INSERT policy called, only item_of() (its results' and dead items'
-- policies call it).
CREATE OR REPLACE FUNCTION {schema}.worker_privileges(r name, revoke boolean) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  views CONSTANT text[] := ARRAY['item_acks', 'claim_record_drops', 'item_retries', 'item_abandons'];
  fns CONSTANT text := '{schema}.item_of(bigint, text), '
                       '{schema}.put_items(text, text[], text[], smallint[], bigint[], bytea[], text[])';
  old_fns CONSTANT text := '{schema}.item_fits(bigint, text, int, bytea), '
                           '{schema}.reserve_item_ids(int), {schema}.fresh_item_id(bigint)';
  t text;
  cols text;
BEGIN
  IF revoke THEN
    FOREACH t IN ARRAY {schema}.worker_tables() || ARRAY['schema_migrations', 'outbox'] || views LOOP
      EXECUTE format('REVOKE ALL ON {schema}.%I FROM %I', t, r);
    END LOOP;
    EXECUTE format('REVOKE USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} FROM %I', r);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s, %s FROM %I', fns, old_fns, r);
    RETURN;
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA {schema} TO %I', r);
  FOREACH t IN ARRAY {schema}.worker_tables() LOOP
    CONTINUE WHEN t IN ('groups', 'queues', 'cancelled_items');
    EXECUTE format('GRANT SELECT%s ON {schema}.%I TO %I',
                   CASE WHEN t IN ('schedules', 'items') THEN '' ELSE ', INSERT' END, t, r);
    CONTINUE WHEN t IN ('items', 'results', 'dead_items');
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
    FROM pg_attribute a
    WHERE a.attrelid = format('%I.%I', '{schema_name}', t)::regclass AND a.attnum > 0
      AND NOT a.attisdropped AND a.attname NOT IN ('id', 'queue', 'part', 'session_id');
    EXECUTE format('GRANT UPDATE (%s) ON {schema}.%I TO %I', cols, t, r);
  END LOOP;
  EXECUTE format('GRANT SELECT, INSERT, UPDATE (pending, done, dead, cancelled, ended_at, '
                 'end_error, end_item) ON {schema}.groups TO %I', r);
  EXECUTE format('GRANT SELECT, UPDATE (paused) ON {schema}.queues TO %I', r);
  EXECUTE format('GRANT SELECT ON {schema}.cancelled_items TO %I', r);
  EXECUTE format('GRANT SELECT ON {schema}.schema_migrations TO %I', r);
  EXECUTE format('GRANT INSERT ON {schema}.outbox TO %I', r);
  FOREACH t IN ARRAY views LOOP
    EXECUTE format('GRANT SELECT, INSERT ON {schema}.%I TO %I', t, r);
  END LOOP;
  EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO %I', r);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fns, r);
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.worker_privileges(name, boolean) FROM PUBLIC;

-- The worker roles granted before this migration: their privileges as
-- this version makes them.
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

-- The SQL API's enqueues (and a group's end item) took a worker of a queue
-- through its INSERT privilege on items (may(): of its own queues only);
-- with that privilege gone, its worker grant says the same.
CREATE OR REPLACE FUNCTION {schema}.authorize_enqueue(queue text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM {schema}.authorize(queue, ARRAY['producer', 'operator', 'worker'], 'items', 'INSERT');
  PERFORM set_config('partq.max_payload_bytes',
                     coalesce((SELECT q.max_payload_bytes FROM {schema}.queues q
                               WHERE q.name = authorize_enqueue.queue), 1048576)::text, true);
END
$$;

-- Whether id is a live item of queue, for the policies of a confined
-- worker's results and dead items: now only of one of its worker queues.
-- It answered for any queue, so a worker learnt another queue's live ids
-- (the attack review of this migration).
CREATE OR REPLACE FUNCTION {schema}.item_of(id bigint, queue text)
RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT 1 FROM {schema}.my_worker_queues m WHERE m.queue = item_of.queue)
   AND EXISTS (SELECT 1 FROM {schema}.items i
               WHERE i.id = item_of.id AND i.queue = item_of.queue);

-- put_items() checks its caller's grant itself, as the SQL API does, so it
-- is open to every role; with the schema's version readable by every role
-- too, a producer role runs `partq enqueue` (single and --stdin) as a
-- worker role does: it was refused at "checking the schema", and its table
-- privileges were none to use anyway.
GRANT EXECUTE ON FUNCTION {schema}.put_items(text, text[], text[], smallint[], bigint[], bytea[],
                                             text[])
  TO PUBLIC;
GRANT SELECT ON {schema}.schema_migrations TO PUBLIC;
