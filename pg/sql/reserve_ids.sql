-- EnqueueBatch reserves ids for its rows (so the client can compute
-- PartForId and COPY explicit ids). Usually the n values are contiguous
-- and min/max/count say so; if concurrent nextval calls interleaved,
-- reserve_id_list fetches a fresh, explicit list instead. The transaction
-- takes its xid first (`x`: a row of `s` needs it), so a poll-only consumer
-- that sees a snapshot's xmin pass it knows these ids committed or never
-- will (consumer/claim_scheduler.h, "poll-only floors").
WITH x AS MATERIALIZED (SELECT pg_current_xact_id()),
q AS (SELECT parts FROM {schema}.queues WHERE name = $1),
s AS (SELECT nextval('{schema}.items_id_seq') AS v FROM q, x, generate_series(1, $2::int))
SELECT (SELECT parts FROM q), min(v), max(v), count(v),
       (extract(epoch FROM now()) * 1000000)::bigint
FROM s
