-- Migration 40: a confined worker's INSERT ... ON CONFLICT and foreign keys reach no row of another queue
--
-- A worker role could lock rows of other queues without seeing them (issue
-- 48, the third review): row-level security checks an ON CONFLICT DO
-- UPDATE's existing row only after its WHERE, so
--   INSERT INTO items (id, queue, ...) VALUES (<an item of queue b>, 'a', ...)
--   ON CONFLICT (id) DO UPDATE SET attempts = 0 WHERE false
-- locked b's item until the transaction ended and stalled the ack of its
-- batch; the same by id on sessions (a static member's id is md5 of its
-- queue and instance id), by name on schedules, and by the foreign key of
-- session_parts (a part row naming another queue's session locks that
-- session FOR KEY SHARE, so it can neither leave nor expire). Each is
-- closed where it opens, with nothing on the owner's path:
-- - items, results and dead_items: a worker role gets no UPDATE on any of
--   their columns, so PostgreSQL refuses ON CONFLICT DO UPDATE there
--   before it looks at a row. A retry and a takeover's abandoned mark, the
--   only updates a worker makes of items, go through the rules of
--   item_retries and item_abandons below (of the caller's worker queues
--   only), as its deletes go through item_acks (migration 39).
-- - schedules: a worker role may not insert (schedules are added through
--   add_schedule(), the SQL API, or by the owner); its firer only updates.
-- - sessions: a row's id is made from its queue, as join.sql makes it (a
--   static member's md5(queue/instance id); a confined role's dynamic
--   session a random one, whatever it asked for), so no insert by a worker
--   of queue a can meet a row of queue b.
-- - session_parts: a confined worker's new row must name a session of its
--   queue, and it may not update session_id; the foreign key then locks
--   only its own queue's sessions.
-- The later reviews of the same day found more, closed below, each with
-- its reason: SECURITY DEFINER functions no longer open to every role;
-- a confined worker's new items take only ids issued to it, are enqueued
-- about now, and belong to a queue group only through
-- insert_grouped_items(); a group's end item is enqueued only by the group
-- as it ends (enqueue_group_end()), and 'partq.' dedup keys are partq's
-- own; delete_schedule() deletes the row it authorized.

-- Retries of a confined worker's general Finish (fragments/retry_items_confined.sql):
-- `INSERT INTO item_retries SELECT ... RETURNING id` counts the attempt
-- unless refunded, sets run_at and the error as finish_ctes.sql's UPDATE
-- does, of the caller's worker queues only. The queue is tested as an
-- array (`<@`), which no index of items serves: the rows are found by id.
CREATE VIEW {schema}.item_retries AS
  SELECT NULL::bigint AS id, NULL::boolean AS refund, NULL::bigint AS delay_us,
         NULL::text AS error, NULL::int AS max_attempts
  WHERE false;
CREATE RULE item_retries_update AS ON INSERT TO {schema}.item_retries DO INSTEAD
  UPDATE {schema}.items i
  SET attempts = i.attempts + (NOT NEW.refund)::int,
      run_at = statement_timestamp() + NEW.delay_us * interval '1 microsecond',
      abandoned_epoch = NULL, last_error = NEW.error
  WHERE i.id = NEW.id AND (NEW.refund OR i.attempts + 1 < NEW.max_attempts)
    AND ARRAY[i.queue::text] <@ ARRAY(SELECT q.queue::text FROM {schema}.my_worker_queues q)
  RETURNING i.id, NULL::boolean, NULL::bigint, NULL::text, NULL::int;

-- A takeover's mark on the items a dead owner had in flight
-- (fragments/abandon_items_confined.sql): one attempt counted each, at
-- most 1,000,000, and the epoch they were abandoned at.
CREATE VIEW {schema}.item_abandons AS
  SELECT NULL::bigint[] AS ids, NULL::bigint AS epoch
  WHERE false;
CREATE RULE item_abandons_update AS ON INSERT TO {schema}.item_abandons DO INSTEAD
  UPDATE {schema}.items i
  SET attempts = least(i.attempts + 1, 1000000), abandoned_epoch = NEW.epoch
  WHERE i.id = ANY (NEW.ids)
    AND ARRAY[i.queue::text] <@ ARRAY(SELECT q.queue::text FROM {schema}.my_worker_queues q)
  RETURNING NULL::bigint[], NULL::bigint;

