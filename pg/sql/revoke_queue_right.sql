-- partq revoke: the grant of kind $3 on queue $1 to role $2, if there is one.
DELETE FROM {schema}.grants WHERE queue = $1 AND role = $2 AND kind = $3
