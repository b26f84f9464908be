-- Migration 23: items and part_claims: vacuum never truncates them (no exclusive lock, no 5 s wait)
--
-- Vacuum without truncation: a queue's table empties at its
-- end again and again, so a vacuum of items often finds empty pages there
-- and then tries for the exclusive lock that truncating them needs. Some
-- statement holds a lock on items nearly always, so it tries for 5 s
-- (PostgreSQL's VACUUM_TRUNCATE_LOCK_TIMEOUT) and mostly gives up: in issue
-- 27's half-hour soak 54 of 179 vacuums of items spent 5 s so, against 0.3 s
-- for the vacuum itself, and no other vacuum of the table can start
-- meanwhile; 11 got the lock, and every claim, ack and COPY waited behind
-- it (a hot standby replays that lock too). Without truncation: 0 of 180.
-- The pages stay; the free space map hands them to the next COPY, so the
-- table's size stays bounded by its peak.

ALTER TABLE {schema}.items SET (vacuum_truncate = false);
ALTER TABLE {schema}.part_claims SET (vacuum_truncate = false);
