-- insert_batch_grouped.sql for a confined worker (migration 40): its
-- grouped items go in through insert_grouped_items(), as the owner, which
-- holds each group and counts its items in the same statement, and decides
-- itself which items wait for their group's start.
SELECT * FROM {schema}.insert_grouped_items($1, $2::bigint[], $3::int[], $4::text[], $5::text[],
                                            $6::smallint[], $7::bigint[], $8::text[], $9::text[],
                                            $10::bool[])
