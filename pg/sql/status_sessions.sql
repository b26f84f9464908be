-- Status: sessions (with the other queues their process serves), then one row per part (zero-filled by
-- generate_series). An item is in flight while a claim record lists it
-- (its owner's, or a dead owner's that no one has taken over yet: the
-- next owner marks those abandoned), else ready or delayed by run_at, or held
-- (run_at 'infinity': an item of a queue group not started).
-- `fly` is small (what sessions have in flight), so the IN test is a
-- hash lookup per item.
SELECT s.id, coalesce(s.instance_id, ''), s.host, s.pid,
       (extract(epoch FROM now() - s.heartbeat_at) * 1000000)::bigint,
       (extract(epoch FROM s.expires_at - now()) * 1000000)::bigint,
       (SELECT count(*) FROM {schema}.session_parts sp WHERE sp.session_id = s.id),
       (extract(epoch FROM now()) * 1000000)::bigint,
       (extract(epoch FROM now() - s.started_at) * 1000000)::bigint,
       -- The other queues this session's process serves (queue names hold no comma).
       (SELECT coalesce(string_agg(o.queue, ',' ORDER BY o.queue), '')
        FROM {schema}.sessions o
        WHERE s.pid <> 0 AND o.host = s.host AND o.pid = s.pid AND o.queue <> s.queue
          AND o.expires_at > now())
FROM {schema}.sessions s WHERE s.queue = $1 ORDER BY s.id
