-- Store::CurrentSnapshot: the bounds of a snapshot taken now (xid8 as a
-- bigint: a 64-bit xid never wraps around). Reads no table, so it needs no
-- privilege and works through a transaction pooler.
SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
FROM pg_current_snapshot() s
