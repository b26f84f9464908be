-- partq revoke publish: role $2's grant for Kafka topic $1, if there is one.
DELETE FROM {schema}.topic_grants WHERE topic = $1 AND role = $2
