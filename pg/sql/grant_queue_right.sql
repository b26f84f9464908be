-- partq grant: role $2 may use queue $1 as kind $3 (migration 29, the
-- SQL API's authorize()); the queue's foreign key refuses an unknown queue.
-- Granting twice keeps the first row.
INSERT INTO {schema}.grants (queue, role, kind) VALUES ($1, $2, $3)
ON CONFLICT (queue, role, kind) DO NOTHING
