-- Whether this session's role owns the item tables (or is a member of the
-- role that does, or a superuser): it may then read them whole. Any other
-- role (a producer's, a viewer's, a worker's, confined by row-level
-- security) asks the SQL API for items' states (item_state_api.sql).
SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = '{schema}.items'::regclass
