-- Migration 10: autovacuum of items and part_claims: unthrottled, by a row count
--
-- Vacuum that keeps up: every item is a row inserted and
-- deleted, so at 75k items/s the table makes 75k dead rows a second. With
-- PostgreSQL's defaults an autovacuum of items sleeps 2 ms after every 200
-- cost units and starts at 20 % of a
-- row count that is mostly zero; in issue 27's soak it fell behind for
-- good: the table and its indexes grew by 6 MB/s each (1.3 GB after five
-- minutes) with 13M dead rows. Unthrottled (cost delay 0), started by a
-- fixed count of dead rows, it ran about once a minute (the launcher's
-- naptime) and the table and its indexes stayed at 328 and 330 MB for the
-- last 14 minutes of a 30-minute soak at 35k items/s (BENCHMARKS.md). part_claims makes a dead
-- row per claim (migration 9) and is vacuumed the same way. Analyze runs by a fixed count too;
-- statements that must not depend on the statistics of a table that is empty one moment and full
-- the next do not (TakeOverClaims, AckCtes). Per-table settings, so nothing else on the server
-- changes; the launcher still visits a database once per autovacuum_naptime (1 min by default),
-- which sets the table's size (README, "Running it hard").

ALTER TABLE {schema}.items SET (
  autovacuum_vacuum_cost_delay = 0,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 10000,
  autovacuum_analyze_scale_factor = 0,
  autovacuum_analyze_threshold = 100000);
ALTER TABLE {schema}.part_claims SET (
  autovacuum_vacuum_cost_delay = 0,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000);
