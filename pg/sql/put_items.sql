-- insert_batch.sql and insert_batch_grouped.sql for a worker role
-- (migration 41: it writes no item row itself): a chunk of EnqueueBatch
-- through put_items(), which makes each item's id and part and holds and
-- counts its groups. $1 queue, $2 keys, $3 dedup keys, $4 priorities,
-- $5 delays in µs, $6 payloads in hex, $7 groups. One row per item, in
-- order: id, part, duplicate, waits (for its group's start: no notice).
SELECT r.id, r.part, r.duplicate, r.waits
FROM {schema}.put_items($1, $2::text[], $3::text[], $4::smallint[], $5::bigint[],
                        ARRAY(SELECT decode(t.p, 'hex') FROM unnest($6::text[])
                              WITH ORDINALITY AS t(p, o) ORDER BY t.o),
                        $7::text[]) r
