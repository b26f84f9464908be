-- partq grants: every grant ($1 NULL) or one queue's, with whether the role
-- still exists (a dropped role's rows count for no one).
SELECT g.queue, g.role, g.kind, (extract(epoch FROM g.granted_at) * 1000000)::bigint,
       EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = g.role)
FROM {schema}.grants g WHERE $1::text IS NULL OR g.queue = $1
ORDER BY g.queue, g.role, g.kind
