-- The idle heartbeat (PgStore::HeartbeatSince tries it first when the
-- caller knows a generation and has no counts to carry): our row's
-- update, the generation, whether anyone else is past its TTL, and
-- the queue row's fields, all in one snapshot, and nothing else. When
-- it answers alive, at the generation the caller knows, with nobody
-- expired, that is the whole answer (the full statement's `same`,
-- under which it would expire nobody and read no row either). Anything
-- else and the full `heartbeat` follows. Why two statements: an idle
-- fleet's server CPU was mostly the full statement's executor start
-- (its four data-modifying CTEs and every CASE branch are initialized
-- on each run, though only the update does anything) and its planning
-- (BENCHMARKS.md, "The idle heartbeat"); this plan is a few nodes.
-- Whether anyone is past its TTL is read from the members only when
-- the queue's expiry sweep (migration 24) is due: its generation is not
-- the current one, or its time has come. Then `next` is the earliest
-- expiry of the others ('infinity' for none; ours, just renewed, is no
-- earlier than theirs; a row of our id at another incarnation is not
-- ours but a static re-join's, and counts), and when it is still ahead
-- the sweep row takes it, with the generation read beside it. The row
-- is locked SKIP LOCKED and only then (a CASE runs its subquery only in
-- the branch it takes): a heartbeat never waits for another's sweep,
-- and one that is not due writes nothing but its own row. A queue
-- without a sweep row is due every time, which is correct, only slower.
--
-- {heartbeat_me}: heartbeat_me.sql.
{heartbeat_me},
gen AS (SELECT coalesce((SELECT generation FROM {schema}.group_generations WHERE queue = $1), 0)
               AS generation),
scan AS (
  SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM {schema}.expiry_sweeps w
                               WHERE w.queue = $1 AND w.generation = (SELECT generation FROM gen)
                                 AND w.sweep_after > now())
         THEN coalesce((SELECT min(x.expires_at) FROM {schema}.sessions x
                        WHERE x.queue = $1 AND NOT (x.id = $2 AND x.incarnation = $3)),
                       'infinity') END AS next),
lock AS (
  SELECT CASE WHEN (SELECT next FROM scan) >= now() THEN
           (SELECT w.queue FROM {schema}.expiry_sweeps w WHERE w.queue = $1
            FOR UPDATE SKIP LOCKED) END AS queue),
swept AS (
  UPDATE {schema}.expiry_sweeps w SET generation = gen.generation, sweep_after = scan.next
  FROM gen, scan WHERE w.queue = (SELECT queue FROM lock)
  RETURNING 1)
SELECT (SELECT count(*) FROM me), (SELECT generation FROM gen),
       coalesce((SELECT next FROM scan) < now(), false),
       q.paused, q.rate, q.parts
FROM (VALUES (1)) AS one LEFT JOIN {schema}.queues q ON q.name = $1
