-- partq grants: every grant ($1 NULL) or one queue's, with whether the role
-- it was granted to still exists (a dropped role's rows count for no one,
-- nor for a role made again under its name: migration 38); with every queue,
-- the Kafka topics roles may publish to as confined workers (migration 34),
-- whose queue is NULL.
SELECT g.queue, g.role, g.kind, (extract(epoch FROM g.granted_at) * 1000000)::bigint,
       EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = g.role AND r.oid = g.role_oid), NULL::text
FROM {schema}.grants g WHERE $1::text IS NULL OR g.queue = $1
UNION ALL
SELECT NULL, t.role, 'publish', (extract(epoch FROM t.granted_at) * 1000000)::bigint,
       EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = t.role AND r.oid = t.role_oid), t.topic
FROM {schema}.topic_grants t WHERE $1::text IS NULL
ORDER BY 1 NULLS LAST, 6, 2, 3
