-- Migration 6: the SQL API: enqueue(), enqueue_item(), item_state(), murmur2(), channel_for()
--
-- The SQL API, docs/sql-api.md: enqueue(), enqueue_item(),
-- item_state() and item_state_by_dedup_key() let a program in any language
-- produce through its own PostgreSQL driver, in its own transaction, with
-- the C++ producer's rules; murmur2(), part_for_key() and channel_for()
-- are PartForKey and ChannelFor in SQL, so an item lands in the part and
-- wakes the channel the C++ code would use (no stored copy to keep in
-- step). The functions are SECURITY INVOKER: the caller needs the
-- privileges the same SQL would need.

-- murmur2 (partitioner/part.cc, Kafka's Utils.murmur2) over bytes, as an
-- unsigned 32-bit value in a bigint. 32-bit multiplication wraps; a bigint
-- cannot hold the full 64-bit product, so mul32 multiplies the two 16-bit
-- halves of `a` apart: a*b mod 2^32 = a_lo*b + ((a_hi*b) mod 2^16) << 16.
CREATE FUNCTION {schema}.mul32(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (((a & 65535) * b) + ((((a >> 16) * b) & 65535) << 16)) & 4294967295;

CREATE FUNCTION {schema}.murmur2(data bytea) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
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
    k := {schema}.mul32(k, m);
    k := k # (k >> 24);
    k := {schema}.mul32(k, m);
    h := {schema}.mul32(h, m) # k;
    i := i + 4;
  END LOOP;
  IF len & 3 = 3 THEN h := h # (get_byte(data, blocks + 2) << 16); END IF;
  IF len & 3 >= 2 THEN h := h # (get_byte(data, blocks + 1) << 8); END IF;
  IF len & 3 >= 1 THEN h := {schema}.mul32(h # get_byte(data, blocks), m); END IF;
  h := h # (h >> 13);
  h := {schema}.mul32(h, m);
  RETURN h # (h >> 15);
END
$$;

-- PartForKey: Kafka's toPositive (the sign bit cleared) mod parts, over the
-- key's UTF-8 bytes whatever the database's encoding.
CREATE FUNCTION {schema}.part_for_key(key text, parts int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (({schema}.murmur2(convert_to(key, 'UTF8')) & 2147483647) % parts)::int;

-- ChannelFor (pg/pg_store.cc): the LISTEN/NOTIFY channel of a queue of this
-- schema. Computed rather than stored: nothing to keep in step with the
-- queues table, and the C++ side computes it the same way.
CREATE FUNCTION {schema}.channel_for(queue text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'partq_'
       || lpad(to_hex({schema}.murmur2(convert_to('{schema_name}.' || queue, 'UTF8'))), 8, '0')
       || lpad(to_hex({schema}.murmur2(convert_to('partq:{schema_name}.' || queue, 'UTF8'))),
               8, '0');

-- The errors the C++ store gives for a queue name (ValidateQueueName) and
-- for a queue this schema does not have (UnknownQueue), with SQLSTATEs a
-- driver can tell apart: 22023 (invalid_parameter_value), 42704
-- (undefined_object).
CREATE FUNCTION {schema}.check_queue_name(queue text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid queue name %s (use 1-63 letters, digits, ''_'', ''.'' or ''-'', starting with a '
      'letter or digit)', coalesce('"' || queue || '"', 'NULL'));
  END IF;
END
$$;

CREATE FUNCTION {schema}.unknown_queue(queue text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format(
    'unknown queue "%s" in schema "%s" (create it with: partq queue create %s --parts N%s)',
    queue, '{schema_name}', queue,
    CASE WHEN '{schema_name}' = 'partq' THEN '' ELSE ' --schema {schema_name}' END);
END
$$;

-- Both errors, for a reader of the queue (an enqueue reads it under its lock).
CREATE FUNCTION {schema}.require_queue(queue text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM {schema}.check_queue_name(queue);
  PERFORM 1 FROM {schema}.queues q WHERE q.name = queue;
  IF NOT FOUND THEN
    PERFORM {schema}.unknown_queue(queue);
  END IF;
END
$$;

-- The enqueue of Store::Enqueue, in the caller's transaction: the item
-- exists, and its wake-up goes out, exactly when that transaction commits.
-- The same checks (CheckNewItem), part, dedup and notice as the C++ producer
-- (pg_store_items.cc, EnqueueIn; pg_store_sql.cc, kEnqueue). The payload
-- limit is the setting partq.max_payload_bytes (1 MiB, the C++ default,
-- when unset), as the C++ limit is the client's option.
-- A dedup hit returns the live item's id with duplicate = true.
CREATE FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE AS $$
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
BEGIN
  PERFORM {schema}.check_queue_name(q);
  IF body IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload must not be NULL';
  END IF;
  IF octet_length(body) > lim THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'payload is %s bytes; the limit is %s (partq.max_payload_bytes)', octet_length(body), lim);
  END IF;
  IF prio NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('priority %s is out of range -32768..32767', prio);
  END IF;
  IF octet_length(k) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('key is %s bytes; the limit is 1024', octet_length(k));
  END IF;
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
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q;
  ELSE
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q FOR KEY SHARE;
  END IF;
  IF nparts IS NULL THEN
    PERFORM {schema}.unknown_queue(q);
  END IF;
  IF k IS NOT NULL THEN
    h := {schema}.murmur2(convert_to(k, 'UTF8')) & 2147483647;
  END IF;

  -- A dedup hit whose live item is acked before the lookup: insert again
  -- (once; a second miss is a real race worth reporting), as EnqueueIn does.
  FOR attempt IN 1..2 LOOP
    new_id := nextval('{schema}.items_id_seq');
    INSERT INTO {schema}.items AS i (id, queue, part, key, dedup_key, priority, run_at, payload)
    VALUES (new_id, q,
            CASE WHEN h IS NULL THEN {schema}.part_for_id(new_id, nparts)
                 ELSE (h % nparts)::int END,
            k, dk, prio::smallint, now() + d, body)
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.part INTO new_part;
    IF new_part IS NOT NULL THEN
      PERFORM pg_notify({schema}.channel_for(q), 'i:' || new_part);
      id := new_id;
      part := new_part;
      duplicate := false;
      RETURN NEXT;
      RETURN;
    END IF;
    SELECT i.id, i.part INTO new_id, new_part
    FROM {schema}.items i WHERE i.queue = q AND i.dedup_key = dk;
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

-- A text payload is its UTF-8 bytes. A plain string literal resolves to
-- this overload (PostgreSQL prefers the string category for unknown-type
-- arguments), a bytea value to the one above.
CREATE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT * FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key, dedup_key, delay,
                                      priority);
END;

CREATE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, payload, key, dedup_key, delay, priority) e);

CREATE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key,
                                               dedup_key, delay, priority) e);

-- Store::GetItemState in SQL: pending (in items), done (acked: a results
-- row, or an allocated id found nowhere, as acks without a result leave no
-- row), dead (in dead_items), or unknown (never allocated, or an item of
-- another queue). attempts and last_error as the C++ ItemState has them.
CREATE FUNCTION {schema}.item_state(queue text, id bigint)
RETURNS TABLE (state text, attempts int, result bytea, last_error text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  want CONSTANT bigint := id;
  r record;
  high_water bigint;
BEGIN
  PERFORM {schema}.require_queue(q);
  SELECT 'pending' AS s, i.queue, i.attempts, NULL::bytea AS result, i.last_error INTO r
  FROM {schema}.items i WHERE i.id = want;
  IF NOT FOUND THEN
    SELECT 'dead' AS s, d.queue, d.attempts, NULL::bytea AS result, d.last_error INTO r
    FROM {schema}.dead_items d WHERE d.id = want;
  END IF;
  IF NOT FOUND THEN
    SELECT 'done' AS s, x.queue, 0 AS attempts, x.result, NULL::text AS last_error INTO r
    FROM {schema}.results x WHERE x.id = want;
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
  FROM {schema}.items_id_seq s;
  -- Ids are shared by all queues of the schema, and a vanished id does not
  -- say which queue it had (pg/README.md), as in C++.
  RETURN QUERY SELECT CASE WHEN want BETWEEN 1 AND high_water THEN 'done' ELSE 'unknown' END,
                      0, NULL::bytea, NULL::text;
END
$$;

-- Store::GetItemStateByDedupKey: the live item with that dedup key, else the
-- newest finished one (done with a result row, or dead), else unknown (id
-- NULL).
CREATE FUNCTION {schema}.item_state_by_dedup_key(queue text, dedup_key text)
RETURNS TABLE (id bigint, state text, attempts int, result bytea, last_error text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  dk CONSTANT text := dedup_key;
BEGIN
  PERFORM {schema}.require_queue(q);
  RETURN QUERY
    SELECT i.id, 'pending'::text, i.attempts, NULL::bytea, i.last_error
    FROM {schema}.items i WHERE i.queue = q AND i.dedup_key = dk;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT f.id, f.s, f.attempts, f.result, f.last_error FROM (
      SELECT x.id, 'done'::text AS s, 0 AS attempts, x.result, NULL::text AS last_error
      FROM {schema}.results x WHERE x.queue = q AND x.dedup_key = dk
      UNION ALL
      SELECT d.id, 'dead', d.attempts, NULL, d.last_error
      FROM {schema}.dead_items d WHERE d.queue = q AND d.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text, 0, NULL::bytea, NULL::text;
END
$$;
