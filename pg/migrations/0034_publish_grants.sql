-- Migration 34: a confined worker publishes only to the Kafka topics granted to it
--
-- A handler's Kafka messages go into outbox in its ack's transaction, and
-- `partq bridge publish` sends them to the topic each row names. outbox has
-- no queue column, and a worker role holds INSERT on it (migration 30), so a
-- worker confined to queue a could write messages for any topic, one that
-- other services trust (issue 48). Now a role with a worker grant writes
-- outbox rows only for the topics granted to it with `partq grant publish
-- ROLE --topic T[,T...]` (rows of topic_grants, as grants are); the schema's
-- owner and its members, and roles without a worker grant, are as before. A
-- trigger, not a policy, so the refusal says which topic and what to run:
-- SECURITY DEFINER, since worker roles may not read the grants themselves.

CREATE TABLE {schema}.topic_grants (
  role        name NOT NULL,
  topic       text COLLATE "C" NOT NULL CHECK (topic <> ''),
  granted_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (role, topic)
);

CREATE FUNCTION {schema}.outbox_topics_of_workers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF pg_has_role(session_user,
                 (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = '{schema_name}'),
                 'MEMBER')
     OR {schema}.worker_scope() IS NULL
     OR EXISTS (SELECT 1 FROM {schema}.topic_grants g JOIN pg_roles r ON r.rolname = g.role
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
REVOKE EXECUTE ON FUNCTION {schema}.outbox_topics_of_workers() FROM PUBLIC;

CREATE TRIGGER outbox_topics_of_workers BEFORE INSERT ON {schema}.outbox
  FOR EACH ROW EXECUTE FUNCTION {schema}.outbox_topics_of_workers();
