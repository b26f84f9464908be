-- Migration 25: enqueue_many(): many items in one call of the SQL API
--
-- enqueue_many() (docs/sql-api.md): a program enqueueing a
-- list through its driver called enqueue_item once per item, each call its
-- own lock, queue read, checks, insert and notice: 20000 items took
-- 1.3-1.8 s. enqueue_many checks what all items share once and each item in
-- one pass, inserts all in one statement, reads the live items of dedup
-- keys that met one in a statement of its own (which sees them), and sends
-- the notices of the C++ producer's batches (0.21-0.23 s). Items of a group
-- go through enqueue_item, which holds and counts the group per item.

CREATE FUNCTION {schema}.enqueue_many(queue text, payloads bytea[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
-- JIT off: the insert's estimates are a guess, and compiling it took longer
-- than inserting 20000 items.
LANGUAGE plpgsql VOLATILE SET jit = off AS $$
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
  PERFORM {schema}.check_queue_name(q);
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
  PERFORM {schema}.check_new_item(''::bytea, prio, NULL);
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
      PERFORM {schema}.check_new_item(bad.p, prio, bad.k);
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
      CROSS JOIN LATERAL {schema}.enqueue_item(q, u.p, u.k, u.dk, d, prio, grp) e
      ORDER BY u.o;
    RETURN;
  END IF;

  -- The lock and the queue read of enqueue_item (which says why).
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q;
  ELSE
    SELECT qq.parts INTO nparts FROM {schema}.queues qq WHERE qq.name = q FOR KEY SHARE;
  END IF;
  IF nparts IS NULL THEN
    PERFORM {schema}.unknown_queue(q);
  END IF;

  -- One insert for all; ids in the order given, so a key's items keep it.
  -- Each item's answer goes into ids/item_parts/dups at its position: the
  -- new item, or NULL where its dedup key already had a live item.
  WITH src AS MATERIALIZED (
    SELECT u.o, u.p, u.k, u.dk, nextval('{schema}.items_id_seq') AS nid
    FROM unnest(payloads, keys, dedup_keys) WITH ORDINALITY AS u(p, k, dk, o)
    ORDER BY u.o),
  ins AS (
    INSERT INTO {schema}.items AS i (id, queue, part, key, dedup_key, priority, run_at, payload)
    SELECT s.nid, q,
           CASE WHEN s.k IS NULL THEN {schema}.part_for_id(s.nid, nparts)
                ELSE (({schema}.murmur2(convert_to(s.k, 'UTF8')) & 2147483647) % nparts)::int
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
      JOIN {schema}.items x ON x.queue = q AND x.dedup_key = t.dk
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
      FROM {schema}.enqueue_item(q, r.p, r.k, r.dk, d, prio) e;
      ids[r.o] := one.id;
      item_parts[r.o] := one.part;
      dups[r.o] := one.duplicate;
    END LOOP;
  END IF;

  -- The notices of the C++ producer's batches (NotifyParts): one per part
  -- with the lowest id it added there; past 32 parts one for all parts.
  IF cardinality(ps) > 32 THEN
    PERFORM pg_notify({schema}.channel_for(q),
                      'i:-1:' || prio || ':' || (SELECT min(f) FROM unnest(firsts) f));
  ELSIF ps IS NOT NULL THEN
    PERFORM pg_notify({schema}.channel_for(q), 'i:' || t.p || ':' || prio || ':' || t.i)
    FROM unnest(ps, firsts) AS t(p, i);
  END IF;
  RETURN QUERY SELECT t.id, t.part, t.dup FROM unnest(ids, item_parts, dups) AS t(id, part, dup);
END
$$;

-- Text payloads are their UTF-8 bytes, as enqueue_item's.
CREATE FUNCTION {schema}.enqueue_many(queue text, payloads text[], keys text[] DEFAULT NULL,
                                      dedup_keys text[] DEFAULT NULL,
                                      delay interval DEFAULT '0', priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF array_ndims(payloads) > 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'payloads, keys and dedup_keys must be one-dimensional arrays';
  END IF;
  RETURN QUERY SELECT * FROM {schema}.enqueue_many(
    queue,
    CASE WHEN payloads IS NOT NULL THEN ARRAY(
      SELECT convert_to(t.p, 'UTF8') FROM unnest(payloads) WITH ORDINALITY AS t(p, o) ORDER BY t.o)
    END,
    keys, dedup_keys, delay, priority, group_id);
END
$$;
