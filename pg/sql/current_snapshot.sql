-- Store::CurrentSnapshot: the xmin of a snapshot taken now, an xid above
-- every xid handed out before this statement (the one it takes, plus one:
-- a snapshot's xmax is only the last xid to end plus one, which an older
-- transaction still open may be above, as a review showed with psql), both
-- xid8 as a bigint (a 64-bit xid never wraps around), and the CACHE of the
-- items' id sequence: poll floors hold only while nextval hands ids out in time
-- order, which a CACHE above 1 breaks (each backend takes a run of ids
-- ahead and spends it later). Reads only the catalog pg_sequence, which
-- every role may read (the name needs USAGE on the schema, as every
-- statement does), and works through a transaction pooler. Taking an xid
-- writes a commit record: once a second, while a poll-only claimer has ids
-- not yet known final.
SELECT pg_snapshot_xmin(s)::text::bigint, pg_current_xact_id()::text::bigint + 1,
       (SELECT q.seqcache FROM pg_catalog.pg_sequence q
        WHERE q.seqrelid = '{schema}.items_id_seq'::regclass)
FROM pg_current_snapshot() s
