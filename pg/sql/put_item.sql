-- enqueue.sql for a worker role (migration 41: it writes no item row
-- itself): the item goes in through put_items(), which makes its id and
-- part as enqueue.sql does, and the notice goes in the same statement.
-- $1 queue, $2 key, $3 dedup key, $4 priority, $5 delay in µs, $6 payload,
-- $7 channel, $8 group. A duplicate returns the live item's id and part (NULLs if
-- it finished meanwhile).
SELECT r.id, r.part, r.duplicate,
       CASE WHEN NOT r.duplicate AND NOT r.waits
            THEN pg_notify($7, 'i:' || r.part || ':' || $4 || ':' || r.id) END
FROM {schema}.put_items($1, ARRAY[$2::text], ARRAY[$3::text], ARRAY[$4::smallint],
                        ARRAY[$5::bigint], ARRAY[$6::bytea], ARRAY[$8::text]) r
