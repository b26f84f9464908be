-- ListDead: queue $1's dead items, newest first, at most $2, each with the
-- first $3 bytes of its payload and its size ({payload}:
-- fragments/dead_payload.sql, or for a role that may not read payloads, a
-- viewer, fragments/dead_payload_hidden.sql, which does not name the
-- column).
SELECT id, part, key, dedup_key, attempts,
       (date_part('epoch', enqueued_at) * 1000000)::bigint,
       (date_part('epoch', failed_at) * 1000000)::bigint, last_error, {payload}
FROM {schema}.dead_items WHERE queue = $1
ORDER BY failed_at DESC, id DESC LIMIT $2
