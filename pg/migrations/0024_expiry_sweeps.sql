-- Migration 24: expiry_sweeps: an idle heartbeat reads the members only when one may have expired
--
-- Expiry sweeps, issue 26: an idle heartbeat asks whether
-- any member is past its TTL, which read every session row of the queue
-- (no index may cover expires_at: the heartbeat's update would stop being
-- HOT). With 200 sessions spread over 31 pages that was 0.24 ms of the
-- statement's 0.39, 80 times a second. A member's expiry only moves later
-- while it lives, and a join or leave moves the group generation, so the
-- earliest expiry among the members, read at one generation, is a time
-- before which nobody of that generation can expire. expiry_sweeps keeps
-- it per queue: an idle heartbeat reads the members only once that time
-- has passed or the generation moved (PgStore, "heartbeat_idle"), about
-- once per TTL minus an interval for a whole fleet. No index on the
-- timestamp, so the row's updates are HOT too.

CREATE TABLE {schema}.expiry_sweeps (
  queue        text COLLATE "C" PRIMARY KEY
               REFERENCES {schema}.queues (name) ON DELETE CASCADE,
  generation   bigint NOT NULL,
  sweep_after  timestamptz NOT NULL
) WITH (fillfactor = 50);
INSERT INTO {schema}.expiry_sweeps (queue, generation, sweep_after)
SELECT name, -1, '-infinity' FROM {schema}.queues;
