-- Tx::Publish: a message for `partq bridge publish`, in the caller's
-- transaction.
INSERT INTO {schema}.outbox (topic, key, payload, headers)
VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4::jsonb)
