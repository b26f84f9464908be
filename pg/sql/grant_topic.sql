-- partq grant publish: role $2 may write outbox rows for Kafka topic $1 as
-- a confined worker (migration 34). Granting twice keeps the first row.
INSERT INTO {schema}.topic_grants (topic, role) VALUES ($1, $2)
ON CONFLICT (role, topic) DO NOTHING
