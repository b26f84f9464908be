-- An enqueue that hit a dedup key ($1 queue, $2 key): the live item it hit.
SELECT id, part FROM {schema}.items WHERE queue = $1 AND dedup_key = $2
