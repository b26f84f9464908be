-- Migration 8: items_later: what comes due behind a cursor; enqueue notices carry the key
--
-- Claims that do not walk acked rows: an owner reads a part
-- from its cursor on, and what can come due behind the cursor (retried,
-- delayed and requeued items: run_at later than enqueued_at) is found in
-- items_later, in run_at order, which holds only such rows. Before, the
-- owner read the part from its head on every enqueue notice and every
-- second, walking the index entries of every acked row vacuum had not yet
-- removed: while a long transaction held the vacuum horizon, that walk
-- grew with every item acked. A new item that sorts behind a cursor (a
-- late commit, a higher priority) is told by its notice, which now
-- carries its key ("i:PART:PRIORITY:ID", Notice::from), enqueue_item()'s
-- too. A retry already moved run_at, which items_abandoned's predicate
-- column made a non-HOT update anyway; items_later adds an index entry
-- to it. The index is built without CONCURRENTLY (migrations run in a
-- transaction): it blocks enqueues while it is built.

CREATE INDEX items_later ON {schema}.items (queue, part, run_at) WHERE run_at > enqueued_at;

CREATE OR REPLACE FUNCTION {schema}.enqueue_item(queue text, payload bytea, key text DEFAULT NULL,
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
      PERFORM pg_notify({schema}.channel_for(q), 'i:' || new_part || ':' || prio || ':' || new_id);
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
