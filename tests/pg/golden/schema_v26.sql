--
-- PostgreSQL database dump
--



SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: {schema}; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA {schema};


--
-- Name: ack_items(tid[], bigint[]); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.ack_items(tids tid[], ids bigint[]) RETURNS TABLE(acked_id bigint, acked_queue text, acked_dedup_key text)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
  n bigint;
BEGIN
  RETURN QUERY
    DELETE FROM "{schema}".items i WHERE i.ctid = ANY(tids) AND i.id = ANY(ids)
    RETURNING i.id, i.queue::text, i.dedup_key::text;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n < cardinality(ids) THEN
    -- Not where the claim saw them (a table rewrite moves rows): by id. The
    -- rows deleted above are no longer visible to this statement.
    RETURN QUERY
      DELETE FROM "{schema}".items i WHERE i.id = ANY(ids)
      RETURNING i.id, i.queue::text, i.dedup_key::text;
  END IF;
END
$$;


--
-- Name: add_schedule(text, text, bytea, interval, text, text, text, integer, timestamp with time zone); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload bytea, every interval DEFAULT NULL::interval, cron text DEFAULT NULL::text, time_zone text DEFAULT NULL::text, key text DEFAULT NULL::text, priority integer DEFAULT 0, first_tick timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    AS $_$
#variable_conflict use_variable
DECLARE
  names CONSTANT text[] := ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
  fields text[];
  secs numeric;
  prio CONSTANT int := coalesce(priority, 0);
  other text;
BEGIN
  IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid schedule name %s (use 1-63 letters, digits, ''_'', ''.'' or ''-'', starting with '
      'a letter or digit)', coalesce('"' || name || '"', 'NULL'));
  END IF;
  PERFORM "{schema}".require_queue(queue);
  IF (every IS NULL) = (cron IS NULL) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = CASE WHEN every IS NULL
      THEN 'a schedule needs every (an interval) or cron (''MIN HOUR DOM MON DOW'')'
      ELSE 'give either every or cron, not both' END;
  END IF;
  IF every IS NOT NULL THEN
    secs := extract(epoch FROM every);
    IF secs < 1 OR secs > 366 * 86400 OR secs <> trunc(secs) THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
        'every %s: the interval must be a whole number of seconds from 1s to 366 days', every);
    END IF;
    IF time_zone IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
        'time_zone applies to cron only (an interval ticks on multiples of it since the Unix '
        'epoch, the same in every time zone)';
    END IF;
  ELSE
    IF left(btrim(cron), 1) <> '@' THEN
      fields := regexp_split_to_array(btrim(cron), '\s+');
      IF btrim(cron) = '' OR array_length(fields, 1) <> 5 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
          'cron expression "%s" has %s fields; partq takes 5: minute hour day-of-month month '
          'day-of-week%s', btrim(cron), CASE WHEN btrim(cron) = '' THEN 0
                                            ELSE array_length(fields, 1) END,
          CASE WHEN array_length(fields, 1) = 6 THEN ' (no seconds or year field)' ELSE '' END);
      END IF;
      FOR i IN 1..5 LOOP
        IF fields[i] !~ '^[A-Za-z0-9*/,-]+$' THEN
          RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'cron field %s (%s): "%s" has characters cron does not use', i, names[i], fields[i]);
        END IF;
      END LOOP;
    END IF;
    IF time_zone IS NOT NULL THEN
      BEGIN
        PERFORM now() AT TIME ZONE time_zone;
      EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
          'unknown time zone "%s" (use an IANA name such as Europe/Berlin or UTC)', time_zone);
      END;
    END IF;
  END IF;
  PERFORM "{schema}".check_new_item(payload, prio, key);
  SELECT s.queue INTO other FROM "{schema}".schedules s WHERE s.name = add_schedule.name;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '23505', MESSAGE = format(
      'schedule "%s" already exists (on queue "%s"); delete it first to change it', name, other);
  END IF;
  INSERT INTO "{schema}".schedules (name, queue, every, cron, time_zone, payload, key, priority,
                                  next_tick)
  VALUES (name, queue, every, btrim(cron), time_zone, payload, key, prio, first_tick);
END
$_$;


