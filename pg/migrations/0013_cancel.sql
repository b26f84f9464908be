-- Migration 13: cancel: cancelled_items, cancel_items(), cancel(); item_state() says cancelled
--
-- Cancel: cancelled_items keeps what a cancel removed (no
-- payload: the record answers `partq wait` and item_state(), it is not
-- work to run again), deleted with its queue, as results are. The cancel
-- itself is a function, cancel_items(), so the C++ store and the SQL API
-- share its lock order (its comment, and docs/architecture.md, "Cancel").

CREATE TABLE {schema}.cancelled_items (
  id            bigint PRIMARY KEY,
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  key           text COLLATE "C",
  dedup_key     text COLLATE "C",
  priority      smallint NOT NULL,
  attempts      int NOT NULL,
  enqueued_at   timestamptz NOT NULL,
  cancelled_at  timestamptz NOT NULL DEFAULT now(),
  group_id      text COLLATE "C"
);
CREATE INDEX cancelled_items_queue ON {schema}.cancelled_items (queue, part);
CREATE INDEX cancelled_items_dedup ON {schema}.cancelled_items (queue, dedup_key)
  WHERE dedup_key IS NOT NULL;

-- Store::CancelItems (store.h): removes the items among `ids` that are
-- ready or delayed, recording each in cancelled_items, and returns one row
-- per distinct id: cancelled, in_flight, already_cancelled, done, dead or
-- unknown (not an item of this queue). docs/architecture.md ("Cancel") has
-- the lock order and why it is exact; in short, per part of the asked items:
--   1. items' ROW EXCLUSIVE lock, then the queue row FOR NO KEY UPDATE (once):
--      DeleteQueue waits for this transaction or this for it (it takes
--      items' lock first too), and AcquireParts, which locks the queue row
--      FOR SHARE before anything else, cannot give an unowned part an owner
--      until this transaction ends. Enqueues and joins (FOR KEY SHARE, via
--      the sessions FK) are not held up.
--   2. If the part has an owner: its current claim record (the latest at the
--      owner's epoch) gets a new seq. A claim replaces exactly that row
--      (found by its seq); one under way waits for this transaction and then
--      finds the row gone from under it, so it records nothing and returns
--      nothing from this part (pg_store_sql.cc, ClaimCtes), however old its
--      snapshot. A claim that committed first is seen: the UPDATE waits for
--      it, finds the row replaced, and looks again. The ids on the record are
--      in flight; no other items of the part can be, until this commits.
--   3. The other asked items of the part are deleted and recorded in one
--      statement, skipping rows another transaction holds (a static re-join
--      marking them abandoned): those stay, reported in flight. This never
--      waits while holding the record, so it cannot close a deadlock.
-- With no owner, no claim can run in the part (an owner comes only through
-- AcquireParts, held off by the queue row), and a dead owner's record names
-- items nobody runs: they are cancelled, and the next owner's takeover
-- finds their ids gone, as it finds acked ones. Parts are taken in order;
-- the C++ store cancels one part per transaction, because a claim across
-- parts replaces several records in one statement, and a transaction that
-- held one record while waiting for another could deadlock with it
-- (PostgreSQL would then abort one of the two).
-- Items of queue groups count as cancelled in their groups (groups_finished,
-- last, after the parts' records and rows: the order of an ack), which may
-- end a group.
CREATE FUNCTION {schema}.cancel_items(queue text, ids bigint[])
RETURNS TABLE (id bigint, state text)
LANGUAGE plpgsql VOLATILE AS $$
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
  PERFORM {schema}.check_queue_name(q);
  IF ids IS NULL OR EXISTS (SELECT 1 FROM unnest(ids) AS x WHERE x IS NULL OR x < 1) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'item ids must be 1 or more, not %s', coalesce(ids::text, 'NULL'));
  END IF;
  LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE;
  PERFORM 1 FROM {schema}.queues qq WHERE qq.name = q FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    PERFORM {schema}.unknown_queue(q);
  END IF;
  FOR p IN SELECT DISTINCT i.part FROM {schema}.items i
           WHERE i.id = ANY(ids) AND i.queue = q ORDER BY 1 LOOP
    flying := '{}';
    tries := 0;
    LOOP
      SELECT sp.epoch INTO owner_epoch FROM {schema}.session_parts sp
      WHERE sp.queue = q AND sp.part = p;
      EXIT WHEN NOT FOUND;
      UPDATE {schema}.part_claims c SET seq = nextval('{schema}.claim_seq')
      WHERE c.queue = q AND c.part = p AND c.epoch = owner_epoch
        AND c.seq = (SELECT l.seq FROM {schema}.part_claims l
                     WHERE l.queue = q AND l.part = p AND l.epoch = owner_epoch
                     ORDER BY l.seq DESC LIMIT 1)
      RETURNING c.ids INTO flying;
      IF FOUND THEN
        PERFORM 1 FROM {schema}.session_parts sp
        WHERE sp.queue = q AND sp.part = p AND sp.epoch = owner_epoch;
        EXIT WHEN FOUND;
        flying := '{}';  -- a static re-join moved the epoch: the new tenure's record
      ELSE
        PERFORM 1 FROM {schema}.part_claims l
        WHERE l.queue = q AND l.part = p AND l.epoch = owner_epoch;
        IF NOT FOUND THEN
          PERFORM 1 FROM {schema}.session_parts sp
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
      DELETE FROM {schema}.items i
      WHERE i.id IN (SELECT x.id FROM {schema}.items x
                     WHERE x.id = ANY(ids) AND x.queue = q AND x.part = p
                       AND x.id <> ALL(flying)
                     FOR UPDATE SKIP LOCKED)
      RETURNING i.id, i.queue, i.part, i.key, i.dedup_key, i.priority, i.attempts, i.enqueued_at,
                i.group_id),
    recorded AS (
      INSERT INTO {schema}.cancelled_items
        (id, queue, part, key, dedup_key, priority, attempts, enqueued_at, group_id)
      SELECT * FROM gone
      RETURNING cancelled_items.id, cancelled_items.group_id)
    SELECT cancelled || coalesce(array_agg(r.id), '{}'),
           cgroups || coalesce(array_agg(r.group_id) FILTER (WHERE r.group_id IS NOT NULL), '{}')
    INTO cancelled, cgroups FROM recorded r;
  END LOOP;
  IF cardinality(cgroups) > 0 THEN
    PERFORM {schema}.groups_finished(q, cgroups, array_fill(0::bigint, ARRAY[cardinality(cgroups)]),
                                     array_fill(0::bigint, ARRAY[cardinality(cgroups)]),
                                     array_fill(1::bigint, ARRAY[cardinality(cgroups)]));
  END IF;
  SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO high_water
  FROM {schema}.items_id_seq s;
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
    LEFT JOIN {schema}.items i ON i.id = a.id
    LEFT JOIN {schema}.dead_items d ON d.id = a.id
    LEFT JOIN {schema}.cancelled_items c ON c.id = a.id
    LEFT JOIN {schema}.results x ON x.id = a.id
    ORDER BY a.n;
END
$$;

-- By dedup key: the live item holding it, cancelled as above; with none,
-- the newest finished one's state (done, dead, already_cancelled), else
-- unknown with id NULL.
CREATE FUNCTION {schema}.cancel_by_dedup_key(queue text, dedup_key text)
RETURNS TABLE (id bigint, state text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  q CONSTANT text := queue;
  dk CONSTANT text := dedup_key;
  live bigint;
BEGIN
  PERFORM {schema}.require_queue(q);
  SELECT i.id INTO live FROM {schema}.items i WHERE i.queue = q AND i.dedup_key = dk;
  IF FOUND THEN
    RETURN QUERY SELECT c.id, c.state FROM {schema}.cancel_items(q, ARRAY[live]) c;
    RETURN;
  END IF;
  RETURN QUERY
    SELECT f.id, f.s FROM (
      SELECT x.id, 'done'::text AS s FROM {schema}.results x
      WHERE x.queue = q AND x.dedup_key = dk
      UNION ALL
      SELECT d.id, 'dead' FROM {schema}.dead_items d WHERE d.queue = q AND d.dedup_key = dk
      UNION ALL
      SELECT c.id, 'already_cancelled' FROM {schema}.cancelled_items c
      WHERE c.queue = q AND c.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text;
END
$$;

-- The SQL API's cancel of one item (docs/sql-api.md), in the caller's
-- transaction: its state after the call, as cancel_items() names it.
CREATE FUNCTION {schema}.cancel(queue text, id bigint) RETURNS text
LANGUAGE sql VOLATILE
RETURN (SELECT c.state FROM {schema}.cancel_items(queue, ARRAY[id]) c);

-- Cancelling a queue group (migration 12), step one: the group takes no
-- more items and, with run_end false, ends without its end item; a group
-- with nothing pending ends now. Its items are then cancelled with
-- cancel_items(), which counts them in the group (Store::CancelGroup does it
-- part by part, one transaction each, as CancelItems does); those in flight
-- finish, and the last to finish ends the group. Returns the ids of its items
-- still there. Unknown group 42704, one that ended 55000.
CREATE FUNCTION {schema}.group_mark_cancelled(queue text, group_id text, run_end boolean)
RETURNS bigint[] LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  q CONSTANT text := queue;
  g CONSTANT text := group_id;
  left_over bigint;
  out bigint[];
BEGIN
  PERFORM {schema}.require_queue(q);
  PERFORM {schema}.check_group_id(g);
  UPDATE {schema}.groups x
  SET cancelled_at = coalesce(x.cancelled_at, now()),
      end_skipped = x.end_skipped OR NOT coalesce(run_end, true)
  WHERE x.queue = q AND x.id = g AND x.ended_at IS NULL
  RETURNING x.pending INTO left_over;
  IF NOT FOUND THEN
    PERFORM 1 FROM {schema}.groups x WHERE x.queue = q AND x.id = g;
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = format('group "%s" of queue "%s" has ended; there is nothing to cancel', g, q);
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = format('unknown group "%s" in queue "%s"', g, q);
  END IF;
  IF left_over <= 0 THEN
    PERFORM {schema}.group_end(q, g);
  END IF;
  SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}') INTO out
  FROM {schema}.items i WHERE i.queue = q AND i.group_id = g;
  RETURN out;
END
$$;

-- The SQL API's group cancel, in the caller's transaction: both steps at
-- once; returns how many items it cancelled. (Across several parts a
-- transaction can meet a claim in a deadlock, 40P01: retry it.)
CREATE FUNCTION {schema}.group_cancel(queue text, group_id text, run_end boolean DEFAULT true)
RETURNS bigint LANGUAGE sql VOLATILE
RETURN (SELECT count(*) FROM {schema}.cancel_items(
          queue, {schema}.group_mark_cancelled(queue, group_id, run_end)) c
        WHERE c.state = 'cancelled');

-- item_state() and item_state_by_dedup_key() of migration 6, with cancelled
-- items.
CREATE OR REPLACE FUNCTION {schema}.item_state(queue text, id bigint)
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
  IF NOT FOUND THEN
    SELECT 'cancelled' AS s, c.queue, c.attempts, NULL::bytea AS result,
           NULL::text AS last_error INTO r
    FROM {schema}.cancelled_items c WHERE c.id = want;
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

CREATE OR REPLACE FUNCTION {schema}.item_state_by_dedup_key(queue text, dedup_key text)
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
      FROM {schema}.dead_items d WHERE d.queue = q AND d.dedup_key = dk
      UNION ALL
      SELECT c.id, 'cancelled', c.attempts, NULL, NULL
      FROM {schema}.cancelled_items c WHERE c.queue = q AND c.dedup_key = dk) f
    ORDER BY f.id DESC LIMIT 1;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::bigint, 'unknown'::text, 0, NULL::bytea, NULL::text;
END
$$;
