-- Migration 42: keyless items go to parts in runs of 32 consecutive ids
--
-- part_for_id() spread every keyless item on its own, so an enqueue of 25
-- items over 16 parts woke every session of a 4-session fleet, each for a
-- claim of a few items and an ack commit of its own: at a steady 5,000
-- items/s that was p99 3.0-4.6 ms from the enqueue's commit to the ack's,
-- against 1.9-2.2 ms for one session. Now ids in one aligned run of 32
-- (id >> 5) share a part and the runs are spread as the ids were, as
-- Kafka's sticky partitioner fills one partition a batch: the same
-- enqueue wakes one or two sessions, and p99 fell to 2.0-2.9 ms
-- (docs/benchmarks-history.md, "Keyless items in runs of 32"). The shift is
-- a logical one (the mask clears the sign bits an arithmetic shift copies),
-- as PartForId's on the unsigned bits in C++. Items already enqueued keep
-- their parts: a keyless item's part only has to be one of the queue's.
-- (PgStoreTest.PartForIdInSqlMatchesPartitioner,
-- PartForId.ConsecutiveIdsShareAPartInRuns)

CREATE OR REPLACE FUNCTION {schema}.part_for_id(id bigint, parts int) RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  two64 CONSTANT numeric := 18446744073709551616;
  two63 CONSTANT numeric := 9223372036854775808;
  x bigint := (id >> 5) & 576460752303423487;
  u numeric;
BEGIN
  x := x # ((x >> 30) & 17179869183);
  u := mod((CASE WHEN x < 0 THEN x + two64 ELSE x END) * 13787848793156543929, two64);
  x := (CASE WHEN u >= two63 THEN u - two64 ELSE u END)::bigint;
  x := x # ((x >> 27) & 137438953471);
  u := mod((CASE WHEN x < 0 THEN x + two64 ELSE x END) * 10723151780598845931, two64);
  x := (CASE WHEN u >= two63 THEN u - two64 ELSE u END)::bigint;
  x := x # ((x >> 31) & 8589934591);
  RETURN mod(CASE WHEN x < 0 THEN x + two64 ELSE x END, parts)::int;
END
$$;