--
-- Name: add_schedule(text, text, text, interval, text, text, text, integer, timestamp with time zone); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.add_schedule(name text, queue text, payload text, every interval DEFAULT NULL::interval, cron text DEFAULT NULL::text, time_zone text DEFAULT NULL::text, key text DEFAULT NULL::text, priority integer DEFAULT 0, first_tick timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
 SELECT {schema}.add_schedule(name, queue, convert_to(payload, 'UTF8'::name), every, cron, time_zone, key, priority, first_tick) AS add_schedule;
END;


--
-- Name: bad_part_count(integer); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.bad_part_count(parts integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
  RAISE EXCEPTION 'parts must be between 1 and 4096, not %', parts USING ERRCODE = '22023';
END
$$;


--
-- Name: cancel_items(text, bigint[]); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.cancel_items(queue text, ids bigint[]) RETURNS TABLE(id bigint, state text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  p int;
  owner_epoch bigint;
  flying bigint[];
  cancelled bigint[] := '{}';
  cgroups text[] := '{}';
  done_now bigint[];
  tries int;
  high_water bigint;
BEGIN
  PERFORM "{schema}".check_queue_name(q);
  IF ids IS NULL OR EXISTS (SELECT 1 FROM unnest(ids) AS x WHERE x IS NULL OR x < 1) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'item ids must be 1 or more, not %s', coalesce(ids::text, 'NULL'));
  END IF;
  LOCK TABLE "{schema}".items IN ROW EXCLUSIVE MODE;
  PERFORM 1 FROM "{schema}".queues qq WHERE qq.name = q FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    PERFORM "{schema}".unknown_queue(q);
  END IF;
  FOR p IN SELECT DISTINCT i.part FROM "{schema}".items i
           WHERE i.id = ANY(ids) AND i.queue = q ORDER BY 1 LOOP
    flying := '{}';
    tries := 0;
    LOOP
      SELECT sp.epoch INTO owner_epoch FROM "{schema}".session_parts sp
      WHERE sp.queue = q AND sp.part = p;
      EXIT WHEN NOT FOUND;
      UPDATE "{schema}".part_claims c SET seq = nextval('"{schema}".claim_seq')
      WHERE c.queue = q AND c.part = p AND c.epoch = owner_epoch
        AND c.seq = (SELECT l.seq FROM "{schema}".part_claims l
                     WHERE l.queue = q AND l.part = p AND l.epoch = owner_epoch
                     ORDER BY l.seq DESC LIMIT 1)
      RETURNING c.ids INTO flying;
      IF FOUND THEN
        PERFORM 1 FROM "{schema}".session_parts sp
        WHERE sp.queue = q AND sp.part = p AND sp.epoch = owner_epoch;
        EXIT WHEN FOUND;
        flying := '{}';  -- a static re-join moved the epoch: the new tenure's record
      ELSE
        PERFORM 1 FROM "{schema}".part_claims l
        WHERE l.queue = q AND l.part = p AND l.epoch = owner_epoch;
        IF NOT FOUND THEN
          PERFORM 1 FROM "{schema}".session_parts sp
          WHERE sp.queue = q AND sp.part = p AND sp.epoch = owner_epoch;
          IF FOUND THEN
            -- An owner without a record (an owner writes one when its tenure
            -- starts, so never expected): what it runs cannot be told, so
            -- nothing of the part is taken from it.
            flying := ids;
            EXIT;
          END IF;
        END IF;
      END IF;
      tries := tries + 1;
      IF tries >= 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = format(
          'cancel in queue "%s": part %s''s claims changed 1000 times meanwhile; retry', q, p);
      END IF;
    END LOOP;
    WITH gone AS (
      DELETE FROM "{schema}".items i
      WHERE i.id IN (SELECT x.id FROM "{schema}".items x
                     WHERE x.id = ANY(ids) AND x.queue = q AND x.part = p
                       AND x.id <> ALL(flying)
                     FOR UPDATE SKIP LOCKED)
      RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority, i.attempts, i.enqueued_at,
                i.group_id),
    recorded AS (
      INSERT INTO "{schema}".cancelled_items
        (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, group_id)
      SELECT * FROM gone
      RETURNING cancelled_items.id, cancelled_items.group_id)
    SELECT cancelled || coalesce(array_agg(r.id), '{}'),
           cgroups || coalesce(array_agg(r.group_id) FILTER (WHERE r.group_id IS NOT NULL), '{}')
    INTO cancelled, cgroups FROM recorded r;
  END LOOP;
  IF cardinality(cgroups) > 0 THEN
    PERFORM "{schema}".groups_finished(q, cgroups, array_fill(0::bigint, ARRAY[cardinality(cgroups)]),
                                     array_fill(0::bigint, ARRAY[cardinality(cgroups)]),
                                     array_fill(1::bigint, ARRAY[cardinality(cgroups)]));
  END IF;
  SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO high_water
  FROM "{schema}".items_id_seq s;
  -- What became of the others, as item_state() tells it (in flight: still an
  -- item, on a record or held by another transaction).
  RETURN QUERY
    SELECT a.id, CASE
      WHEN a.id = ANY(cancelled) THEN 'cancelled'
      WHEN i.queue IS NOT NULL THEN CASE WHEN i.queue = q THEN 'in_flight' ELSE 'unknown' END
      WHEN d.queue IS NOT NULL THEN CASE WHEN d.queue = q THEN 'dead' ELSE 'unknown' END
      WHEN c.queue IS NOT NULL THEN
        CASE WHEN c.queue = q THEN 'already_cancelled' ELSE 'unknown' END
      WHEN x.queue IS NOT NULL THEN CASE WHEN x.queue = q THEN 'done' ELSE 'unknown' END
      WHEN a.id BETWEEN 1 AND high_water THEN 'done'
      ELSE 'unknown' END
    FROM (SELECT u.id, min(u.n) AS n FROM unnest(ids) WITH ORDINALITY AS u(id, n)
          GROUP BY u.id) a
    LEFT JOIN "{schema}".items i ON i.id = a.id
    LEFT JOIN "{schema}".dead_items d ON d.id = a.id
    LEFT JOIN "{schema}".cancelled_items c ON c.id = a.id
    LEFT JOIN "{schema}".results x ON x.id = a.id
    ORDER BY a.n;
END
$$;


--
-- Name: cancel(text, bigint); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.cancel(queue text, id bigint) RETURNS text
    LANGUAGE sql
    RETURN (SELECT c.state FROM {schema}.cancel_items(cancel.queue, ARRAY[cancel.id]) c(id, state));


--
-- Name: cancel_by_dedup_key(text, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.cancel_by_dedup_key(queue text, dedup_key text) RETURNS TABLE(id bigint, state text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  dk CONSTANT text := dedup_key;
  live bigint;
BEGIN
  PERFORM "{schema}".require_queue(q);
  SELECT i.id INTO live FROM "{schema}".items i WHERE i.queue = q AND i.dedup_key = dk;
  IF FOUND THEN
    RETURN QUERY SELECT c.id, c.state FROM "{schema}".cancel_items(q, ARRAY[live]) c;
    RETURN;
  END IF;
  RETURN QUERY
    SELECT f.id, f.s FROM (
      SELECT x.id, 'done'::text AS s FROM "{schema}".results x
      WHERE x.queue = q AND x.dedup_key = dk
      UNION ALL
      SELECT d.id, 'dead' FROM "{schema}".dead_items d WHERE d.queue = q AND d.dedup_key = dk
      UNION ALL
      SELECT c.id, 'already_cancelled' FROM "{schema}".cancelled_items c
      WHERE c.queue = q AND c.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text;
END
$$;


--
-- Name: murmur2(bytea); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.murmur2(data bytea) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
DECLARE
  m CONSTANT bigint := 1540483477;  -- 0x5bd1e995
  len CONSTANT int := length(data);
  blocks CONSTANT int := len - (len & 3);
  h bigint := 2538058380 # len;     -- the seed 0x9747b28c, xor the length
  k bigint;
  i int := 0;
BEGIN
  WHILE i < blocks LOOP
    -- Little-endian blocks; bytes are unsigned.
    k := get_byte(data, i) | (get_byte(data, i + 1) << 8) | (get_byte(data, i + 2) << 16)
         | (get_byte(data, i + 3)::bigint << 24);
    k := "{schema}".mul32(k, m);
    k := k # (k >> 24);
    k := "{schema}".mul32(k, m);
    h := "{schema}".mul32(h, m) # k;
    i := i + 4;
  END LOOP;
  IF len & 3 = 3 THEN h := h # (get_byte(data, blocks + 2) << 16); END IF;
  IF len & 3 >= 2 THEN h := h # (get_byte(data, blocks + 1) << 8); END IF;
  IF len & 3 >= 1 THEN h := "{schema}".mul32(h # get_byte(data, blocks), m); END IF;
  h := h # (h >> 13);
  h := "{schema}".mul32(h, m);
  RETURN h # (h >> 15);
END
$$;


--
-- Name: channel_for(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.channel_for(queue text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (('partq_'::text || lpad(to_hex({schema}.murmur2(convert_to(('{schema}.'::text || queue), 'UTF8'::name))), 8, '0'::text)) || lpad(to_hex({schema}.murmur2(convert_to(('partq:{schema}.'::text || queue), 'UTF8'::name))), 8, '0'::text));


--
-- Name: check_group_id(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.check_group_id(group_id text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
  IF group_id IS NULL OR group_id = '' OR octet_length(group_id) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid group id %s (use 1-200 bytes of text)', coalesce('"' || group_id || '"', 'NULL'));
  END IF;
END
$$;


--
-- Name: check_new_item(bytea, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.check_new_item(payload bytea, priority integer, key text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
BEGIN
  IF payload IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload must not be NULL';
  END IF;
  IF octet_length(payload) > lim THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'payload is %s bytes; the limit is %s (partq.max_payload_bytes)', octet_length(payload), lim);
  END IF;
  IF priority NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('priority %s is out of range -32768..32767', priority);
  END IF;
  IF octet_length(key) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('key is %s bytes; the limit is 1024', octet_length(key));
  END IF;
END
$$;


--
-- Name: check_queue_name(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.check_queue_name(queue text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
BEGIN
  IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid queue name %s (use 1-63 letters, digits, ''_'', ''.'' or ''-'', starting with a '
      'letter or digit)', coalesce('"' || queue || '"', 'NULL'));
  END IF;
END
$_$;


--
-- Name: delete_schedule(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.delete_schedule(name text) RETURNS void
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_variable
BEGIN
  DELETE FROM "{schema}".schedules s WHERE s.name = name;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
      'unknown schedule "%s" in schema "%s" (partq schedule list shows them)', name,
      '{schema}');
  END IF;
END
$$;


--
-- Name: enqueue_item(text, bytea, text, text, interval, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL::text, dedup_key text DEFAULT NULL::text, delay interval DEFAULT '00:00:00'::interval, priority integer DEFAULT 0, group_id text DEFAULT NULL::text) RETURNS TABLE(id bigint, part integer, duplicate boolean)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  body CONSTANT bytea := payload;
  k CONSTANT text := key;
  dk CONSTANT text := dedup_key;
  prio CONSTANT int := coalesce(priority, 0);
  d interval := coalesce(delay, interval '0');
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
  nparts int;
  h bigint;
  new_id bigint;
  new_part int;
  grp CONSTANT text := group_id;
  held boolean := false;
BEGIN
  PERFORM "{schema}".check_queue_name(q);
  PERFORM "{schema}".check_new_item(body, prio, k);
  IF octet_length(dk) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('dedup key is %s bytes; the limit is 1024', octet_length(dk));
  END IF;
  IF d > interval '3650 days' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('delay %s is longer than 10 years', d);
  END IF;
  -- A negative delay means now, as in C++.
  d := greatest(d, interval '0');

  -- DeleteQueue takes items' SHARE ROW EXCLUSIVE lock and then deletes the
  -- queue row and its items, so every writer of items takes its ROW
  -- EXCLUSIVE lock before it reads the queue row (pg_store_sql.cc,
  -- lock_items_for_enqueue): either the delete waits for this transaction
  -- to end (and deletes this item with the queue), or this waits for the
  -- delete and then finds no queue. Under READ COMMITTED the read below
  -- takes a new snapshot after the lock is held. A REPEATABLE READ or
  -- SERIALIZABLE transaction keeps the snapshot it started with, which may
  -- predate a delete that has committed since; locking the queue row makes
  -- such a read fail with a serialization failure (40001) instead of
  -- writing into a queue that is gone. READ COMMITTED skips the row lock:
  -- it would write the hot queue row on every enqueue.
  LOCK TABLE "{schema}".items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT qq.parts INTO nparts FROM "{schema}".queues qq WHERE qq.name = q;
  ELSE
    SELECT qq.parts INTO nparts FROM "{schema}".queues qq WHERE qq.name = q FOR KEY SHARE;
  END IF;
  IF nparts IS NULL THEN
    PERFORM "{schema}".unknown_queue(q);
  END IF;
  IF k IS NOT NULL THEN
    h := "{schema}".murmur2(convert_to(k, 'UTF8')) & 2147483647;
  END IF;
  IF grp IS NOT NULL THEN
    IF d > interval '0' THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
        'an item of a group runs when its group starts; it cannot have a delay (group "%s")', grp);
    END IF;
    held := NOT "{schema}".group_hold(q, grp);
  END IF;

  -- A dedup hit whose live item is acked before the lookup: insert again
  -- (once; a second miss is a real race worth reporting), as EnqueueIn does.
  FOR attempt IN 1..2 LOOP
    new_id := nextval('"{schema}".items_id_seq');
    INSERT INTO "{schema}".items AS i (id, queue, part, key, dedup_key, priority, run_at, payload, group_id)
    VALUES (new_id, q,
            CASE WHEN h IS NULL THEN "{schema}".part_for_id(new_id, nparts)
                 ELSE (h % nparts)::int END,
            k, dk, prio::smallint, CASE WHEN held THEN 'infinity' ELSE now() + d END, body, grp)
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.part INTO new_part;
    IF new_part IS NOT NULL THEN
      IF grp IS NOT NULL THEN
        UPDATE "{schema}".groups g SET pending = g.pending + 1 WHERE g.queue = q AND g.id = grp;
      END IF;
      IF NOT held THEN
        PERFORM pg_notify("{schema}".channel_for(q), 'i:' || new_part || ':' || prio || ':' || new_id);
      END IF;
      id := new_id;
      part := new_part;
      duplicate := false;
      RETURN NEXT;
      RETURN;
    END IF;
    SELECT i.id, i.part INTO new_id, new_part
    FROM "{schema}".items i WHERE i.queue = q AND i.dedup_key = dk;
    IF new_part IS NOT NULL THEN
      id := new_id;
      part := new_part;
      duplicate := true;
      RETURN NEXT;
      RETURN;
    END IF;
  END LOOP;
  RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = format(
    'enqueue into "%s": dedup key "%s" is being finished concurrently; retry', q, dk);
END
$$;


--
-- Name: enqueue(text, bytea, text, text, interval, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL::text, dedup_key text DEFAULT NULL::text, delay interval DEFAULT '00:00:00'::interval, priority integer DEFAULT 0, group_id text DEFAULT NULL::text) RETURNS bigint
    LANGUAGE sql
    RETURN (SELECT e.id FROM {schema}.enqueue_item(enqueue.queue, enqueue.payload, enqueue.key, enqueue.dedup_key, enqueue.delay, enqueue.priority, enqueue.group_id) e(id, part, duplicate));


--
-- Name: enqueue(text, text, text, text, interval, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL::text, dedup_key text DEFAULT NULL::text, delay interval DEFAULT '00:00:00'::interval, priority integer DEFAULT 0, group_id text DEFAULT NULL::text) RETURNS bigint
    LANGUAGE sql
    RETURN (SELECT e.id FROM {schema}.enqueue_item(enqueue.queue, convert_to(enqueue.payload, 'UTF8'::name), enqueue.key, enqueue.dedup_key, enqueue.delay, enqueue.priority, enqueue.group_id) e(id, part, duplicate));


--
-- Name: enqueue_item(text, text, text, text, interval, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL::text, dedup_key text DEFAULT NULL::text, delay interval DEFAULT '00:00:00'::interval, priority integer DEFAULT 0, group_id text DEFAULT NULL::text) RETURNS TABLE(id bigint, part integer, duplicate boolean)
    LANGUAGE sql
    BEGIN ATOMIC
 SELECT enqueue_item.id,
     enqueue_item.part,
     enqueue_item.duplicate
    FROM {schema}.enqueue_item(enqueue_item.queue, convert_to(enqueue_item.payload, 'UTF8'::name), enqueue_item.key, enqueue_item.dedup_key, enqueue_item.delay, enqueue_item.priority, enqueue_item.group_id) enqueue_item(id, part, duplicate);
END;


--
-- Name: enqueue_many(text, bytea[], text[], text[], interval, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.enqueue_many(queue text, payloads bytea[], keys text[] DEFAULT NULL::text[], dedup_keys text[] DEFAULT NULL::text[], delay interval DEFAULT '00:00:00'::interval, priority integer DEFAULT 0, group_id text DEFAULT NULL::text) RETURNS TABLE(id bigint, part integer, duplicate boolean)
    LANGUAGE plpgsql
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  grp CONSTANT text := group_id;
  n CONSTANT int := cardinality(payloads);
  prio CONSTANT int := coalesce(priority, 0);
  d interval := coalesce(delay, interval '0');
  lim CONSTANT bigint :=
    coalesce(nullif(current_setting('partq.max_payload_bytes', true), ''), '1048576')::bigint;
  nparts int;
  bad record;
  r record;
  ids bigint[];
  item_parts int[];
  dups boolean[];
  one record;
  ps int[];
  firsts bigint[];
BEGIN
  PERFORM "{schema}".check_queue_name(q);
  IF payloads IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payloads must not be NULL';
  END IF;
  IF array_ndims(payloads) > 1 OR array_ndims(keys) > 1 OR array_ndims(dedup_keys) > 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'payloads, keys and dedup_keys must be one-dimensional arrays';
  END IF;
  IF cardinality(keys) <> n THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'keys must have one element per payload (NULL for none): %s for %s payloads',
      cardinality(keys), n);
  END IF;
  IF cardinality(dedup_keys) <> n THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'dedup_keys must have one element per payload (NULL for none): %s for %s payloads',
      cardinality(dedup_keys), n);
  END IF;
  -- The checks of enqueue_item, once for what all items share ...
  PERFORM "{schema}".check_new_item(''::bytea, prio, NULL);
  IF d > interval '3650 days' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('delay %s is longer than 10 years', d);
  END IF;
  d := greatest(d, interval '0');
  -- ... and for each item in one pass; the first refused one is named.
  SELECT u.o, u.p, u.k, u.dk INTO bad
  FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
  WHERE u.p IS NULL OR octet_length(u.p) > lim OR octet_length(u.k) > 1024
     OR octet_length(u.dk) > 1024
  ORDER BY u.o LIMIT 1;
  IF FOUND THEN
    BEGIN
      PERFORM "{schema}".check_new_item(bad.p, prio, bad.k);
      RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('dedup key is %s bytes; the limit is 1024', octet_length(bad.dk));
    EXCEPTION WHEN invalid_parameter_value THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('item %s: %s', bad.o, SQLERRM);
    END;
  END IF;

  IF grp IS NOT NULL THEN
    -- A group's items are held and counted by enqueue_item, one by one.
    RETURN QUERY
      SELECT e.id, e.part, e.duplicate
      FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
      CROSS JOIN LATERAL "{schema}".enqueue_item(q, u.p, u.k, u.dk, d, prio, grp) e
      ORDER BY u.o;
    RETURN;
  END IF;

  -- The lock and the queue read of enqueue_item (which says why).
  LOCK TABLE "{schema}".items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT qq.parts INTO nparts FROM "{schema}".queues qq WHERE qq.name = q;
  ELSE
    SELECT qq.parts INTO nparts FROM "{schema}".queues qq WHERE qq.name = q FOR KEY SHARE;
  END IF;
  IF nparts IS NULL THEN
    PERFORM "{schema}".unknown_queue(q);
  END IF;

  -- One insert for all; ids in the order given, so a key's items keep it.
  -- Each item's answer goes into ids/item_parts/dups at its position: the
  -- new item, or NULL where its dedup key already had a live item.
  WITH src AS MATERIALIZED (
    SELECT u.o, u.p, u.k, u.dk, nextval('"{schema}".items_id_seq') AS nid
    FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
    ORDER BY u.o),
  ins AS (
    INSERT INTO "{schema}".items AS i (id, queue, part, key, dedup_key, priority, run_at, payload)
    SELECT s.nid, q,
           CASE WHEN s.k IS NULL THEN "{schema}".part_for_id(s.nid, nparts)
                ELSE (("{schema}".murmur2(convert_to(s.k, 'UTF8')) & 2147483647) % nparts)::int
           END,
           s.k, s.dk, prio::smallint, now() + d, s.p
    FROM src s
    -- In dedup key order (ids stay in the order given): calls that share
    -- keys then wait for each other's in one order, never in a cycle.
    ORDER BY s.dk, s.o
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.id, i.part),
  lowest AS (SELECT x.part, min(x.id) AS first FROM ins x GROUP BY x.part)
  SELECT array_agg(m.id ORDER BY s.o), array_agg(m.part ORDER BY s.o),
         array_agg(m.id IS NULL ORDER BY s.o),
         (SELECT array_agg(l.part ORDER BY l.part) FROM lowest l),
         (SELECT array_agg(l.first ORDER BY l.part) FROM lowest l)
  INTO ids, item_parts, dups, ps, firsts
  FROM src s LEFT JOIN ins m ON m.id = s.nid;

  IF array_position(ids, NULL) IS NOT NULL THEN
    -- The live items of those keys, read in a statement of its own, which
    -- sees the items this call inserted (a key given twice) and, under READ
    -- COMMITTED, those whose inserts the one above waited for ...
    FOR r IN
      SELECT t.o, x.id, x.part
      FROM unnest(ids, dedup_keys) WITH ORDINALITY AS t(id, dk, o)
      JOIN "{schema}".items x ON x.queue = q AND x.dedup_key = t.dk
      WHERE t.id IS NULL
    LOOP
      ids[r.o] := r.id;
      item_parts[r.o] := r.part;
    END LOOP;
    -- ... and any finished meanwhile enqueued anew, as enqueue_item does.
    -- (By position, not subscript: the caller's arrays may not start at 1.)
    FOR r IN
      SELECT t.o, t.p, t.k, t.dk
      FROM unnest(ids, payloads, keys, dedup_keys) WITH ORDINALITY AS t(id, p, k, dk, o)
      WHERE t.id IS NULL
    LOOP
      SELECT e.id, e.part, e.duplicate INTO one
      FROM "{schema}".enqueue_item(q, r.p, r.k, r.dk, d, prio) e;
      ids[r.o] := one.id;
      item_parts[r.o] := one.part;
      dups[r.o] := one.duplicate;
    END LOOP;
  END IF;

  -- The notices of the C++ producer's batches (NotifyParts): one per part
  -- with the lowest id it added there; past 32 parts one for all parts.
  IF cardinality(ps) > 32 THEN
    PERFORM pg_notify("{schema}".channel_for(q),
                      'i:-1:' || prio || ':' || (SELECT min(f) FROM unnest(firsts) f));
  ELSIF ps IS NOT NULL THEN
    PERFORM pg_notify("{schema}".channel_for(q), 'i:' || t.p || ':' || prio || ':' || t.i)
    FROM unnest(ps, firsts) AS t(p, i);
  END IF;
  RETURN QUERY SELECT t.id, t.part, t.dup FROM unnest(ids, item_parts, dups) AS t(id, part, dup);
END
$$;


--
-- Name: enqueue_many(text, text[], text[], text[], interval, integer, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.enqueue_many(queue text, payloads text[], keys text[] DEFAULT NULL::text[], dedup_keys text[] DEFAULT NULL::text[], delay interval DEFAULT '00:00:00'::interval, priority integer DEFAULT 0, group_id text DEFAULT NULL::text) RETURNS TABLE(id bigint, part integer, duplicate boolean)
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF array_ndims(payloads) > 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'payloads, keys and dedup_keys must be one-dimensional arrays';
  END IF;
  RETURN QUERY SELECT * FROM "{schema}".enqueue_many(
    queue,
    CASE WHEN payloads IS NOT NULL THEN ARRAY(
      SELECT convert_to(t.p, 'UTF8') FROM unnest(payloads) WITH ORDINALITY AS t(p, o) ORDER BY t.o)
    END,
    keys, dedup_keys, delay, priority, group_id);
END
$$;


--
-- Name: finish_refused(bigint, integer, bigint, integer); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.finish_refused(held bigint, wanted integer, acked bigint, expected integer) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'PQ001',
    MESSAGE = format('partq: finish refused: %s of %s parts held at their epochs, %s of %s items '
                     'still there', held, wanted, acked, expected);
END
$$;


--
-- Name: group_mark_cancelled(text, text, boolean); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_mark_cancelled(queue text, group_id text, run_end boolean) RETURNS bigint[]
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  left_over bigint;
  out bigint[];
BEGIN
  PERFORM "{schema}".require_queue(q);
  PERFORM "{schema}".check_group_id(g);
  UPDATE "{schema}".groups x
  SET cancelled_at = coalesce(x.cancelled_at, now()),
      end_skipped = x.end_skipped OR NOT coalesce(run_end, true)
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.pending INTO left_over;
  IF NOT FOUND THEN
    PERFORM 1 FROM "{schema}".groups x WHERE x.queue = q AND x.id = g;
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = format('group "%s" of queue "%s" has ended; there is nothing to cancel', g, q);
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = format('unknown group "%s" in queue "%s"', g, q);
  END IF;
  IF left_over <= 0 THEN
    PERFORM "{schema}".group_end(q, g);
  END IF;
  SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}') INTO out
  FROM "{schema}".items i WHERE i.queue = q AND i.group_id = g;
  RETURN out;
END
$$;


--
-- Name: group_cancel(text, text, boolean); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_cancel(queue text, group_id text, run_end boolean DEFAULT true) RETURNS bigint
    LANGUAGE sql
    RETURN (SELECT count(*) AS count FROM {schema}.cancel_items(group_cancel.queue, {schema}.group_mark_cancelled(group_cancel.queue, group_cancel.group_id, group_cancel.run_end)) c(id, state) WHERE (c.state = 'cancelled'::text));


--
-- Name: group_create(text, text, text, jsonb); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_create(queue text, group_id text, end_queue text DEFAULT NULL::text, end_payload jsonb DEFAULT NULL::jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  eq CONSTANT text := end_queue;
  ep CONSTANT jsonb := end_payload;
  r record;
BEGIN
  PERFORM "{schema}".require_queue(q);
  PERFORM "{schema}".check_group_id(g);
  IF eq IS NOT NULL THEN
    PERFORM "{schema}".require_queue(eq);
  ELSIF ep IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'an end payload needs an end queue to go to';
  END IF;
  PERFORM "{schema}".group_hold(q, g);
  SELECT x.end_queue, x.end_payload INTO r FROM "{schema}".groups x WHERE x.queue = q AND x.id = g;
  IF r.end_queue IS NULL THEN
    UPDATE "{schema}".groups x SET end_queue = eq, end_payload = ep
    WHERE x.queue = q AND x.id = g;
  ELSIF r.end_queue IS DISTINCT FROM eq OR r.end_payload IS DISTINCT FROM ep THEN
    RAISE EXCEPTION USING ERRCODE = '42710', MESSAGE = format(
      'group "%s" of queue "%s" already has other end work (end queue "%s")', g, q, r.end_queue);
  END IF;
END
$$;


--
-- Name: group_end(text, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_end(queue text, group_id text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
  end_id bigint;
BEGIN
  UPDATE "{schema}".groups x SET ended_at = now(), pending = 0
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.* INTO r;
  IF NOT FOUND OR r.end_queue IS NULL THEN
    RETURN;
  END IF;
  IF r.end_skipped THEN
    UPDATE "{schema}".groups x SET end_error = 'cancelled without its end work (--no-end)'
    WHERE x.queue = q AND x.id = g;
    RETURN;
  END IF;
  BEGIN
    SELECT e.id INTO end_id
    FROM "{schema}".enqueue_item(r.end_queue,
           convert_to(jsonb_build_object('queue', q, 'group', g, 'done', r.done, 'dead', r.dead,
                                         'cancelled', r.cancelled,
                                         'payload', r.end_payload)::text, 'UTF8'),
           dedup_key => 'partq.group:' || q || ':' || g) e;
    UPDATE "{schema}".groups x SET end_item = end_id WHERE x.queue = q AND x.id = g;
  EXCEPTION WHEN undefined_object THEN
    UPDATE "{schema}".groups x SET end_error = SQLERRM WHERE x.queue = q AND x.id = g;
  END;
END
$$;


--
-- Name: group_hold(text, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_hold(queue text, group_id text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
BEGIN
  PERFORM "{schema}".check_group_id(g);
  LOOP
    SELECT x.started_at, x.ended_at, x.cancelled_at INTO r FROM "{schema}".groups x
    WHERE x.queue = q AND x.id = g FOR UPDATE;
    IF FOUND THEN
      IF r.ended_at IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format(
          'group "%s" of queue "%s" has ended; it takes no more items (use a new group id)', g, q);
      END IF;
      IF r.cancelled_at IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format(
          'group "%s" of queue "%s" was cancelled; it takes no more items', g, q);
      END IF;
      RETURN r.started_at IS NOT NULL;
    END IF;
    INSERT INTO "{schema}".groups (queue, id) VALUES (q, g) ON CONFLICT DO NOTHING;
  END LOOP;
END
$$;


--
-- Name: group_start(text, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_start(queue text, group_id text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  n bigint;
  ps int[];
  prs int[];
  ids bigint[];
  lo int := 1;
  n_released bigint;
BEGIN
  -- Items' lock before the queue row, as every writer of items takes it
  -- (enqueue_item says why).
  LOCK TABLE "{schema}".items IN ROW EXCLUSIVE MODE;
  PERFORM "{schema}".require_queue(q);
  PERFORM "{schema}".group_hold(q, g);
  UPDATE "{schema}".groups x SET started_at = coalesce(x.started_at, now())
  WHERE x.queue = q AND x.id = g RETURNING x.pending INTO n;
  WITH released AS (
    UPDATE "{schema}".items i SET run_at = statement_timestamp()
    WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'
    RETURNING i.part, i.priority, i.id),
  lowest AS (
    SELECT DISTINCT ON (r.part) r.part, r.priority, r.id FROM released r
    ORDER BY r.part, r.priority, r.id)
  SELECT array_agg(l.part ORDER BY l.part), array_agg(l.priority ORDER BY l.part),
         array_agg(l.id ORDER BY l.part),
         (SELECT count(*) FROM released)
  INTO ps, prs, ids, n_released FROM lowest l;
  IF cardinality(ps) > 32 THEN
    -- Too many parts: one notice for all, from the lowest key of all.
    FOR i IN 2..cardinality(ps) LOOP
      IF (prs[i], ids[i]) < (prs[lo], ids[lo]) THEN lo := i; END IF;
    END LOOP;
    PERFORM pg_notify("{schema}".channel_for(q), 'i:-1:' || prs[lo] || ':' || ids[lo]);
  ELSIF ps IS NOT NULL THEN
    FOR i IN 1..cardinality(ps) LOOP
      PERFORM pg_notify("{schema}".channel_for(q), 'i:' || ps[i] || ':' || prs[i] || ':' || ids[i]);
    END LOOP;
  END IF;
  IF n <= 0 THEN
    PERFORM "{schema}".group_end(q, g);
  END IF;
  RETURN n_released;
END
$$;


--
-- Name: group_status(text, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.group_status(queue text, group_id text) RETURNS TABLE(pending bigint, held bigint, in_flight bigint, done bigint, dead bigint, cancelled bigint, created_at timestamp with time zone, started_at timestamp with time zone, cancelled_at timestamp with time zone, ended_at timestamp with time zone, end_queue text, end_payload jsonb, end_item bigint, end_error text)
    LANGUAGE plpgsql STABLE
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
BEGIN
  PERFORM "{schema}".require_queue(q);
  PERFORM "{schema}".check_group_id(g);
  RETURN QUERY
    SELECT x.pending,
           (SELECT count(*) FROM "{schema}".items i
            WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'),
           (SELECT count(*) FROM "{schema}".items i
            WHERE i.queue = q AND i.group_id = g AND EXISTS (
              SELECT 1 FROM "{schema}".part_claims c
              WHERE c.queue = q AND c.part = i.part AND i.id = ANY(c.ids))),
           x.done, x.dead, x.cancelled, x.created_at, x.started_at, x.cancelled_at, x.ended_at,
           x.end_queue::text, x.end_payload, x.end_item, x.end_error
    FROM "{schema}".groups x WHERE x.queue = q AND x.id = g;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = format('unknown group "%s" in queue "%s"', g, q);
  END IF;
END
$$;


--
-- Name: groups_finished(text, text[], bigint[], bigint[], bigint[]); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.groups_finished(queue text, group_ids text[], done bigint[], dead bigint[], cancelled bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  t record;
  r record;
BEGIN
  FOR t IN SELECT u.g, sum(u.d) AS d, sum(u.x) AS x, sum(u.c) AS c
           FROM unnest(group_ids, done, dead, cancelled) AS u(g, d, x, c)
           WHERE u.g IS NOT NULL GROUP BY u.g ORDER BY u.g LOOP
    UPDATE "{schema}".groups x
    SET pending = x.pending - t.d - t.x - t.c, done = x.done + t.d, dead = x.dead + t.x,
        cancelled = x.cancelled + t.c
    WHERE x.queue = q AND x.id = t.g AND x.ended_at IS NULL
    RETURNING x.pending, x.started_at, x.cancelled_at INTO r;
    IF FOUND AND r.pending <= 0 AND (r.started_at IS NOT NULL OR r.cancelled_at IS NOT NULL) THEN
      PERFORM "{schema}".group_end(q, t.g);
    END IF;
  END LOOP;
END
$$;


--
-- Name: item_state(text, bigint); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.item_state(queue text, id bigint) RETURNS TABLE(state text, attempts integer, result bytea, last_error text)
    LANGUAGE plpgsql STABLE
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  want CONSTANT bigint := id;
  r record;
  high_water bigint;
BEGIN
  PERFORM "{schema}".require_queue(q);
  SELECT 'pending' AS s, i.queue, i.attempts, NULL::bytea AS result, i.last_error INTO r
  FROM "{schema}".items i WHERE i.id = want;
  IF NOT FOUND THEN
    SELECT 'dead' AS s, d.queue, d.attempts, NULL::bytea AS result, d.last_error INTO r
    FROM "{schema}".dead_items d WHERE d.id = want;
  END IF;
  IF NOT FOUND THEN
    SELECT 'done' AS s, x.queue, 0 AS attempts, x.result, NULL::text AS last_error INTO r
    FROM "{schema}".results x WHERE x.id = want;
  END IF;
  IF NOT FOUND THEN
    SELECT 'cancelled' AS s, c.queue, c.attempts, NULL::bytea AS result,
           NULL::text AS last_error INTO r
    FROM "{schema}".cancelled_items c WHERE c.id = want;
  END IF;
  IF FOUND THEN
    IF r.queue = q THEN
      RETURN QUERY SELECT r.s::text, r.attempts::int, r.result::bytea, r.last_error::text;
    ELSE
      RETURN QUERY SELECT 'unknown'::text, 0, NULL::bytea, NULL::text;
    END IF;
    RETURN;
  END IF;
  SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO high_water
  FROM "{schema}".items_id_seq s;
  -- Ids are shared by all queues of the schema, and a vanished id does not
  -- say which queue it had (pg/README.md), as in C++.
  RETURN QUERY SELECT CASE WHEN want BETWEEN 1 AND high_water THEN 'done' ELSE 'unknown' END,
                      0, NULL::bytea, NULL::text;
END
$$;


--
-- Name: item_state_by_dedup_key(text, text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.item_state_by_dedup_key(queue text, dedup_key text) RETURNS TABLE(id bigint, state text, attempts integer, result bytea, last_error text)
    LANGUAGE plpgsql STABLE
    AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  dk CONSTANT text := dedup_key;
BEGIN
  PERFORM "{schema}".require_queue(q);
  RETURN QUERY
    SELECT i.id, 'pending'::text, i.attempts, NULL::bytea, i.last_error
    FROM "{schema}".items i WHERE i.queue = q AND i.dedup_key = dk;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT f.id, f.s, f.attempts, f.result, f.last_error FROM (
      SELECT x.id, 'done'::text AS s, 0 AS attempts, x.result, NULL::text AS last_error
      FROM "{schema}".results x WHERE x.queue = q AND x.dedup_key = dk
      UNION ALL
      SELECT d.id, 'dead', d.attempts, NULL, d.last_error
      FROM "{schema}".dead_items d WHERE d.queue = q AND d.dedup_key = dk
      UNION ALL
      SELECT c.id, 'cancelled', c.attempts, NULL, NULL
      FROM "{schema}".cancelled_items c WHERE c.queue = q AND c.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text, 0, NULL::bytea, NULL::text;
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: schedules; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.schedules (
    name text NOT NULL COLLATE pg_catalog."C",
    queue text NOT NULL COLLATE pg_catalog."C",
    every interval,
    cron text,
    time_zone text,
    payload bytea NOT NULL,
    key text,
    priority smallint DEFAULT 0 NOT NULL,
    next_tick timestamp with time zone,
    last_tick timestamp with time zone,
    fired bigint DEFAULT 0 NOT NULL,
    missed bigint DEFAULT 0 NOT NULL,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schedules_check CHECK (((every IS NULL) <> (cron IS NULL))),
    CONSTRAINT schedules_check1 CHECK (((every IS NULL) OR (time_zone IS NULL))),
    CONSTRAINT schedules_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'::text))
);


--
-- Name: list_schedules(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.list_schedules(queue text DEFAULT NULL::text) RETURNS SETOF {schema}.schedules
    LANGUAGE plpgsql STABLE
    AS $$
#variable_conflict use_variable
BEGIN
  IF queue IS NOT NULL THEN
    PERFORM "{schema}".require_queue(queue);
  END IF;
  RETURN QUERY
    SELECT s.* FROM "{schema}".schedules s WHERE queue IS NULL OR s.queue = queue ORDER BY s.name;
END
$$;


--
-- Name: move_group_generation(); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.move_group_generation() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF TG_TABLE_NAME <> 'session_parts' THEN
    INSERT INTO "{schema}".group_generations AS g (queue, generation)
    SELECT DISTINCT c.queue, 1 FROM changed c
    ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
    RETURN NULL;
  END IF;
  WITH moved AS (
    INSERT INTO "{schema}".group_generations AS g (queue, generation)
    SELECT DISTINCT c.queue, 1 FROM changed c
    ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1
    RETURNING g.queue, g.generation),
  logged AS (
    INSERT INTO "{schema}".group_changes (queue, generation, part, session_id, epoch)
    SELECT c.queue, m.generation, c.part,
           CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE c.session_id END,
           CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE c.epoch END
    FROM changed c JOIN moved m ON m.queue = c.queue)
  DELETE FROM "{schema}".group_changes x USING moved m
  WHERE x.queue = m.queue AND m.generation % 64 = 0 AND x.generation <= m.generation - 1024;
  RETURN NULL;
END
$$;


--
-- Name: move_group_generation_row(); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.move_group_generation_row() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO "{schema}".group_generations AS g (queue, generation)
  VALUES (NEW.queue, 1)
  ON CONFLICT (queue) DO UPDATE SET generation = g.generation + 1;
  RETURN NULL;
END
$$;


--
-- Name: mul32(bigint, bigint); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.mul32(a bigint, b bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN ((((a & (65535)::bigint) * b) + ((((a >> 16) * b) & (65535)::bigint) << 16)) & '4294967295'::bigint);


--
-- Name: owner_changes(text, bigint); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.owner_changes(queue text, since bigint) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT string_agg(d.part || ':' || coalesce(d.session_id::text, '') || ':'
                    || coalesce(d.epoch::text, ''), ',' ORDER BY d.part)
  FROM (SELECT DISTINCT ON (c.part) c.part, c.session_id, c.epoch
        FROM "{schema}".group_changes c
        WHERE c.queue = owner_changes.queue AND c.generation > since
        ORDER BY c.part, c.generation DESC) d
$$;


--
-- Name: part_for_id(bigint, integer); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.part_for_id(id bigint, parts integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
DECLARE
  two64 CONSTANT numeric := 18446744073709551616;
  two63 CONSTANT numeric := 9223372036854775808;
  x bigint := id;
  u numeric;
BEGIN
  x := x # ((x >> 30) & 17179869183);
  u := mod((CASE WHEN x < 0 THEN x + two64 ELSE x END) * 13787848793156543929, two64);
  x := (CASE WHEN u >= two63 THEN u - two64 ELSE u END)::bigint;
  x := x # ((x >> 27) & 137438953471);
  u := mod((CASE WHEN x < 0 THEN x + two64 ELSE x END) * 10723151780598845931, two64);
  x := (CASE WHEN u >= two63 THEN u - two64 ELSE u END)::bigint;
  x := x # ((x >> 31) & 8589934591);
  RETURN mod(CASE WHEN x < 0 THEN x + two64 ELSE x END, parts)::int;
END
$$;


--
-- Name: part_for_key(text, integer); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.part_for_key(key text, parts integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN ((parts >= 1) AND (parts <= 4096)) THEN ((({schema}.murmur2(convert_to(key, 'UTF8'::name)) & (2147483647)::bigint) % (parts)::bigint))::integer ELSE {schema}.bad_part_count(parts) END;


--
-- Name: prune(text, interval, boolean); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.prune(queue text, older_than interval, dead boolean DEFAULT false) RETURNS TABLE(results bigint, cancelled bigint, groups bigint, dead_items bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
  q CONSTANT text := queue;
  cutoff timestamptz;
BEGIN
  PERFORM "{schema}".require_queue(q);
  IF older_than IS NULL OR older_than < interval '0' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'a retention age must be zero or more, not %s', coalesce(older_than::text, 'NULL'));
  END IF;
  cutoff := now() - older_than;
  DELETE FROM "{schema}".results r WHERE r.queue = q AND r.finished_at <= cutoff;
  GET DIAGNOSTICS results = ROW_COUNT;
  DELETE FROM "{schema}".cancelled_items c WHERE c.queue = q AND c.cancelled_at <= cutoff;
  GET DIAGNOSTICS cancelled = ROW_COUNT;
  DELETE FROM "{schema}".groups g WHERE g.queue = q AND g.ended_at <= cutoff;
  GET DIAGNOSTICS groups = ROW_COUNT;
  dead_items := 0;
  IF coalesce(dead, false) THEN
    DELETE FROM "{schema}".dead_items d WHERE d.queue = q AND d.failed_at <= cutoff;
    GET DIAGNOSTICS dead_items = ROW_COUNT;
  END IF;
  RETURN NEXT;
END
$$;


--
-- Name: require_queue(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.require_queue(queue text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
  PERFORM "{schema}".check_queue_name(queue);
  PERFORM 1 FROM "{schema}".queues q WHERE q.name = queue;
  IF NOT FOUND THEN
    PERFORM "{schema}".unknown_queue(queue);
  END IF;
END
$$;


--
-- Name: unknown_queue(text); Type: FUNCTION; Schema: {schema}; Owner: -
--

CREATE FUNCTION {schema}.unknown_queue(queue text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
    'unknown queue "%s" in schema "%s" (create it with: partq queue create %s --parts N%s)',
    queue, '{schema}', queue,
    CASE WHEN '{schema}' = 'partq' THEN '' ELSE ' --schema {schema}' END);
END
$$;


--
-- Name: cancelled_items; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.cancelled_items (
    id bigint NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    part integer NOT NULL,
    key text COLLATE pg_catalog."C",
    dedup_key text COLLATE pg_catalog."C",
    priority smallint NOT NULL,
    attempts integer NOT NULL,
    enqueued_at timestamp with time zone NOT NULL,
    cancelled_at timestamp with time zone DEFAULT now() NOT NULL,
    group_id text COLLATE pg_catalog."C"
);


--
-- Name: claim_seq; Type: SEQUENCE; Schema: {schema}; Owner: -
--

CREATE SEQUENCE {schema}.claim_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: dead_items; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.dead_items (
    id bigint NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    part integer NOT NULL,
    key text COLLATE pg_catalog."C",
    dedup_key text COLLATE pg_catalog."C",
    priority smallint NOT NULL,
    attempts integer NOT NULL,
    enqueued_at timestamp with time zone NOT NULL,
    failed_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text NOT NULL,
    payload bytea NOT NULL,
    origin_topic text,
    origin_partition integer,
    origin_offset bigint,
    headers jsonb,
    group_id text COLLATE pg_catalog."C"
);


--
-- Name: epochs; Type: SEQUENCE; Schema: {schema}; Owner: -
--

CREATE SEQUENCE {schema}.epochs
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: expiry_sweeps; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.expiry_sweeps (
    queue text NOT NULL COLLATE pg_catalog."C",
    generation bigint NOT NULL,
    sweep_after timestamp with time zone NOT NULL
)
WITH (fillfactor='50');


--
-- Name: group_changes; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.group_changes (
    queue text NOT NULL COLLATE pg_catalog."C",
    generation bigint NOT NULL,
    part integer NOT NULL,
    session_id uuid,
    epoch bigint
);


--
-- Name: group_generations; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.group_generations (
    queue text NOT NULL COLLATE pg_catalog."C",
    generation bigint NOT NULL
);


--
-- Name: groups; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.groups (
    queue text NOT NULL COLLATE pg_catalog."C",
    id text NOT NULL COLLATE pg_catalog."C",
    end_queue text COLLATE pg_catalog."C",
    end_payload jsonb,
    pending bigint DEFAULT 0 NOT NULL,
    done bigint DEFAULT 0 NOT NULL,
    dead bigint DEFAULT 0 NOT NULL,
    cancelled bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    cancelled_at timestamp with time zone,
    ended_at timestamp with time zone,
    end_item bigint,
    end_error text,
    end_skipped boolean DEFAULT false NOT NULL
);


--
-- Name: items; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.items (
    id bigint NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    part integer NOT NULL,
    key text COLLATE pg_catalog."C",
    dedup_key text COLLATE pg_catalog."C",
    priority smallint DEFAULT 0 NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    abandoned_epoch bigint,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    payload bytea DEFAULT '\x'::bytea NOT NULL,
    origin_topic text,
    origin_partition integer,
    origin_offset bigint,
    headers jsonb,
    group_id text COLLATE pg_catalog."C"
)
WITH (fillfactor='100', autovacuum_vacuum_cost_delay='0', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='100000', vacuum_truncate='false');


--
-- Name: items_id_seq; Type: SEQUENCE; Schema: {schema}; Owner: -
--

ALTER TABLE {schema}.items ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME {schema}.items_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: kafka_offsets; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.kafka_offsets (
    queue text NOT NULL COLLATE pg_catalog."C",
    topic text NOT NULL COLLATE pg_catalog."C",
    partition integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT kafka_offsets_next_offset_check CHECK ((next_offset >= 0))
);


--
-- Name: outbox; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.outbox (
    id bigint NOT NULL,
    topic text NOT NULL,
    key bytea,
    payload bytea NOT NULL,
    headers jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: outbox_id_seq; Type: SEQUENCE; Schema: {schema}; Owner: -
--

ALTER TABLE {schema}.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: part_claims; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.part_claims (
    queue text NOT NULL COLLATE pg_catalog."C",
    part integer NOT NULL,
    epoch bigint NOT NULL,
    ids bigint[] NOT NULL,
    claimed_at timestamp with time zone DEFAULT now() NOT NULL,
    seq bigint DEFAULT nextval('{schema}.claim_seq'::regclass) NOT NULL
)
WITH (fillfactor='100', autovacuum_vacuum_cost_delay='0', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', vacuum_truncate='false');


--
-- Name: queues; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.queues (
    name text NOT NULL COLLATE pg_catalog."C",
    parts integer NOT NULL,
    assignment text DEFAULT 'lexical'::text NOT NULL,
    session_ttl interval DEFAULT '00:00:10'::interval NOT NULL,
    max_attempts integer DEFAULT 25 NOT NULL,
    ordered boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    dlq_topic text,
    paused boolean DEFAULT false NOT NULL,
    rate double precision,
    grown_from integer[] DEFAULT '{}'::integer[] NOT NULL,
    fair_by text,
    key_concurrency integer,
    CONSTRAINT queues_assignment_check CHECK ((assignment = ANY (ARRAY['lexical'::text, 'sticky'::text]))),
    CONSTRAINT queues_dlq_topic_name CHECK (((dlq_topic ~ '^[A-Za-z0-9._-]{1,249}$'::text) AND (dlq_topic <> ALL (ARRAY['.'::text, '..'::text])))),
    CONSTRAINT queues_fair_by_check CHECK (((fair_by IS NULL) OR (fair_by = 'key'::text))),
    CONSTRAINT queues_key_concurrency_check CHECK (((key_concurrency IS NULL) OR ((key_concurrency >= 1) AND (key_concurrency <= 1000000)))),
    CONSTRAINT queues_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT queues_parts_check CHECK (((parts >= 1) AND (parts <= 4096))),
    CONSTRAINT queues_rate_check CHECK (((rate IS NULL) OR ((rate > (0)::double precision) AND (rate <= (1000000)::double precision)))),
    CONSTRAINT queues_session_ttl_check CHECK (((session_ttl >= '00:00:00.1'::interval) AND (session_ttl <= '1 day'::interval)))
);


--
-- Name: results; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.results (
    id bigint NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    dedup_key text COLLATE pg_catalog."C",
    result bytea,
    finished_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: schema_migrations; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.schema_migrations (
    version integer NOT NULL,
    description text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: session_parts; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.session_parts (
    queue text NOT NULL COLLATE pg_catalog."C",
    part integer NOT NULL,
    session_id uuid NOT NULL,
    epoch bigint NOT NULL,
    acquired_at timestamp with time zone DEFAULT now() NOT NULL
)
WITH (fillfactor='50');


--
-- Name: sessions; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.sessions (
    id uuid NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    incarnation bigint DEFAULT 1 NOT NULL,
    instance_id text,
    host text DEFAULT ''::text NOT NULL,
    pid integer DEFAULT 0 NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
)
WITH (fillfactor='50');


--
-- Name: throughput; Type: TABLE; Schema: {schema}; Owner: -
--

CREATE TABLE {schema}.throughput (
    queue text NOT NULL COLLATE pg_catalog."C",
    minute timestamp with time zone NOT NULL,
    session_id uuid NOT NULL,
    acked bigint DEFAULT 0 NOT NULL,
    retried bigint DEFAULT 0 NOT NULL,
    dead bigint DEFAULT 0 NOT NULL
);


--
-- Name: cancelled_items cancelled_items_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.cancelled_items
    ADD CONSTRAINT cancelled_items_pkey PRIMARY KEY (id);


--
-- Name: dead_items dead_items_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.dead_items
    ADD CONSTRAINT dead_items_pkey PRIMARY KEY (id);


--
-- Name: expiry_sweeps expiry_sweeps_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.expiry_sweeps
    ADD CONSTRAINT expiry_sweeps_pkey PRIMARY KEY (queue);


--
-- Name: group_changes group_changes_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.group_changes
    ADD CONSTRAINT group_changes_pkey PRIMARY KEY (queue, generation, part);


--
-- Name: group_generations group_generations_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.group_generations
    ADD CONSTRAINT group_generations_pkey PRIMARY KEY (queue);


--
-- Name: groups groups_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.groups
    ADD CONSTRAINT groups_pkey PRIMARY KEY (queue, id);


--
-- Name: items items_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.items
    ADD CONSTRAINT items_pkey PRIMARY KEY (id);


--
-- Name: kafka_offsets kafka_offsets_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.kafka_offsets
    ADD CONSTRAINT kafka_offsets_pkey PRIMARY KEY (queue, topic, partition);


--
-- Name: outbox outbox_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);


--
-- Name: part_claims part_claims_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.part_claims
    ADD CONSTRAINT part_claims_pkey PRIMARY KEY (queue, part, seq);


--
-- Name: queues queues_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (name);


--
-- Name: results results_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.results
    ADD CONSTRAINT results_pkey PRIMARY KEY (id);


--
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: session_parts session_parts_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.session_parts
    ADD CONSTRAINT session_parts_pkey PRIMARY KEY (queue, part);


--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);


--
-- Name: throughput throughput_pkey; Type: CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.throughput
    ADD CONSTRAINT throughput_pkey PRIMARY KEY (queue, minute, session_id);


--
-- Name: cancelled_items_dedup; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX cancelled_items_dedup ON {schema}.cancelled_items USING btree (queue, dedup_key) WHERE (dedup_key IS NOT NULL);


--
-- Name: cancelled_items_queue; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX cancelled_items_queue ON {schema}.cancelled_items USING btree (queue, part);


--
-- Name: dead_items_dedup; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX dead_items_dedup ON {schema}.dead_items USING btree (queue, dedup_key) WHERE (dedup_key IS NOT NULL);


--
-- Name: dead_items_queue; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX dead_items_queue ON {schema}.dead_items USING btree (queue, part);


--
-- Name: items_abandoned; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX items_abandoned ON {schema}.items USING btree (queue, part, priority, id) WHERE (abandoned_epoch IS NOT NULL);


--
-- Name: items_dedup; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE UNIQUE INDEX items_dedup ON {schema}.items USING btree (queue, dedup_key) WHERE (dedup_key IS NOT NULL);


--
-- Name: items_group; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX items_group ON {schema}.items USING btree (queue, group_id, part) WHERE (group_id IS NOT NULL);


--
-- Name: items_key; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX items_key ON {schema}.items USING btree (queue, part, key, id) WHERE (key IS NOT NULL);


--
-- Name: items_later; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX items_later ON {schema}.items USING btree (queue, part, run_at) WHERE (run_at > enqueued_at);


--
-- Name: items_ready; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX items_ready ON {schema}.items USING btree (queue, part, priority, id);


--
-- Name: results_dedup; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX results_dedup ON {schema}.results USING btree (queue, dedup_key, id) WHERE (dedup_key IS NOT NULL);


--
-- Name: schedules_due; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX schedules_due ON {schema}.schedules USING btree (queue, next_tick);


--
-- Name: session_parts_session; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX session_parts_session ON {schema}.session_parts USING btree (session_id);


--
-- Name: sessions_queue; Type: INDEX; Schema: {schema}; Owner: -
--

CREATE INDEX sessions_queue ON {schema}.sessions USING btree (queue);


--
-- Name: session_parts group_parts_deleted; Type: TRIGGER; Schema: {schema}; Owner: -
--

CREATE TRIGGER group_parts_deleted AFTER DELETE ON {schema}.session_parts REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();


--
-- Name: session_parts group_parts_inserted; Type: TRIGGER; Schema: {schema}; Owner: -
--

CREATE TRIGGER group_parts_inserted AFTER INSERT ON {schema}.session_parts REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();


--
-- Name: session_parts group_parts_updated; Type: TRIGGER; Schema: {schema}; Owner: -
--

CREATE TRIGGER group_parts_updated AFTER UPDATE ON {schema}.session_parts REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();


--
-- Name: sessions group_sessions_deleted; Type: TRIGGER; Schema: {schema}; Owner: -
--

CREATE TRIGGER group_sessions_deleted AFTER DELETE ON {schema}.sessions REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();


--
-- Name: sessions group_sessions_inserted; Type: TRIGGER; Schema: {schema}; Owner: -
--

CREATE TRIGGER group_sessions_inserted AFTER INSERT ON {schema}.sessions REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.move_group_generation();


--
-- Name: sessions group_sessions_revived; Type: TRIGGER; Schema: {schema}; Owner: -
--

CREATE TRIGGER group_sessions_revived AFTER UPDATE ON {schema}.sessions FOR EACH ROW WHEN ((old.expires_at < now())) EXECUTE FUNCTION {schema}.move_group_generation_row();


--
-- Name: expiry_sweeps expiry_sweeps_queue_fkey; Type: FK CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.expiry_sweeps
    ADD CONSTRAINT expiry_sweeps_queue_fkey FOREIGN KEY (queue) REFERENCES {schema}.queues(name) ON DELETE CASCADE;


--
-- Name: groups groups_queue_fkey; Type: FK CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.groups
    ADD CONSTRAINT groups_queue_fkey FOREIGN KEY (queue) REFERENCES {schema}.queues(name) ON DELETE CASCADE;


--
-- Name: schedules schedules_queue_fkey; Type: FK CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.schedules
    ADD CONSTRAINT schedules_queue_fkey FOREIGN KEY (queue) REFERENCES {schema}.queues(name) ON DELETE CASCADE;


--
-- Name: session_parts session_parts_session_id_fkey; Type: FK CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.session_parts
    ADD CONSTRAINT session_parts_session_id_fkey FOREIGN KEY (session_id) REFERENCES {schema}.sessions(id) ON DELETE CASCADE;


--
-- Name: sessions sessions_queue_fkey; Type: FK CONSTRAINT; Schema: {schema}; Owner: -
--

ALTER TABLE ONLY {schema}.sessions
    ADD CONSTRAINT sessions_queue_fkey FOREIGN KEY (queue) REFERENCES {schema}.queues(name) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--


