-- ReadGroup: as the heartbeat's read, $2 the generation last read, $3
-- kGroupChangesKept.
WITH gen AS (
  SELECT coalesce((SELECT generation FROM {schema}.group_generations WHERE queue = $1), 0)
         AS generation),
same AS (
  SELECT $2::bigint >= 0 AND $2::bigint = (SELECT generation FROM gen)
         AND NOT EXISTS (SELECT 1 FROM {schema}.sessions x
                         WHERE x.queue = $1 AND x.expires_at < now()) AS yes),
delta AS (
  SELECT NOT (SELECT yes FROM same) AND $2::bigint >= 0
         AND $2::bigint <= (SELECT generation FROM gen)
         AND $2::bigint >= (SELECT generation FROM gen) - $3::bigint AS yes)
SELECT (SELECT count(*) FROM {schema}.queues WHERE name = $1),
       CASE WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(id::text, ',' ORDER BY id) FROM {schema}.sessions
          WHERE queue = $1 AND expires_at >= now()) END,
       CASE WHEN (SELECT yes FROM delta) THEN
         {schema}.owner_changes($1, $2::bigint)
       WHEN NOT (SELECT yes FROM same) THEN
         (SELECT string_agg(part || ':' || session_id || ':' || epoch, ',' ORDER BY part)
          FROM {schema}.session_parts WHERE queue = $1) END,
       q.paused, q.rate, q.parts, (SELECT generation FROM gen), (SELECT yes FROM same),
       (SELECT yes FROM delta)
FROM (VALUES (1)) AS one LEFT JOIN {schema}.queues q ON q.name = $1
