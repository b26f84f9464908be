-- Owners ($1 queue), for `partq owners` and the console: the part count
-- ('q'), the sessions ('s'), the part owners ('p') and whether any item
-- is left ('i'), one snapshot.
SELECT 'q', NULL::text, NULL::text, parts, NULL::bigint, NULL::bigint
FROM {schema}.queues WHERE name = $1
UNION ALL SELECT 's', id::text, host, pid,
                 (extract(epoch FROM now() - heartbeat_at) * 1000000)::bigint,
                 (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM {schema}.sessions WHERE queue = $1
UNION ALL SELECT 'p', session_id::text, NULL, part, NULL, NULL
FROM {schema}.session_parts WHERE queue = $1
UNION ALL SELECT 'i', NULL, NULL, NULL, NULL, NULL
WHERE EXISTS (SELECT 1 FROM {schema}.items WHERE queue = $1)
