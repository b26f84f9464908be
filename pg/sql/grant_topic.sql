-- partq grant publish: role $2 may write outbox rows for Kafka topic $1 as
-- a confined worker (migration 34), that role and no later one of its name
-- (the oid, migration 38). Granting twice keeps the first row.
INSERT INTO {schema}.topic_grants (topic, role, role_oid)
VALUES ($1, $2, (SELECT r.oid FROM pg_roles r WHERE r.rolname = $2))
ON CONFLICT (role, topic) DO NOTHING
