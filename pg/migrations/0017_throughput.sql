-- Migration 17: throughput: what sessions finished per minute, carried by their heartbeats
--
-- Throughput, `partq status` rates: the database keeps no
-- count of acks (acked items are deleted, and a count would be a write on
-- every ack), so each session counts what its consumer finished in memory
-- and its heartbeat adds the counts since its last one to a row keyed by
-- (queue, minute, session): every session writes only rows of its own, so
-- a fleet heartbeating at once never waits on a shared row, and a row is
-- updated once per heartbeat (HOT: no index covers the counts). Rows older
-- than an hour are deleted by the heartbeats. No FK to sessions: a dead
-- session's counts still count; DeleteQueue deletes the queue's rows.

CREATE TABLE {schema}.throughput (
  queue       text COLLATE "C" NOT NULL,
  minute      timestamptz NOT NULL,
  session_id  uuid NOT NULL,
  acked       bigint NOT NULL DEFAULT 0,
  retried     bigint NOT NULL DEFAULT 0,
  dead        bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, minute, session_id)
);
