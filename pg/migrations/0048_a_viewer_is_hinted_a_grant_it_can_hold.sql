-- Migration 48: a viewer is hinted a grant it can hold
--
-- authorize() (migration 47) took any confined role for a worker:
-- worker_scope() is not NULL for a viewer too (migration 36 keeps both
-- confined), so a viewer's refused enqueue was hinted "partq grant worker",
-- which partq grant then refuses to a viewer ("a role is a worker or a
-- viewer, not both"). A worker is now a role with a worker grant, a viewer
-- one with a viewer grant, and neither is hinted the other's kind: a viewer
-- that may not enqueue is hinted producer, as a role with no grant is.
-- (RolesTest.RefusalsNameTheNarrowestGrantAndNoQueueTheCallerMayNotSee)

CREATE OR REPLACE FUNCTION {schema}.authorize(queue text, kinds text[], tbl text, privilege text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
  holds text[];
  hint text;
BEGIN
  PERFORM {schema}.check_queue_name(queue);
  IF NOT {schema}.may(queue, kinds, tbl, privilege) THEN
    -- The worker and viewer kinds the caller holds, on any queue.
    holds := ARRAY(SELECT DISTINCT g.kind FROM {schema}.grants g JOIN pg_roles r ON r.rolname = g.role
                   WHERE g.kind IN ('worker', 'viewer') AND pg_has_role(session_user, r.oid, 'MEMBER'));
    hint := CASE
      WHEN 'worker' = ANY (holds) AND 'worker' = ANY (kinds) THEN 'worker'
      WHEN 'viewer' = ANY (holds) AND 'viewer' = ANY (kinds) THEN 'viewer'
      WHEN cardinality(holds) = 0 AND 'viewer' = ANY (kinds) THEN 'viewer'
      ELSE (SELECT k FROM unnest(kinds) WITH ORDINALITY AS u(k, n)
            WHERE NOT ('worker' = ANY (holds) AND k = 'viewer')
              AND NOT ('viewer' = ANY (holds) AND k = 'worker')
            ORDER BY n LIMIT 1) END;
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
      'permission denied for queue "%s" of schema "%s": role "%s" is not its %s',
      queue, '{schema_name}', session_user, array_to_string(kinds, ' or ')),
      HINT = format('the schema''s owner grants it: partq grant %s %s --queue %s%s',
                    coalesce(hint, kinds[1]), quote_ident(session_user), queue,
                    CASE WHEN '{schema_name}' = 'partq' THEN '' ELSE ' --schema {schema_name}' END);
  END IF;
END
$$;
