-- The queue's groups by state, and what the open ones have pending.
SELECT count(*) FILTER (WHERE started_at IS NULL AND ended_at IS NULL),
       count(*) FILTER (WHERE started_at IS NOT NULL AND ended_at IS NULL),
       count(*) FILTER (WHERE ended_at IS NOT NULL),
       coalesce(sum(pending) FILTER (WHERE ended_at IS NULL), 0)
FROM {schema}.groups WHERE queue = $1
