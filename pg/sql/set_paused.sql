-- SetPaused: the flag, and a group notice so sessions re-read at once.
WITH u AS (UPDATE {schema}.queues SET paused = $2 WHERE name = $1 RETURNING 1)
SELECT count(pg_notify($3, 'g')) FROM u
