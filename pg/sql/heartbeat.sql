-- Heartbeat: one round trip. The update touches only heartbeat_at and
-- expires_at (no index covers them: a HOT update). Expired sessions of
-- the queue are deleted (their parts cascade), but a heartbeat never
-- waits: a locked session row is one in the middle of its own
-- heartbeat or leave (and two expired members deleting each other must
-- not deadlock), and a locked part row is a Finish of that session
-- still running (a paused process can hold it for long; its parts are
-- fenced until it ends anyway), so those sessions are left for a later
-- heartbeat. The part rows are locked here first (all or none) so the
-- cascade cannot wait either. All
-- CTEs read one snapshot, so rows deleted here are still visible to the
-- reads below and are excluded by hand; our own row is taken from the
-- update (the snapshot still has the old expires_at).
-- `done` adds what the session finished since its last heartbeat
-- ($5..$7, Store::Heartbeat) to its row of the current minute in
-- throughput (a session writes only its own rows: no row every member
-- updates at once), and only while the session is alive; `pruned`
-- deletes the queue's rows older than an hour, those of dead sessions
-- too, skipping rows another heartbeat is deleting (it never waits).
-- Both deletes go through delete_rows() (migration 39: a worker role may
-- not delete from the tables) by the addresses of the rows locked here;
-- the last column counts `pruned`, because a CTE that is not itself a
-- data-modifying statement runs only when something reads it.
-- $8 is the group generation the caller last read the whole group at
-- (Store::HeartbeatSince): when it is where it was, nobody expired here
-- and nobody is past its TTL, members and owners stay NULL (a CASE
-- runs its subquery only when it takes that branch) and the statement
-- reads no part row. The generation is read in the statement's one
-- snapshot, so it belongs with the rows read beside it; the triggers of
-- migration 19 move it in every transaction that changes the group.
-- When it moved, and $8 is at most kGroupChangesKept behind, and this
-- statement expired nobody (the changes its own deletions log are not
-- in its snapshot), the owners are only those changed since $8
-- (owner_changes() of migration 22; GroupView::delta): the latest
-- change of each part, an empty session for a row that went.
--
-- {heartbeat_me}: heartbeat_me.sql.
{heartbeat_me},
done AS (
  INSERT INTO {schema}.throughput AS t (queue, minute, session_id, acked, retried, dead)
  SELECT $1, date_trunc('minute', now()), me.id, $5::bigint, $6::bigint, $7::bigint FROM me
  WHERE $5::bigint <> 0 OR $6::bigint <> 0 OR $7::bigint <> 0
  ON CONFLICT (queue, minute, session_id) DO UPDATE
    SET acked = t.acked + excluded.acked, retried = t.retried + excluded.retried,
        dead = t.dead + excluded.dead),
pruned AS (
  SELECT 1 FROM {schema}.delete_rows('throughput', ARRAY(
    SELECT x.ctid FROM {schema}.throughput x
    WHERE x.queue = $1 AND x.minute < now() - interval '1 hour'
    LIMIT 1000 FOR UPDATE SKIP LOCKED)) d),
gone AS (
  SELECT (d->>'id')::uuid AS id FROM {schema}.delete_rows('sessions', ARRAY(
    SELECT x.ctid FROM {schema}.sessions x
    WHERE x.queue = $1 AND x.expires_at < now() AND x.id <> $2
      AND (SELECT count(*) FROM {schema}.session_parts sp WHERE sp.session_id = x.id)
          = (SELECT count(*) FROM (SELECT 1 FROM {schema}.session_parts sp
                                   WHERE sp.session_id = x.id FOR UPDATE SKIP LOCKED) l)
    FOR UPDATE SKIP LOCKED)) d),
members AS (
  SELECT id FROM {schema}.sessions
  WHERE queue = $1 AND expires_at >= now() AND id <> $2 AND id NOT IN (SELECT id FROM gone)
  UNION ALL SELECT id FROM me),
gen AS (SELECT coalesce((SELECT generation FROM {schema}.group_generations WHERE queue = $1), 0)
               AS generation),
same AS (
  SELECT $8::bigint >= 0 AND $8::bigint = (SELECT generation FROM gen)
         AND NOT EXISTS (SELECT 1 FROM gone)
         AND NOT EXISTS (SELECT 1 FROM {schema}.sessions x
                         WHERE x.queue = $1 AND x.expires_at < now() AND x.id <> $2) AS yes),
delta AS (
  SELECT NOT (SELECT yes FROM same) AND $8::bigint >= 0
         AND $8::bigint <= (SELECT generation FROM gen)
         AND $8::bigint >= (SELECT generation FROM gen) - $9::bigint
         AND NOT EXISTS (SELECT 1 FROM gone) AS yes)
SELECT (SELECT count(*) FROM me), (SELECT count(*) FROM gone),
       CASE WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(id::text, ',' ORDER BY id) FROM members) END,
       CASE WHEN (SELECT yes FROM delta) THEN
         {schema}.owner_changes($1, $8::bigint)
       WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(part || ':' || session_id || ':' || epoch, ',' ORDER BY part)
          FROM {schema}.session_parts
          WHERE queue = $1 AND session_id NOT IN (SELECT id FROM gone)) END,
       (SELECT count(pg_notify($4, 'g')) FROM (SELECT 1 FROM gone LIMIT 1) g),
       q.paused, q.rate, q.parts, (SELECT generation FROM gen), (SELECT yes FROM same),
       (SELECT yes FROM delta), (SELECT count(*) FROM pruned)
FROM (VALUES (1)) AS one LEFT JOIN {schema}.queues q ON q.name = $1
