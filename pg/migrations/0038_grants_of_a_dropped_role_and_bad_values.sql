-- Migration 38: a dropped role's grants go to no new role of its name; a bad group id is echoed cut; attempts stay in range
--
-- Three low findings of issue 48's second review:
-- - grants and topic_grants named their role by name only. PostgreSQL
--   drops a role's own privileges with it, but these rows stayed, and a
--   role created later under the same name inherited them: may() and the
--   outbox trigger let it use the queues and topics granted to the one
--   dropped. Each row now keeps the oid of the role it was granted to and
--   counts only for that role; partq grant forgets the rows of an earlier
--   role of the name it grants to (pg/sql/forget_earlier_role.sql). Rows of
--   roles that no longer exist get no oid and count for no one, as before.
-- - check_group_id() echoed a refused group id whole: a 100 KB id made a
--   100 KB error message. It now shows its first 64 characters and its length.
-- - A worker (which may update its queue's items) could set an item's
--   attempts to 2147483647; every claim of that part then failed on
--   attempts + 1 (integer out of range), and the part's other items
--   stalled. Attempts never pass max_attempts (at most 1000) by more than a
--   few takeovers, so new values must lie in 0..1000000 (a takeover's
--   increment stops there: take_over_claims.sql). Rows already outside are
--   brought in first; NOT VALID then spares a second scan.
--
-- The constraint takes items' ACCESS EXCLUSIVE lock for a moment. It goes
-- first, before any other lock of this migration is held, and waits for
-- it at most 10 s (a keeper's VACUUM holds a lock it must wait for): past
-- that the migration fails, changes nothing, and may be run again, rather
-- than keep every claim, ack and enqueue queued behind its wait.

SET LOCAL lock_timeout = '10s';
ALTER TABLE {schema}.items ADD CONSTRAINT items_attempts_in_range
  CHECK (attempts BETWEEN 0 AND 1000000) NOT VALID;
UPDATE {schema}.items SET attempts = least(greatest(attempts, 0), 1000000)
WHERE attempts NOT BETWEEN 0 AND 1000000;
RESET lock_timeout;

ALTER TABLE {schema}.grants ADD COLUMN role_oid oid;
UPDATE {schema}.grants g SET role_oid = r.oid FROM pg_roles r WHERE r.rolname = g.role;
ALTER TABLE {schema}.topic_grants ADD COLUMN role_oid oid;
UPDATE {schema}.topic_grants g SET role_oid = r.oid FROM pg_roles r WHERE r.rolname = g.role;

-- Migration 36's worker_scope(), its grants matched by oid as well as name:
-- a worker grant of a dropped role confines no role made again under its
-- name.
CREATE OR REPLACE FUNCTION {schema}.worker_scope() RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope CONSTANT text[] := ARRAY(
    SELECT g.queue FROM {schema}.grants g
    JOIN pg_roles r ON r.rolname = g.role AND r.oid = g.role_oid
    WHERE g.kind = 'worker' AND pg_has_role(session_user, r.oid, 'MEMBER'));
BEGIN
  IF cardinality(scope) > 0
     OR EXISTS (SELECT 1 FROM {schema}.confined_roles c JOIN pg_roles r ON r.oid = c.role_oid
                WHERE pg_has_role(session_user, r.oid, 'MEMBER')) THEN
    RETURN scope;
  END IF;
  RETURN NULL;
END
$$;

-- Migration 30's may(), its grants matched by oid as well as name.
CREATE OR REPLACE FUNCTION {schema}.may(queue text, kinds text[], tbl text, privilege text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
  scope text[];
BEGIN
  IF pg_has_role(session_user,
                 (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                 'MEMBER')
     OR EXISTS (SELECT 1 FROM {schema}.grants g
                JOIN pg_roles r ON r.rolname = g.role AND r.oid = g.role_oid
                WHERE g.queue = may.queue AND g.kind = ANY (may.kinds)
                  AND pg_has_role(session_user, r.oid, 'MEMBER')) THEN
    RETURN true;
  END IF;
  IF NOT has_table_privilege(session_user, format('%I.%I', '{schema_name}', tbl), privilege) THEN
    RETURN false;
  END IF;
  -- The table privileges of a confined worker reach only its queues.
  scope := {schema}.worker_scope();
  RETURN scope IS NULL OR queue = ANY (scope);
END
$$;

-- Migration 34's trigger, its topic grants matched by oid as well as name.
CREATE OR REPLACE FUNCTION {schema}.outbox_topics_of_workers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF pg_has_role(session_user,
                 (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                 'MEMBER')
     OR {schema}.worker_scope() IS NULL
     OR EXISTS (SELECT 1 FROM {schema}.topic_grants g
                JOIN pg_roles r ON r.rolname = g.role AND r.oid = g.role_oid
                WHERE g.topic = NEW.topic AND pg_has_role(session_user, r.oid, 'MEMBER')) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'permission denied for Kafka topic "%": role "%" is a confined worker of schema "%" without a publish grant for it',
                  NEW.topic, session_user, '{schema_name}'
    USING ERRCODE = '42501',
          HINT = format('the schema''s owner grants it: partq grant publish %s --topic %s',
                        session_user, NEW.topic);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.check_group_id(group_id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF group_id IS NULL OR group_id = '' OR octet_length(group_id) > 200 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
      'invalid group id %s (use 1-200 bytes of text)',
      CASE WHEN group_id IS NULL THEN 'NULL'
           WHEN length(group_id) <= 64 THEN '"' || group_id || '"'
           ELSE format('"%s"... (%s bytes)', left(group_id, 64), octet_length(group_id))
      END);
  END IF;
END
$$;

