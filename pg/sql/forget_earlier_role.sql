-- partq grant, first: the grants and topic grants of an earlier role named
-- $1 (dropped, then a role made again under its name) are forgotten, so
-- the role granted now starts from its own grants only (migration 38).
WITH queues AS (
  DELETE FROM {schema}.grants g
  WHERE g.role = $1
    AND g.role_oid IS DISTINCT FROM (SELECT r.oid FROM pg_roles r WHERE r.rolname = $1))
DELETE FROM {schema}.topic_grants t
WHERE t.role = $1
  AND t.role_oid IS DISTINCT FROM (SELECT r.oid FROM pg_roles r WHERE r.rolname = $1)
