-- GrowParts ($2 the new count, checked by the caller against $3, the
-- count it read): the row locked FOR UPDATE, so a grow waits for the
-- acquisitions and cancels holding it (and they for the grow), and
-- two grows at once apply one after the other, each checked against
-- the count it read (a grow that read a stale one changes nothing and
-- returns the current count, for the caller to check again). Enqueues
-- take no lock on the row: one that read the old count may still
-- commit an item into the old part, which the ordered claim's probe
-- of earlier parts sees (ReadyItems). A group notice so sessions
-- re-read at once.
WITH q AS (SELECT parts FROM {schema}.queues WHERE name = $1 FOR UPDATE),
u AS (
  UPDATE {schema}.queues SET parts = $2, grown_from = grown_from || q.parts
  FROM q WHERE name = $1 AND q.parts = $3 AND $2 > q.parts
  RETURNING 1)
SELECT q.parts, (SELECT count(*) FROM u), (SELECT count(pg_notify($4, 'g')) FROM u) FROM q
