-- partq grant and revoke, first: the grants and topic grants of an earlier
-- role named $1 (dropped, then a role made again under its name) are
-- forgotten, so the role granted now starts from its own grants only
-- (migration 38). Without a role of that name the comparison is NULL and
-- nothing goes: a dropped role's own rows are still revoked by its name.
WITH queues AS (
  DELETE FROM {schema}.grants g
  WHERE g.role = $1
    AND coalesce(g.role_oid, 0) <> (SELECT r.oid FROM pg_roles r WHERE r.rolname = $1))
DELETE FROM {schema}.topic_grants t
WHERE t.role = $1
  AND coalesce(t.role_oid, 0) <> (SELECT r.oid FROM pg_roles r WHERE r.rolname = $1)
