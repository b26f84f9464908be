-- partq grant: role $2 may use queue $1 as kind $3 (migration 29, the
-- SQL API's authorize()), that role and no later one of its name (the
-- oid, migration 38); the queue's foreign key refuses an unknown queue.
-- Granting twice keeps the first row.
INSERT INTO {schema}.grants (queue, role, kind, role_oid)
VALUES ($1, $2, $3, (SELECT r.oid FROM pg_roles r WHERE r.rolname = $2))
ON CONFLICT (queue, role, kind) DO NOTHING
