-- dead_payload.sql for a role that may not read payloads: no size, no
-- bytes, and no mention of the column, which its privileges would refuse.
0, substring(''::bytea FROM 1 FOR $3)
