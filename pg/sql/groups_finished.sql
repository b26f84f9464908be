-- Finish's part: the groups of the items it acked or dead-lettered.
SELECT {schema}.groups_finished($1, $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