-- The ids a confined worker may give its new items: ones issued to it.
-- item_fits() let it use any id the sequence had issued, so it could insert
-- a row (run_at 'infinity', never claimed) under the id of another queue's
-- finished item, which item_state() and partq wait then called unknown,
-- and a dead item's requeue found taken (the fourth review: every finished
-- item of the schema in one statement). Now its batch's ids come from
-- reserve_item_ids(), which records them for its role, and an id of a new
-- item must be one of those (consumed by the insert) or the one its own
-- session's nextval() gave last (an item made in one statement: enqueue.sql,
-- a group's end item).
CREATE TABLE {schema}.item_id_grants (
  id          bigint PRIMARY KEY,
  role_oid    oid NOT NULL,
  reserved_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX item_id_grants_age ON {schema}.item_id_grants (role_oid, reserved_at);

-- n new item ids for session_user, a confined worker (reserve_ids_confined.sql),
-- at most 1,000,000 at a time (EnqueueBatch reserves a chunk's); its
-- reservations older than an hour (of a batch that never committed its
-- items, in a transaction of its own) go.
CREATE FUNCTION {schema}.reserve_item_ids(n int) RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me CONSTANT oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = session_user);
BEGIN
  IF n IS NULL OR n < 0 OR n > 1000000 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('reserve 0 to 1000000 item ids at a time (asked for %s)', n);
  END IF;
  DELETE FROM {schema}.item_id_grants g
  WHERE g.role_oid = me AND g.reserved_at < now() - interval '1 hour';
  RETURN QUERY
    INSERT INTO {schema}.item_id_grants (id, role_oid)
    SELECT nextval('{schema}.items_id_seq'), me FROM generate_series(1, n)
    RETURNING id;
END
$$;

-- Whether a confined worker's new item may have this id (its INSERT
-- policy): reserved for its role (the reservation is used up), or the last
-- its session's nextval() gave.
CREATE FUNCTION {schema}.fresh_item_id(id bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM {schema}.item_id_grants g
  WHERE g.id = fresh_item_id.id
    AND g.role_oid = (SELECT r.oid FROM pg_roles r WHERE r.rolname = session_user);
  IF FOUND THEN
    RETURN true;
  END IF;
  BEGIN
    RETURN fresh_item_id.id = currval('{schema}.items_id_seq');
  EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN false;  -- no nextval() in this session yet
  END;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.reserve_item_ids(int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.fresh_item_id(bigint) FROM PUBLIC;

-- A group's end item, enqueued when the group ends (group_end(), run as
-- whoever finishes the group's last item), as the owner: the caller may
-- produce to the end queue (authorize_enqueue(), as enqueue_item()), the
-- group must be ending (ended, with neither an end item nor an end error
-- yet: a state group_end() leaves it in only within its transaction, and
-- which only a role that may update the group's row can make), and the
-- payload is made here from the group's row.
-- Its dedup key, 'partq.group:QUEUE:GROUP', makes it once; no other
-- enqueue may use a 'partq.' key any more (check_dedup_keys() below, and
-- a confined worker's INSERT policy): a producer of the end queue could
-- enqueue a look-alike under that key first, and the group then took it
-- for its end item (the fourth review). Stamped as enqueued now, not at the
-- transaction's start: due at once, so not among items_later. Migration
-- 30's group_end() stamped it with an UPDATE of items, which a worker role
-- may no longer make.
CREATE FUNCTION {schema}.enqueue_group_end(q text, g text)
RETURNS TABLE (end_id bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r record;
  e record;
BEGIN
  SELECT * INTO r FROM {schema}.groups x
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NOT NULL AND x.end_queue IS NOT NULL
    AND x.end_item IS NULL AND x.end_error IS NULL
  FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('group "%s" of queue "%s" is not ending with an end item to enqueue', g, q);
  END IF;
  PERFORM {schema}.authorize_enqueue(r.end_queue);
  SELECT * INTO e FROM {schema}.enqueue_item_as_owner(r.end_queue,
    convert_to(jsonb_build_object('queue', q, 'group', g, 'done', r.done, 'dead', r.dead,
                                  'cancelled', r.cancelled, 'payload', r.end_payload)::text,
               'UTF8'),
    dedup_key => 'partq.group:' || q || ':' || g) AS x;
  IF NOT e.duplicate THEN
    UPDATE {schema}.items i SET enqueued_at = statement_timestamp(), run_at = statement_timestamp()
    WHERE i.id = e.id AND i.queue = r.end_queue;
  END IF;
  RETURN QUERY SELECT e.id, e.duplicate;
END
$$;
-- Open to every role, as the SQL API is: it checks its caller itself
-- (authorize_enqueue()), and only a role that may update the group's row
-- (its queue's worker) can make it ending. (A role given the tables' privileges by
-- hand, as before migration 29, ends groups too.)

-- group_end() of migration 30 but for the end item, enqueued above.
CREATE OR REPLACE FUNCTION {schema}.group_end(queue text, group_id text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
  end_id bigint;
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
    SELECT e.end_id INTO end_id FROM {schema}.enqueue_group_end(q, g) e;
    UPDATE {schema}.groups x SET end_item = end_id WHERE x.queue = q AND x.id = g;
  EXCEPTION WHEN undefined_object OR insufficient_privilege OR invalid_parameter_value THEN
    UPDATE {schema}.groups x SET end_error = SQLERRM WHERE x.queue = q AND x.id = g;
  END;
END
$$;

-- 'partq.' dedup keys are partq's own (a group's end item): the SQL API
-- refuses them.
CREATE FUNCTION {schema}.check_dedup_keys(keys text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM unnest(keys) k WHERE k LIKE 'partq.%') THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'dedup keys that start with "partq." are partq''s own (a group''s end item)';
  END IF;
END
$$;

-- A confined worker's items of queue groups (insert_batch_grouped_confined.sql),
-- as the owner: its INSERT policy refuses a group_id, since an item of a
-- group it inserted itself need not count in the group (the third review:
-- uncounted items of another queue's group ended it early, its end item
-- saying done of items that had not run, and ran before the group
-- started). Here each group is held before the insert and its items
-- counted with it, whether an item waits for its group's start is decided
-- here (`held`, the caller's view, is not read), the queue must be one the
-- caller works on or produces to, the ids ones issued to it, the rows what
-- item_fits() says, no 'partq.' dedup key.
CREATE FUNCTION {schema}.insert_grouped_items(q text, ids bigint[], parts int[], keys text[],
                                              dedups text[], prios smallint[], delays bigint[],
                                              payloads text[], grps text[], held bool[])
RETURNS TABLE (inserted bigint, counted bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  g text;
  started text[] := '{}';
BEGIN
  IF NOT EXISTS (SELECT 1 FROM {schema}.grants g
                 WHERE g.queue = q AND g.kind IN ('worker', 'producer', 'operator')
                   AND pg_get_userbyid(g.role_oid) = g.role
                   AND pg_has_role(session_user, g.role_oid, 'MEMBER')) THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
      'permission denied for queue "%s" of schema "%s": role "%s" may not put items into it',
      q, '{schema_name}', session_user);
  END IF;
  PERFORM {schema}.check_dedup_keys(dedups);
  IF EXISTS (SELECT 1 FROM unnest(ids, parts, payloads) AS t(id, part, payload)
             WHERE NOT ({schema}.fresh_item_id(t.id)
                        AND {schema}.item_fits(t.id, q, t.part, decode(t.payload, 'hex')))) THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = 'new row violates row-level security policy for table "items"';
  END IF;
  -- Each group held (made if new) in statements of their own, before the
  -- insert: the count below must see a group made here, or one another
  -- transaction was making (group_hold() waits for it), which a CTE of the
  -- same statement would not (the fourth review: such a group kept pending
  -- 0 with items in it, and ended at its start).
  FOR g IN SELECT DISTINCT x FROM unnest(grps) AS x WHERE x IS NOT NULL ORDER BY 1 LOOP
    IF {schema}.group_hold(q, g) THEN
      started := started || g;
    END IF;
  END LOOP;
  RETURN QUERY
  WITH ins AS (
    INSERT INTO {schema}.items (id, queue, part, key, dedup_key, priority, run_at, payload,
                                group_id)
    SELECT t.id, q, t.part, t.key, t.dedup, t.prio,
           CASE WHEN t.grp IS NOT NULL AND NOT t.grp = ANY (started) THEN 'infinity'
                ELSE now() + t.delay_us * interval '1 microsecond' END,
           decode(t.payload, 'hex'), t.grp
    FROM unnest(ids, parts, keys, dedups, prios, delays, payloads, grps)
         AS t(id, part, key, dedup, prio, delay_us, payload, grp)
    ORDER BY t.id
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING group_id),
  counted AS (
    UPDATE {schema}.groups x SET pending = x.pending + c.n
    FROM (SELECT group_id, count(*) AS n FROM ins WHERE group_id IS NOT NULL GROUP BY group_id) c
    WHERE x.queue = q AND x.id = c.group_id
    RETURNING 1)
  SELECT count(*), (SELECT count(*) FROM counted) FROM ins;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.insert_grouped_items(text, bigint[], int[], text[], text[],
                                                         smallint[], bigint[], text[], text[],
                                                         bool[])
  FROM PUBLIC;

-- The SQL API's enqueue functions of migration 29, refusing 'partq.' dedup keys.
CREATE OR REPLACE FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.check_dedup_keys(ARRAY[dedup_key]);
  RETURN QUERY SELECT * FROM {schema}.enqueue_item_as_owner(queue, payload, key, dedup_key, delay,
                                                             priority, group_id);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.check_dedup_keys(ARRAY[dedup_key]);
  RETURN QUERY SELECT * FROM {schema}.enqueue_item_as_owner(queue, convert_to(payload, 'UTF8'),
                                                             key, dedup_key, delay, priority,
                                                             group_id);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.check_dedup_keys(ARRAY[dedup_key]);
  RETURN (SELECT e.id FROM {schema}.enqueue_item_as_owner(queue, payload, key, dedup_key, delay,
                                                           priority, group_id) e);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.check_dedup_keys(ARRAY[dedup_key]);
  RETURN (SELECT e.id FROM {schema}.enqueue_item_as_owner(queue, convert_to(payload, 'UTF8'),
                                                           key, dedup_key, delay, priority,
                                                           group_id) e);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue_many(queue text, payloads bytea[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.check_dedup_keys(dedup_keys);
  RETURN QUERY SELECT * FROM {schema}.enqueue_many_as_owner(queue, payloads, keys, dedup_keys,
                                                             delay, priority, group_id);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue_many(queue text, payloads text[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM {schema}.authorize_enqueue(queue);
  PERFORM {schema}.check_dedup_keys(dedup_keys);
  RETURN QUERY SELECT * FROM {schema}.enqueue_many_as_owner(queue, payloads, keys, dedup_keys,
                                                             delay, priority, group_id);
END
$$;

-- A worker role's privileges, as migration 39 made them but for the
-- above: no UPDATE on items, results or dead_items, no INSERT on
-- schedules, no UPDATE of session_id; the two views.
CREATE OR REPLACE FUNCTION {schema}.worker_privileges(r name, revoke boolean) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  views CONSTANT text[] := ARRAY['item_acks', 'claim_record_drops', 'item_retries', 'item_abandons'];
  t text;
  cols text;
BEGIN
  IF revoke THEN
    FOREACH t IN ARRAY {schema}.worker_tables() || ARRAY['schema_migrations', 'outbox'] || views LOOP
      EXECUTE format('REVOKE ALL ON {schema}.%I FROM %I', t, r);
    END LOOP;
    EXECUTE format('REVOKE USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} FROM %I', r);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION {schema}.item_of(bigint, text), '
                   '{schema}.item_fits(bigint, text, int, bytea), {schema}.reserve_item_ids(int), '
                   '{schema}.fresh_item_id(bigint), '
                   '{schema}.insert_grouped_items(text, bigint[], int[], text[], text[], smallint[], '
                   'bigint[], text[], text[], bool[]) FROM %I', r);
    RETURN;
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA {schema} TO %I', r);
  FOREACH t IN ARRAY {schema}.worker_tables() LOOP
    CONTINUE WHEN t IN ('groups', 'queues', 'cancelled_items');
    EXECUTE format('GRANT SELECT%s ON {schema}.%I TO %I',
                   CASE WHEN t = 'schedules' THEN '' ELSE ', INSERT' END, t, r);
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
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.item_of(bigint, text), '
                 '{schema}.item_fits(bigint, text, int, bytea), {schema}.reserve_item_ids(int), '
                 '{schema}.fresh_item_id(bigint), '
                 '{schema}.insert_grouped_items(text, bigint[], int[], text[], text[], smallint[], '
                 'bigint[], text[], text[], bool[]) TO %I', r);
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.worker_privileges(name, boolean) FROM PUBLIC;

-- A session's id from its queue: a static member's is md5(queue/instance
-- id), as join.sql makes it; a confined role's dynamic session gets a
-- random one. Sessions are made once per join, so the owner's path pays
-- one call per join.
CREATE FUNCTION {schema}.session_ids() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NEW.instance_id IS NOT NULL THEN
    NEW.id := md5(NEW.queue || '/' || NEW.instance_id)::uuid;
  ELSIF NOT pg_has_role(session_user,
                        (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                        'MEMBER')
        AND {schema}.worker_scope() IS NOT NULL THEN
    NEW.id := gen_random_uuid();
  END IF;
  RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.session_ids() FROM PUBLIC;
CREATE TRIGGER session_ids BEFORE INSERT ON {schema}.sessions
  FOR EACH ROW EXECUTE FUNCTION {schema}.session_ids();

-- Role r's restrictive policies as migration 36 made them, and a confined
-- worker's new part row names a session of its own queue (read with the
-- role's own rights: it sees only its queues' sessions).
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
      -- privilege names the count columns only, worker_privileges()).
      EXECUTE format('CREATE POLICY %I ON {schema}.groups AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK (end_queue IS NULL OR end_queue = ANY (%L))',
                     pol || '_end', r, produce);
    END IF;
    IF t IN ('results', 'dead_items') THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.%I AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK ({schema}.item_of(id, queue))', pol || '_ids', t, r);
    END IF;
    IF t = 'session_parts' THEN
      EXECUTE format('CREATE POLICY %I ON {schema}.session_parts AS RESTRICTIVE FOR INSERT TO %I '
                     'WITH CHECK (EXISTS (SELECT 1 FROM {schema}.sessions s '
                     'WHERE s.id = session_parts.session_id AND s.queue = session_parts.queue))',
                     pol || '_ids', r);
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
    -- new items (an attempts count no claim survives would stall a part),
    -- under ids issued to it (fresh_item_id()), enqueued about now and due
    -- within the SQL API's range of delays or never: an item enqueued or due
    -- at +-infinity made every claim of its queue fail (its time in
    -- microseconds is out of bigint's range; the fifth review).
    EXECUTE format('CREATE POLICY %I ON {schema}.items AS RESTRICTIVE FOR INSERT TO %I '
                   'WITH CHECK (queue = ANY (%L) AND (queue = ANY (%L) OR attempts = 0) '
                   'AND {schema}.item_fits(id, queue, part, payload) AND {schema}.fresh_item_id(id) '
                   'AND (dedup_key IS NULL OR dedup_key NOT LIKE ''partq.%%'') AND group_id IS NULL '
                   'AND enqueued_at BETWEEN now() - interval ''1 day'' AND now() + interval ''1 day'' '
                   'AND run_at >= now() - interval ''1 day'' '
                   'AND (run_at = ''infinity'' OR run_at <= now() + interval ''20 years''))',
                   pol || '_insert', r, produce, work);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.apply_worker_policies(name) FROM PUBLIC;

-- A SECURITY DEFINER function runs as the owner for whoever may execute
-- it, and PostgreSQL lets everyone execute a new function. Migration 39
-- made move_group_generation() one and left it so: any role that may use
-- the schema could attach it to a temporary table of its own and write
-- group changes of any queue as the owner (the fourth review: a
-- producer's forged changes told a queue's worker it had lost its parts,
-- and the queue stalled). A trigger's function needs EXECUTE only when the
-- trigger is made, so partq's own triggers keep firing. item_of() and
-- item_fits() answered anyone whether an id or a part of another queue
-- exists: only worker roles, whose policies call them, may now.
-- (RolesTest.NoFunctionThatRunsAsTheOwnerIsOpenToEveryoneButTheApis)
REVOKE EXECUTE ON FUNCTION {schema}.move_group_generation() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.item_of(bigint, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.item_fits(bigint, text, int, bytea) FROM PUBLIC;

-- delete_schedule() authorized the queue of the row one statement read and
-- deleted by name in the next, so a schedule of another queue added under
-- that name between the two went (the fourth review: once in 200,000
-- calls). Now it deletes the row it authorized, locked from the read.
CREATE OR REPLACE FUNCTION {schema}.delete_schedule(name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text;
BEGIN
  SELECT s.queue INTO q FROM {schema}.schedules s WHERE s.name = delete_schedule.name FOR UPDATE;
  IF FOUND THEN
    PERFORM {schema}.authorize(q, ARRAY['operator'], 'schedules', 'DELETE');
    DELETE FROM {schema}.schedules s WHERE s.name = delete_schedule.name AND s.queue = q;
    RETURN;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
    'unknown schedule "%s" in schema "%s" (partq schedule list shows them)', delete_schedule.name,
    '{schema_name}');
END
$$;

-- The worker roles granted before this migration: their privileges and
-- policies as this version makes them.
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
  FOR r IN SELECT p.rolname FROM {schema}.confined_roles c JOIN pg_roles p ON p.oid = c.role_oid LOOP
    PERFORM {schema}.apply_worker_policies(r);
  END LOOP;
END
$$;
