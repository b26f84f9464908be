-- Migration 31: a confined worker cannot change its queue's settings
--
-- A worker's part acquisition reads its queue's row FOR SHARE, and PostgreSQL
-- asks an UPDATE privilege on one column for that: migration 30 gave workers
-- UPDATE (paused), so a worker role could pause or resume its own queue
-- (issue 48). Row-level security cannot tell the lock from the write, a
-- trigger can: an UPDATE of queues by a role with a worker grant, that is not
-- the schema's owner or a member, is refused. Row locks fire no trigger, so
-- the FOR SHARE goes on as before; roles without a worker grant are as
-- before. SECURITY DEFINER: worker roles may not read grants themselves.

CREATE FUNCTION {schema}.queues_unchanged_by_workers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF {schema}.worker_scope() IS NOT NULL
     AND NOT pg_has_role(session_user,
                         (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                         'MEMBER') THEN
    RAISE EXCEPTION 'permission denied for queue "%" of schema "%": a worker role may not change it',
                    OLD.name, '{schema_name}'
      USING ERRCODE = '42501',
            HINT = 'the schema''s owner pauses, resumes and sets queues (partq queue pause|resume|set)';
  END IF;
  RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.queues_unchanged_by_workers() FROM PUBLIC;

CREATE TRIGGER queues_unchanged_by_workers BEFORE UPDATE ON {schema}.queues
  FOR EACH ROW EXECUTE FUNCTION {schema}.queues_unchanged_by_workers();
