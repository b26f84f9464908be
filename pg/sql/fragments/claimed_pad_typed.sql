-- claimed_pad.sql's NULLs typed, for the first row, which sets the
-- columns' types.
NULL::int, NULL::text, NULL::text, NULL::smallint, NULL::int, NULL::bytea, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bool, NULL::text, NULL::bigint, NULL::text
