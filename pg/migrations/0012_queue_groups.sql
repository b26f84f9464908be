-- Migration 12: queue groups: items.group_id, groups, group_*(), enqueue_item(group_id)

-- Queue groups (store.h, "Queue groups"). An item of a group not yet started
-- waits with run_at 'infinity' (claims read only what is due, and
-- items_later holds it, so a claim never walks it); group_start makes it due.
-- The group's row counts what is pending and how it ended; every writer of
-- those counts holds the row (FOR UPDATE, or its UPDATE) until it commits,
-- so the last finisher of a started group is decided by the row's lock, not
-- by a snapshot: exactly one transaction sees pending reach 0, and it
-- enqueues the end item.
ALTER TABLE {schema}.items ADD COLUMN group_id text COLLATE "C";
ALTER TABLE {schema}.dead_items ADD COLUMN group_id text COLLATE "C";
CREATE INDEX items_group ON {schema}.items (queue, group_id, part) WHERE group_id IS NOT NULL;

CREATE TABLE {schema}.groups (
  queue         text COLLATE "C" NOT NULL REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  id            text COLLATE "C" NOT NULL,
  end_queue     text COLLATE "C",
  end_payload   jsonb,
  pending       bigint NOT NULL DEFAULT 0,  -- enqueued, not yet acked, dead or cancelled
  done          bigint NOT NULL DEFAULT 0,
  dead          bigint NOT NULL DEFAULT 0,
  cancelled     bigint NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  started_at    timestamptz,
  cancelled_at  timestamptz,
  ended_at      timestamptz,
  end_item      bigint,   -- the end item's id
  end_error     text,     -- why there is no end item though there was end work
  end_skipped   boolean NOT NULL DEFAULT false,  -- cancelled without its end work
  PRIMARY KEY (queue, id)
);

