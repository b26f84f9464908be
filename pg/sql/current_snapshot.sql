-- Store::CurrentSnapshot: the bounds of a snapshot taken now (xid8 as a
-- bigint: a 64-bit xid never wraps around), and the CACHE of the items'
-- id sequence: poll floors hold only while nextval hands ids out in time
-- order, which a CACHE above 1 breaks (each backend takes a run of ids
-- ahead and spends it later). Reads only the catalog pg_sequence, which
-- every role may read (the name needs USAGE on the schema, as every
-- statement does), and works through a transaction pooler.
SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint,
       (SELECT q.seqcache FROM pg_catalog.pg_sequence q
        WHERE q.seqrelid = '{schema}.items_id_seq'::regclass)
FROM pg_current_snapshot() s
