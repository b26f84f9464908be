-- Migration 43: put_items() calls check_put_items() with an exact match
--
-- put_items() (migration 41) runs as the schema's owner and called
-- check_put_items(bigint, ...) with the queue's int limit: an implicit
-- cast, so a role that may create in the schema could add
-- check_put_items(int, ...), the better match, and have it run as the
-- owner (the review of 2026-12-06). Here is that int form, the call's
-- exact match, which no other role can make any more; its body is bound
-- to the bigint one when it is made (BEGIN ATOMIC), not looked up when it
-- runs. The real cure is that no role but the owner may create in the
-- schema: partq grant refuses while one may, partq migrate and workers
-- say so (pg/sql/schema_creators.sql).
-- (RolesTest.ARoleThatMayCreateInTheSchemaIsRefusedAndCannotPlantAFunction)

-- One a role made already, before this migration, goes first.
DROP FUNCTION IF EXISTS {schema}.check_put_items(int, text[], text[], smallint[], bigint[], bytea[],
                                                 text[]);
CREATE FUNCTION {schema}.check_put_items(lim int, keys text[], dedups text[], prios smallint[],
                                         delays bigint[], payloads bytea[], grps text[])
RETURNS void LANGUAGE sql IMMUTABLE
BEGIN ATOMIC
  SELECT {schema}.check_put_items(lim::bigint, keys, dedups, prios, delays, payloads, grps);
END;
