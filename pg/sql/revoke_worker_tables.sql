-- partq revoke worker, when the role's last worker grant goes: without one it
-- would no longer be confined (worker_scope() is NULL), so the privileges
-- grant_worker_tables.sql gave go too. USAGE on the schema stays.
REVOKE SELECT, INSERT, UPDATE, DELETE ON {schema}.sessions, {schema}.session_parts,
  {schema}.items, {schema}.dead_items, {schema}.results, {schema}.part_claims,
  {schema}.cancelled_items, {schema}.kafka_offsets, {schema}.throughput, {schema}.schedules,
  {schema}.group_generations, {schema}.expiry_sweeps, {schema}.group_changes FROM {role};
REVOKE SELECT, INSERT, UPDATE (pending, done, dead, cancelled, ended_at, end_error, end_item)
  ON {schema}.groups FROM {role};
REVOKE SELECT, UPDATE (paused) ON {schema}.queues FROM {role};
REVOKE SELECT ON {schema}.schema_migrations FROM {role};
REVOKE INSERT ON {schema}.outbox FROM {role};
REVOKE USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}
