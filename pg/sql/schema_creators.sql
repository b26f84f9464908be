-- The roles, but the schema's owner, its members and superusers, that may
-- create objects in schema $1: PUBLIC alone when every role may. A function
-- one of them made there could be a better match for a call in partq's
-- functions, which run as the owner (SECURITY DEFINER), than the function
-- the call means, and would run as the owner: no role that may create in
-- the schema stays confined to its queues. partq grant refuses while there
-- are any; partq migrate and a starting worker say so.
SELECT 'PUBLIC' AS role
FROM pg_namespace n
WHERE n.nspname = $1 AND has_schema_privilege('public', n.oid, 'CREATE')
UNION ALL
SELECT r.rolname::text
FROM pg_namespace n JOIN pg_roles r ON r.oid <> n.nspowner
WHERE n.nspname = $1 AND NOT has_schema_privilege('public', n.oid, 'CREATE') AND NOT r.rolsuper
  AND has_schema_privilege(r.oid, n.oid, 'CREATE') AND NOT pg_has_role(r.oid, n.nspowner, 'MEMBER')
ORDER BY 1