CREATE FUNCTION {schema}.check_group_id(group_id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF group_id IS NULL OR group_id = '' OR octet_length(group_id) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid group id %s (use 1-200 bytes of text)', coalesce('"' || group_id || '"', 'NULL'));
  END IF;
END
$$;

-- Holds the group's row for the rest of the transaction, creating it (not
-- started) when missing; returns whether it has started. A group that has
-- ended takes no more items. The queue must exist (the caller checks).
CREATE FUNCTION {schema}.group_hold(queue text, group_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
BEGIN
  PERFORM {schema}.check_group_id(g);
  LOOP
    SELECT x.started_at, x.ended_at, x.cancelled_at INTO r FROM {schema}.groups x
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
    INSERT INTO {schema}.groups (queue, id) VALUES (q, g) ON CONFLICT DO NOTHING;
  END LOOP;
END
$$;

-- Ends a started group whose pending count reached 0, in the caller's
-- transaction (which holds the row): marks it ended and enqueues its end
-- work, once. The end item's payload is JSON: the queue, the group, its
-- counts and the end payload given at group_create. An end queue deleted
-- since leaves the group ended with end_error set, rather than failing the
-- ack that finished the group's last item.
CREATE FUNCTION {schema}.group_end(queue text, group_id text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  r record;
  end_id bigint;
BEGIN
  UPDATE {schema}.groups x SET ended_at = now(), pending = 0
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
    SELECT e.id INTO end_id
    FROM {schema}.enqueue_item(r.end_queue,
           convert_to(jsonb_build_object('queue', q, 'group', g, 'done', r.done, 'dead', r.dead,
                                         'cancelled', r.cancelled,
                                         'payload', r.end_payload)::text, 'UTF8'),
           dedup_key => 'partq.group:' || q || ':' || g) e;
    UPDATE {schema}.groups x SET end_item = end_id WHERE x.queue = q AND x.id = g;
  EXCEPTION WHEN undefined_object THEN
    UPDATE {schema}.groups x SET end_error = SQLERRM WHERE x.queue = q AND x.id = g;
  END;
END
$$;

-- Counts items of groups that finished in the caller's transaction (acked,
-- dead-lettered, cancelled), and ends each started group whose last pending
-- item this was. The rows are taken in group order, so two transactions
-- finishing items of the same groups cannot deadlock on them.
CREATE FUNCTION {schema}.groups_finished(queue text, group_ids text[], done bigint[],
                                         dead bigint[], cancelled bigint[])
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  t record;
  r record;
BEGIN
  FOR t IN SELECT u.g, sum(u.d) AS d, sum(u.x) AS x, sum(u.c) AS c
           FROM unnest(group_ids, done, dead, cancelled) AS u(g, d, x, c)
           WHERE u.g IS NOT NULL GROUP BY u.g ORDER BY u.g LOOP
    UPDATE {schema}.groups x
    SET pending = x.pending - t.d - t.x - t.c, done = x.done + t.d, dead = x.dead + t.x,
        cancelled = x.cancelled + t.c
    WHERE x.queue = q AND x.id = t.g AND x.ended_at IS NULL
    RETURNING x.pending, x.started_at, x.cancelled_at INTO r;
    IF FOUND AND r.pending <= 0 AND (r.started_at IS NOT NULL OR r.cancelled_at IS NOT NULL) THEN
      PERFORM {schema}.group_end(q, t.g);
    END IF;
  END LOOP;
END
$$;

-- Creates a group (not started) with its end work, or gives a group that
-- enqueues created its end work. The same call again does nothing; other end
-- work for a group that has some, or any for a group that ended, is refused.
CREATE FUNCTION {schema}.group_create(queue text, group_id text, end_queue text DEFAULT NULL,
                                      end_payload jsonb DEFAULT NULL)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  eq CONSTANT text := end_queue;
  ep CONSTANT jsonb := end_payload;
  r record;
BEGIN
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.check_group_id(g);
  IF eq IS NOT NULL THEN
    PERFORM {schema}.require_queue(eq);
  ELSIF ep IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'an end payload needs an end queue to go to';
  END IF;
  PERFORM {schema}.group_hold(q, g);
  SELECT x.end_queue, x.end_payload INTO r FROM {schema}.groups x WHERE x.queue = q AND x.id = g;
  IF r.end_queue IS NULL THEN
    UPDATE {schema}.groups x SET end_queue = eq, end_payload = ep
    WHERE x.queue = q AND x.id = g;
  ELSIF r.end_queue IS DISTINCT FROM eq OR r.end_payload IS DISTINCT FROM ep THEN
    RAISE EXCEPTION USING ERRCODE = '42710', MESSAGE = format(
      'group "%s" of queue "%s" already has other end work (end queue "%s")', g, q, r.end_queue);
  END IF;
END
$$;

-- A group as `partq group status` shows it. pending = held (not started) +
-- ready or delayed + in flight (listed in its part's claim record).
CREATE FUNCTION {schema}.group_status(queue text, group_id text)
RETURNS TABLE (pending bigint, held bigint, in_flight bigint, done bigint, dead bigint,
               cancelled bigint, created_at timestamptz, started_at timestamptz,
               cancelled_at timestamptz, ended_at timestamptz, end_queue text,
               end_payload jsonb, end_item bigint, end_error text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
BEGIN
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.check_group_id(g);
  RETURN QUERY
    SELECT x.pending,
           (SELECT count(*) FROM {schema}.items i
            WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'),
           (SELECT count(*) FROM {schema}.items i
            WHERE i.queue = q AND i.group_id = g AND EXISTS (
              SELECT 1 FROM {schema}.part_claims c
              WHERE c.queue = q AND c.part = i.part AND i.id = ANY(c.ids))),
           x.done, x.dead, x.cancelled, x.created_at, x.started_at, x.cancelled_at, x.ended_at,
           x.end_queue::text, x.end_payload, x.end_item, x.end_error
    FROM {schema}.groups x WHERE x.queue = q AND x.id = g;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = format('unknown group "%s" in queue "%s"', g, q);
  END IF;
END
$$;

-- Starts a group: its held items become due (one notice per part, with the
-- lowest key released there, as an enqueue sends), and from now on its new
-- items are due as they come. A group with nothing pending ends at once.
-- Starting a started group does nothing; an ended one is refused.
CREATE FUNCTION {schema}.group_start(queue text, group_id text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  n bigint;
  ps int[];
  prs int[];
  ids bigint[];
  lo int := 1;
BEGIN
  -- Items' lock before the queue row, as every writer of items takes it
  -- (enqueue_item says why).
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.group_hold(q, g);
  UPDATE {schema}.groups x SET started_at = coalesce(x.started_at, now())
  WHERE x.queue = q AND x.id = g RETURNING x.pending INTO n;
  WITH released AS (
    UPDATE {schema}.items i SET run_at = statement_timestamp()
    WHERE i.queue = q AND i.group_id = g AND i.run_at = 'infinity'
    RETURNING i.part, i.priority, i.id),
  lowest AS (
    SELECT DISTINCT ON (r.part) r.part, r.priority, r.id FROM released r
    ORDER BY r.part, r.priority, r.id)
  SELECT array_agg(l.part ORDER BY l.part), array_agg(l.priority ORDER BY l.part),
         array_agg(l.id ORDER BY l.part)
  INTO ps, prs, ids FROM lowest l;
  IF cardinality(ps) > 32 THEN
    -- Too many parts: one notice for all, from the lowest key of all.
    FOR i IN 2..cardinality(ps) LOOP
      IF (prs[i], ids[i]) < (prs[lo], ids[lo]) THEN lo := i; END IF;
    END LOOP;
    PERFORM pg_notify({schema}.channel_for(q), 'i:-1:' || prs[lo] || ':' || ids[lo]);
  ELSIF ps IS NOT NULL THEN
    FOR i IN 1..cardinality(ps) LOOP
      PERFORM pg_notify({schema}.channel_for(q), 'i:' || ps[i] || ':' || prs[i] || ':' || ids[i]);
    END LOOP;
  END IF;
  IF n <= 0 THEN
    PERFORM {schema}.group_end(q, g);
  END IF;
  RETURN coalesce(cardinality(ids), 0);
END
$$;


-- The checks of a new item that every writer of the SQL API makes
-- (enqueue_item, add_schedule), as the C++ producer's ValidateNewItem: a
-- payload of at most partq.max_payload_bytes (1 MiB when unset), a priority
-- in -32768..32767, a key of at most 1024 bytes. 22023 with the C++ message.
CREATE FUNCTION {schema}.check_new_item(payload bytea, priority int, key text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
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

-- enqueue() and enqueue_item() take a group id (named group_id; the older
-- calls, by position or by name, mean the same as before).
DROP FUNCTION {schema}.enqueue(text, text, text, text, interval, int);
DROP FUNCTION {schema}.enqueue(text, bytea, text, text, interval, int);
DROP FUNCTION {schema}.enqueue_item(text, text, text, text, interval, int);
DROP FUNCTION {schema}.enqueue_item(text, bytea, text, text, interval, int);
CREATE FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0,
                                      group_id text DEFAULT NULL)
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
  grp CONSTANT text := group_id;
  held boolean := false;
BEGIN
  PERFORM {schema}.check_queue_name(q);
  PERFORM {schema}.check_new_item(body, prio, k);
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
  IF grp IS NOT NULL THEN
    IF d > interval '0' THEN
      RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
        'an item of a group runs when its group starts; it cannot have a delay (group "%s")', grp);
    END IF;
    held := NOT {schema}.group_hold(q, grp);
  END IF;

  -- A dedup hit whose live item is acked before the lookup: insert again
  -- (once; a second miss is a real race worth reporting), as EnqueueIn does.
  FOR attempt IN 1..2 LOOP
    new_id := nextval('{schema}.items_id_seq');
    INSERT INTO {schema}.items AS i (id, queue, part, key, dedup_key, priority, run_at, payload, group_id)
    VALUES (new_id, q,
            CASE WHEN h IS NULL THEN {schema}.part_for_id(new_id, nparts)
                 ELSE (h % nparts)::int END,
            k, dk, prio::smallint, CASE WHEN held THEN 'infinity' ELSE now() + d END, body, grp)
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING i.part INTO new_part;
    IF new_part IS NOT NULL THEN
      IF grp IS NOT NULL THEN
        UPDATE {schema}.groups g SET pending = g.pending + 1 WHERE g.queue = q AND g.id = grp;
      END IF;
      IF NOT held THEN
        PERFORM pg_notify({schema}.channel_for(q), 'i:' || new_part || ':' || prio || ':' || new_id);
      END IF;
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

CREATE FUNCTION {schema}.enqueue_item(queue text, payload text, key text DEFAULT NULL,
                                      dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                      priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS TABLE (id bigint, part int, duplicate boolean)
LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT * FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key, dedup_key, delay,
                                      priority, group_id);
END;

CREATE FUNCTION {schema}.enqueue(queue text, payload bytea, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, payload, key, dedup_key, delay, priority,
                                               group_id) e);

CREATE FUNCTION {schema}.enqueue(queue text, payload text, key text DEFAULT NULL,
                                 dedup_key text DEFAULT NULL, delay interval DEFAULT '0',
                                 priority int DEFAULT 0, group_id text DEFAULT NULL)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT e.id FROM {schema}.enqueue_item(queue, convert_to(payload, 'UTF8'), key,
                                               dedup_key, delay, priority, group_id) e);
