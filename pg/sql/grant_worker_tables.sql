-- partq grant worker: the table privileges a worker uses (migration 30), for
-- role {role}; row-level security keeps it to its queues' rows. partq revoke
-- worker, at the role's last worker grant, runs the same statements as
-- REVOKE ... FROM (pg_store_roles.cc, WorkerPrivileges), USAGE on the
-- schema excepted: without a worker grant the role would not be confined. No TRUNCATE
-- (row-level security does not apply to it); of queues only the column the
-- part acquisition's FOR SHARE needs an UPDATE privilege on; of outbox (no
-- queue column) only INSERT, which an ack with Kafka messages writes; of
-- groups the count columns an ack moves, never end_queue or end_payload.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.sessions, {schema}.session_parts, {schema}.items,
  {schema}.dead_items, {schema}.results, {schema}.part_claims,
  {schema}.cancelled_items, {schema}.kafka_offsets, {schema}.throughput, {schema}.schedules,
  {schema}.group_generations, {schema}.expiry_sweeps, {schema}.group_changes TO {role};
GRANT SELECT, INSERT, UPDATE (pending, done, dead, cancelled, ended_at, end_error, end_item)
  ON {schema}.groups TO {role};
GRANT SELECT, UPDATE (paused) ON {schema}.queues TO {role};
GRANT SELECT ON {schema}.schema_migrations TO {role};
GRANT INSERT ON {schema}.outbox TO {role};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}
